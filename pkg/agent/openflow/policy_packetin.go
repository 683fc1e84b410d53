package openflow

import (
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Packet-ins of policy rules. A rule that rejects or logs sends the agent a
// metered copy of the packet (controller(meter_id=...): the meter drops
// copies above its rate, never the packet itself) with its conjunction id
// in PolicyRuleIDField and this userdata:
//
//	[0] PacketInPolicy
//	[1] flags: PolicyPacketInLog, PolicyPacketInReject, PolicyPacketInDeny
//	[2] the rule's Direction
//	[3] the rule's RuleAction
const (
	// PolicyPacketInLog asks for an audit log line.
	PolicyPacketInLog byte = 1 << 0
	// PolicyPacketInReject asks the agent to answer the packet: a TCP
	// reset, or an ICMP error for other protocols.
	PolicyPacketInReject byte = 1 << 1
	// PolicyPacketInDeny reports a packet a Drop or Reject rule, or the
	// isolation of K8s NetworkPolicies, denied: the FlowExporter keeps it as
	// a denied connection (SetDenyTracking).
	PolicyPacketInDeny byte = 1 << 2
)

// Meters of policy packet-ins, so that a flood of rejected or logged
// packets cannot keep the agent busy: above the rate (after a burst of as
// many) the copies are dropped; the decision on the packet itself is made
// by the flow whatever the meter says. Rejected clients above the rate time
// out instead of being refused; logged packets above it are not logged;
// denied packets above it are not counted in their denied connection's
// record (and a denied connection whose every packet finds the meter
// empty has none).
const (
	PolicyRejectMeterID uint32 = 2
	PolicyLogMeterID    uint32 = 3
	PolicyDenyMeterID   uint32 = 5
	PolicyRejectRate    uint32 = 500
	PolicyLogRate       uint32 = 500
	PolicyDenyRate      uint32 = 500
	// policyPacketInMaxLen holds the Ethernet, IP and transport headers
	// (with options) the agent reads, and what an ICMP error quotes.
	policyPacketInMaxLen = 256
)

func policyMeter(cmd binding.MeterModCommand, id, rate uint32) *binding.MeterMod {
	return &binding.MeterMod{Command: cmd, Flags: binding.MeterPktps | binding.MeterBurst | binding.MeterStats, MeterID: id,
		Bands: []binding.MeterBand{{Rate: rate, BurstSize: rate}}}
}

// PolicyPacketIn is what a policy rule's packet-in says.
type PolicyPacketIn struct {
	// RuleID is the conjunction id of the rule.
	RuleID    uint32
	Direction Direction
	Action    RuleAction
	Log       bool
	Reject    bool
	// Deny: the FlowExporter is to record the packet as denied.
	Deny bool
	// Table is the name of the table whose flow sent it.
	Table string
	// Packet is the packet-in itself (data, in_port, tunnel and conntrack
	// metadata).
	Packet *binding.PacketIn
}

// ParsePolicyPacketIn reads a policy rule's packet-in; ok is false for
// packet-ins of other features.
func (c *networkPolicy) ParsePolicyPacketIn(pi *binding.PacketIn) (PolicyPacketIn, bool) {
	u := pi.UserData
	if len(u) < 4 || PacketInKind(u[0]) != PacketInPolicy || u[3] > byte(ActionPass) || u[2] > byte(DirectionEgress) {
		return PolicyPacketIn{}, false
	}
	out := PolicyPacketIn{Direction: Direction(u[2]), Action: RuleAction(u[3]), Log: u[1]&PolicyPacketInLog != 0,
		Reject: u[1]&PolicyPacketInReject != 0, Deny: u[1]&PolicyPacketInDeny != 0, Packet: pi}
	if v, ok := pi.Match.Get(PolicyRuleIDField.Field); ok {
		out.RuleID = uint32(v.Value.Lo)
	}
	for _, t := range c.p.Tables() {
		if t.ID == pi.TableID {
			out.Table = t.Name
		}
	}
	return out, true
}
