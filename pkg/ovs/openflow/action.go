package openflow

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Action is one OpenFlow action (or instruction: GotoTable, WriteMetadata,
// WriteActions and ClearActions are listed among a flow's actions the way
// ovs-ofctl lists them, and encoded as instructions). The set of actions is
// closed: every implementation is in this package.
type Action interface {
	// String prints the action as ovs-ofctl does.
	String() string
	appendAction(b []byte, version uint8) ([]byte, error)
	appendText(b []byte) []byte
}

// Reserved OpenFlow 1.1+ port numbers (OpenFlow 1.5.1 section 7.2.1, enum ofp_port_no).
const (
	PortMax        uint32 = 0xffffff00
	PortInPort     uint32 = 0xfffffff8
	PortTable      uint32 = 0xfffffff9
	PortNormal     uint32 = 0xfffffffa
	PortFlood      uint32 = 0xfffffffb
	PortAll        uint32 = 0xfffffffc
	PortController uint32 = 0xfffffffd
	PortLocal      uint32 = 0xfffffffe
	PortAny        uint32 = 0xffffffff
)

// NoTable says "no table": for Resubmit, no resubmit to another table; for
// CT, no recirculation (NX_CT_RECIRC_NONE).
const NoTable uint8 = 0xff

// Packet-in reasons (OpenFlow 1.5.1 enum ofp_packet_in_reason).
const (
	ReasonNoMatch    uint8 = 0
	ReasonAction     uint8 = 1
	ReasonInvalidTTL uint8 = 2
	ReasonActionSet  uint8 = 3
	ReasonGroup      uint8 = 4
	ReasonPacketOut  uint8 = 5
)

// OFPAT_* action types (OpenFlow 1.5.1 section 7.2.5).
const (
	ofpatOutput       uint16 = 0
	ofpatPushVLAN     uint16 = 17
	ofpatPopVLAN      uint16 = 18
	ofpatGroup        uint16 = 22
	ofpatSetNwTTL     uint16 = 23
	ofpatDecNwTTL     uint16 = 24
	ofpatSetField     uint16 = 25
	ofpatCopyField    uint16 = 28
	ofpatMeter        uint16 = 29
	ofpatExperimenter uint16 = 0xffff
)

// NXAST_* Nicira action subtypes (Open vSwitch lib/ofp-actions.c).
const (
	nxastResubmit      uint16 = 1
	nxastRegMove       uint16 = 6
	nxastNote          uint16 = 8
	nxastResubmitTable uint16 = 14
	nxastLearn         uint16 = 16
	nxastController    uint16 = 20
	nxastRegLoad2      uint16 = 33
	nxastConjunction   uint16 = 34
	nxastCT            uint16 = 35
	nxastNAT           uint16 = 36
	nxastController2   uint16 = 37
	nxastCTClear       uint16 = 43
	nxastResubmitCT    uint16 = 44
)

// ActionsString prints a list of actions as ovs-ofctl does ("drop" when empty).
func ActionsString(acts []Action) string { return string(appendActionsText(nil, acts)) }

// appendActionsText prints actions in the order Open vSwitch keeps them:
// meter first, the other apply-actions next, then clear_actions,
// write_actions, write_metadata and goto_table, whatever order the list has.
func appendActionsText(b []byte, acts []Action) []byte {
	start := len(b)
	for pass := rankMeter; pass <= rankGotoTable; pass++ {
		for _, a := range acts {
			if instructionRank(a) != pass {
				continue
			}
			if len(b) > start {
				b = append(b, ',')
			}
			b = a.appendText(b)
		}
	}
	if len(b) == start {
		b = append(b, "drop"...)
	}
	return b
}

// Ranks order a flow's actions and instructions as OpenFlow requires them.
const (
	rankMeter = iota
	rankApply
	rankClearActions
	rankWriteActions
	rankWriteMetadata
	rankGotoTable
)

func instructionRank(a Action) int {
	switch a.(type) {
	case *Meter:
		return rankMeter
	case *ClearActions:
		return rankClearActions
	case *WriteActions:
		return rankWriteActions
	case *WriteMetadata:
		return rankWriteMetadata
	case *GotoTable:
		return rankGotoTable
	}
	return rankApply
}

// appendActions encodes a list of actions (no instructions allowed).
func appendActions(b []byte, acts []Action, version uint8) ([]byte, error) {
	var err error
	for _, a := range acts {
		if instructionRank(a) > rankApply {
			return b, fmt.Errorf("openflow: %s is an instruction, not an action", a)
		}
		if b, err = a.appendAction(b, version); err != nil {
			return b, err
		}
	}
	return b, nil
}

// appendNXHeader starts a Nicira action: type, length placeholder, vendor, subtype.
func appendNXHeader(b []byte, subtype uint16) []byte {
	b = append(b, 0xff, 0xff, 0, 0)
	b = binary.BigEndian.AppendUint32(b, NiciraExperimenter)
	return binary.BigEndian.AppendUint16(b, subtype)
}

// finishAction pads the action that starts at start to a multiple of 8 and
// writes its length.
func finishAction(b []byte, start int) ([]byte, error) {
	b = appendPad8(b, len(b)-start)
	n := len(b) - start
	if n > 0xffff {
		return b[:start], fmt.Errorf("openflow: action of %d bytes is too long", n)
	}
	binary.BigEndian.PutUint16(b[start+2:], uint16(n))
	return b, nil
}

func actionString(a Action) string { return string(a.appendText(nil)) }

// appendPort prints a port number the way ovs-ofctl names reserved ports.
func appendPort(b []byte, p uint32) []byte {
	switch p {
	case PortInPort:
		return append(b, "IN_PORT"...)
	case PortTable:
		return append(b, "TABLE"...)
	case PortNormal:
		return append(b, "NORMAL"...)
	case PortFlood:
		return append(b, "FLOOD"...)
	case PortAll:
		return append(b, "ALL"...)
	case PortController:
		return append(b, "CONTROLLER"...)
	case PortLocal:
		return append(b, "LOCAL"...)
	case PortAny:
		return append(b, "ANY"...)
	}
	return fmt.Appendf(b, "%d", p)
}

// Output sends the packet to a port (a number or one of Port*). MaxLen is the
// number of bytes sent when the port is PortController.
type Output struct {
	Port   uint32
	MaxLen uint16
}

// String implements Action.
func (a *Output) String() string { return actionString(a) }

func (a *Output) appendAction(b []byte, _ uint8) ([]byte, error) {
	b = binary.BigEndian.AppendUint16(b, ofpatOutput)
	b = binary.BigEndian.AppendUint16(b, 16)
	b = binary.BigEndian.AppendUint32(b, a.Port)
	b = binary.BigEndian.AppendUint16(b, a.MaxLen)
	return append(b, 0, 0, 0, 0, 0, 0), nil
}

func (a *Output) appendText(b []byte) []byte {
	if a.Port < PortMax {
		b = append(b, "output:"...)
	}
	b = appendPort(b, a.Port)
	if a.Port == PortController {
		b = fmt.Appendf(b, ":%d", a.MaxLen)
	}
	return b
}

// Controller sends the packet to the controller as an NXT_PACKET_IN2
// (NXAST_CONTROLLER2). MaxLen 0 means the whole packet (65535). Reason is an
// OpenFlow packet-in reason; use ReasonAction unless you mean otherwise.
// Pause stops the pipeline until the controller resumes it. MeterID (0: none)
// rate-limits the packet-ins through that meter without touching the packet
// itself: Open vSwitch meters a clone of it (NXAC2PT_METER_ID), so a flow can
// send a metered copy to the controller and go on.
type Controller struct {
	MaxLen       uint16
	ControllerID uint16
	Reason       uint8
	UserData     []byte
	Pause        bool
	MeterID      uint32
}

// SendToController is a Controller action with reason "action" and the given userdata.
func SendToController(userdata []byte, pause bool) *Controller {
	return &Controller{Reason: ReasonAction, UserData: userdata, Pause: pause}
}

// String implements Action.
func (a *Controller) String() string { return actionString(a) }

func (a *Controller) maxLen() uint16 {
	if a.MaxLen == 0 {
		return 0xffff
	}
	return a.MaxLen
}

func (a *Controller) appendAction(b []byte, _ uint8) ([]byte, error) {
	start := len(b)
	b = appendNXHeader(b, nxastController2)
	b = append(b, 0, 0, 0, 0, 0, 0)
	if ml := a.maxLen(); ml != 0xffff {
		b = appendProp(b, 0, binary.BigEndian.AppendUint16(nil, ml))
	}
	if a.ControllerID != 0 {
		b = appendProp(b, 1, binary.BigEndian.AppendUint16(nil, a.ControllerID))
	}
	if a.Reason != ReasonAction {
		b = appendProp(b, 2, []byte{a.Reason})
	}
	if len(a.UserData) > 0 {
		b = appendProp(b, 3, a.UserData)
	}
	if a.Pause {
		b = appendProp(b, 4, nil)
	}
	if a.MeterID != 0 {
		b = appendProp(b, 5, binary.BigEndian.AppendUint32(nil, a.MeterID))
	}
	return finishAction(b, start)
}

// appendProp appends an OpenFlow property (type, length, value) padded to 8 bytes.
func appendProp(b []byte, typ uint16, value []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, uint16(4+len(value)))
	b = append(b, value...)
	return appendPad8(b, 4+len(value))
}

