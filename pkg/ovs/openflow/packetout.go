package openflow

import (
	"encoding/binary"
	"fmt"
)

// PacketOut is OFPT_PACKET_OUT: Data runs through Actions as if it had
// arrived on InPort (0 means the controller, OFPP_CONTROLLER). In OpenFlow
// 1.5 Match may add other pipeline fields (registers, tunnel metadata); in_port
// is taken from InPort.
type PacketOut struct {
	InPort  uint32
	Match   Match
	Actions []Action
	Data    []byte
}

// MsgType implements Message.
func (p *PacketOut) MsgType() uint8 { return TypePacketOut }

func (p *PacketOut) inPort() uint32 {
	if p.InPort == 0 {
		return PortController
	}
	return p.InPort
}

// AppendBody implements Message: ofp15_packet_out or ofp11_packet_out.
func (p *PacketOut) AppendBody(b []byte, version uint8) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // buffer_id: OFP_NO_BUFFER
	var lenAt int
	if version >= Version15 {
		lenAt = len(b)
		b = append(b, 0, 0, 0, 0)
		m := p.Match.Clone()
		m.InPort(p.inPort())
		b = m.AppendMatch(b)
	} else {
		if p.Match.Len() > 0 {
			return b, fmt.Errorf("openflow: packet-out match fields need OpenFlow 1.5")
		}
		b = binary.BigEndian.AppendUint32(b, p.inPort())
		lenAt = len(b)
		b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	start := len(b)
	var err error
	if b, err = appendActions(b, p.Actions, version); err != nil {
		return b, fmt.Errorf("openflow: packet-out: %w", err)
	}
	binary.BigEndian.PutUint16(b[lenAt:], uint16(len(b)-start))
	return append(b, p.Data...), nil
}

// DecodePacketOut decodes the body of an OFPT_PACKET_OUT.
func DecodePacketOut(body []byte, version uint8) (*PacketOut, error) {
	p := &PacketOut{}
	var rest []byte
	var alen int
	if version >= Version15 {
		if len(body) < 8 {
			return nil, fmt.Errorf("openflow: packet-out too short")
		}
		alen = int(binary.BigEndian.Uint16(body[4:]))
		m, n, err := DecodeMatch(body[8:])
		if err != nil {
			return nil, fmt.Errorf("openflow: packet-out: %w", err)
		}
		if in, ok := m.Get(FieldInPort); ok {
			p.InPort = uint32(in.Value.Lo)
			m.Delete(FieldInPort)
		}
		p.Match = m
		rest = body[8+n:]
	} else {
		if len(body) < 16 {
			return nil, fmt.Errorf("openflow: packet-out too short")
		}
		p.InPort = binary.BigEndian.Uint32(body[4:])
		alen = int(binary.BigEndian.Uint16(body[8:]))
		rest = body[16:]
	}
	if p.InPort == PortController {
		p.InPort = 0
	}
	if alen > len(rest) {
		return nil, fmt.Errorf("openflow: packet-out actions of %d bytes overrun", alen)
	}
	acts, err := DecodeActions(rest[:alen])
	if err != nil {
		return nil, err
	}
	p.Actions = acts
	p.Data = append([]byte(nil), rest[alen:]...)
	return p, nil
}
