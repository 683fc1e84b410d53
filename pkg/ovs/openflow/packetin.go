package openflow

import (
	"encoding/binary"
	"fmt"
)

// nxtResume is NXT_RESUME (Open vSwitch include/openvswitch/ofp-msgs.h);
// NXT_PACKET_IN2 and NXT_SET_PACKET_IN_FORMAT are in conn_async.go.
const nxtResume uint32 = 28

// NXT_PACKET_IN2 property types (enum nx_packet_in2_prop_type).
const (
	nxpintPacket       uint16 = 0
	nxpintFullLen      uint16 = 1
	nxpintBufferID     uint16 = 2
	nxpintTableID      uint16 = 3
	nxpintCookie       uint16 = 4
	nxpintReason       uint16 = 5
	nxpintMetadata     uint16 = 6
	nxpintUserdata     uint16 = 7
	nxpintContinuation uint16 = 8
)

// PacketIn is a packet sent to the controller, from NXT_PACKET_IN2 or
// OFPT_PACKET_IN. Match holds the packet's metadata fields (in_port,
// registers, tunnel and conntrack fields, …). Continuation, set when the
// controller action paused the pipeline, is what Resume sends back.
type PacketIn struct {
	Data         []byte
	FullLen      uint32
	BufferID     uint32
	TableID      uint8
	Cookie       uint64
	Reason       uint8
	Match        Match
	UserData     []byte
	Continuation []byte
}

// MsgType implements Message (an NXT_PACKET_IN2, which switches send; used by tests and fakes).
func (p *PacketIn) MsgType() uint8 { return TypeExperimenter }

// AppendBody implements Message: the NXT_PACKET_IN2 form.
func (p *PacketIn) AppendBody(b []byte, _ uint8) ([]byte, error) {
	b = appendExperimenter(b, NiciraExperimenter, nxtPacketIn2)
	return p.appendProps(b, false), nil
}

func (p *PacketIn) appendProps(b []byte, resume bool) []byte {
	b = appendProp(b, nxpintPacket, p.Data)
	if p.FullLen != 0 && p.FullLen != uint32(len(p.Data)) {
		b = appendProp(b, nxpintFullLen, binary.BigEndian.AppendUint32(nil, p.FullLen))
	}
	if p.BufferID != 0 && p.BufferID != 0xffffffff {
		b = appendProp(b, nxpintBufferID, binary.BigEndian.AppendUint32(nil, p.BufferID))
	}
	b = appendProp(b, nxpintTableID, []byte{p.TableID})
	// 64-bit properties carry 4 bytes of padding before the value (ofpprop_put_be64).
	b = appendProp(b, nxpintCookie, binary.BigEndian.AppendUint64([]byte{0, 0, 0, 0}, p.Cookie))
	b = appendProp(b, nxpintReason, []byte{p.Reason})
	b = appendProp(b, nxpintMetadata, p.Match.AppendOXMFields(nil))
	if !resume && len(p.UserData) > 0 {
		b = appendProp(b, nxpintUserdata, p.UserData)
	}
	if len(p.Continuation) > 0 {
		b = appendProp(b, nxpintContinuation, p.Continuation)
	}
	return b
}

// Resume returns the NXT_RESUME message that continues a paused packet.
func (p *PacketIn) Resume() Message { return &resume{p} }

// resume is the NXT_RESUME message of a paused packet-in.
type resume struct{ p *PacketIn }

// MsgType implements Message.
func (r *resume) MsgType() uint8 { return TypeExperimenter }

// AppendBody implements Message.
func (r *resume) AppendBody(b []byte, _ uint8) ([]byte, error) {
	if len(r.p.Continuation) == 0 {
		return b, fmt.Errorf("openflow: resume: packet-in has no continuation")
	}
	b = appendExperimenter(b, NiciraExperimenter, nxtResume)
	return r.p.appendProps(b, true), nil
}