func (a *Controller) appendText(b []byte) []byte {
	ml := a.maxLen()
	if a.Reason == ReasonAction && a.ControllerID == 0 && len(a.UserData) == 0 && !a.Pause && a.MeterID == 0 {
		return fmt.Appendf(b, "CONTROLLER:%d", ml)
	}
	b = append(b, "controller("...)
	start := len(b)
	sep := func() {
		if len(b) > start {
			b = append(b, ',')
		}
	}
	if a.Reason != ReasonAction {
		b = append(b, "reason="...)
		b = append(b, reasonName(a.Reason)...)
	}
	if ml != 0xffff {
		sep()
		b = fmt.Appendf(b, "max_len=%d", ml)
	}
	if a.ControllerID != 0 {
		sep()
		b = fmt.Appendf(b, "id=%d", a.ControllerID)
	}
	if len(a.UserData) > 0 {
		sep()
		b = append(b, "userdata="...)
		b = appendHexArg(b, a.UserData)
	}
	if a.Pause {
		sep()
		b = append(b, "pause"...)
	}
	if a.MeterID != 0 {
		sep()
		b = fmt.Appendf(b, "meter_id=%d", a.MeterID)
	}
	return append(b, ')')
}

var reasonNames = [...]string{"no_match", "action", "invalid_ttl", "action_set", "group", "packet_out"}

