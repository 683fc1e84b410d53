package openflow

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Session affinity. A port with ClientIP affinity has a lookup flow in
// SessionAffinity: the first packet of a connection sets reg4[18] and
// resubmits to SessionAffinity, where a flow learned from an earlier
// connection of the same client to the same port loads the endpoint that
// connection went to (reg3, reg4[0..15], reg4[16]); then it goes on to
// ServiceLB, which sends a packet with an endpoint chosen straight to
// EndpointDNAT, and any other to the port's group. The group's bucket
// resubmits (reg4[19] set) to its endpoint's learn flow in SessionAffinity,
// one per port and endpoint, which learns that flow and goes on to
// EndpointDNAT: so the learned flow's cookie names its endpoint
// (affinityCookie), and the flows learned for one endpoint are deleted when
// it leaves the port, without touching the other clients' affinity.
//
// Timeouts: Kubernetes allows up to 86400 s, OpenFlow's idle_timeout holds
// 65535. A learned flow expires when no new connection of its client used
// it for the port's timeout (kube-proxy's semantics: the recent match is
// refreshed by every new connection; later packets of a connection never
// reach SessionAffinity, as ConntrackZone already DNATed them). Up to
// maxSwitchTimeout the switch does it (idle_timeout); above, the learned
// flow has no timeout and the agent expires it from the flow's idle time
// in flow stats (AgeSessionAffinity), which is exact to its polling period.

// serviceFlow is a flow of a Service port or endpoint: cookieServiceTag.
func (b *flowBuilder) serviceFlow(t *TableSpec, priority uint16, match func(*binding.Match), actions ...binding.Action) *binding.Flow {
	f := b.flow(t, priority, match, actions...)
	f.Cookie = uint64(cookieServiceTag)
	return f
}

func affinityCookie(e Endpoint) uint64 {
	return uint64(cookieAffinityTag) | uint64(e.Port)<<32 | addrBits32(e.IP)
}

// DefaultMaxSwitchTimeout is the longest affinity timeout left to the
// switch: OpenFlow's 16-bit idle_timeout.
const DefaultMaxSwitchTimeout = 65535

// affinityIdle is the idle timeout of the flows an affinity port learns: its
// timeout when the switch can hold it, none otherwise (the agent ages them).
func (c *services) affinityIdle(ps PortState) uint16 {
	if ps.AffinityTimeout == 0 || ps.AffinityTimeout > c.svc.maxSwitchTimeout {
		return 0
	}
	return uint16(ps.AffinityTimeout)
}

// SetMaxSwitchTimeout lowers the longest affinity timeout left to the
// switch's idle_timeout (at most DefaultMaxSwitchTimeout); longer ones are
// aged by the agent. Tests use it to run the agent's ageing in seconds.
// Ports installed before keep their flows until they change.
func (c *services) SetMaxSwitchTimeout(seconds uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.svc.maxSwitchTimeout = min(seconds, DefaultMaxSwitchTimeout)
}

func l4DstField(proto uint8) binding.Field {
	switch proto {
	case binding.IPProtoUDP:
		return binding.FieldUDPDst
	case binding.IPProtoSCTP:
		return binding.FieldSCTPDst
	}
	return binding.FieldTCPDst
}

// affinityLearnFlow is the learn flow of one endpoint of an affinity port,
// which the endpoint's bucket resubmits to: the flow it learns matches later
// lookups (reg4[18]) of the same client, Service address, protocol and
// port, and loads the endpoint; then the packet goes on to EndpointDNAT.
func (b *flowBuilder) affinityLearnFlow(p ServicePort, e Endpoint, idle uint16) *binding.Flow {
	l4 := l4DstField(p.Protocol).All()
	f := types.FamilyOf(p.IP)
	src, dst, epIP := ipSrcField(f).All(), ipDstField(f).All(), endpointIPField(f)
	learn := &binding.Learn{Table: b.p.Table(SessionAffinityTable).ID, IdleTimeout: idle, Priority: priorityNormal, Cookie: affinityCookie(e),
		Specs: []binding.LearnSpec{
			{Kind: binding.LearnMatch, Immediate: true, Value: binding.U64(uint64(ethType(f))), Dst: binding.FieldEthType.All()},
			{Kind: binding.LearnMatch, Immediate: true, Value: binding.U64(uint64(p.Protocol)), Dst: binding.FieldIPProto.All()},
			{Kind: binding.LearnMatch, Immediate: true, Value: binding.U64(1), Dst: AffinityLookupField},
			{Kind: binding.LearnMatch, Src: src, Dst: src},
			{Kind: binding.LearnMatch, Src: dst, Dst: dst},
			{Kind: binding.LearnMatch, Src: l4, Dst: l4},
			{Kind: binding.LearnLoad, Immediate: true, Value: addrValue(e.IP), Dst: epIP},
			{Kind: binding.LearnLoad, Immediate: true, Value: binding.U64(uint64(e.Port)), Dst: EndpointPortField},
			{Kind: binding.LearnLoad, Immediate: true, Value: binding.U64(1), Dst: EndpointSelectedField},
		}}
	return b.serviceFlow(SessionAffinityTable, p.priority(priorityHigh), func(m *binding.Match) {
		b.matchServicePort(m, p)
		matchEndpointIP(m, e.IP)
		matchField(m, EndpointPortField, uint64(e.Port))
		matchField(m, AffinityLearnField, 1)
	}, learn, b.gotoTable(EndpointDNATTable))
}

