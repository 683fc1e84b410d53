package openflow

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
)

// FlowStats is one entry of a flow stats reply: the flow and its counters.
// IdleSec is how long the flow has not matched a packet, when the switch
// says (OpenFlow 1.5's idle_time; Open vSwitch reports it): HasIdle.
type FlowStats struct {
	Flow
	DurationSec  uint32
	DurationNsec uint32
	PacketCount  uint64
	ByteCount    uint64
	IdleSec      uint32
	HasIdle      bool
}

// OXS statistics fields of OpenFlow 1.5 ofp_stats (class OFPXSC_OPENFLOW_BASIC).
const (
	oxsClassBasic    uint16 = 0x8002
	oxsDuration      uint8  = 0
	oxsIdleTime      uint8  = 1
	oxsPacketCount   uint8  = 4
	oxsByteCount     uint8  = 5
	flowDesc15Fixed         = 24
	flowStats13Fixed        = 48
)

// DecodeFlowStats decodes the concatenated entries of a flow stats reply
// (ofp_flow_desc in 1.5, ofp_flow_stats in 1.3).
func DecodeFlowStats(body []byte, version uint8) ([]FlowStats, error) {
	var out []FlowStats
	for len(body) > 0 {
		if len(body) < 2 {
			return out, fmt.Errorf("openflow: truncated flow stats entry")
		}
		n := int(binary.BigEndian.Uint16(body))
		fixed := flowStats13Fixed
		if version >= Version15 {
			fixed = flowDesc15Fixed
		}
		if n < fixed+8 || n > len(body) {
			return out, fmt.Errorf("openflow: flow stats entry of %d bytes (%d left)", n, len(body))
		}
		fs, err := decodeFlowStatsEntry(body[:n], version)
		if err != nil {
			return out, err
		}
		out = append(out, fs)
		body = body[n:]
	}
	return out, nil
}

func decodeFlowStatsEntry(e []byte, version uint8) (FlowStats, error) {
	var fs FlowStats
	var rest []byte
	if version >= Version15 {
		fs.Table = e[4]
		fs.Priority = binary.BigEndian.Uint16(e[6:])
		fs.IdleTimeout = binary.BigEndian.Uint16(e[8:])
		fs.HardTimeout = binary.BigEndian.Uint16(e[10:])
		fs.Flags = FlowFlags(binary.BigEndian.Uint16(e[12:]))
		fs.Importance = binary.BigEndian.Uint16(e[14:])
		fs.Cookie = binary.BigEndian.Uint64(e[16:])
		m, n, err := DecodeMatch(e[24:])
		if err != nil {
			return fs, fmt.Errorf("openflow: flow stats: %w", err)
		}
		fs.Match = m
		rest = e[24+n:]
		// ofp_stats: reserved, length, OXS fields, padded to 8.
		if len(rest) < 4 {
			return fs, fmt.Errorf("openflow: flow stats without ofp_stats")
		}
		slen := int(binary.BigEndian.Uint16(rest[2:]))
		spadded := (slen + 7) / 8 * 8
		if slen < 4 || spadded > len(rest) {
			return fs, fmt.Errorf("openflow: ofp_stats length %d overruns", slen)
		}
		if err := fs.decodeOXS(rest[4:slen]); err != nil {
			return fs, err
		}
		rest = rest[spadded:]
	} else {
		fs.Table = e[2]
		fs.DurationSec = binary.BigEndian.Uint32(e[4:])
		fs.DurationNsec = binary.BigEndian.Uint32(e[8:])
		fs.Priority = binary.BigEndian.Uint16(e[12:])
		fs.IdleTimeout = binary.BigEndian.Uint16(e[14:])
		fs.HardTimeout = binary.BigEndian.Uint16(e[16:])
		fs.Flags = FlowFlags(binary.BigEndian.Uint16(e[18:]))
		fs.Cookie = binary.BigEndian.Uint64(e[24:])
		fs.PacketCount = binary.BigEndian.Uint64(e[32:])
		fs.ByteCount = binary.BigEndian.Uint64(e[40:])
		m, n, err := DecodeMatch(e[48:])
		if err != nil {
			return fs, fmt.Errorf("openflow: flow stats: %w", err)
		}
		fs.Match = m
		rest = e[48+n:]
	}
	acts, err := DecodeInstructions(rest)
	if err != nil {
		return fs, fmt.Errorf("openflow: flow stats of cookie 0x%x: %w", fs.Cookie, err)
	}
	fs.Actions = acts
	return fs, nil
}

