package openflow

import (
	"encoding/binary"
	"fmt"
)

// Learn flags (NX_LEARN_F_*).
const (
	LearnSendFlowRem   uint16 = 1 << 0
	LearnDeleteLearned uint16 = 1 << 1
)

// LearnSpecKind says what a learn spec does in the learned flow.
type LearnSpecKind uint8

// Learn spec kinds (NX_LEARN_DST_*).
const (
	// LearnMatch makes the learned flow match Dst against the source.
	LearnMatch LearnSpecKind = iota
	// LearnLoad makes the learned flow load the source into Dst.
	LearnLoad
	// LearnOutput makes the learned flow output to the port in Src.
	LearnOutput
)

// LearnSpec is one flow_mod_spec of a learn action. The source is the field
// range Src of the packet, or the immediate Value when Immediate is set.
type LearnSpec struct {
	Kind      LearnSpecKind
	Src       FieldRange
	Immediate bool
	Value     U128
	Dst       FieldRange
}

// Learn adds or modifies a flow in Table built from the packet (NXAST_LEARN);
// the session-affinity flows of a service use it.
type Learn struct {
	Table          uint8
	IdleTimeout    uint16
	HardTimeout    uint16
	Priority       uint16
	Cookie         uint64
	Flags          uint16
	FinIdleTimeout uint16
	FinHardTimeout uint16
	Specs          []LearnSpec
}

// String implements Action.
func (a *Learn) String() string { return actionString(a) }

func (s *LearnSpec) nbits() uint {
	if s.Kind == LearnOutput {
		return s.Src.Bits()
	}
	return s.Dst.Bits()
}

func (a *Learn) appendAction(b []byte, _ uint8) ([]byte, error) {
	start := len(b)
	b = appendNXHeader(b, nxastLearn)
	b = binary.BigEndian.AppendUint16(b, a.IdleTimeout)
	b = binary.BigEndian.AppendUint16(b, a.HardTimeout)
	b = binary.BigEndian.AppendUint16(b, a.Priority)
	b = binary.BigEndian.AppendUint64(b, a.Cookie)
	b = binary.BigEndian.AppendUint16(b, a.Flags)
	b = append(b, a.Table, 0)
	b = binary.BigEndian.AppendUint16(b, a.FinIdleTimeout)
	b = binary.BigEndian.AppendUint16(b, a.FinHardTimeout)
	for i := range a.Specs {
		s := &a.Specs[i]
		n := s.nbits()
		if s.Kind != LearnOutput {
			if err := s.Dst.valid(); err != nil {
				return b[:start], fmt.Errorf("openflow: learn spec %d: %w", i, err)
			}
		}
		if !s.Immediate {
			if err := s.Src.valid(); err != nil {
				return b[:start], fmt.Errorf("openflow: learn spec %d: %w", i, err)
			}
			if s.Kind != LearnOutput && s.Src.Bits() != n {
				return b[:start], fmt.Errorf("openflow: learn spec %d: %s and %s differ in width", i, s.Src, s.Dst)
			}
		} else if s.Kind == LearnOutput {
			return b[:start], fmt.Errorf("openflow: learn spec %d: output needs a field source", i)
		}
		hdr := uint16(n) & 0x7ff
		if s.Immediate {
			hdr |= 1 << 13
		}
		hdr |= uint16(s.Kind) << 11
		b = binary.BigEndian.AppendUint16(b, hdr)
		if s.Immediate {
			b = s.Value.appendBytes(b, int((n+15)/16*2))
		} else {
			b = binary.BigEndian.AppendUint32(b, s.Src.Field.oxmHeader())
			b = binary.BigEndian.AppendUint16(b, uint16(s.Src.Start))
		}
		if s.Kind != LearnOutput {
			b = binary.BigEndian.AppendUint32(b, s.Dst.Field.oxmHeader())
			b = binary.BigEndian.AppendUint16(b, uint16(s.Dst.Start))
		}
	}
	return finishAction(b, start)
}