func reasonName(r uint8) string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("%d", r)
}

// appendHexArg prints bytes as ovs-ofctl's format_hex_arg: "01.02.ff".
func appendHexArg(b []byte, data []byte) []byte {
	for i, c := range data {
		if i > 0 {
			b = append(b, '.')
		}
		b = fmt.Appendf(b, "%02x", c)
	}
	return b
}

// Resubmit searches table Table (NoTable: the current one) as if the packet
// had arrived on Port (0: its actual in_port). CT resubmits with the
// conntrack original-direction tuple (NXAST_RESUBMIT_TABLE_CT).
type Resubmit struct {
	Port  uint32
	Table uint8
	CT    bool
}

// ResubmitToTable is resubmit(,table).
func ResubmitToTable(table uint8) *Resubmit { return &Resubmit{Table: table} }

// String implements Action.
func (a *Resubmit) String() string { return actionString(a) }

func (a *Resubmit) port16() uint16 {
	switch {
	case a.Port == 0:
		return 0xfff8
	case a.Port >= PortMax:
		return uint16(a.Port)
	}
	return uint16(a.Port)
}

func (a *Resubmit) appendAction(b []byte, _ uint8) ([]byte, error) {
	start := len(b)
	sub := nxastResubmitTable
	if a.CT {
		sub = nxastResubmitCT
	}
	b = appendNXHeader(b, sub)
	b = binary.BigEndian.AppendUint16(b, a.port16())
	b = append(b, a.Table, 0, 0, 0)
	return finishAction(b, start)
}

