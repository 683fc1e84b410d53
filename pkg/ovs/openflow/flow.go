package openflow

import (
	"encoding/binary"
	"fmt"
)

// OFPT_* message types of the messages this half of the package encodes
// (OpenFlow 1.5.1 section 7.1; the same numbers in 1.3).
const (
	TypePacketOut uint8 = 13
	TypeFlowMod   uint8 = 14
	TypeGroupMod  uint8 = 15
	TypeMeterMod  uint8 = 29
)

// TableAll is OFPTT_ALL: a delete or stats request for every table.
const TableAll uint8 = 0xff

// FlowFlags are OFPFF_* flow flags.
type FlowFlags uint16

// Flow flags (OpenFlow 1.5.1 enum ofp_flow_mod_flags).
const (
	FlowSendFlowRem  FlowFlags = 1 << 0
	FlowCheckOverlap FlowFlags = 1 << 1
	FlowResetCounts  FlowFlags = 1 << 2
	FlowNoPktCounts  FlowFlags = 1 << 3
	FlowNoBytCounts  FlowFlags = 1 << 4
)

// Flow is one flow entry: where it lives, what it matches and what it does.
// Actions lists actions and the instructions goto_table, write_metadata,
// write_actions and clear_actions in any order (they are encoded and printed
// in OpenFlow's instruction order); an empty list drops the packet.
//
// A typical flow:
//
//	f := &openflow.Flow{Table: 0, Priority: 100, Cookie: 0x1}
//	f.Match.IPSrc(netip.MustParseAddr("10.0.0.1"))
//	f.Actions = []openflow.Action{openflow.ResubmitToTable(1)}
//	f.String() // "cookie=0x1, priority=100,ip,nw_src=10.0.0.1 actions=resubmit(,1)"
type Flow struct {
	Table       uint8
	Priority    uint16
	Cookie      uint64
	IdleTimeout uint16
	HardTimeout uint16
	Importance  uint16
	Flags       FlowFlags
	Match       Match
	Actions     []Action
}

// NewFlow returns a flow in table with the given priority.
func NewFlow(table uint8, priority uint16) *Flow { return &Flow{Table: table, Priority: priority} }

// String prints the flow as `ovs-ofctl -O OpenFlow15 --no-stats dump-flows`
// prints it: dump-flows without duration, counters and ages, which also
// leaves out "cookie=0x0, " and "table=0, ".
func (f *Flow) String() string { return string(f.AppendText(make([]byte, 0, 128))) }

// AppendText appends String() to b.
func (f *Flow) AppendText(b []byte) []byte {
	if f.Cookie != 0 {
		b = fmt.Appendf(b, "cookie=0x%x, ", f.Cookie)
	}
	if f.Table != 0 {
		b = fmt.Appendf(b, "table=%d, ", f.Table)
	}
	if f.IdleTimeout != 0 {
		b = fmt.Appendf(b, "idle_timeout=%d, ", f.IdleTimeout)
	}
	if f.HardTimeout != 0 {
		b = fmt.Appendf(b, "hard_timeout=%d, ", f.HardTimeout)
	}
	b = appendFlowFlags(b, f.Flags)
	if f.Importance != 0 {
		b = fmt.Appendf(b, "importance=%d, ", f.Importance)
	}
	n := len(b)
	b = appendMatchText(b, &f.Match, f.Priority)
	if len(b) != n {
		b = append(b, ' ')
	}
	b = append(b, "actions="...)
	return appendActionsText(b, f.Actions)
}

// MatchKey identifies the flow within its switch as a strict modify or
// delete selects it: table, priority and match ("table=0,priority=100,ip,...").
// Callers use it to key caches of installed flows.
func (f *Flow) MatchKey() string {
	b := fmt.Appendf(make([]byte, 0, 64), "table=%d,priority=%d,", f.Table, f.Priority)
	return string(appendMatchText(b, &f.Match, defaultPriority))
}

func appendFlowFlags(b []byte, fl FlowFlags) []byte {
	names := [...]string{"send_flow_rem ", "check_overlap ", "reset_counts ", "no_packet_counts ", "no_byte_counts "}
	for i, n := range names {
		if fl&(1<<i) != 0 {
			b = append(b, n...)
		}
	}
	return b
}

