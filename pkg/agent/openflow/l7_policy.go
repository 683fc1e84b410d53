package openflow

import (
	"context"
	"fmt"
	"slices"
	"sync"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// L7NetworkPolicy (pkg/agent/l7engine): the connections an Allow rule with
// l7Protocols matches go through the layer 7 engine, an inline inspector
// on the port antrea-l7-tap0. The rule's conj_id flow (network_policy.go)
// sets L7RedirectField and loads the rule's layer 7 id in L7RuleVLANField;
// ConntrackCommit stores both in the connection's ct_mark (ruleLabels). The
// feature has no table of its own; its flows:
//
//   - Output (priority l7SteerPriority, above TrafficControl's): a TCP
//     packet with L7RedirectField (the connection's first packet) or of a
//     tracked connection with L7RedirectCTMark (every later packet, both
//     directions) gets a VLAN header whose id is the rule's layer 7 id and
//     goes to the engine's port instead of its destination.
//   - Output (just below): a packet that is not TCP with either mark is
//     dropped: a layer 7 rule selects its L3/L4 traffic, and what the
//     engine cannot read (UDP, ICMP) is denied, as upstream's engine does.
//   - Classifier: what the engine sends back (the packets it lets through,
//     untagged and unchanged, and the 403 answers and resets it makes) is
//     marked FromL7Engine and goes to L3Forwarding, which routes it again;
//   - AntreaPolicyIngressRule: those packets skip the policy and conntrack
//     tables, which decided before the engine, straight to Output.
//
// The engine's packets enter untracked and without registers, so the
// steering flows never send them to the engine again.
const (
	l7SteerPriority = priorityNormal + 8
	// l7ReturnPriority is TrafficControl's return priority: the two flows
	// match different PktSourceField values.
	l7ReturnPriority = trafficControlReturnPriority
)

// l7Policy is the L7NetworkPolicy feature.
type l7Policy struct {
	*datapath
	featureDefaults

	mu    sync.Mutex
	flows map[string][]*binding.Flow // one key: every flow
}

func newL7Policy(d *datapath) *l7Policy {
	return &l7Policy{datapath: d, flows: map[string][]*binding.Flow{}}
}

// Name implements Feature.
func (*l7Policy) Name() string { return "L7NetworkPolicy" }

// Tables implements Feature: none, its flows sit in Classifier,
// AntreaPolicyIngressRule and Output.
func (*l7Policy) Tables() []*TableSpec { return nil }

// Installed implements Feature: the steering flows, replayed after a switch
// restart.
func (l *l7Policy) Installed() ([]*binding.GroupMod, []*binding.Flow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return nil, slices.Clone(l.flows["l7"])
}

func (l *l7Policy) flow(table *TableSpec, priority uint16, match func(*binding.Match), actions ...binding.Action) *binding.Flow {
	f := l.b.flow(table, priority, match, actions...)
	f.Cookie = withRound(l.round, cookieL7Policy)
	return f
}

// l7Flows are the steering flows of the engine's port (none for port 0).
func (l *l7Policy) l7Flows(n *NodeConfig, port uint32) []*binding.Flow {
	if port == 0 {
		return nil
	}
	var out []*binding.Flow
	for _, fam := range n.families() {
		ip := ethType(fam)
		out = append(out,
			l.flow(OutputTable, l7SteerPriority+1, func(m *binding.Match) {
				m.EthType(ip).IPProto(binding.IPProtoTCP)
				matchField(m, L7RedirectField, on)
			}, &binding.PushVLAN{EtherType: 0x8100}, move(L7RuleVLANField, binding.FieldVlanVID.Range(0, 11)), &binding.Output{Port: port}),
			l.flow(OutputTable, l7SteerPriority, func(m *binding.Match) {
				m.EthType(ip).IPProto(binding.IPProtoTCP).CTState(binding.CTStateTrk, binding.CTStateTrk)
				matchField(m, L7RedirectCTMark, on)
			}, &binding.PushVLAN{EtherType: 0x8100}, move(L7RuleVLANCTMark, binding.FieldVlanVID.Range(0, 11)), &binding.Output{Port: port}),
			// What a layer 7 rule selects that is not TCP (UDP, ICMP
			// to the same Pods) is dropped, as upstream does: the
			// rule's "anything else" verdict. ICMP errors of a steered
			// connection (+rel) still pass.
			l.flow(OutputTable, l7SteerPriority-1, func(m *binding.Match) {
				m.EthType(ip)
				matchField(m, L7RedirectField, on)
			}),
			l.flow(OutputTable, l7SteerPriority-2, func(m *binding.Match) {
				m.EthType(ip).CTState(binding.CTStateTrk, binding.CTStateTrk|binding.CTStateRel)
				matchField(m, L7RedirectCTMark, on)
			}),
			l.flow(ClassifierTable, priorityHigh, func(m *binding.Match) { m.InPort(port).EthType(ip) },
				load(PktSourceField, FromL7Engine), l.b.gotoTable(L3ForwardingTable)),
			l.flow(AntreaPolicyIngressRuleTable, l7ReturnPriority, func(m *binding.Match) {
				m.EthType(ip)
				matchField(m, PktSourceField, FromL7Engine)
			}, l.b.gotoTable(OutputTable)),
		)
	}
	return out
}

// SetL7EnginePort installs the steering flows for the engine's OpenFlow
// port (0 removes them), in one bundle.
func (l *l7Policy) SetL7EnginePort(ctx context.Context, port uint32) error {
	n := l.node.Load()
	if n == nil {
		return fmt.Errorf("layer 7 steering flows: pipeline not initialized")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var b deltaBatch
	b.add(replaceDelta(l.flows, "l7", l.l7Flows(n, port)))
	return b.commit(ctx, l, "layer 7 steering")
}

// outputFlows are the feature's flows in Output (to the engine, or the
// drops of what is not TCP), which Traceflow copies.
func (l *l7Policy) outputFlows(output uint8) []*binding.Flow {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*binding.Flow
	for _, f := range l.flows["l7"] {
		if f.Table == output {
			out = append(out, f)
		}
	}
	return out
}