func (a *Resubmit) appendText(b []byte) []byte {
	port := port16To32(a.port16())
	if port != PortInPort && a.Table == NoTable && !a.CT {
		b = append(b, "resubmit:"...)
		return appendPort(b, port)
	}
	b = append(b, "resubmit("...)
	if port != PortInPort {
		b = appendPort(b, port)
	}
	b = append(b, ',')
	if a.Table != NoTable {
		b = fmt.Appendf(b, "%d", a.Table)
	}
	if a.CT {
		b = append(b, ",ct"...)
	}
	return append(b, ')')
}

// SetField sets a field to Value under Mask (a zero Mask means every bit).
// A partial mask is encoded as a masked OFPAT_SET_FIELD in OpenFlow 1.5 and as
// NXAST_REG_LOAD2 in 1.3.
type SetField struct {
	Field Field
	Value U128
	Mask  U128
}

// Load is the action "load:value->dst": it sets the bits of the range to v
// (given unshifted).
func Load(dst FieldRange, v uint64) *SetField {
	mask := bitRange(uint(dst.Start), uint(dst.End))
	return &SetField{Field: dst.Field, Value: U64(v).shl(uint(dst.Start)).and(mask), Mask: mask}
}

// LoadU128 is Load for values wider than 64 bits.
func LoadU128(dst FieldRange, v U128) *SetField {
	mask := bitRange(uint(dst.Start), uint(dst.End))
	return &SetField{Field: dst.Field, Value: v.shl(uint(dst.Start)).and(mask), Mask: mask}
}

// String implements Action.
func (a *SetField) String() string { return actionString(a) }

func (a *SetField) mask() U128 {
	if a.Mask.IsZero() {
		return a.Field.fullMask()
	}
	return a.Mask.and(a.Field.fullMask())
}

func (a *SetField) appendAction(b []byte, version uint8) ([]byte, error) {
	if !a.Field.valid() {
		return b, fmt.Errorf("openflow: set_field of unknown field %d", a.Field)
	}
	mask := a.mask()
	start := len(b)
	if mask != a.Field.fullMask() && version < Version15 {
		b = appendNXHeader(b, nxastRegLoad2)
	} else {
		b = append(b, 0, byte(ofpatSetField), 0, 0)
	}
	b = appendOXM(b, a.Field, a.Value.and(mask), mask)
	return finishAction(b, start)
}

func (a *SetField) appendText(b []byte) []byte {
	b = append(b, "set_field:"...)
	b = appendFieldValue(b, a.Field, a.Value.and(a.mask()), a.mask())
	b = append(b, "->"...)
	return append(b, a.Field.Name()...)
}

// RegMove copies bits between fields: move:Src->Dst (equal widths).
type RegMove struct {
	Src, Dst FieldRange
}

// String implements Action.
func (a *RegMove) String() string { return actionString(a) }

func (a *RegMove) appendAction(b []byte, version uint8) ([]byte, error) {
	if err := a.Src.valid(); err != nil {
		return b, err
	}
	if err := a.Dst.valid(); err != nil {
		return b, err
	}
	if a.Src.Bits() != a.Dst.Bits() {
		return b, fmt.Errorf("openflow: move %s->%s: widths differ", a.Src, a.Dst)
	}
	start := len(b)
	if version >= Version15 {
		// OpenFlow 1.5 has OFPAT_COPY_FIELD; Open vSwitch accepts
		// NXAST_REG_MOVE only up to 1.4.
		b = append(b, 0, byte(ofpatCopyField), 0, 0)
	} else {
		b = appendNXHeader(b, nxastRegMove)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(a.Src.Bits()))
	b = binary.BigEndian.AppendUint16(b, uint16(a.Src.Start))
	b = binary.BigEndian.AppendUint16(b, uint16(a.Dst.Start))
	if version >= Version15 {
		b = append(b, 0, 0)
	}
	b = binary.BigEndian.AppendUint32(b, a.Src.Field.oxmHeader())
	b = binary.BigEndian.AppendUint32(b, a.Dst.Field.oxmHeader())
	return finishAction(b, start)
}