// FlowModCommand is OFPFC_*.
type FlowModCommand uint8

// Flow mod commands (OpenFlow 1.5.1 enum ofp_flow_mod_command).
const (
	FlowAdd          FlowModCommand = 0
	FlowModify       FlowModCommand = 1
	FlowModifyStrict FlowModCommand = 2
	FlowDelete       FlowModCommand = 3
	FlowDeleteStrict FlowModCommand = 4
)

var flowModCommandNames = [...]string{"ADD", "MOD", "MOD_STRICT", "DEL", "DEL_STRICT"}

// String names the command as ofp-print does.
func (c FlowModCommand) String() string {
	if int(c) < len(flowModCommandNames) {
		return flowModCommandNames[c]
	}
	return fmt.Sprintf("cmd%d", c)
}

// FlowMod is an OFPT_FLOW_MOD message. For deletes and non-strict
// modifications, CookieMask selects flows whose cookie equals Flow.Cookie on
// the masked bits; OutPort (0: any) and OutGroup (when FilterOutGroup) select
// flows that output there; Table may be TableAll.
type FlowMod struct {
	Flow
	Command        FlowModCommand
	CookieMask     uint64
	OutPort        uint32
	OutGroup       uint32
	FilterOutGroup bool
}

// AddFlow is the flow mod that adds f.
func AddFlow(f *Flow) *FlowMod { return &FlowMod{Flow: *f, Command: FlowAdd} }

// ModifyFlowStrict is the flow mod that replaces the actions of the flow
// with exactly f's table, priority and match.
func ModifyFlowStrict(f *Flow) *FlowMod { return &FlowMod{Flow: *f, Command: FlowModifyStrict} }

// DeleteFlowStrict is the flow mod that deletes the flow with exactly f's
// table, priority and match.
func DeleteFlowStrict(f *Flow) *FlowMod { return &FlowMod{Flow: *f, Command: FlowDeleteStrict} }

// DeleteFlows is the flow mod that deletes every flow of table (TableAll: of
// every table) whose cookie matches cookie on the bits of cookieMask.
func DeleteFlows(table uint8, cookie, cookieMask uint64) *FlowMod {
	return &FlowMod{Flow: Flow{Table: table, Cookie: cookie}, Command: FlowDelete, CookieMask: cookieMask}
}

// MsgType implements Message.
func (m *FlowMod) MsgType() uint8 { return TypeFlowMod }

// AppendBody implements Message: ofp_flow_mod for OpenFlow 1.3 or 1.5.
func (m *FlowMod) AppendBody(b []byte, version uint8) ([]byte, error) {
	b = binary.BigEndian.AppendUint64(b, m.Cookie)
	b = binary.BigEndian.AppendUint64(b, m.CookieMask)
	b = append(b, m.Table, byte(m.Command))
	b = binary.BigEndian.AppendUint16(b, m.IdleTimeout)
	b = binary.BigEndian.AppendUint16(b, m.HardTimeout)
	b = binary.BigEndian.AppendUint16(b, m.Priority)
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // buffer_id: OFP_NO_BUFFER
	outPort, outGroup := PortAny, PortAny            // OFPP_ANY, OFPG_ANY
	if m.OutPort != 0 {
		outPort = m.OutPort
	}
	if m.FilterOutGroup {
		outGroup = m.OutGroup
	}
	b = binary.BigEndian.AppendUint32(b, outPort)
	b = binary.BigEndian.AppendUint32(b, outGroup)
	b = binary.BigEndian.AppendUint16(b, uint16(m.Flags))
	if version >= Version15 {
		b = binary.BigEndian.AppendUint16(b, m.Importance)
	} else {
		b = append(b, 0, 0)
	}
	b = m.Match.AppendMatch(b)
	if m.Command == FlowDelete || m.Command == FlowDeleteStrict {
		return b, nil
	}
	return appendInstructions(b, m.Actions, version)
}

