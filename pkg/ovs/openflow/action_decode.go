package openflow

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// DecodeActions decodes a list of OpenFlow 1.3/1.5 actions (with the Nicira
// extensions this package knows) that fills b.
func DecodeActions(b []byte) ([]Action, error) {
	var acts []Action
	for len(b) > 0 {
		if len(b) < 4 {
			return acts, fmt.Errorf("openflow: %d trailing bytes in action list", len(b))
		}
		typ, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if n < 8 || n > len(b) || n%8 != 0 {
			return acts, fmt.Errorf("openflow: action type %d has bad length %d (%d bytes left)", typ, n, len(b))
		}
		a, err := decodeAction(typ, b[:n])
		if err != nil {
			return acts, err
		}
		acts = append(acts, a)
		b = b[n:]
	}
	return acts, nil
}

func decodeAction(typ uint16, b []byte) (Action, error) {
	body := b[4:]
	switch typ {
	case ofpatOutput:
		if len(b) != 16 {
			return nil, fmt.Errorf("openflow: output action of %d bytes", len(b))
		}
		return &Output{Port: binary.BigEndian.Uint32(body), MaxLen: binary.BigEndian.Uint16(body[4:])}, nil
	case ofpatPushVLAN:
		return &PushVLAN{EtherType: binary.BigEndian.Uint16(body)}, nil
	case ofpatPopVLAN:
		return &PopVLAN{}, nil
	case ofpatGroup:
		return &Group{ID: binary.BigEndian.Uint32(body)}, nil
	case ofpatDecNwTTL:
		return &DecTTL{}, nil
	case ofpatMeter:
		return &Meter{ID: binary.BigEndian.Uint32(body)}, nil
	case ofpatSetField:
		return decodeSetFieldOXM(body)
	case ofpatCopyField:
		if len(body) < 16 {
			return nil, fmt.Errorf("openflow: copy_field action too short")
		}
		return decodeMove(binary.BigEndian.Uint16(body), binary.BigEndian.Uint16(body[2:]), binary.BigEndian.Uint16(body[4:]),
			binary.BigEndian.Uint32(body[8:]), binary.BigEndian.Uint32(body[12:]))
	case ofpatExperimenter:
		if len(b) < 10 {
			return nil, fmt.Errorf("openflow: experimenter action too short")
		}
		if v := binary.BigEndian.Uint32(body); v == ONFExperimenter && len(b) >= 28 && binary.BigEndian.Uint16(b[8:]) == 3200 {
			// onf_action_copy_field: how Open vSwitch reports a move in OpenFlow 1.3.
			return decodeMove(binary.BigEndian.Uint16(b[12:]), binary.BigEndian.Uint16(b[14:]), binary.BigEndian.Uint16(b[16:]),
				binary.BigEndian.Uint32(b[20:]), binary.BigEndian.Uint32(b[24:]))
		} else if v != NiciraExperimenter {
			return nil, fmt.Errorf("openflow: action of unknown experimenter 0x%08x", v)
		}
		return decodeNXAction(binary.BigEndian.Uint16(b[8:]), b[10:])
	}
	return nil, fmt.Errorf("openflow: unsupported action type %d", typ)
}

func decodeSetFieldOXM(b []byte) (Action, error) {
	f, v, mask, _, err := decodeOXM(b)
	if err != nil {
		return nil, fmt.Errorf("openflow: set_field: %w", err)
	}
	a := &SetField{Field: f, Value: v, Mask: mask}
	if mask == f.fullMask() {
		a.Mask = U128{}
	}
	return a, nil
}

func decodeMove(nbits, srcOfs, dstOfs uint16, srcHdr, dstHdr uint32) (Action, error) {
	src, err := fieldFromHeader32(srcHdr)
	if err != nil {
		return nil, err
	}
	dst, err := fieldFromHeader32(dstHdr)
	if err != nil {
		return nil, err
	}
	if nbits == 0 || nbits > 128 || srcOfs > 127 || dstOfs > 127 {
		return nil, fmt.Errorf("openflow: move of %d bits at %d/%d", nbits, srcOfs, dstOfs)
	}
	a := &RegMove{
		Src: FieldRange{src, uint8(srcOfs), uint8(srcOfs + nbits - 1)},
		Dst: FieldRange{dst, uint8(dstOfs), uint8(dstOfs + nbits - 1)},
	}
	if err := a.Src.valid(); err != nil {
		return nil, err
	}
	if err := a.Dst.valid(); err != nil {
		return nil, err
	}
	return a, nil
}