func (a *RegMove) appendText(b []byte) []byte {
	b = append(b, "move:"...)
	b = a.Src.appendText(b)
	b = append(b, "->"...)
	return a.Dst.appendText(b)
}

// CT sends the packet through the connection tracker (NXAST_CT). The zone is
// Zone, or read from ZoneSrc when that is set. Table is where the packet
// continues after tracking (NoTable: none). Actions may hold one NAT first and
// SetField actions on ct_mark / ct_label (printed inside exec(...)).
type CT struct {
	Commit  bool
	Force   bool
	Zone    uint16
	ZoneSrc *FieldRange
	Table   uint8
	Alg     uint16
	Actions []Action
}

// String implements Action.
func (a *CT) String() string { return actionString(a) }

const (
	ctFlagCommit uint16 = 1 << 0
	ctFlagForce  uint16 = 1 << 1
)

func (a *CT) appendAction(b []byte, version uint8) ([]byte, error) {
	start := len(b)
	b = appendNXHeader(b, nxastCT)
	var flags uint16
	if a.Commit {
		flags |= ctFlagCommit
	}
	if a.Force {
		flags |= ctFlagForce
	}
	b = binary.BigEndian.AppendUint16(b, flags)
	if a.ZoneSrc != nil {
		if err := a.ZoneSrc.valid(); err != nil {
			return b[:start], err
		}
		b = binary.BigEndian.AppendUint32(b, a.ZoneSrc.Field.oxmHeader())
		b = binary.BigEndian.AppendUint16(b, a.ZoneSrc.ofsNbits())
	} else {
		b = binary.BigEndian.AppendUint32(b, 0)
		b = binary.BigEndian.AppendUint16(b, a.Zone)
	}
	b = append(b, a.Table, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, a.Alg)
	var err error
	if b, err = appendActions(b, a.Actions, version); err != nil {
		return b[:start], fmt.Errorf("openflow: ct: %w", err)
	}
	return finishAction(b, start)
}

func (a *CT) appendText(b []byte) []byte {
	b = append(b, "ct("...)
	start := len(b)
	sep := func() {
		if len(b) > start {
			b = append(b, ',')
		}
	}
	if a.Commit {
		b = append(b, "commit"...)
	}
	if a.Force {
		sep()
		b = append(b, "force"...)
	}
	if a.Table != NoTable {
		sep()
		b = fmt.Appendf(b, "table=%d", a.Table)
	}
	if a.ZoneSrc != nil {
		sep()
		b = append(b, "zone="...)
		b = a.ZoneSrc.appendText(b)
	} else if a.Zone != 0 {
		sep()
		b = fmt.Appendf(b, "zone=%d", a.Zone)
	}
	acts := a.Actions
	if len(acts) > 0 {
		if nat, ok := acts[0].(*NAT); ok {
			sep()
			b = nat.appendText(b)
			acts = acts[1:]
		}
	}
	if len(acts) > 0 {
		sep()
		b = append(b, "exec("...)
		for i, x := range acts {
			if i > 0 {
				b = append(b, ',')
			}
			b = x.appendText(b)
		}
		b = append(b, ')')
	}
	switch a.Alg {
	case 0:
	case 21:
		sep()
		b = append(b, "alg=ftp"...)
	case 69:
		sep()
		b = append(b, "alg=tftp"...)
	default:
		sep()
		b = fmt.Appendf(b, "alg=%d", a.Alg)
	}
	return append(b, ')')
}