func (fs *FlowStats) decodeOXS(b []byte) error {
	for len(b) > 0 {
		if len(b) < 4 {
			return fmt.Errorf("openflow: truncated OXS header")
		}
		h := binary.BigEndian.Uint32(b)
		class, field, n := uint16(h>>16), uint8(h>>9)&0x7f, int(h&0xff)
		if 4+n > len(b) {
			return fmt.Errorf("openflow: OXS field %d overruns", field)
		}
		v := b[4 : 4+n]
		if class == oxsClassBasic {
			switch {
			case field == oxsDuration && n == 8:
				fs.DurationSec, fs.DurationNsec = binary.BigEndian.Uint32(v), binary.BigEndian.Uint32(v[4:])
			case field == oxsIdleTime && n == 8:
				fs.IdleSec, fs.HasIdle = binary.BigEndian.Uint32(v), true
			case field == oxsPacketCount && n == 8:
				fs.PacketCount = binary.BigEndian.Uint64(v)
			case field == oxsByteCount && n == 8:
				fs.ByteCount = binary.BigEndian.Uint64(v)
			}
		}
		b = b[4+n:]
	}
	return nil
}

// AppendFlowStats encodes entries as a switch does in a flow stats reply
// (for fake switches and tests).
func AppendFlowStats(b []byte, entries []FlowStats, version uint8) ([]byte, error) {
	for i := range entries {
		fs := &entries[i]
		start := len(b)
		var err error
		if version >= Version15 {
			b = append(b, 0, 0, 0, 0, fs.Table, 0)
			b = binary.BigEndian.AppendUint16(b, fs.Priority)
			b = binary.BigEndian.AppendUint16(b, fs.IdleTimeout)
			b = binary.BigEndian.AppendUint16(b, fs.HardTimeout)
			b = binary.BigEndian.AppendUint16(b, uint16(fs.Flags))
			b = binary.BigEndian.AppendUint16(b, fs.Importance)
			b = binary.BigEndian.AppendUint64(b, fs.Cookie)
			b = fs.Match.AppendMatch(b)
			b = append(b, 0, 0, 0, 4+3*12)
			for _, f := range [...]struct {
				field uint8
				v     uint64
			}{{oxsDuration, uint64(fs.DurationSec)<<32 | uint64(fs.DurationNsec)}, {oxsPacketCount, fs.PacketCount}, {oxsByteCount, fs.ByteCount}} {
				b = binary.BigEndian.AppendUint32(b, uint32(oxsClassBasic)<<16|uint32(f.field)<<9|8)
				b = binary.BigEndian.AppendUint64(b, f.v)
			}
			b = appendPad8(b, 40)
		} else {
			b = append(b, 0, 0, fs.Table, 0)
			b = binary.BigEndian.AppendUint32(b, fs.DurationSec)
			b = binary.BigEndian.AppendUint32(b, fs.DurationNsec)
			b = binary.BigEndian.AppendUint16(b, fs.Priority)
			b = binary.BigEndian.AppendUint16(b, fs.IdleTimeout)
			b = binary.BigEndian.AppendUint16(b, fs.HardTimeout)
			b = binary.BigEndian.AppendUint16(b, uint16(fs.Flags))
			b = append(b, 0, 0, 0, 0)
			b = binary.BigEndian.AppendUint64(b, fs.Cookie)
			b = binary.BigEndian.AppendUint64(b, fs.PacketCount)
			b = binary.BigEndian.AppendUint64(b, fs.ByteCount)
			b = fs.Match.AppendMatch(b)
		}
		if b, err = appendInstructions(b, fs.Actions, version); err != nil {
			return b[:start], err
		}
		binary.BigEndian.PutUint16(b[start:], uint16(len(b)-start))
	}
	return b, nil
}

// TableStats is one entry of a table stats reply.
type TableStats struct {
	TableID      uint8
	ActiveCount  uint32
	LookupCount  uint64
	MatchedCount uint64
}

