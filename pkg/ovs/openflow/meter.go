package openflow

import (
	"encoding/binary"
	"fmt"
)

// MeterModCommand is OFPMC_*.
type MeterModCommand uint16

// Meter mod commands (OpenFlow 1.5.1 enum ofp_meter_mod_command).
const (
	MeterAdd    MeterModCommand = 0
	MeterModify MeterModCommand = 1
	MeterDelete MeterModCommand = 2
)

// MeterFlags are OFPMF_*.
type MeterFlags uint16

// Meter flags (OpenFlow 1.5.1 enum ofp_meter_flags).
const (
	MeterKbps  MeterFlags = 1 << 0
	MeterPktps MeterFlags = 1 << 1
	MeterBurst MeterFlags = 1 << 2
	MeterStats MeterFlags = 1 << 3
)

// MeterAll is OFPM_ALL: every meter (for deletes and stats).
const MeterAll uint32 = 0xffffffff

// MeterBand is a drop band (OFPMBT_DROP): above Rate (kb/s or packets/s per
// the meter's flags), with BurstSize when the meter has MeterBurst, packets drop.
type MeterBand struct {
	Rate      uint32
	BurstSize uint32
}

// MeterMod is OFPT_METER_MOD.
type MeterMod struct {
	Command MeterModCommand
	Flags   MeterFlags
	MeterID uint32
	Bands   []MeterBand
}

// MsgType implements Message.
func (m *MeterMod) MsgType() uint8 { return TypeMeterMod }

// AppendBody implements Message: ofp_meter_mod with drop bands (the same in 1.3 and 1.5).
func (m *MeterMod) AppendBody(b []byte, _ uint8) ([]byte, error) {
	b = binary.BigEndian.AppendUint16(b, uint16(m.Command))
	b = binary.BigEndian.AppendUint16(b, uint16(m.Flags))
	b = binary.BigEndian.AppendUint32(b, m.MeterID)
	for _, band := range m.Bands {
		b = append(b, 0, 1, 0, 16) // OFPMBT_DROP, length 16
		b = binary.BigEndian.AppendUint32(b, band.Rate)
		b = binary.BigEndian.AppendUint32(b, band.BurstSize)
		b = append(b, 0, 0, 0, 0)
	}
	return b, nil
}

// String prints the meter as ovs-ofctl does, on one line: "meter=1 kbps bands=type=drop rate=1000"
// (ovs-ofctl starts each band on a new line).
func (m *MeterMod) String() string {
	b := fmt.Appendf(nil, "meter=%d", m.MeterID)
	for i, n := range [...]string{" kbps", " pktps", " burst", " stats"} {
		if m.Flags&(1<<i) != 0 {
			b = append(b, n...)
		}
	}
	b = append(b, " bands="...)
	for i, band := range m.Bands {
		if i > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "type=drop rate=%d", band.Rate)
		if m.Flags&MeterBurst != 0 {
			b = fmt.Appendf(b, " burst_size=%d", band.BurstSize)
		}
	}
	return string(b)
}

// DecodeMeterMod decodes the body of an OFPT_METER_MOD (drop bands only).
func DecodeMeterMod(body []byte) (*MeterMod, error) {
	if len(body) < 8 {
		return nil, fmt.Errorf("openflow: meter_mod too short")
	}
	m := &MeterMod{Command: MeterModCommand(binary.BigEndian.Uint16(body)), Flags: MeterFlags(binary.BigEndian.Uint16(body[2:])),
		MeterID: binary.BigEndian.Uint32(body[4:])}
	for b := body[8:]; len(b) > 0; {
		if len(b) < 16 {
			return nil, fmt.Errorf("openflow: meter %d: truncated band", m.MeterID)
		}
		typ, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if n < 16 || n > len(b) {
			return nil, fmt.Errorf("openflow: meter %d: band length %d", m.MeterID, n)
		}
		if typ != 1 {
			return nil, fmt.Errorf("openflow: meter %d: unsupported band type %d", m.MeterID, typ)
		}
		m.Bands = append(m.Bands, MeterBand{Rate: binary.BigEndian.Uint32(b[4:]), BurstSize: binary.BigEndian.Uint32(b[8:])})
		b = b[n:]
	}
	return m, nil
}