// affinityLookupFlow starts the affinity lookup of a port's new connections.
func (b *flowBuilder) affinityLookupFlow(p ServicePort) *binding.Flow {
	return b.serviceFlow(SessionAffinityTable, p.priority(priorityHigh), func(m *binding.Match) {
		b.matchServicePort(m, p)
		m.CTState(binding.CTStateNew|binding.CTStateTrk, binding.CTStateNew|binding.CTStateTrk)
		matchField(m, AffinityLookupField, 0)
	}, load(AffinityLookupField, 1), binding.ResubmitToTable(b.p.Table(SessionAffinityTable).ID), b.next(SessionAffinityTable))
}

// affinityExactFlow makes every new connection to an affinity port look
// the learned flows up, and learn, in datapath flows of its own. Without it
// the datapath flow that cached the first connection's lookup (which found
// nothing) would carry the client's next connections, made within a few
// milliseconds, to the group until the revalidators noticed the learned
// flow; and the datapath flows after the group's recirculation, which run
// the learn flows, would be shared by the client's connections that hash to
// the same bucket, so the revalidators, pushing their statistics, would
// re-run a learn of an earlier connection over a newer one (Open vSwitch
// refreshes learned flows that way). Both were seen: 1 connection of 15
// elsewhere. The flow matches the connection's original source port
// (ct_tp_src 0, which no connection has) and ranks above every flow of a
// lookup or a learn (reg4[18] is set in both), so the classifier checks it
// first and un-wildcards the whole field in both datapath flows. (tp_src
// would not do: Open vSwitch's ports trie un-wildcards only the bits that
// tell a port from 0, and every ephemeral port has the top bit set.) The
// cost is one upcall per new connection to an affinity port.
func (b *flowBuilder) affinityExactFlow(p ServicePort) *binding.Flow {
	return b.serviceFlow(SessionAffinityTable, p.priority(priorityAffinityExact), func(m *binding.Match) {
		b.matchServicePort(m, p)
		m.CTState(binding.CTStateTrk, binding.CTStateTrk|binding.CTStateInv) // ct_tp_src's prerequisite
		m.Set(binding.FieldCTNwProto, binding.U64(uint64(p.Protocol)))
		m.Set(binding.FieldCTTpSrc, binding.U64(0))
		matchField(m, AffinityLookupField, 1)
	})
}

// priorityAffinityExact ranks affinityExactFlow above the learn flows and
// the learned flows.
const priorityAffinityExact = 230

// deleteLearned deletes the flows a port learned: all of them, or only
// those of one endpoint.
func (b *flowBuilder) deleteLearned(p ServicePort, e *Endpoint) *binding.FlowMod {
	fm := &binding.FlowMod{Command: binding.FlowDelete, Flow: binding.Flow{Table: b.p.Table(SessionAffinityTable).ID, Cookie: uint64(cookieAffinityTag)},
		CookieMask: uint64(cookieTagMask)}
	b.matchVIP(&fm.Flow.Match, p) // learned flows match the address, whoever the client
	if e != nil {
		fm.Flow.Cookie, fm.CookieMask = affinityCookie(*e), ^uint64(0)
	}
	return fm
}