// String prints the flow mod as `ovs-ofctl ofp-parse` prints it after the
// message header, e.g. "ADD priority=100,ip cookie:0x1 actions=drop".
func (m *FlowMod) String() string {
	b := []byte(m.Command.String())
	if m.Table != 0 {
		b = fmt.Appendf(b, " table:%d", m.Table)
	}
	b = append(b, ' ')
	b = appendMatchText(b, &m.Match, m.Priority)
	if b[len(b)-1] != ' ' {
		b = append(b, ' ')
	}
	if m.Command == FlowAdd {
		if m.Cookie != 0 && m.Cookie != ^uint64(0) {
			b = fmt.Appendf(b, "cookie:0x%x ", m.Cookie)
		}
	} else if m.CookieMask != 0 {
		b = fmt.Appendf(b, "cookie:0x%x/0x%x ", m.Cookie, m.CookieMask)
	}
	if m.IdleTimeout != 0 {
		b = fmt.Appendf(b, "idle:%d ", m.IdleTimeout)
	}
	if m.HardTimeout != 0 {
		b = fmt.Appendf(b, "hard:%d ", m.HardTimeout)
	}
	if m.Importance != 0 {
		b = fmt.Appendf(b, "importance:%d ", m.Importance)
	}
	if m.OutPort != 0 && m.OutPort != PortAny {
		b = append(b, "out_port:"...)
		b = appendPort(b, m.OutPort)
		b = append(b, ' ')
	}
	b = appendFlowFlags(b, m.Flags)
	b = append(b, "actions="...)
	acts := m.Actions
	if m.Command == FlowDelete || m.Command == FlowDeleteStrict {
		acts = nil
	}
	return string(appendActionsText(b, acts))
}

// OFPIT_* instruction types (OpenFlow 1.5.1 section 7.2.4).
const (
	ofpitGotoTable     uint16 = 1
	ofpitWriteMetadata uint16 = 2
	ofpitWriteActions  uint16 = 3
	ofpitApplyActions  uint16 = 4
	ofpitClearActions  uint16 = 5
	ofpitMeter         uint16 = 6
)

// appendInstructions encodes a flow's action list as OpenFlow instructions in
// the order the specification requires.
func appendInstructions(b []byte, acts []Action, version uint8) ([]byte, error) {
	if len(acts) == 0 {
		return b, nil
	}
	var err error
	// OpenFlow 1.3 has meters as an instruction that comes first.
	if version < Version15 {
		for _, a := range acts {
			if mt, ok := a.(*Meter); ok {
				b = binary.BigEndian.AppendUint16(b, ofpitMeter)
				b = binary.BigEndian.AppendUint16(b, 8)
				b = binary.BigEndian.AppendUint32(b, mt.ID)
			}
		}
	}
	// In OpenFlow 1.5 the meter is an action, first in apply-actions.
	applyFrom := rankMeter
	if version < Version15 {
		applyFrom = rankApply
	}
	hasApply := false
	for _, a := range acts {
		if r := instructionRank(a); r >= applyFrom && r <= rankApply {
			hasApply = true
			break
		}
	}
	if hasApply {
		start := len(b)
		b = append(b, 0, byte(ofpitApplyActions), 0, 0, 0, 0, 0, 0)
		for rank := applyFrom; rank <= rankApply; rank++ {
			for _, a := range acts {
				if instructionRank(a) != rank {
					continue
				}
				if b, err = a.appendAction(b, version); err != nil {
					return b[:start], err
				}
			}
		}
		binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	}
	for rank := rankClearActions; rank <= rankGotoTable; rank++ {
		for _, a := range acts {
			if instructionRank(a) != rank {
				continue
			}
			switch x := a.(type) {
			case *ClearActions:
				b = append(b, 0, byte(ofpitClearActions), 0, 8, 0, 0, 0, 0)
			case *WriteActions:
				start := len(b)
				b = append(b, 0, byte(ofpitWriteActions), 0, 0, 0, 0, 0, 0)
				if b, err = appendActions(b, x.Actions, version); err != nil {
					return b[:start], err
				}
				binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
			case *WriteMetadata:
				b = append(b, 0, byte(ofpitWriteMetadata), 0, 24, 0, 0, 0, 0)
				b = binary.BigEndian.AppendUint64(b, x.Value)
				b = binary.BigEndian.AppendUint64(b, x.mask())
			case *GotoTable:
				b = append(b, 0, byte(ofpitGotoTable), 0, 8, x.Table, 0, 0, 0)
			}
		}
	}
	return b, nil
}
