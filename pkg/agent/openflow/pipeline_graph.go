package openflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sort"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// The pipeline as a graph, for docs/design/ovs-pipeline.svg and antctl get
// pipeline: the tables each feature declares, and the edges between tables
// read from flows' actions. Nothing here lists an edge by hand: the edges of
// the layout come from the flows this package's client installs for one
// object of every kind (SampleFlows), the edges of a live node from the
// flows it holds (the same Edges on a dump).

// FeatureTables is one feature and the tables it declares, in declaration
// order.
type FeatureTables struct {
	Name   string
	Tables []*TableSpec
}

// Features lists the registered features, with their tables.
func Features() []FeatureTables {
	var out []FeatureTables
	for _, f := range registeredFeatures(&datapath{}) {
		if len(f.Tables()) == 0 {
			continue // a feature that only copies others' flows (Traceflow)
		}
		out = append(out, FeatureTables{Name: f.Name(), Tables: f.Tables()})
	}
	return out
}

// Stages lists the stages in the order a packet meets them.
func Stages() []StageID {
	out := make([]StageID, len(stageNames))
	for i := range out {
		out[i] = StageID(i)
	}
	return out
}

// Pipelines lists the pipelines in table-number order.
func Pipelines() []PipelineID {
	out := make([]PipelineID, len(pipelineNames))
	for i := range out {
		out[i] = PipelineID(i)
	}
	return out
}

// EdgeKind is how a flow moves a packet to another table.
type EdgeKind string

// Edge kinds, as ovs-ofctl prints the action.
const (
	EdgeGoto     EdgeKind = "goto_table"
	EdgeResubmit EdgeKind = "resubmit"
	// EdgeCT is ct(table=N): the packet continues in N once tracked.
	EdgeCT EdgeKind = "ct"
	// EdgeGroup is a resubmit inside a group's bucket, from the table of
	// the flow that sends packets to the group.
	EdgeGroup EdgeKind = "group"
	// EdgeLearn is learn(table=N): the flow writes flows into N (no packet
	// moves along it).
	EdgeLearn EdgeKind = "learn"
)

// Edge is one (from, to, kind) found in the flows, with how many flows
// carry it.
type Edge struct {
	From, To uint8
	Kind     EdgeKind
	Flows    int
}

// Edges returns the table-to-table edges of flows: goto_table, resubmit to
// a table, ct(table=...), learn(table=...), and the resubmits of the groups
// (looked up in groups) the flows send packets to. Edges come out sorted by
// from, to and kind.
func Edges(flows []*binding.Flow, groups []*binding.GroupMod) []Edge {
	byGroup := map[uint32]*binding.GroupMod{}
	for _, g := range groups {
		byGroup[g.GroupID] = g
	}
	count := map[Edge]int{}
	for _, f := range flows {
		seen := map[Edge]bool{}
		add := func(to uint8, kind EdgeKind) {
			e := Edge{From: f.Table, To: to, Kind: kind}
			if !seen[e] {
				seen[e] = true
				count[e]++
			}
		}
		var walk func(actions []binding.Action, inGroup bool)
		walk = func(actions []binding.Action, inGroup bool) {
			for _, a := range actions {
				switch a := a.(type) {
				case *binding.GotoTable:
					add(a.Table, EdgeGoto)
				case *binding.Resubmit:
					if a.Table == binding.NoTable {
						add(f.Table, EdgeResubmit)
						continue
					}
					if inGroup {
						add(a.Table, EdgeGroup)
					} else {
						add(a.Table, EdgeResubmit)
					}
				case *binding.CT:
					if a.Table != binding.NoTable {
						add(a.Table, EdgeCT)
					}
				case *binding.Learn:
					add(a.Table, EdgeLearn)
				case *binding.WriteActions:
					walk(a.Actions, inGroup)
				case *binding.Group:
					if g, ok := byGroup[a.ID]; ok && !inGroup {
						for _, b := range g.Buckets {
							walk(b.Actions, true)
						}
					}
				}
			}
		}
		walk(f.Actions, false)
	}
	out := make([]Edge, 0, len(count))
	for e, n := range count {
		e.Flows = n
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.To != b.To {
			return a.To < b.To
		}
		return a.Kind < b.Kind
	})
	return out
}

// discardBridge accepts every bundle and writes nothing: SampleFlows reads
// the flows back from the client's own record.
type discardBridge struct{}

func (discardBridge) Bundle(context.Context, ...binding.Message) error { return nil }