// decodeNXAction decodes a Nicira action from the bytes after its subtype.
func decodeNXAction(sub uint16, b []byte) (Action, error) {
	need := func(n int) error {
		if len(b) < n {
			return fmt.Errorf("openflow: Nicira action %d needs %d bytes, has %d", sub, n, len(b))
		}
		return nil
	}
	switch sub {
	case nxastResubmit, nxastResubmitTable, nxastResubmitCT:
		if err := need(3); err != nil {
			return nil, err
		}
		a := &Resubmit{Port: port16To32(binary.BigEndian.Uint16(b)), Table: b[2], CT: sub == nxastResubmitCT}
		if sub == nxastResubmit {
			a.Table = NoTable
		}
		if a.Port == PortInPort {
			a.Port = 0
		}
		return a, nil
	case nxastRegMove:
		if err := need(14); err != nil {
			return nil, err
		}
		return decodeMove(binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint16(b[4:]),
			binary.BigEndian.Uint32(b[6:]), binary.BigEndian.Uint32(b[10:]))
	case 7: // NXAST_REG_LOAD: ofs_nbits, dst header, 64-bit value
		if err := need(14); err != nil {
			return nil, err
		}
		f, err := fieldFromHeader32(binary.BigEndian.Uint32(b[2:]))
		if err != nil {
			return nil, err
		}
		r := rangeFromOfsNbits(f, binary.BigEndian.Uint16(b))
		if err := r.valid(); err != nil {
			return nil, err
		}
		return Load(r, binary.BigEndian.Uint64(b[6:])), nil
	case nxastRegLoad2:
		return decodeSetFieldOXM(b)
	case nxastNote:
		return &Note{Data: append([]byte(nil), b...)}, nil
	case nxastLearn:
		return decodeLearn(b)
	case nxastController:
		if err := need(5); err != nil {
			return nil, err
		}
		return &Controller{MaxLen: binary.BigEndian.Uint16(b), ControllerID: binary.BigEndian.Uint16(b[2:]), Reason: b[4]}, nil
	case nxastController2:
		if err := need(6); err != nil {
			return nil, err
		}
		a := &Controller{MaxLen: 0xffff, Reason: ReasonAction}
		// Open vSwitch writes 16- and 8-bit properties with 4 value bytes
		// (lib/ofp-prop.c ofpprop_put_u16/u8 pad the value) and reads any
		// length that holds the value (ofpprop_parse_u16): so does this.
		err := walkProps(b[6:], func(typ uint16, v []byte) error {
			switch typ {
			case 0:
				if len(v) < 2 {
					return fmt.Errorf("openflow: controller max_len property of %d bytes", len(v))
				}
				a.MaxLen = binary.BigEndian.Uint16(v)
			case 1:
				if len(v) < 2 {
					return fmt.Errorf("openflow: controller id property of %d bytes", len(v))
				}
				a.ControllerID = binary.BigEndian.Uint16(v)
			case 2:
				if len(v) < 1 {
					return fmt.Errorf("openflow: controller reason property of %d bytes", len(v))
				}
				a.Reason = v[0]
			case 3:
				a.UserData = append([]byte(nil), v...)
			case 4:
				a.Pause = true
			case 5:
				if len(v) < 4 {
					return fmt.Errorf("openflow: controller meter_id property of %d bytes", len(v))
				}
				a.MeterID = binary.BigEndian.Uint32(v)
			}
			return nil
		})
		if a.MaxLen == 0xffff {
			a.MaxLen = 0
		}
		return a, err
	case nxastConjunction:
		if err := need(6); err != nil {
			return nil, err
		}
		return &Conjunction{Clause: b[0] + 1, NClauses: b[1], ID: binary.BigEndian.Uint32(b[2:])}, nil
	case nxastCT:
		if err := need(14); err != nil {
			return nil, err
		}
		flags := binary.BigEndian.Uint16(b)
		a := &CT{Commit: flags&ctFlagCommit != 0, Force: flags&ctFlagForce != 0, Table: b[8],
			Alg: binary.BigEndian.Uint16(b[12:])}
		if src := binary.BigEndian.Uint32(b[2:]); src != 0 {
			f, err := fieldFromHeader32(src)
			if err != nil {
				return nil, err
			}
			r := rangeFromOfsNbits(f, binary.BigEndian.Uint16(b[6:]))
			if err := r.valid(); err != nil {
				return nil, err
			}
			a.ZoneSrc = &r
		} else {
			a.Zone = binary.BigEndian.Uint16(b[6:])
		}
		acts, err := DecodeActions(b[14:])
		if err != nil {
			return nil, fmt.Errorf("openflow: ct nested actions: %w", err)
		}
		a.Actions = acts
		return a, nil
	case nxastNAT:
		return decodeNAT(b)
	case nxastCTClear:
		return &CTClear{}, nil
	}
	return nil, fmt.Errorf("openflow: unsupported Nicira action subtype %d", sub)
}