// NAT is the nat(...) action inside CT (NXAST_NAT). With neither Src nor
// Dst it is a bare "nat" that applies the connection's existing NAT. MinAddr
// and MaxAddr (optional) give the address range, MinPort/MaxPort the port range.
type NAT struct {
	Src, Dst                 bool
	MinAddr, MaxAddr         netip.Addr
	MinPort, MaxPort         uint16
	Persistent, Hash, Random bool
}

// String implements Action.
func (a *NAT) String() string { return actionString(a) }

const (
	natFlagSrc        uint16 = 1 << 0
	natFlagDst        uint16 = 1 << 1
	natFlagPersistent uint16 = 1 << 2
	natFlagHash       uint16 = 1 << 3
	natFlagRandom     uint16 = 1 << 4

	natRangeIPv4Min  uint16 = 1 << 0
	natRangeIPv4Max  uint16 = 1 << 1
	natRangeIPv6Min  uint16 = 1 << 2
	natRangeIPv6Max  uint16 = 1 << 3
	natRangeProtoMin uint16 = 1 << 4
	natRangeProtoMax uint16 = 1 << 5
)

func (a *NAT) appendAction(b []byte, _ uint8) ([]byte, error) {
	start := len(b)
	b = appendNXHeader(b, nxastNAT)
	b = append(b, 0, 0)
	var flags, present uint16
	if a.Src {
		flags |= natFlagSrc
	}
	if a.Dst {
		flags |= natFlagDst
	}
	if a.Persistent {
		flags |= natFlagPersistent
	}
	if a.Hash {
		flags |= natFlagHash
	}
	if a.Random {
		flags |= natFlagRandom
	}
	b = binary.BigEndian.AppendUint16(b, flags)
	presentAt := len(b)
	b = append(b, 0, 0)
	if a.MinAddr.IsValid() {
		if a.MinAddr.Is4() {
			present |= natRangeIPv4Min
			v := a.MinAddr.As4()
			b = append(b, v[:]...)
			if a.MaxAddr.IsValid() && a.MaxAddr.Is4() {
				present |= natRangeIPv4Max
				v := a.MaxAddr.As4()
				b = append(b, v[:]...)
			}
		} else {
			present |= natRangeIPv6Min
			v := a.MinAddr.As16()
			b = append(b, v[:]...)
			if a.MaxAddr.IsValid() && !a.MaxAddr.Is4() {
				present |= natRangeIPv6Max
				v := a.MaxAddr.As16()
				b = append(b, v[:]...)
			}
		}
	}
	if a.MinPort != 0 {
		present |= natRangeProtoMin
		b = binary.BigEndian.AppendUint16(b, a.MinPort)
		if a.MaxPort != 0 {
			present |= natRangeProtoMax
			b = binary.BigEndian.AppendUint16(b, a.MaxPort)
		}
	}
	binary.BigEndian.PutUint16(b[presentAt:], present)
	return finishAction(b, start)
}

func (a *NAT) appendText(b []byte) []byte {
	b = append(b, "nat"...)
	if !a.Src && !a.Dst {
		return b
	}
	if a.Src {
		b = append(b, "(src"...)
	} else {
		b = append(b, "(dst"...)
	}
	if a.MinAddr.IsValid() {
		b = append(b, '=')
		v6 := !a.MinAddr.Is4()
		bracket := v6 && a.MinPort != 0
		appendAddr := func(x netip.Addr) {
			if bracket {
				b = append(b, '[')
			}
			b = x.AppendTo(b)
			if bracket {
				b = append(b, ']')
			}
		}
		appendAddr(a.MinAddr)
		if a.MaxAddr.IsValid() && a.MaxAddr != a.MinAddr && !a.MaxAddr.IsUnspecified() {
			b = append(b, '-')
			appendAddr(a.MaxAddr)
		}
		if a.MinPort != 0 {
			b = fmt.Appendf(b, ":%d", a.MinPort)
			if a.MaxPort != 0 && a.MaxPort != a.MinPort {
				b = fmt.Appendf(b, "-%d", a.MaxPort)
			}
		}
		if a.Persistent {
			b = append(b, ",persistent"...)
		}
		if a.Hash {
			b = append(b, ",hash"...)
		}
		if a.Random {
			b = append(b, ",random"...)
		}
	}
	return append(b, ')')
}