// DecodePacketIn2 decodes the body of an OFPT_EXPERIMENTER message holding
// an NXT_PACKET_IN2 (body starts with the experimenter id and type): the
// Body of a Frame for which IsPacketIn2 holds.
func DecodePacketIn2(body []byte) (*PacketIn, error) {
	exp, typ, props, ok := experimenterHeader(body)
	if !ok || exp != NiciraExperimenter || typ != nxtPacketIn2 {
		return nil, fmt.Errorf("openflow: not an NXT_PACKET_IN2 (experimenter 0x%x type %d)", exp, typ)
	}
	p := &PacketIn{BufferID: 0xffffffff}
	fixed := func(v []byte, n int, name string) error {
		if len(v) != n {
			return fmt.Errorf("openflow: packet-in2 %s property of %d bytes, want %d", name, len(v), n)
		}
		return nil
	}
	err := walkProps(props, func(t uint16, v []byte) error {
		switch t {
		case nxpintPacket:
			p.Data = append([]byte(nil), v...)
		case nxpintFullLen:
			if err := fixed(v, 4, "full_len"); err != nil {
				return err
			}
			p.FullLen = binary.BigEndian.Uint32(v)
		case nxpintBufferID:
			if err := fixed(v, 4, "buffer_id"); err != nil {
				return err
			}
			p.BufferID = binary.BigEndian.Uint32(v)
		case nxpintTableID:
			if err := fixed(v, 1, "table_id"); err != nil {
				return err
			}
			p.TableID = v[0]
		case nxpintCookie:
			if err := fixed(v, 12, "cookie"); err != nil {
				return err
			}
			p.Cookie = binary.BigEndian.Uint64(v[4:])
		case nxpintReason:
			if err := fixed(v, 1, "reason"); err != nil {
				return err
			}
			p.Reason = v[0]
		case nxpintMetadata:
			m, err := decodeOXMFieldsLenient(v)
			if err != nil {
				return fmt.Errorf("openflow: packet-in2 metadata: %w", err)
			}
			p.Match = m
		case nxpintUserdata:
			p.UserData = append([]byte(nil), v...)
		case nxpintContinuation:
			p.Continuation = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.FullLen == 0 {
		p.FullLen = uint32(len(p.Data))
	}
	return p, nil
}

// decodeOXMFieldsLenient decodes OXM fields, skipping fields this package
// does not know (a switch reports every metadata field it has, such as
// recirc_id or tun_flags).
func decodeOXMFieldsLenient(b []byte) (Match, error) {
	var m Match
	for len(b) > 0 {
		class, _, _, length, hdrLen, err := decodeOXMHeader(b)
		if err != nil {
			return m, err
		}
		if hdrLen+length > len(b) {
			return m, fmt.Errorf("openflow: OXM class 0x%04x overruns by %d bytes", class, hdrLen+length-len(b))
		}
		if n, ok, err := decodePacketReg(&m, b); ok {
			if err != nil {
				return m, err
			}
			b = b[n:]
			continue
		}
		if f, value, mask, n, err := decodeOXM(b); err == nil {
			m.SetMasked(f, value, mask)
			b = b[n:]
			continue
		}
		b = b[hdrLen+length:]
	}
	return m, nil
}

// DecodePacketIn decodes the body of an OpenFlow 1.3/1.5 OFPT_PACKET_IN.
func DecodePacketIn(body []byte) (*PacketIn, error) {
	if len(body) < 16 {
		return nil, fmt.Errorf("openflow: packet-in too short (%d bytes)", len(body))
	}
	p := &PacketIn{BufferID: binary.BigEndian.Uint32(body), FullLen: uint32(binary.BigEndian.Uint16(body[4:])),
		Reason: body[6], TableID: body[7], Cookie: binary.BigEndian.Uint64(body[8:])}
	if len(body) < 20 {
		return nil, fmt.Errorf("openflow: packet-in without match")
	}
	length := int(binary.BigEndian.Uint16(body[18:]))
	padded := (length + 7) / 8 * 8
	if length < 4 || 16+padded+2 > len(body) {
		return nil, fmt.Errorf("openflow: packet-in match length %d overruns", length)
	}
	m, err := decodeOXMFieldsLenient(body[20 : 16+length])
	if err != nil {
		return nil, err
	}
	p.Match = m
	p.Data = append([]byte(nil), body[16+padded+2:]...)
	return p, nil
}