// learnedToDelete is what a port's change deletes of the flows its clients
// learned: all of them when affinity goes off or the learned flows' idle
// timeout changes (clients learn anew), those of each endpoint that left
// otherwise (its clients are balanced again). What the port had is read from
// its flows as installed, so it also works for a port an earlier agent run
// left (whose state this run does not know).
func (c *services) learnedToDelete(p ServicePort, old *installedPort, ps PortState) []binding.Message {
	wasOn, wasIdle, wasEndpoints := c.affinityOf(old.flows)
	if !wasOn {
		return nil
	}
	if ps.AffinityTimeout == 0 || wasIdle != c.affinityIdle(ps) {
		return []binding.Message{c.b.deleteLearned(p, nil)}
	}
	var out []binding.Message
	for _, e := range wasEndpoints {
		gone := true
		for _, n := range ps.Endpoints {
			if n.IP == e.IP && n.Port == e.Port {
				gone = false
				break
			}
		}
		if gone {
			out = append(out, c.b.deleteLearned(p, &e))
		}
	}
	return out
}

// affinityOf reads a port's affinity from its flows: whether it has a
// lookup flow, the idle timeout its learn flows give, and their endpoints.
func (c *services) affinityOf(flows []*binding.Flow) (on bool, idle uint16, eps []Endpoint) {
	sa := c.p.Table(SessionAffinityTable).ID
	for _, f := range flows {
		if f.Table != sa {
			continue
		}
		for _, a := range f.Actions {
			switch a := a.(type) {
			case *binding.Learn:
				idle = a.IdleTimeout
				var e Endpoint
				if ip, ok := endpointIPOf(&f.Match); ok {
					e.IP = ip
				}
				if v, ok := f.Match.Get(EndpointPortField.Field); ok {
					e.Port = uint16(v.Value.Lo >> EndpointPortField.Start)
				}
				eps = append(eps, e)
			case *binding.Resubmit:
				on = true
			}
		}
	}
	return on, idle, eps
}

// flowDumper reads flows with their counters (a *binding.Client).
type flowDumper interface {
	DumpFlows(ctx context.Context, table uint8, cookie, cookieMask uint64) ([]binding.FlowStats, error)
}

// AgeSessionAffinity expires the learned affinity flows that the switch
// does not: those of ports whose timeout is above maxSwitchTimeout, which
// have no idle_timeout. A flow idle (no new connection of its client) for
// the port's timeout is deleted, strictly, in one bundle. The proxy calls
// it periodically; it returns how many flows it deleted. A client that
// connects between the dump and the delete loses its affinity a little
// early and is balanced again.
func (c *services) AgeSessionAffinity(ctx context.Context) (int, error) {
	c.mu.Lock()
	long := map[ServicePort]uint32{}
	for p, ip := range c.svc.ports {
		if ip.state.AffinityTimeout > c.svc.maxSwitchTimeout {
			long[p.vip()] = ip.state.AffinityTimeout
		}
	}
	c.mu.Unlock()
	if len(long) == 0 {
		return 0, nil
	}
	d, ok := c.bridge.(flowDumper)
	if !ok {
		return 0, fmt.Errorf("age session affinity: the bridge cannot dump flows")
	}
	stats, err := d.DumpFlows(ctx, c.p.Table(SessionAffinityTable).ID, uint64(cookieAffinityTag), uint64(cookieTagMask))
	if err != nil {
		return 0, fmt.Errorf("age session affinity: %w", err)
	}
	var dels []binding.Message
	for i := range stats {
		fs := &stats[i]
		timeout, ok := long[learnedPort(&fs.Match)]
		if !ok || !fs.HasIdle || fs.IdleSec < timeout {
			continue
		}
		f := fs.Flow
		dels = append(dels, binding.DeleteFlowStrict(&f))
	}
	if err := c.write(ctx, "expired session affinity", dels); err != nil {
		return 0, err
	}
	if len(dels) > 0 {
		klog.V(2).InfoS("Expired session affinity flows", "flows", len(dels), "learned", len(stats))
	}
	return len(dels), nil
}

// learnedPort is the Service port a learned affinity flow matches.
func learnedPort(m *binding.Match) ServicePort {
	var p ServicePort
	for _, f := range types.IPFamilies {
		if v, ok := m.Get(ipDstField(f)); ok {
			p.IP = valueAddr(f, v.Value)
		}
	}
	if v, ok := m.Get(binding.FieldIPProto); ok {
		p.Protocol = uint8(v.Value.Lo)
	}
	if v, ok := m.Get(l4DstField(p.Protocol)); ok {
		p.Port = uint16(v.Value.Lo)
	}
	return p
}
