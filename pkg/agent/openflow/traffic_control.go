package openflow

import (
	"context"
	"fmt"
	"slices"
	"sync"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// TrafficControl (pkg/agent/trafficcontrol): the traffic a TrafficControl's
// local Pods send (Egress) or receive (Ingress) is copied (Mirror) or
// diverted (Redirect) to its target port. The feature has no table of its
// own, so adding it moves no table number: its flows sit in Output, above
// the flows that output to the port in reg1 and below the hairpin flow, and
// so see each packet once the whole pipeline (policy, Services, routing)
// has decided where it goes, as it leaves:
//
//   - a Pod's egress: in_port=<pod port> (priority 206); its ingress:
//     reg1=<pod port> (205). When both match one packet (two Pods of this
//     Node, each with its TrafficControl), the sender's wins.
//   - Mirror outputs a copy to the target port, marks the packet done
//     (TrafficControlDoneField, so it is not mirrored again) and resubmits
//     it to Output, which outputs it as before.
//   - Redirect outputs it to the target port only.
//
// A return port is where redirected packets come back (an inline
// appliance sends them there): Classifier marks them FromTrafficControlReturn
// and done and sends them to L3Forwarding, which routes them again (the
// tunnel's tun_dst is not carried through the appliance); a flow at the top
// of AntreaPolicyIngressRule then takes them past the policy and conntrack
// tables, whose decision was made before the redirect, straight to Output.
const (
	trafficControlEgressPriority  = priorityNormal + 6
	trafficControlIngressPriority = priorityNormal + 5
	// trafficControlReturnPriority is above every flow of
	// AntreaPolicyIngressRule (the FQDN interception is at 64995).
	trafficControlReturnPriority = 64996
)

// TrafficControlRule is one TrafficControl on this Node: its local Pods'
// ports, the directions, the action and the target port.
type TrafficControlRule struct {
	// Name is the TrafficControl's (the first by name wins a Pod port and
	// direction two of them claim).
	Name            string
	Ports           []uint32
	Ingress, Egress bool
	Redirect        bool
	Target          uint32
}

// TrafficControlFlows is the whole desired state of the feature's flows.
type TrafficControlFlows struct {
	Rules []TrafficControlRule
	// ReturnPorts are the return ports of the Redirect rules.
	ReturnPorts []uint32
}

// trafficControl is the TrafficControl feature.
type trafficControl struct {
	*datapath
	featureDefaults

	mu    sync.Mutex
	flows map[string][]*binding.Flow // one key: every flow
}

func newTrafficControl(d *datapath) *trafficControl {
	return &trafficControl{datapath: d, flows: map[string][]*binding.Flow{}}
}

// Name implements Feature.
func (*trafficControl) Name() string { return "TrafficControl" }

// Tables implements Feature: none, its flows sit in Output (and Classifier,
// AntreaPolicyIngressRule for the return ports).
func (*trafficControl) Tables() []*TableSpec { return nil }

// Installed implements Feature: the flows, replayed after a switch restart.
func (t *trafficControl) Installed() ([]*binding.GroupMod, []*binding.Flow) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return nil, slices.Clone(t.flows["tc"])
}

func (t *trafficControl) flow(table *TableSpec, priority uint16, match func(*binding.Match), actions ...binding.Action) *binding.Flow {
	f := t.b.flow(table, priority, match, actions...)
	f.Cookie = withRound(t.round, cookieTrafficControl)
	return f
}

// action is what a rule does with a packet in Output.
func (t *trafficControl) action(r TrafficControlRule) []binding.Action {
	if r.Redirect {
		return []binding.Action{&binding.Output{Port: r.Target}}
	}
	return []binding.Action{load(TrafficControlDoneField, on), &binding.Output{Port: r.Target},
		binding.ResubmitToTable(t.p.Table(OutputTable).ID)}
}

// trafficControlFlows builds the flows of want.
func (t *trafficControl) trafficControlFlows(want TrafficControlFlows) []*binding.Flow {
	rules := slices.Clone(want.Rules)
	slices.SortFunc(rules, func(a, b TrafficControlRule) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	type key struct {
		port    uint32
		ingress bool
	}
	taken := map[key]bool{}
	var out []*binding.Flow
	for _, r := range rules {
		for _, port := range r.Ports {
			if r.Egress && !taken[key{port, false}] {
				taken[key{port, false}] = true
				out = append(out, t.flow(OutputTable, trafficControlEgressPriority, func(m *binding.Match) {
					m.InPort(port)
					matchField(m, OFPortFoundField, on)
					matchField(m, TrafficControlDoneField, off)
				}, t.action(r)...))
			}
			if r.Ingress && !taken[key{port, true}] {
				taken[key{port, true}] = true
				out = append(out, t.flow(OutputTable, trafficControlIngressPriority, func(m *binding.Match) {
					matchField(m, OFPortFoundField, on)
					matchField(m, TargetOFPortField, port)
					matchField(m, TrafficControlDoneField, off)
				}, t.action(r)...))
			}
		}
	}
	returns := slices.Clone(want.ReturnPorts)
	slices.Sort(returns)
	for _, port := range slices.Compact(returns) {
		out = append(out, t.flow(ClassifierTable, priorityHigh, func(m *binding.Match) { m.InPort(port) },
			load(PktSourceField, FromTrafficControlReturn), load(TrafficControlDoneField, on), t.b.gotoTable(L3ForwardingTable)))
	}
	if len(returns) > 0 {
		out = append(out, t.flow(AntreaPolicyIngressRuleTable, trafficControlReturnPriority, func(m *binding.Match) {
			matchField(m, PktSourceField, FromTrafficControlReturn)
		}, t.b.gotoTable(OutputTable)))
	}
	return out
}

// SetTrafficControlFlows makes the feature's flows those of want, in one
// bundle (deletes of the flows no longer wanted, adds of the others).
func (t *trafficControl) SetTrafficControlFlows(ctx context.Context, want TrafficControlFlows) error {
	if t.node.Load() == nil {
		return fmt.Errorf("traffic control flows: pipeline not initialized")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var b deltaBatch
	b.add(replaceDelta(t.flows, "tc", t.trafficControlFlows(want)))
	return b.commit(ctx, t, "traffic control")
}