// DecodeTableStats decodes the 24-byte ofp_table_stats entries of a reply.
func DecodeTableStats(body []byte) ([]TableStats, error) {
	if len(body)%24 != 0 {
		return nil, fmt.Errorf("openflow: table stats body of %d bytes is not a multiple of 24", len(body))
	}
	out := make([]TableStats, 0, len(body)/24)
	for ; len(body) > 0; body = body[24:] {
		out = append(out, TableStats{TableID: body[0], ActiveCount: binary.BigEndian.Uint32(body[4:]),
			LookupCount: binary.BigEndian.Uint64(body[8:]), MatchedCount: binary.BigEndian.Uint64(body[16:])})
	}
	return out, nil
}

// PortDesc describes a port (ofp_port).
type PortDesc struct {
	PortNo     uint32
	HWAddr     net.HardwareAddr
	Name       string
	Config     uint32
	State      uint32
	Curr       uint32
	Advertised uint32
	Supported  uint32
	Peer       uint32
	CurrSpeed  uint32
	MaxSpeed   uint32
}

// Port state and config bits that callers test most.
const (
	PortConfigDown uint32 = 1 << 0 // OFPPC_PORT_DOWN
	PortStateDown  uint32 = 1 << 0 // OFPPS_LINK_DOWN
)

// DecodePortDesc decodes the ofp_port entries of a port desc reply (or of a port status message body after its 8-byte header).
func DecodePortDesc(body []byte, version uint8) ([]PortDesc, error) {
	var out []PortDesc
	for len(body) > 0 {
		var p PortDesc
		n := 64
		if version >= Version15 {
			if len(body) < 40 {
				return out, fmt.Errorf("openflow: truncated ofp_port")
			}
			n = int(binary.BigEndian.Uint16(body[4:]))
			if n < 40 || n > len(body) {
				return out, fmt.Errorf("openflow: ofp_port of %d bytes (%d left)", n, len(body))
			}
		} else if len(body) < 64 {
			return out, fmt.Errorf("openflow: truncated ofp_port")
		}
		e := body[:n]
		p.PortNo = binary.BigEndian.Uint32(e)
		p.HWAddr = net.HardwareAddr(append([]byte(nil), e[8:14]...))
		name := e[16:32]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		p.Name = string(name)
		p.Config = binary.BigEndian.Uint32(e[32:])
		p.State = binary.BigEndian.Uint32(e[36:])
		eth := func(v []byte) {
			if len(v) < 24 {
				return
			}
			p.Curr, p.Advertised, p.Supported, p.Peer = binary.BigEndian.Uint32(v), binary.BigEndian.Uint32(v[4:]), binary.BigEndian.Uint32(v[8:]), binary.BigEndian.Uint32(v[12:])
			p.CurrSpeed, p.MaxSpeed = binary.BigEndian.Uint32(v[16:]), binary.BigEndian.Uint32(v[20:])
		}
		if version >= Version15 {
			err := walkProps(e[40:], func(t uint16, v []byte) error {
				if t == 0 && len(v) >= 28 { // OFPPDPT_ETHERNET: pad[4] then the fields
					eth(v[4:])
				}
				return nil
			})
			if err != nil {
				return out, err
			}
		} else {
			eth(e[40:])
		}
		out = append(out, p)
		body = body[n:]
	}
	return out, nil
}

// PortStats is one entry of a port stats reply.
type PortStats struct {
	PortNo       uint32
	DurationSec  uint32
	DurationNsec uint32
	RxPackets    uint64
	TxPackets    uint64
	RxBytes      uint64
	TxBytes      uint64
	RxDropped    uint64
	TxDropped    uint64
	RxErrors     uint64
	TxErrors     uint64
}