// CTClear clears the packet's conntrack state (NXAST_CT_CLEAR).
type CTClear struct{}

// String implements Action.
func (a *CTClear) String() string { return "ct_clear" }

func (a *CTClear) appendAction(b []byte, _ uint8) ([]byte, error) {
	start := len(b)
	b = appendNXHeader(b, nxastCTClear)
	return finishAction(b, start)
}

func (a *CTClear) appendText(b []byte) []byte { return append(b, "ct_clear"...) }

// Conjunction is conjunction(ID, Clause/NClauses); Clause counts from 1 as in
// the text form.
type Conjunction struct {
	ID       uint32
	Clause   uint8
	NClauses uint8
}

// String implements Action.
func (a *Conjunction) String() string { return actionString(a) }

func (a *Conjunction) appendAction(b []byte, _ uint8) ([]byte, error) {
	if a.Clause < 1 || a.Clause > a.NClauses || a.NClauses < 2 || a.NClauses > 64 {
		return b, fmt.Errorf("openflow: conjunction(%d,%d/%d): need 1 <= k <= n, 2 <= n <= 64", a.ID, a.Clause, a.NClauses)
	}
	start := len(b)
	b = appendNXHeader(b, nxastConjunction)
	b = append(b, a.Clause-1, a.NClauses)
	b = binary.BigEndian.AppendUint32(b, a.ID)
	return finishAction(b, start)
}

func (a *Conjunction) appendText(b []byte) []byte {
	return fmt.Appendf(b, "conjunction(%d,%d/%d)", a.ID, a.Clause, a.NClauses)
}

// DecTTL decrements the IP TTL (OFPAT_DEC_NW_TTL).
type DecTTL struct{}

// String implements Action.
func (a *DecTTL) String() string { return "dec_ttl" }

func (a *DecTTL) appendAction(b []byte, _ uint8) ([]byte, error) {
	return append(b, 0, byte(ofpatDecNwTTL), 0, 8, 0, 0, 0, 0), nil
}

func (a *DecTTL) appendText(b []byte) []byte { return append(b, "dec_ttl"...) }

// Group sends the packet to a group.
type Group struct{ ID uint32 }

// String implements Action.
func (a *Group) String() string { return actionString(a) }

func (a *Group) appendAction(b []byte, _ uint8) ([]byte, error) {
	b = append(b, 0, byte(ofpatGroup), 0, 8)
	return binary.BigEndian.AppendUint32(b, a.ID), nil
}

func (a *Group) appendText(b []byte) []byte { return fmt.Appendf(b, "group:%d", a.ID) }

// Meter sends the packet through a meter (an action in OpenFlow 1.5, an
// instruction in 1.3).
type Meter struct{ ID uint32 }

// String implements Action.
func (a *Meter) String() string { return actionString(a) }

func (a *Meter) appendAction(b []byte, version uint8) ([]byte, error) {
	if version < Version15 {
		return b, fmt.Errorf("openflow: meter action needs OpenFlow 1.5")
	}
	b = append(b, 0, byte(ofpatMeter), 0, 8)
	return binary.BigEndian.AppendUint32(b, a.ID), nil
}

func (a *Meter) appendText(b []byte) []byte { return fmt.Appendf(b, "meter:%d", a.ID) }

// Note carries opaque bytes that the switch ignores (NXAST_NOTE). The switch
// pads them with zeros to the action's 8-byte boundary and reports them so.
type Note struct{ Data []byte }

// String implements Action.
func (a *Note) String() string { return actionString(a) }

func (a *Note) appendAction(b []byte, _ uint8) ([]byte, error) {
	start := len(b)
	b = appendNXHeader(b, nxastNote)
	b = append(b, a.Data...)
	if len(b)-start < 16 {
		b = append(b, make([]byte, 16-(len(b)-start))...)
	}
	return finishAction(b, start)
}