// SampleFlows lays out the pipeline and has a client that writes nowhere
// install one object of every kind the agent handles: the node's fixed
// flows, a local pod, a peer node, a Service port with two endpoints and
// ClientIP affinity and one without endpoints, a LoadBalancer port with
// source ranges, and a policy rule of every
// tier and action (Pass above baseline only) in both directions with an isolated port. It returns the
// flows and groups the client recorded: the flows of a node with such
// objects, which is where Edges finds the pipeline's edges.
func SampleFlows() (*Pipeline, []*binding.Flow, []*binding.GroupMod, error) {
	c, err := NewClient(discardBridge{}, 1)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx := context.Background()
	_, podCIDR, _ := net.ParseCIDR("10.10.0.0/24")
	_, peerCIDR, _ := net.ParseCIDR("10.10.1.0/24")
	node := &NodeConfig{GatewayOFPort: 2, GatewayIP: net.ParseIP("10.10.0.1"),
		GatewayMAC: net.HardwareAddr{0x0a, 0, 0, 0, 0, 1}, TunnelOFPort: 1, PodCIDR: podCIDR}
	if err := c.Initialize(ctx, node); err != nil {
		return nil, nil, nil, fmt.Errorf("sample node: %w", err)
	}
	if err := c.InstallPodFlows("pod-a", []net.IP{net.ParseIP("10.10.0.2")}, net.HardwareAddr{0x0a, 0, 0, 0, 0, 2}, 3); err != nil {
		return nil, nil, nil, fmt.Errorf("sample pod: %w", err)
	}
	if err := c.InstallNodeFlows("node-2", peerCIDR, net.ParseIP("10.10.1.1"), net.ParseIP("172.30.0.12")); err != nil {
		return nil, nil, nil, fmt.Errorf("sample peer node: %w", err)
	}
	vip := netip.MustParseAddr("10.96.0.10")
	svc := ServiceState{
		{IP: vip, Protocol: binding.IPProtoTCP, Port: 80}: {AffinityTimeout: 10800, Endpoints: []Endpoint{
			{IP: netip.MustParseAddr("10.10.0.2"), Port: 8080, Local: true},
			{IP: netip.MustParseAddr("10.10.1.2"), Port: 8080}}},
		{IP: vip, Protocol: binding.IPProtoUDP, Port: 53}: {NoEndpoints: Reject},
	}
	if err := c.InstallService(ctx, "sample/svc", svc); err != nil {
		return nil, nil, nil, fmt.Errorf("sample service: %w", err)
	}
	lb := ServicePort{IP: netip.MustParseAddr("172.30.0.240"), Protocol: binding.IPProtoTCP, Port: 80}
	if err := c.InstallService(ctx, "sample/lb", ServiceState{lb: {Endpoints: []Endpoint{{IP: netip.MustParseAddr("10.10.0.2"), Port: 8080, Local: true}}}}); err != nil {
		return nil, nil, nil, fmt.Errorf("sample LoadBalancer: %w", err)
	}
	if err := c.SetLoadBalancerSourceRanges(ctx, "sample/lb", SourceRanges{lb: {netip.MustParsePrefix("172.30.0.0/24")}}); err != nil {
		return nil, nil, nil, fmt.Errorf("sample LoadBalancer source ranges: %w", err)
	}
	var ch PolicyChange
	id := uint32(1)
	for _, d := range []Direction{DirectionIngress, DirectionEgress} {
		for _, tier := range []PolicyTier{TierAntrea, TierK8s, TierBaseline} {
			// K8s NetworkPolicy rules only allow; Pass exists above
			// baseline only (the baseline tier has nothing to pass to).
			actions := []RuleAction{ActionAllow}
			switch tier {
			case TierAntrea:
				actions = []RuleAction{ActionAllow, ActionDrop, ActionReject, ActionPass}
			case TierBaseline:
				actions = []RuleAction{ActionAllow, ActionDrop, ActionReject}
			}
			for _, a := range actions {
				prio := PolicyRulePriority
				if tier != TierK8s {
					prio = PolicyTopPriority - uint16(id)
				}
				ch.Rules = append(ch.Rules, RuleChange{New: &PolicyRule{
					ID: id, Key: fmt.Sprintf("sample/%d", id), Direction: d, Tier: tier, Action: a, Priority: prio,
					Peers:     []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24")},
					AppliedTo: []uint32{3}, Services: []PolicyPort{{Protocol: binding.IPProtoTCP, Port: 80}},
				}})
				id++
			}
		}
		ch.Isolate[d] = []uint32{3}
	}
	if _, err := c.ApplyPolicyChange(ctx, ch); err != nil {
		return nil, nil, nil, fmt.Errorf("sample policy: %w", err)
	}
	return c.Pipeline(), c.Flows(), c.Groups(), nil
}
