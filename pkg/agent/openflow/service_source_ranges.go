package openflow

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// LoadBalancer source ranges (a Service's spec.loadBalancerSourceRanges):
// only clients whose address is in one of the ranges may open connections
// to the Service through its LoadBalancer ingress IPs; its ClusterIPs,
// external IPs and NodePorts stay open to everyone, as kube-proxy does
// (its nftables "firewall" chain, which drops the rest). The feature has
// one table, LoadBalancerSourceRanges, the first of the PreRouting stage:
// after ConntrackZone gave the packet its conntrack state, before
// SessionAffinity and ServiceLB pick an endpoint. For each ingress IP,
// protocol and port of a Service with ranges:
//
//   - a flow per range lets the first packet of a new connection from the
//     range go on (ct_state=+new+trk, the address, protocol and port,
//     nw_src=range);
//   - one flow below them drops every other first packet to that port;
//   - when a range holds the node's own address, the node's own
//     connections, which reach the bridge from the gateway source-NATed to
//     the gateway IP (pkg/agent/route, NodePath), go on too (kube-proxy's
//     "allowFromNode");
//   - UDP fragments carry no port in the OpenFlow match (service_fragments.go):
//     fragments of a new connection to the address from outside the ranges
//     of its UDP ports are dropped likewise.
//
// Only first packets are judged: the later packets of a connection and its
// replies are +est, and a connection never committed (dropped here) leaves
// no state. Both ways into the bridge meet the table: a pod of this node
// from its port, and traffic from outside the node, which the node routes
// to the gateway with its client address (LoadBalancer ingress IPs are not
// source-NATed on the way in, under externalTrafficPolicy Cluster and Local
// alike; only the node's own traffic is). A pod of another node opens its
// connection on its own node, whose table judges it by its pod address.
// Nothing here assumes a family: a range of another family than the
// address is not the address's range.
//
// Traceflow reports a packet these flows drop as dropped in this table.

// LoadBalancerSourceRangesTable is the table of the feature.
var LoadBalancerSourceRangesTable = &TableSpec{Name: "LoadBalancerSourceRanges", Stage: PreRoutingStage, Pipeline: PipelineIP, Miss: MissNext,
	Doc: "Drops the first packet of a new connection to a LoadBalancer ingress IP and port whose Service has loadBalancerSourceRanges, unless its source is in one of them (or is the node's own traffic and a range holds the node IP); everything else goes on."}

// Priorities of the feature's flows.
const (
	sourceRangeAllowPriority = priorityNormal
	sourceRangeDropPriority  = priorityNormal - 10
)

// SourceRanges are a Service's LoadBalancer ingress ports with
// loadBalancerSourceRanges: for each address, protocol and port (External
// is ignored: the ranges hold for every source), the client ranges that
// may open connections to it. A port with no range is open to everyone.
type SourceRanges map[ServicePort][]netip.Prefix