func (a *Learn) appendText(b []byte) []byte {
	b = fmt.Appendf(b, "learn(table=%d", a.Table)
	if a.IdleTimeout != 0 {
		b = fmt.Appendf(b, ",idle_timeout=%d", a.IdleTimeout)
	}
	if a.HardTimeout != 0 {
		b = fmt.Appendf(b, ",hard_timeout=%d", a.HardTimeout)
	}
	if a.FinIdleTimeout != 0 {
		b = fmt.Appendf(b, ",fin_idle_timeout=%d", a.FinIdleTimeout)
	}
	if a.FinHardTimeout != 0 {
		b = fmt.Appendf(b, ",fin_hard_timeout=%d", a.FinHardTimeout)
	}
	if a.Priority != defaultPriority {
		b = fmt.Appendf(b, ",priority=%d", a.Priority)
	}
	if a.Flags&LearnSendFlowRem != 0 {
		b = append(b, ",send_flow_rem"...)
	}
	if a.Flags&LearnDeleteLearned != 0 {
		b = append(b, ",delete_learned"...)
	}
	if a.Cookie != 0 {
		b = fmt.Appendf(b, ",cookie=%#x", a.Cookie)
	}
	for i := range a.Specs {
		s := &a.Specs[i]
		b = append(b, ',')
		nbytes := int((s.nbits() + 7) / 8)
		switch {
		case s.Kind == LearnMatch && s.Immediate:
			if s.Dst.Start == 0 && s.Dst.Bits() == s.Dst.Field.Bits() {
				b = append(b, s.Dst.Field.Name()...)
				b = append(b, '=')
				b = appendFieldValue(b, s.Dst.Field, s.Value, s.Dst.Field.fullMask())
			} else {
				b = s.Dst.appendText(b)
				b = append(b, '=')
				b = appendHexBytes(b, s.Value, nbytes)
			}
		case s.Kind == LearnMatch:
			b = s.Dst.appendText(b)
			if s.Src != s.Dst {
				b = append(b, '=')
				b = s.Src.appendText(b)
			}
		case s.Kind == LearnLoad && s.Immediate:
			b = append(b, "load:"...)
			b = appendHexBytes(b, s.Value, nbytes)
			b = append(b, "->"...)
			b = s.Dst.appendText(b)
		case s.Kind == LearnLoad:
			b = append(b, "load:"...)
			b = s.Src.appendText(b)
			b = append(b, "->"...)
			b = s.Dst.appendText(b)
		default:
			b = append(b, "output:"...)
			b = s.Src.appendText(b)
		}
	}
	return append(b, ')')
}

// decodeLearn decodes the body of NXAST_LEARN after the subtype.
func decodeLearn(body []byte) (*Learn, error) {
	if len(body) < 22 {
		return nil, fmt.Errorf("openflow: learn action too short (%d bytes)", len(body))
	}
	a := &Learn{
		IdleTimeout:    binary.BigEndian.Uint16(body[0:]),
		HardTimeout:    binary.BigEndian.Uint16(body[2:]),
		Priority:       binary.BigEndian.Uint16(body[4:]),
		Cookie:         binary.BigEndian.Uint64(body[6:]),
		Flags:          binary.BigEndian.Uint16(body[14:]),
		Table:          body[16],
		FinIdleTimeout: binary.BigEndian.Uint16(body[18:]),
		FinHardTimeout: binary.BigEndian.Uint16(body[20:]),
	}
	b := body[22:]
	for len(b) >= 2 {
		hdr := binary.BigEndian.Uint16(b)
		if hdr == 0 {
			break // padding
		}
		b = b[2:]
		n := uint(hdr & 0x7ff)
		if n == 0 || n > 128 {
			return nil, fmt.Errorf("openflow: learn spec of %d bits", n)
		}
		s := LearnSpec{Kind: LearnSpecKind(hdr >> 11 & 3), Immediate: hdr&(1<<13) != 0}
		if s.Kind > LearnOutput {
			return nil, fmt.Errorf("openflow: learn spec has unknown destination type %d", s.Kind)
		}
		readRange := func(nb uint) (FieldRange, error) {
			if len(b) < 6 {
				return FieldRange{}, fmt.Errorf("openflow: learn spec truncated")
			}
			f, err := fieldFromHeader32(binary.BigEndian.Uint32(b))
			if err != nil {
				return FieldRange{}, err
			}
			ofs := binary.BigEndian.Uint16(b[4:])
			b = b[6:]
			r := FieldRange{Field: f, Start: uint8(ofs), End: uint8(uint(ofs) + nb - 1)}
			if uint(ofs)+nb > f.Bits() {
				return r, fmt.Errorf("openflow: learn spec range %d+%d exceeds %s", ofs, nb, f)
			}
			return r, nil
		}
		if s.Immediate {
			nb := int((n + 15) / 16 * 2)
			if len(b) < nb {
				return nil, fmt.Errorf("openflow: learn immediate truncated")
			}
			s.Value = u128From(b[:nb])
			b = b[nb:]
		} else {
			var err error
			if s.Src, err = readRange(n); err != nil {
				return nil, err
			}
		}
		if s.Kind != LearnOutput {
			var err error
			if s.Dst, err = readRange(n); err != nil {
				return nil, err
			}
		}
		a.Specs = append(a.Specs, s)
	}
	return a, nil
}