func decodeNAT(b []byte) (Action, error) {
	if len(b) < 6 {
		return nil, fmt.Errorf("openflow: nat action too short")
	}
	flags, present := binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint16(b[4:])
	a := &NAT{Src: flags&natFlagSrc != 0, Dst: flags&natFlagDst != 0, Persistent: flags&natFlagPersistent != 0,
		Hash: flags&natFlagHash != 0, Random: flags&natFlagRandom != 0}
	r := b[6:]
	take := func(n int) ([]byte, error) {
		if len(r) < n {
			return nil, fmt.Errorf("openflow: nat range truncated")
		}
		v := r[:n]
		r = r[n:]
		return v, nil
	}
	for _, step := range []struct {
		bit uint16
		n   int
		set func([]byte)
	}{
		{natRangeIPv4Min, 4, func(v []byte) { a.MinAddr = netip.AddrFrom4([4]byte(v)) }},
		{natRangeIPv4Max, 4, func(v []byte) { a.MaxAddr = netip.AddrFrom4([4]byte(v)) }},
		{natRangeIPv6Min, 16, func(v []byte) { a.MinAddr = netip.AddrFrom16([16]byte(v)) }},
		{natRangeIPv6Max, 16, func(v []byte) { a.MaxAddr = netip.AddrFrom16([16]byte(v)) }},
		{natRangeProtoMin, 2, func(v []byte) { a.MinPort = binary.BigEndian.Uint16(v) }},
		{natRangeProtoMax, 2, func(v []byte) { a.MaxPort = binary.BigEndian.Uint16(v) }},
	} {
		if present&step.bit == 0 {
			continue
		}
		v, err := take(step.n)
		if err != nil {
			return nil, err
		}
		step.set(v)
	}
	return a, nil
}

// walkProps calls fn for each OpenFlow property (type, length, value, padding to 8).
func walkProps(b []byte, fn func(typ uint16, value []byte) error) error {
	for len(b) > 0 {
		if len(b) < 4 {
			return fmt.Errorf("openflow: %d trailing bytes in property list", len(b))
		}
		typ, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		padded := (n + 7) / 8 * 8
		if n < 4 || n > len(b) {
			return fmt.Errorf("openflow: property %d has bad length %d", typ, n)
		}
		if err := fn(typ, b[4:n]); err != nil {
			return err
		}
		if padded > len(b) {
			padded = len(b)
		}
		b = b[padded:]
	}
	return nil
}

// DecodeInstructions decodes OpenFlow instructions into the flat action list
// Flow.Actions uses (instructions become GotoTable, WriteMetadata, …).
func DecodeInstructions(b []byte) ([]Action, error) {
	var meter, apply, rest []Action
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("openflow: %d trailing bytes in instruction list", len(b))
		}
		typ, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if n < 8 || n > len(b) {
			return nil, fmt.Errorf("openflow: instruction type %d has bad length %d", typ, n)
		}
		body := b[4:n]
		switch typ {
		case ofpitGotoTable:
			rest = append(rest, &GotoTable{Table: body[0]})
		case ofpitWriteMetadata:
			if len(body) < 20 {
				return nil, fmt.Errorf("openflow: write_metadata instruction too short")
			}
			rest = append(rest, &WriteMetadata{Value: binary.BigEndian.Uint64(body[4:]), Mask: binary.BigEndian.Uint64(body[12:])})
		case ofpitWriteActions, ofpitApplyActions:
			acts, err := DecodeActions(body[4:])
			if err != nil {
				return nil, err
			}
			if typ == ofpitApplyActions {
				apply = append(apply, acts...)
			} else {
				rest = append(rest, &WriteActions{Actions: acts})
			}
		case ofpitClearActions:
			rest = append(rest, &ClearActions{})
		case ofpitMeter:
			meter = append(meter, &Meter{ID: binary.BigEndian.Uint32(body)})
		default:
			return nil, fmt.Errorf("openflow: unsupported instruction type %d", typ)
		}
		b = b[n:]
	}
	out := append(meter, apply...)
	return append(out, rest...), nil
}

// DecodeFlowMod decodes the body of an OFPT_FLOW_MOD (after ofp_header).
func DecodeFlowMod(body []byte, version uint8) (*FlowMod, error) {
	if len(body) < 40 {
		return nil, fmt.Errorf("openflow: flow_mod body of %d bytes is too short", len(body))
	}
	m := &FlowMod{}
	m.Cookie = binary.BigEndian.Uint64(body)
	m.CookieMask = binary.BigEndian.Uint64(body[8:])
	m.Table = body[16]
	m.Command = FlowModCommand(body[17])
	m.IdleTimeout = binary.BigEndian.Uint16(body[18:])
	m.HardTimeout = binary.BigEndian.Uint16(body[20:])
	m.Priority = binary.BigEndian.Uint16(body[22:])
	if p := binary.BigEndian.Uint32(body[28:]); p != PortAny {
		m.OutPort = p
	}
	if g := binary.BigEndian.Uint32(body[32:]); g != PortAny {
		m.OutGroup, m.FilterOutGroup = g, true
	}
	m.Flags = FlowFlags(binary.BigEndian.Uint16(body[36:]))
	if version >= Version15 {
		m.Importance = binary.BigEndian.Uint16(body[38:])
	}
	match, n, err := DecodeMatch(body[40:])
	if err != nil {
		return nil, err
	}
	m.Match = match
	if m.Actions, err = DecodeInstructions(body[40+n:]); err != nil {
		return nil, err
	}
	return m, nil
}