// DecodePortStats decodes the entries of a port stats reply.
func DecodePortStats(body []byte, version uint8) ([]PortStats, error) {
	var out []PortStats
	for len(body) > 0 {
		var p PortStats
		var counters []byte
		n := 112
		if version >= Version15 {
			if len(body) < 80 {
				return out, fmt.Errorf("openflow: truncated port stats")
			}
			n = int(binary.BigEndian.Uint16(body))
			if n < 80 || n > len(body) {
				return out, fmt.Errorf("openflow: port stats entry of %d bytes", n)
			}
			p.PortNo = binary.BigEndian.Uint32(body[4:])
			p.DurationSec, p.DurationNsec = binary.BigEndian.Uint32(body[8:]), binary.BigEndian.Uint32(body[12:])
			counters = body[16:80]
		} else {
			if len(body) < 112 {
				return out, fmt.Errorf("openflow: truncated port stats")
			}
			p.PortNo = binary.BigEndian.Uint32(body)
			counters = body[8:72]
			p.DurationSec, p.DurationNsec = binary.BigEndian.Uint32(body[104:]), binary.BigEndian.Uint32(body[108:])
		}
		for i, dst := range []*uint64{&p.RxPackets, &p.TxPackets, &p.RxBytes, &p.TxBytes, &p.RxDropped, &p.TxDropped, &p.RxErrors, &p.TxErrors} {
			*dst = binary.BigEndian.Uint64(counters[8*i:])
		}
		out = append(out, p)
		body = body[n:]
	}
	return out, nil
}

// GroupDesc is one entry of a group desc reply: a group as the switch holds it.
type GroupDesc = GroupMod

// DecodeGroupDesc decodes the entries of a group desc reply.
func DecodeGroupDesc(body []byte, version uint8) ([]GroupDesc, error) {
	var out []GroupDesc
	for len(body) > 0 {
		if len(body) < 8 {
			return out, fmt.Errorf("openflow: truncated group desc")
		}
		n := int(binary.BigEndian.Uint16(body))
		if n < 8 || n > len(body) {
			return out, fmt.Errorf("openflow: group desc entry of %d bytes", n)
		}
		e := body[:n]
		g := GroupDesc{Type: GroupType(e[2]), GroupID: binary.BigEndian.Uint32(e[4:])}
		if version >= Version15 {
			if n < 16 {
				return out, fmt.Errorf("openflow: group desc entry of %d bytes", n)
			}
			blen := int(binary.BigEndian.Uint16(e[8:]))
			if 16+blen > n {
				return out, fmt.Errorf("openflow: group %d bucket list overruns", g.GroupID)
			}
			var err error
			if g.Buckets, err = decodeBuckets15(e[16 : 16+blen]); err != nil {
				return out, err
			}
			if err := g.decodeGroupProps15(e[16+blen:]); err != nil {
				return out, err
			}
		} else {
			var err error
			if g.Buckets, err = decodeBuckets13(e[8:]); err != nil {
				return out, err
			}
		}
		out = append(out, g)
		body = body[n:]
	}
	return out, nil
}

// GroupStats is one entry of a group stats reply.
type GroupStats struct {
	GroupID      uint32
	RefCount     uint32
	PacketCount  uint64
	ByteCount    uint64
	DurationSec  uint32
	DurationNsec uint32
	Buckets      []BucketStats
}

// BucketStats counts what went through one bucket.
type BucketStats struct {
	PacketCount uint64
	ByteCount   uint64
}

// DecodeGroupStats decodes the entries of a group stats reply (the same in 1.3 and 1.5).
func DecodeGroupStats(body []byte) ([]GroupStats, error) {
	var out []GroupStats
	for len(body) > 0 {
		if len(body) < 40 {
			return out, fmt.Errorf("openflow: truncated group stats")
		}
		n := int(binary.BigEndian.Uint16(body))
		if n < 40 || n > len(body) || (n-40)%16 != 0 {
			return out, fmt.Errorf("openflow: group stats entry of %d bytes", n)
		}
		g := GroupStats{GroupID: binary.BigEndian.Uint32(body[4:]), RefCount: binary.BigEndian.Uint32(body[8:]),
			PacketCount: binary.BigEndian.Uint64(body[16:]), ByteCount: binary.BigEndian.Uint64(body[24:]),
			DurationSec: binary.BigEndian.Uint32(body[32:]), DurationNsec: binary.BigEndian.Uint32(body[36:])}
		for b := body[40:n]; len(b) > 0; b = b[16:] {
			g.Buckets = append(g.Buckets, BucketStats{PacketCount: binary.BigEndian.Uint64(b), ByteCount: binary.BigEndian.Uint64(b[8:])})
		}
		out = append(out, g)
		body = body[n:]
	}
	return out, nil
}
