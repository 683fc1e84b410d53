package openflow

import (
	"encoding/binary"
	"fmt"
)

// OFPT_* message types this file's connection half sends or routes
// (OpenFlow 1.5.1 section 7.1, enum ofp_type; the same numbers in 1.3 for
// everything below OFPT_BUNDLE_CONTROL).
const (
	TypeHello            uint8 = 0
	TypeError            uint8 = 1
	TypeEchoRequest      uint8 = 2
	TypeEchoReply        uint8 = 3
	TypeExperimenter     uint8 = 4
	TypeFeaturesRequest  uint8 = 5
	TypeFeaturesReply    uint8 = 6
	TypeSetConfig        uint8 = 9
	TypePacketIn         uint8 = 10
	TypeFlowRemoved      uint8 = 11
	TypePortStatus       uint8 = 12
	TypeMultipartRequest uint8 = 18
	TypeMultipartReply   uint8 = 19
	TypeBarrierRequest   uint8 = 20
	TypeBarrierReply     uint8 = 21
	TypeBundleControl    uint8 = 33
	TypeBundleAddMessage uint8 = 34
)

// Experimenter IDs (OpenFlow 1.5.1 section 7.2.6 and Open vSwitch's nicira-ext.h).
const (
	// NiciraExperimenter is NX_VENDOR_ID, the experimenter of every Nicira extension.
	NiciraExperimenter uint32 = 0x00002320
	// ONFExperimenter is ONF_VENDOR_ID, used for the OpenFlow 1.3 bundle extension.
	ONFExperimenter uint32 = 0x4f4e4600
)

// RawMessage is a message whose body is already encoded: a way to send any
// message the package has no type for, and what tests use to hand-encode.
type RawMessage struct {
	Type uint8
	Body []byte
}

// MsgType implements Message.
func (m *RawMessage) MsgType() uint8 { return m.Type }

// AppendBody implements Message; the body is the same for every version.
func (m *RawMessage) AppendBody(b []byte, _ uint8) ([]byte, error) { return append(b, m.Body...), nil }

// Frame is one message as received: its header and its body (the bytes after
// ofp_header). The body is owned by the receiver of the Frame.
type Frame struct {
	Header Header
	Body   []byte
}

// ParseHeader decodes ofp_header from the first HeaderLen bytes of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("openflow: header needs %d bytes, have %d", HeaderLen, len(b))
	}
	h := Header{Version: b[0], Type: b[1], Length: binary.BigEndian.Uint16(b[2:4]), Xid: binary.BigEndian.Uint32(b[4:8])}
	if h.Length < HeaderLen {
		return h, fmt.Errorf("openflow: message length %d is shorter than its header", h.Length)
	}
	return h, nil
}

// SplitMessages splits a byte stream holding whole messages back to back into
// frames (the bodies alias b). It is the framing the reader applies to the
// socket, exposed for tests and for decoding captured streams.
func SplitMessages(b []byte) ([]Frame, error) {
	var out []Frame
	for len(b) > 0 {
		h, err := ParseHeader(b)
		if err != nil {
			return out, err
		}
		if int(h.Length) > len(b) {
			return out, fmt.Errorf("openflow: message xid %d of type %d claims %d bytes, only %d left", h.Xid, h.Type, h.Length, len(b))
		}
		out = append(out, Frame{Header: h, Body: b[HeaderLen:h.Length]})
		b = b[h.Length:]
	}
	return out, nil
}

// experimenterHeader splits an OFPT_EXPERIMENTER body into experimenter id,
// experimenter type and the rest (ofp_experimenter_header / nicira_header).
func experimenterHeader(body []byte) (exp, expType uint32, rest []byte, ok bool) {
	if len(body) < 8 {
		return 0, 0, nil, false
	}
	return binary.BigEndian.Uint32(body[0:4]), binary.BigEndian.Uint32(body[4:8]), body[8:], true
}

// appendExperimenter appends the experimenter id and type that start the body
// of every OFPT_EXPERIMENTER message.
func appendExperimenter(b []byte, exp, expType uint32) []byte {
	b = binary.BigEndian.AppendUint32(b, exp)
	return binary.BigEndian.AppendUint32(b, expType)
}