// Equal says whether two Services' ranges are the same (in any order).
func (s SourceRanges) Equal(o SourceRanges) bool {
	norm := func(ps []netip.Prefix) []netip.Prefix {
		out := make([]netip.Prefix, 0, len(ps))
		for _, p := range ps {
			out = append(out, p.Masked())
		}
		slices.SortFunc(out, comparePrefixes)
		return slices.Compact(out)
	}
	return maps.EqualFunc(s, o, func(a, b []netip.Prefix) bool { return slices.Equal(norm(a), norm(b)) })
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// lbSourceRanges is the feature: the flows of each Service, by Service name.
type lbSourceRanges struct {
	*datapath
	featureDefaults

	mu    sync.Mutex
	flows map[string][]*binding.Flow
}

func newLBSourceRanges(d *datapath) *lbSourceRanges {
	return &lbSourceRanges{datapath: d, flows: map[string][]*binding.Flow{}}
}

// Name implements Feature.
func (*lbSourceRanges) Name() string { return "LoadBalancerSourceRanges" }

// Tables implements Feature.
func (*lbSourceRanges) Tables() []*TableSpec {
	return []*TableSpec{LoadBalancerSourceRangesTable}
}

// Installed implements Feature: every Service's flows.
func (c *lbSourceRanges) Installed() ([]*binding.GroupMod, []*binding.Flow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*binding.Flow
	for _, name := range slices.Sorted(maps.Keys(c.flows)) {
		out = append(out, c.flows[name]...)
	}
	return nil, out
}

// dropFlows are the installed flows that drop (Traceflow reports them).
func (c *lbSourceRanges) dropFlows() []*binding.Flow {
	_, all := c.Installed()
	var out []*binding.Flow
	for _, f := range all {
		if len(f.Actions) == 0 {
			out = append(out, f)
		}
	}
	return out
}

func (c *lbSourceRanges) flow(priority uint16, match func(*binding.Match), actions ...binding.Action) *binding.Flow {
	f := c.b.flow(LoadBalancerSourceRangesTable, priority, match, actions...)
	f.Cookie = uint64(cookieLBSourceRangesTag)
	return f
}

// FinishSourceRangesRecovery removes the flows with the feature's cookie
// that this run did not set (in any table): those an earlier run left for
// Services deleted while the agent was down, or in a table an older layout
// numbered otherwise; it writes nothing when there are none. The flows
// carry no round, so a restarting agent keeps guarding the ports until its
// proxy set their ranges again (a round's flows go when the
// NetworkPolicies are realized, which may come first); call it once every
// Service known at start was installed. A bridge that cannot be read (a
// unit test's fake) gets, in one bundle, every such flow deleted and this
// run's written again.
func (c *lbSourceRanges) FinishSourceRangesRecovery(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cookie, mask := uint64(cookieLBSourceRangesTag), uint64(cookieTagMask)
	var msgs []binding.Message
	if r, ok := c.bridge.(flowDumper); ok {
		stats, err := r.DumpFlows(ctx, binding.TableAll, cookie, mask)
		if err != nil {
			return fmt.Errorf("read the LoadBalancer source ranges of an earlier run: %w", err)
		}
		mine := map[string]bool{}
		id := c.p.Table(LoadBalancerSourceRangesTable).ID
		for _, flows := range c.flows {
			for _, f := range flows {
				mine[f.MatchKey()] = true
			}
		}
		for i := range stats {
			f := stats[i].Flow
			if f.Table != id || !mine[f.MatchKey()] {
				msgs = append(msgs, binding.DeleteFlowStrict(&f))
			}
		}
	} else {
		msgs = append(msgs, binding.DeleteFlows(binding.TableAll, cookie, mask))
		for _, name := range slices.Sorted(maps.Keys(c.flows)) {
			msgs = append(msgs, addMods(c.flows[name])...)
		}
	}
	if len(msgs) > 0 {
		klog.InfoS("Removing the LoadBalancer source ranges an earlier run left", "flowMods", len(msgs))
	}
	return c.write(ctx, "LoadBalancer source ranges left by an earlier run", msgs)
}

// SetLoadBalancerSourceRanges makes OVS hold exactly the flows of want for
// the Service name (nil or empty: none), writing the difference in one
// bundle; nothing is written when the flows are already there.
func (c *lbSourceRanges) SetLoadBalancerSourceRanges(ctx context.Context, name string, want SourceRanges) error {
	var flows []*binding.Flow
	if len(want) > 0 {
		n := c.node.Load()
		if n == nil {
			return fmt.Errorf("source ranges of service %s: pipeline not initialized", name)
		}
		flows = c.sourceRangeFlows(n, name, want)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sameFlows(c.flows[name], flows) {
		return nil
	}
	var b deltaBatch
	b.add(replaceDelta(c.flows, name, flows))
	return b.commit(ctx, c, "source ranges of service "+name)
}

// sameFlows says whether two lists hold the same flows in the same order.
func sameFlows(a, b []*binding.Flow) bool {
	return slices.EqualFunc(a, b, func(x, y *binding.Flow) bool { return x.String() == y.String() })
}

// sourceRangeFlows builds the flows of one Service's ranges for node n
// (nil when none). Ports of a family the pipeline does not realize, and
// ranges of another family than their port's, are left out with a log.
func (c *lbSourceRanges) sourceRangeFlows(n *NodeConfig, name string, want SourceRanges) []*binding.Flow {
	newTrk := binding.CTStateNew | binding.CTStateTrk
	seen := map[string]bool{}
	var flows []*binding.Flow
	add := func(f *binding.Flow) {
		if k := f.MatchKey(); !seen[k] {
			seen[k] = true
			flows = append(flows, f)
		}
	}
	ports := slices.SortedFunc(maps.Keys(want), comparePorts)
	// fragRanges are the ranges of the UDP ports of each address, for
	// its fragments.
	fragRanges := map[netip.Addr][]netip.Prefix{}
	for _, p := range ports {
		f := types.FamilyOf(p.IP)
		if !Realizes(f) {
			klog.InfoS("LoadBalancer source ranges of an address of a family not realized; skipped", "service", name, "port", p.String())
			continue
		}
		ranges := familyRanges(name, p, want[p])
		if len(ranges) == 0 {
			continue
		}
		vip := p.vip()
		for _, r := range ranges {
			add(c.flow(sourceRangeAllowPriority, func(m *binding.Match) {
				c.b.matchVIP(m, vip)
				m.CTState(newTrk, newTrk).IPSrcPrefix(r)
			}, c.b.next(LoadBalancerSourceRangesTable)))
		}
		if gw := n.gatewayIP(f); gw.IsValid() && holdsNodeIP(n, f, ranges) {
			add(c.flow(sourceRangeAllowPriority, func(m *binding.Match) {
				c.b.matchVIP(m, vip)
				m.CTState(newTrk, newTrk).IPSrc(gw)
				matchField(m, PktSourceField, FromGateway)
			}, c.b.next(LoadBalancerSourceRangesTable)))
		}
		add(c.flow(sourceRangeDropPriority, func(m *binding.Match) {
			c.b.matchVIP(m, vip)
			m.CTState(newTrk, newTrk)
		}))
		if p.Protocol == binding.IPProtoUDP {
			fragRanges[p.IP] = append(fragRanges[p.IP], ranges...)
		}
	}
	for _, ip := range slices.SortedFunc(maps.Keys(fragRanges), netip.Addr.Compare) {
		matchFrag := func(m *binding.Match) {
			m.EthType(ethTypeOf(ip)).IPFrag(binding.IPFragAny, binding.IPFragAny).IPProto(binding.IPProtoUDP).IPDst(ip)
			m.CTState(newTrk, newTrk)
		}
		for _, r := range fragRanges[ip] {
			add(c.flow(sourceRangeAllowPriority, func(m *binding.Match) {
				matchFrag(m)
				m.IPSrcPrefix(r)
			}, c.b.next(LoadBalancerSourceRangesTable)))
		}
		add(c.flow(sourceRangeDropPriority, matchFrag))
	}
	return flows
}

// familyRanges are the ranges of the port's family, masked; none when one
// of them is the whole family (0.0.0.0/0, ::/0: everyone may connect, as
// kube-proxy reads it).
func familyRanges(name string, p ServicePort, ranges []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range ranges {
		if !r.IsValid() || r.Addr().Is4() != p.IP.Is4() {
			klog.V(2).InfoS("LoadBalancer source range of another family than its address; not its range", "service", name, "port", p.String(), "range", r.String())
			continue
		}
		if r.Bits() == 0 {
			return nil
		}
		out = append(out, r.Masked())
	}
	slices.SortFunc(out, comparePrefixes)
	return slices.Compact(out)
}

// holdsNodeIP says whether one of ranges holds the node's address of f.
func holdsNodeIP(n *NodeConfig, f types.IPFamily, ranges []netip.Prefix) bool {
	ip, ok := n.nodeIP(f)
	if !ok {
		return false
	}
	return slices.ContainsFunc(ranges, func(r netip.Prefix) bool { return r.Contains(ip) })
}