func (a *Note) appendText(b []byte) []byte {
	b = append(b, "note:"...)
	n := len(a.Data)
	padded := n
	for padded < 6 || (10+padded)%8 != 0 {
		padded++
	}
	data := a.Data
	for i := 0; i < padded; i++ {
		if i > 0 {
			b = append(b, '.')
		}
		c := byte(0)
		if i < n {
			c = data[i]
		}
		b = fmt.Appendf(b, "%02x", c)
	}
	return b
}

// PushVLAN pushes a VLAN header with the given TPID (usually 0x8100).
type PushVLAN struct{ EtherType uint16 }

// String implements Action.
func (a *PushVLAN) String() string { return actionString(a) }

func (a *PushVLAN) appendAction(b []byte, _ uint8) ([]byte, error) {
	b = append(b, 0, byte(ofpatPushVLAN), 0, 8)
	b = binary.BigEndian.AppendUint16(b, a.EtherType)
	return append(b, 0, 0), nil
}

func (a *PushVLAN) appendText(b []byte) []byte { return fmt.Appendf(b, "push_vlan:0x%x", a.EtherType) }

// PopVLAN pops the outer VLAN header.
type PopVLAN struct{}

// String implements Action.
func (a *PopVLAN) String() string { return "pop_vlan" }

func (a *PopVLAN) appendAction(b []byte, _ uint8) ([]byte, error) {
	return append(b, 0, byte(ofpatPopVLAN), 0, 8, 0, 0, 0, 0), nil
}

func (a *PopVLAN) appendText(b []byte) []byte { return append(b, "pop_vlan"...) }

// GotoTable is the goto_table instruction.
type GotoTable struct{ Table uint8 }

// String implements Action.
func (a *GotoTable) String() string { return actionString(a) }

func (a *GotoTable) appendAction(b []byte, _ uint8) ([]byte, error) {
	return b, fmt.Errorf("openflow: goto_table is an instruction")
}

func (a *GotoTable) appendText(b []byte) []byte { return fmt.Appendf(b, "goto_table:%d", a.Table) }

// WriteMetadata is the write_metadata instruction (Mask 0 means all bits).
type WriteMetadata struct{ Value, Mask uint64 }

// String implements Action.
func (a *WriteMetadata) String() string { return actionString(a) }

func (a *WriteMetadata) mask() uint64 {
	if a.Mask == 0 {
		return ^uint64(0)
	}
	return a.Mask
}

func (a *WriteMetadata) appendAction(b []byte, _ uint8) ([]byte, error) {
	return b, fmt.Errorf("openflow: write_metadata is an instruction")
}

func (a *WriteMetadata) appendText(b []byte) []byte {
	b = append(b, "write_metadata:"...)
	b = appendCHex(b, a.Value)
	if m := a.mask(); m != ^uint64(0) {
		b = append(b, '/')
		b = appendCHex(b, m)
	}
	return b
}

// WriteActions is the write_actions instruction: actions added to the action set.
type WriteActions struct{ Actions []Action }

// String implements Action.
func (a *WriteActions) String() string { return actionString(a) }

func (a *WriteActions) appendAction(b []byte, _ uint8) ([]byte, error) {
	return b, fmt.Errorf("openflow: write_actions is an instruction")
}

func (a *WriteActions) appendText(b []byte) []byte {
	b = append(b, "write_actions("...)
	for i, x := range a.Actions {
		if i > 0 {
			b = append(b, ',')
		}
		b = x.appendText(b)
	}
	return append(b, ')')
}

// ClearActions is the clear_actions instruction.
type ClearActions struct{}

// String implements Action.
func (a *ClearActions) String() string { return "clear_actions" }

func (a *ClearActions) appendAction(b []byte, _ uint8) ([]byte, error) {
	return b, fmt.Errorf("openflow: clear_actions is an instruction")
}

func (a *ClearActions) appendText(b []byte) []byte { return append(b, "clear_actions"...) }
