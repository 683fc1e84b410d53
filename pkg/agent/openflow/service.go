package openflow

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"
	"sync"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Tables of the Service feature (the data path of AntreaProxy). The first
// packet of a connection to a Service port (a ClusterIP, external IP or
// LoadBalancer ingress IP, protocol and port) meets its flow in ServiceLB,
// which sends it to the port's select group; the group picks one bucket (one
// per endpoint), which loads the endpoint's address and port into registers
// and resubmits to EndpointDNAT; there one flow per endpoint commits the
// connection with nat(dst=endpoint). A port with session affinity first
// looks up, in SessionAffinity, the endpoint its client's earlier
// connections went to, and its buckets learn there. Later packets of the
// connection are DNATed, and its replies un-DNATed, by ConntrackZone's
// ct(nat): they never meet the group again. These tables sit before the
// policy stages, so NetworkPolicy sees the real endpoint; ServiceSNAT
// comes after them. NodePorts are ports on NodePortVirtualIP, to which the
// node's netfilter DNATs them (the node path: see serviceFixedFlows and
// pkg/agent/route's NodePath). service_recover.go keeps the Services across
// an agent restart.
var (
	SessionAffinityTable = &TableSpec{Name: "SessionAffinity", Stage: PreRoutingStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "ClientIP session affinity: the first packet of a connection to a port with affinity looks up the flows learned from its client's earlier connections (reg4[18] set), which load the endpoint they went to; a lookup that finds none ends there; everything else goes on to ServiceLB."}
	ServiceLBTable = &TableSpec{Name: "ServiceLB", Stage: PreRoutingStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Sends the first packet of a connection to a Service's ClusterIP and port to the port's select group, whose buckets pick an endpoint (or, when session affinity found one, straight to EndpointDNAT); later packets of Service connections are marked for routing (and hairpin)."}
	EndpointDNATTable = &TableSpec{Name: "EndpointDNAT", Stage: PreRoutingStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Commits a Service connection with its destination NATed to the endpoint the group chose (reg3, reg4[0..15]), and asks L3Forwarding to route it; sends the first packet to a port without endpoints (reg4[17]) to the agent, through a meter, to be rejected."}
	ServiceSNATTable = &TableSpec{Name: "ServiceSNAT", Stage: ConntrackStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Source-NATs, after policy saw the real source: a pod's Service connection to itself and a Service connection from the gateway that leaves through the gateway again to the hairpin address; a Service connection from outside the node to an endpoint behind the tunnel to the gateway IP, so its replies come back through this node."}
)

// services is the Service feature (AntreaProxy's data path): the fixed
// flows every Service shares, and each Service's groups and flows, recorded
// in svc under mu.
type services struct {
	*datapath
	mu sync.Mutex
	// svc holds the Services' groups and flows.
	svc serviceState
}

func newServices(d *datapath) *services {
	return &services{datapath: d, svc: newServiceState()}
}

// Name implements Feature.
func (*services) Name() string { return "Service" }

// Tables implements Feature.
func (*services) Tables() []*TableSpec {
	return []*TableSpec{SessionAffinityTable, ServiceLBTable, EndpointDNATTable, ServiceSNATTable}
}

// FixedFlows implements Feature.
func (c *services) FixedFlows(node *NodeConfig) []*binding.Flow { return c.b.serviceFixedFlows(node) }

// Meters implements Feature: the reject meter.
func (*services) Meters() []*binding.MeterMod {
	return []*binding.MeterMod{serviceRejectMeter(binding.MeterAdd)}
}

// Installed implements Feature: the Services' groups and flows.
func (c *services) Installed() ([]*binding.GroupMod, []*binding.Flow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serviceGroups(), c.serviceFlows()
}

// SwitchLost implements Feature: what RecoverServices found of an earlier
// run is gone with the switch's flows.
func (c *services) SwitchLost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.svc.recovered = newRecoveredServices()
}

// PacketInKinds implements Feature: the rejects of ports without endpoints.
func (*services) PacketInKinds() []PacketInKind { return []PacketInKind{PacketInServiceReject} }

// ServicePort is one port of a Service as the data path matches it.
type ServicePort struct {
	IP       netip.Addr // a ClusterIP, an external IP or a LoadBalancer ingress IP
	Protocol uint8      // binding.IPProtoTCP or IPProtoUDP
	Port     uint16
	// External selects the traffic from outside the node (FromOutsideField:
	// it entered from the gateway, not from the node itself), for an address
	// whose externalTrafficPolicy is Local: its flows rank above those of the
	// same address and port for every other source (pods, the node).
	External bool
}

func (p ServicePort) String() string {
	s := fmt.Sprintf("%s/%s", netip.AddrPortFrom(p.IP, p.Port), protocolName(p.Protocol))
	if p.External {
		s += " from outside"
	}
	return s
}

// vip is the port without the traffic it selects.
func (p ServicePort) vip() ServicePort {
	return ServicePort{IP: p.IP, Protocol: p.Protocol, Port: p.Port}
}

// externalBoost ranks the flows of an External port above those of the
// same address and port for pods.
const externalBoost = 5

func (p ServicePort) priority(base uint16) uint16 {
	if p.External {
		return base + externalBoost
	}
	return base
}

func protocolName(p uint8) string {
	switch p {
	case binding.IPProtoTCP:
		return "TCP"
	case binding.IPProtoUDP:
		return "UDP"
	case binding.IPProtoSCTP:
		return "SCTP"
	}
	return fmt.Sprintf("proto%d", p)
}

// Endpoint is a ready endpoint of a ServicePort: where its connections are
// DNATed to. Local is true for a pod on this node: such an endpoint can be
// its own client (hairpin).
type Endpoint struct {
	IP    netip.Addr
	Port  uint16
	Local bool
}

func (e Endpoint) compare(o Endpoint) int {
	if c := e.IP.Compare(o.IP); c != 0 {
		return c
	}
	if e.Port != o.Port {
		if e.Port < o.Port {
			return -1
		}
		return 1
	}
	if e.Local != o.Local {
		if !e.Local {
			return -1
		}
		return 1
	}
	return 0
}

// NoEndpoints is what a new connection to a Service port without endpoints
// meets.
type NoEndpoints uint8

// What a port without endpoints does, as kube-proxy does: a Service with no
// endpoint anywhere rejects at once (TCP reset, ICMP port unreachable), so
// clients fail fast instead of timing out; a port whose traffic policy is
// Local and whose endpoints are all on other nodes drops.
const (
	Reject NoEndpoints = iota
	Drop
)

func (n NoEndpoints) String() string {
	if n == Drop {
		return "drop"
	}
	return "reject"
}

// PortState is the desired state of one Service port: its endpoints, and
// what happens without them.
type PortState struct {
	Endpoints   []Endpoint
	NoEndpoints NoEndpoints
	// AffinityTimeout is the ClientIP session affinity of the port, in
	// seconds (Kubernetes allows up to 86400); 0: none.
	AffinityTimeout uint32
}

// Equal says whether two port states are the same once normalized.
func (s PortState) Equal(o PortState) bool {
	return s.NoEndpoints == o.NoEndpoints && s.AffinityTimeout == o.AffinityTimeout &&
		equalEndpoints(NormalizeEndpoints(s.Endpoints), NormalizeEndpoints(o.Endpoints))
}

func (s PortState) normalized() PortState {
	s.Endpoints = NormalizeEndpoints(s.Endpoints)
	return s
}

// ServiceState is the desired state of one Service: the state of each of
// its ports.
type ServiceState map[ServicePort]PortState

// NormalizeEndpoints returns a sorted, de-duplicated copy (nil when empty),
// so equal sets compare equal and buckets come out in a stable order.
func NormalizeEndpoints(eps []Endpoint) []Endpoint {
	if len(eps) == 0 {
		return nil
	}
	out := append([]Endpoint(nil), eps...)
	sort.Slice(out, func(i, j int) bool { return out[i].compare(out[j]) < 0 })
	n := 0
	for i, e := range out {
		if i == 0 || e != out[n-1] {
			out[n] = e
			n++
		}
	}
	return out[:n]
}

// Equal says whether two states hold the same ports in the same states.
func (s ServiceState) Equal(o ServiceState) bool {
	if len(s) != len(o) {
		return false
	}
	for p, ps := range s {
		other, ok := o[p]
		if !ok || !ps.Equal(other) {
			return false
		}
	}
	return true
}

func equalEndpoints(a, b []Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// bucketWeight is every endpoint's weight: equal shares.
const bucketWeight = 100

// serviceSelectionMethod is how a Service's group picks a bucket: dp_hash
// with the L4 hash algorithm (selection_method_param 0: algorithm
// OVS_HASH_ALG_L4 in the upper 32 bits, basis 0), a hash the datapath
// computes per packet over the 5-tuple, UDP ports included. The switch's
// default for a select group is dp_hash with OVS_HASH_ALG_SYM_L4, which the
// userspace datapath computes with flow_hash_symmetric_l3l4 leaving UDP
// ports out (the kernel datapath's symmetric hash keeps them): every UDP
// connection from one client to one Service port then went to the same
// endpoint, a client never reached the others (issue 34: a pod on node-1
// answered 12 of 12 times by node-2's endpoint). The explicit method hashes
// the same in both datapaths, and still in the datapath, with no upcall
// per connection (the "hash" method with fields would need one).
const serviceSelectionMethod = "dp_hash"

// priorityAffinity ranks ServiceLB's flow for connections whose endpoint
// session affinity chose above every port's group flow.
const priorityAffinity = 220

// endpointKey names one endpoint's EndpointDNAT flows: endpoints of the same
// protocol, address and port share them, whatever Services they belong to.
type endpointKey struct {
	Protocol uint8
	IP       netip.Addr
	Port     uint16
}

func keyOf(proto uint8, e Endpoint) endpointKey { return endpointKey{proto, e.IP, e.Port} }

// endpointUse counts the Service ports using an endpoint, and those of them
// that see it as local: its DNAT flow lives while ports > 0, its hairpin
// flow while local > 0.
type endpointUse struct{ ports, local int }

func (u endpointUse) add(d endpointUse) endpointUse {
	return endpointUse{u.ports + d.ports, u.local + d.local}
}

// installedPort is a Service port in OVS: its group, normalized state and
// flows (as written: a flow's form may depend on more than the state, such
// as the longest timeout the switch ages).
type installedPort struct {
	owner   string
	groupID uint32
	state   PortState
	digest  []byte // of its group
	flows   []*binding.Flow
}

// serviceState is the client's record of what OVS holds for Services.
type serviceState struct {
	services  map[string]ServiceState // by Service name, normalized
	ports     map[ServicePort]*installedPort
	endpoints map[endpointKey]endpointUse
	lastGroup uint32
	// maxSwitchTimeout is the longest affinity timeout the switch ages.
	maxSwitchTimeout uint32
	// recovered holds what an earlier agent run left on the switch and no
	// Service of this run adopted yet (see RecoverServices).
	recovered recoveredServices
}

func newServiceState() serviceState {
	return serviceState{services: map[string]ServiceState{}, ports: map[ServicePort]*installedPort{}, endpoints: map[endpointKey]endpointUse{},
		maxSwitchTimeout: DefaultMaxSwitchTimeout, recovered: newRecoveredServices()}
}

// serviceFixedFlows are the flows every Service shares:
//   - later packets of a Service connection (ct_mark[0], restored by
//     ConntrackZone's ct(nat)) are routed like its first packet, so a request
//     the client sent to the gateway MAC reaches a local endpoint's MAC.
//     That holds for +new packets too: a SYN retransmitted after policy
//     dropped the first one is already DNATed and still new; switched to
//     the gateway MAC it would go round the node's kernel and come back from
//     the gateway, which ingress policy trusts;
//   - connections committed by EndpointDNAT are not committed again;
//   - a hairpin connection (ct_mark[1]) is also source-NATed to HairpinIP
//     and leaves through the port it came in; its replies, sent to HairpinIP,
//     are un-SNATed before ConntrackZone un-DNATs them. The un-SNAT flow
//     matches untracked packets only, so a packet to HairpinIP that is no
//     reply meets it once, not in a loop;
//   - an affinity lookup that found no learned flow ends (the packet goes
//     on to ServiceLB from the lookup flow); a new connection whose
//     endpoint the lookup found goes from ServiceLB straight to
//     EndpointDNAT, above the port's group flow;
//   - the first packet to a port without endpoints (its group's one bucket
//     set reg4[17]) goes to the agent through the reject meter, which bounds
//     the packet-ins; the agent answers it (see pkg/agent/proxy);
//
// and the node path's (traffic that enters from the gateway: NodePorts the
// node DNATed to NodePortVirtualIP, addresses it routes to the bridge, the
// node's own connections):
//   - a routed Service packet (ct_mark[0]) to an address that is neither a
//     local pod, nor behind the tunnel, nor the gateway IP (an endpoint on
//     a node's host network or outside the cluster, or the reply to a client
//     outside the node) goes to the gateway, from the global virtual MAC;
//     one that entered from the gateway leaves through IN_PORT;
//   - a new Service connection from the gateway that goes back to the
//     gateway is source-NATed to HairpinIP (zone 65521), so its replies,
//     which the node routes to HairpinIP through the bridge, are un-DNATed;
//   - a new Service connection from outside the node (FromOutsideField) to
//     an endpoint behind the tunnel is source-NATed to the gateway IP (zone
//     65521), so its replies come back to this node, which DNATed it
//     (externalTrafficPolicy Cluster; Local ports have local endpoints
//     only). Those replies arrive from the tunnel for the gateway IP and are
//     un-SNATed before the un-DNAT. A connection from outside to a local
//     endpoint keeps its client address, as upstream Antrea does.
//
// Later packets of a source-NATed connection meet the same flows (their
// marks, source and route do not change) without the commit.
func (b *flowBuilder) serviceFixedFlows(n *NodeConfig) []*binding.Flow {
	gw := n.GatewayOFPort
	flows := []*binding.Flow{
		b.flow(OutputTable, priorityHigh, func(m *binding.Match) {
			matchField(m, OFPortFoundField, 1)
			matchField(m, HairpinField, 1)
		}, &binding.Output{Port: binding.PortInPort}),
		b.flow(OutputTable, priorityHigh, func(m *binding.Match) {
			m.InPort(gw)
			matchField(m, OFPortFoundField, 1)
			matchField(m, TargetOFPortField, uint64(gw))
		}, &binding.Output{Port: binding.PortInPort}),
	}
	for _, f := range n.families() {
		flows = append(flows, b.serviceFamilyFlows(n, f)...)
	}
	return flows
}

// serviceFamilyFlows are the fixed flows of Services of family f.
func (b *flowBuilder) serviceFamilyFlows(n *NodeConfig, f types.IPFamily) []*binding.Flow {
	newTrk := binding.CTStateNew | binding.CTStateTrk
	ip := ethType(f)
	hairpinIP := types.HairpinIPOf(f)
	afterLB := b.next(EndpointDNATTable)
	snatNext := b.p.Table(ServiceSNATTable).Next().ID
	snat := func(prio uint16, to netip.Addr, match func(m *binding.Match)) []*binding.Flow {
		return []*binding.Flow{
			b.flow(ServiceSNATTable, prio, func(m *binding.Match) {
				m.EthType(ip).CTState(newTrk, newTrk|binding.CTStateRpl)
				match(m)
			}, &binding.CT{Commit: true, Zone: snatCtZone(f), Table: snatNext, Actions: []binding.Action{&binding.NAT{Src: true, MinAddr: to}}}),
			b.flow(ServiceSNATTable, prio, func(m *binding.Match) {
				m.EthType(ip).CTState(binding.CTStateTrk, newTrk|binding.CTStateRpl)
				match(m)
			}, &binding.CT{Zone: snatCtZone(f), Table: snatNext, Actions: []binding.Action{&binding.NAT{}}}),
		}
	}
	gwIP := n.gatewayIP(f)
	flows := []*binding.Flow{
		b.flow(ConntrackZoneTable, priorityHigh, func(m *binding.Match) {
			m.EthType(ip).CTState(0, binding.CTStateTrk).IPDst(hairpinIP)
		}, &binding.CT{Zone: snatCtZone(f), Table: b.p.Table(ConntrackZoneTable).ID, Actions: []binding.Action{&binding.NAT{}}}),
		b.flow(ServiceLBTable, priorityHigh, func(m *binding.Match) {
			m.EthType(ip).CTState(binding.CTStateTrk, binding.CTStateTrk)
			matchField(m, HairpinCTMark, 1)
		}, load(RewriteMACField, 1), load(HairpinField, 1), afterLB),
		b.flow(ServiceLBTable, priorityNormal, func(m *binding.Match) {
			m.EthType(ip).CTState(binding.CTStateTrk, binding.CTStateTrk)
			matchField(m, ServiceCTMark, 1)
		}, load(RewriteMACField, 1), afterLB),
		// A Service connection, committed with its DNAT by EndpointDNAT,
		// is committed again only to store the ids of the policy rules that
		// allowed it in its ct_label (ruleLabels); without any, it passes.
		b.flow(ConntrackCommitTable, priorityHigh+1, func(m *binding.Match) {
			m.EthType(ip).CTState(newTrk, newTrk)
			matchField(m, ServiceCTMark, 1)
			matchField(m, EgressRuleIDField, 0)
			matchField(m, IngressRuleIDField, 0)
		}, b.next(ConntrackCommitTable)),
		b.flow(ConntrackCommitTable, priorityHigh, func(m *binding.Match) {
			m.EthType(ip).CTState(newTrk, newTrk)
			matchField(m, ServiceCTMark, 1)
		}, &binding.CT{Commit: true, Zone: ctZone(f), Table: b.p.Table(ConntrackCommitTable).Next().ID, Actions: ruleLabels()}),
		b.flow(SessionAffinityTable, priorityLow, func(m *binding.Match) {
			m.EthType(ip)
			matchField(m, AffinityLookupField, 1)
		}),
		b.flow(ServiceLBTable, priorityAffinity, func(m *binding.Match) {
			m.EthType(ip).CTState(newTrk, newTrk)
			matchField(m, EndpointSelectedField, 1)
		}, b.gotoTable(EndpointDNATTable)),
		b.flow(EndpointDNATTable, priorityHigh, func(m *binding.Match) {
			m.EthType(ip)
			matchField(m, EndpointRejectField, 1)
		}, &binding.Meter{ID: ServiceRejectMeterID}, &binding.Controller{MaxLen: rejectMaxLen, Reason: binding.ReasonAction,
			UserData: PacketInServiceReject.userData()}),

		// The node path.
		b.flow(L3ForwardingTable, priorityLow, func(m *binding.Match) {
			m.EthType(ip).CTState(binding.CTStateTrk, binding.CTStateTrk)
			matchField(m, ServiceCTMark, 1)
			matchField(m, RewriteMACField, 1)
		}, setEthSrc(GlobalVirtualMAC), setEthDst(n.GatewayMAC), load(PktDestinationField, ToGateway), b.next(L3ForwardingTable)),
	}
	flows = append(flows, snat(priorityNormal, hairpinIP, func(m *binding.Match) {
		matchField(m, HairpinCTMark, 1)
	})...)
	flows = append(flows, snat(priorityLow, hairpinIP, func(m *binding.Match) {
		matchField(m, ServiceCTMark, 1)
		matchField(m, PktSourceField, FromGateway)
		matchField(m, PktDestinationField, ToGateway)
	})...)
	if nodeIP, ok := n.nodeIP(f); ok {
		// A local pod's UDP to a Service endpoint that is this node
		// (a hostNetwork endpoint) leaves as from HairpinIP: a UDP server
		// bound to the wildcard address answers from the address of the
		// route back to its client, which for a pod is the gateway's, and
		// the answer would then match no connection; the node's route to
		// HairpinIP has the node's address as its source (pkg/agent/route,
		// nodepath.go). TCP answers from the address it was reached at.
		flows = append(flows, snat(priorityLow, hairpinIP, func(m *binding.Match) {
			matchField(m, ServiceCTMark, 1)
			matchField(m, PktSourceField, FromLocal)
			matchField(m, PktDestinationField, ToGateway)
			m.IPProto(binding.IPProtoUDP).IPDst(nodeIP)
		})...)
	}
	if n.TunnelOFPort != 0 {
		flows = append(flows, snat(priorityLow, gwIP, func(m *binding.Match) {
			matchField(m, ServiceCTMark, 1)
			matchField(m, FromOutsideField, 1)
			matchField(m, PktDestinationField, ToTunnel)
		})...)
		flows = append(flows, b.flow(ConntrackZoneTable, priorityHigh, func(m *binding.Match) {
			m.InPort(n.TunnelOFPort).EthType(ip).CTState(0, binding.CTStateTrk).IPDst(gwIP)
		}, &binding.CT{Zone: snatCtZone(f), Table: b.p.Table(ConntrackZoneTable).ID, Actions: []binding.Action{&binding.NAT{}}}))
	}
	return flows
}

// The reject meter bounds the packet-ins of Services without endpoints, so a
// client retrying in a loop (or a flood) cannot keep the agent busy: above
// ServiceRejectRate packets a second (after a burst of as many) they drop,
// and those clients time out instead of being refused.
const (
	ServiceRejectMeterID uint32 = 1
	ServiceRejectRate    uint32 = 500
	// rejectMaxLen is how much of the packet the agent needs: Ethernet, IP
	// and TCP headers with options, or what an ICMP error quotes.
	rejectMaxLen = 256
)

func serviceRejectMeter(cmd binding.MeterModCommand) *binding.MeterMod {
	return &binding.MeterMod{Command: cmd, Flags: binding.MeterPktps | binding.MeterBurst | binding.MeterStats, MeterID: ServiceRejectMeterID,
		Bands: []binding.MeterBand{{Rate: ServiceRejectRate, BurstSize: ServiceRejectRate}}}
}

// matchServicePort matches the packets to a Service port: its address,
// protocol and port and, for an External port, from outside the node.
func (b *flowBuilder) matchServicePort(m *binding.Match, p ServicePort) {
	b.matchVIP(m, p)
	if p.External {
		matchField(m, FromOutsideField, 1)
	}
}

// matchVIP matches the packets to a Service port's address, protocol and port.
func (b *flowBuilder) matchVIP(m *binding.Match, p ServicePort) {
	m.EthType(ethTypeOf(p.IP)).IPProto(p.Protocol).IPDst(p.IP)
	switch p.Protocol {
	case binding.IPProtoTCP:
		m.TCPDst(p.Port)
	case binding.IPProtoUDP:
		m.UDPDst(p.Port)
	case binding.IPProtoSCTP:
		m.SCTPDst(p.Port)
	}
}

// serviceLBFlow sends a new connection to the port's group. Its note holds
// the digest of the group's content, which the agent reads back after a
// restart to know whether the group needs rewriting (Open vSwitch cannot
// describe a group larger than 64 KiB).
func (b *flowBuilder) serviceLBFlow(p ServicePort, groupID uint32, digest []byte) *binding.Flow {
	return b.serviceFlow(ServiceLBTable, p.priority(priorityNormal), func(m *binding.Match) {
		b.matchServicePort(m, p)
		m.CTState(binding.CTStateNew|binding.CTStateTrk, binding.CTStateNew|binding.CTStateTrk)
	}, &binding.Note{Data: digest}, &binding.Group{ID: groupID})
}

// digestLen is the length of a group's digest in its ServiceLB flow's note:
// 6 bytes make the note action exactly 16 bytes.
const digestLen = 6

// groupDigest is a digest of a group's content (type and buckets).
func groupDigest(g *binding.GroupMod) []byte {
	return portDigest([]*binding.GroupMod{g})
}

// portDigest is a digest of a port's groups (portGroups): its group's
// content and, when it has one, a mark of its fragment group, whose content
// follows from the group's (so a port an earlier run left without one
// differs, and gets it).
func portDigest(gs []*binding.GroupMod) []byte {
	c := *gs[0]
	c.Command = binding.GroupAdd
	h := fnv.New64a()
	h.Write([]byte(c.String()))
	if len(gs) > 1 {
		fmt.Fprintf(h, "|fragment group, selection_method_param=%d", fragSelectionParam)
	}
	return h.Sum(nil)[:digestLen]
}

// serviceGroup is the select group of a port: one bucket per endpoint.
// Without endpoints, a port that rejects has one bucket marking the packet
// for rejection, one that drops has none. With session affinity a bucket
// resubmits to SessionAffinity instead of EndpointDNAT: its endpoint's learn
// flow there learns the client's affinity and goes on to EndpointDNAT.
// (Open vSwitch runs a bucket's actions as an OpenFlow action set: the
// set_fields and one resubmit, the last; a learn action, or a second
// resubmit, in a bucket is ignored.)
func (b *flowBuilder) serviceGroup(cmd binding.GroupModCommand, groupID uint32, ps PortState) *binding.GroupMod {
	g := &binding.GroupMod{Command: cmd, Type: binding.GroupSelect, GroupID: groupID}
	if cmd == binding.GroupDelete {
		return g
	}
	g.SelectionMethod = serviceSelectionMethod
	dnat := b.p.Table(EndpointDNATTable).ID
	if len(ps.Endpoints) == 0 && ps.NoEndpoints == Reject {
		g.Buckets = []binding.Bucket{{Weight: bucketWeight, Actions: []binding.Action{
			load(EndpointRejectField, 1),
			binding.ResubmitToTable(dnat),
		}}}
		return g
	}
	for _, e := range ps.Endpoints {
		acts := []binding.Action{
			loadEndpointIP(e.IP),
			load(EndpointPortField, uint64(e.Port)),
			load(EndpointSelectedField, 1),
		}
		if ps.AffinityTimeout > 0 {
			acts = append(acts, load(AffinityLearnField, 1), binding.ResubmitToTable(b.p.Table(SessionAffinityTable).ID))
		} else {
			acts = append(acts, binding.ResubmitToTable(dnat))
		}
		g.Buckets = append(g.Buckets, binding.Bucket{Weight: bucketWeight, Actions: acts})
	}
	return g
}

// endpointFlow is the EndpointDNAT flow of one endpoint, the DNAT commit;
// with hairpin, the one at higher priority for a local endpoint being its
// own client, which also marks the connection hairpin. proto is the
// endpoint's protocol, or, for the later fragments of an IPv6 datagram,
// the fragment header's (endpointFlows).
func (b *flowBuilder) endpointFlow(k endpointKey, hairpin bool, proto uint8) *binding.Flow {
	match := func(m *binding.Match) {
		m.EthType(ethTypeOf(k.IP)).IPProto(proto)
		matchEndpointIP(m, k.IP)
		matchField(m, EndpointPortField, uint64(k.Port))
		matchField(m, EndpointSelectedField, 1)
		if hairpin {
			m.IPSrc(k.IP)
		}
	}
	nat := []binding.Action{&binding.NAT{Dst: true, MinAddr: k.IP, MinPort: k.Port}, load(ServiceCTMark, 1)}
	acts := []binding.Action{load(RewriteMACField, 1)}
	prio := uint16(priorityNormal)
	if hairpin {
		nat = append(nat, load(HairpinCTMark, 1))
		acts = append(acts, load(HairpinField, 1))
		prio = priorityHigh
	}
	acts = append(acts, &binding.CT{Commit: true, Zone: ctZone(types.FamilyOf(k.IP)), Table: b.p.Table(EndpointDNATTable).Next().ID, Actions: nat})
	return b.serviceFlow(EndpointDNATTable, prio, match, acts...)
}

// InstallService makes OVS hold exactly the given ports and their states for
// the Service name, writing only the difference from what it holds, as one
// bundle: new endpoints' DNAT flows, then new and changed groups, then new
// and changed flows of the ports (ServiceLB, affinity lookup and learn);
// then the ports' flows no longer wanted, removed ports' groups, the
// affinity flows learned for removed ports and endpoints, and DNAT flows no
// port uses any more. An empty want removes the Service. The
// client's record changes only once OVS accepted the bundle.
func (c *services) InstallService(ctx context.Context, name string, want ServiceState) error {
	return c.InstallServices(ctx, []ServiceChange{{Name: name, Want: want}})
}

// ServiceChange is the desired state of one Service (nil: removed) in a
// batch of InstallServices.
type ServiceChange struct {
	Name string
	Want ServiceState
}

// InstallServices is InstallService for several Services at once, in one
// bundle: each Service's difference, computed from the state the Services
// before it in the batch leave (an endpoint one drops and the next takes
// keeps its DNAT flow), in the order of the batch. All or nothing: when one
// Service's state is refused or OVS rejects the bundle, nothing is written
// and the client's record stays as it was, for every Service of the batch.
// The stale UDP conntrack entries are flushed after the bundle.
func (c *services) InstallServices(ctx context.Context, changes []ServiceChange) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b deltaBatch
	flushes := make([][]*binding.CTFlush, 0, len(changes))
	for _, ch := range changes {
		d, fl, err := c.serviceDelta(ch.Name, ch.Want)
		if err != nil {
			b.revert()
			return err
		}
		// Recorded now, so the next Service's difference starts from it;
		// reverted unless OVS takes the bundle.
		b.add(d)
		flushes = append(flushes, fl)
	}
	what := "service " + changes[0].Name
	if len(changes) > 1 {
		what = fmt.Sprintf("%d services (%s, ...)", len(changes), changes[0].Name)
	}
	if err := b.commit(ctx, c, what); err != nil {
		return err
	}
	for i, ch := range changes {
		c.flushConntrack(ctx, ch.Name, flushes[i])
	}
	return nil
}

// UninstallService removes a Service's groups and flows; unknown names are a no-op.
func (c *services) UninstallService(ctx context.Context, name string) error {
	return c.InstallService(ctx, name, nil)
}

// serviceDelta computes the delta from the installed state of Service name
// to want, and the conntrack flushes of the UDP entries the change leaves
// stale (service_conntrack.go). c.mu is held.
func (c *services) serviceDelta(name string, want ServiceState) (delta, []*binding.CTFlush, error) {
	norm, err := c.normalizedWant(name, want)
	if err != nil {
		return delta{}, nil, err
	}
	pl := &servicePlan{c: c, st: &c.svc, name: name, have: c.svc.services[name], norm: norm,
		refs: map[endpointKey]endpointUse{}, newPorts: map[ServicePort]*installedPort{}, adopted: map[ServicePort]bool{},
		lastGroup: c.svc.lastGroup, fragFlows: fragFlowPorts(norm)}
	for _, p := range sortedPorts(norm) {
		if err := pl.wantPort(p); err != nil {
			return delta{}, nil, err
		}
	}
	pl.removePorts()
	epAdds, epDels, gone := pl.endpointMsgs()
	var msgs []binding.Message
	for _, part := range [][]binding.Message{epAdds, pl.groupMods, pl.flowAdds, pl.flowDels, pl.groupDels, pl.learnDels, epDels} {
		msgs = append(msgs, part...)
	}
	return delta{msgs: msgs, apply: pl.apply}, staleUDPFlushes(pl.have, norm, gone), nil
}

// normalizedWant checks want (families the node carries; no port
// another Service holds) and normalizes each port's state.
func (c *services) normalizedWant(name string, want ServiceState) (ServiceState, error) {
	norm := ServiceState{}
	for p, ps := range want {
		if err := c.checkCarried(fmt.Sprintf("service %s port %s: address", name, p), p.IP); err != nil {
			return nil, err
		}
		if ip := c.svc.ports[p]; ip != nil && ip.owner != name {
			return nil, fmt.Errorf("service %s port %s: already installed for service %s", name, p, ip.owner)
		}
		ps = ps.normalized()
		for _, e := range ps.Endpoints {
			if err := c.checkCarried(fmt.Sprintf("service %s port %s: endpoint", name, p), e.IP); err != nil {
				return nil, err
			}
			if types.FamilyOf(e.IP) != types.FamilyOf(p.IP) {
				return nil, fmt.Errorf("service %s port %s: endpoint %s is of another family", name, p, e.IP)
			}
		}
		norm[p] = ps
	}
	return norm, nil
}

// servicePlan is one Service's change being computed against the record,
// which it does not change until apply.
type servicePlan struct {
	c          *services
	st         *serviceState
	name       string
	have, norm ServiceState
	// refs is the change of each endpoint's use.
	refs                                                map[endpointKey]endpointUse
	groupMods, flowAdds, flowDels, groupDels, learnDels []binding.Message
	newPorts                                            map[ServicePort]*installedPort
	// adopted are the ports, adoptedFlows the EndpointDNAT flows (by match
	// key), taken over from what an earlier run left.
	adopted      map[ServicePort]bool
	adoptedFlows []string
	lastGroup    uint32
	// fragFlows are the ports whose fragments get a flow (fragFlowPorts).
	fragFlows map[ServicePort]bool
}

// wantPort computes the messages of a wanted port: a new group and flows,
// or the differences from the installed (or recovered) port.
func (pl *servicePlan) wantPort(p ServicePort) error {
	c, ps := pl.c, pl.norm[p]
	old := pl.st.ports[p]
	for _, e := range ps.Endpoints {
		pl.refs[keyOf(p.Protocol, e)] = pl.refs[keyOf(p.Protocol, e)].add(use(e, 1))
	}
	if old == nil {
		if rec := pl.st.recovered.ports[p]; rec != nil {
			// Left by the previous agent run: adopt it, changing only
			// what differs.
			old = rec.asInstalled()
			pl.adopted[p] = true
		}
	}
	groupID, cmd := uint32(0), binding.GroupModify
	if old == nil {
		pl.lastGroup++
		groupID, cmd = pl.lastGroup, binding.GroupAdd
	} else {
		groupID = old.groupID
	}
	gs := c.b.portGroups(cmd, groupID, p, ps)
	digest := portDigest(gs)
	flows := c.portFlows(p, groupID, digest, ps, pl.fragFlows[p])
	pl.newPorts[p] = &installedPort{owner: pl.name, groupID: groupID, state: ps, digest: digest, flows: flows}
	changed := old == nil || !bytes.Equal(digest, old.digest)
	if changed && pl.adopted[p] && len(gs) > 1 {
		// An earlier run may not have made the fragment group: write it
		// anew (deleting a group that is not there is no error; deleting
		// one deletes its flow, added again here).
		add := *gs[1]
		add.Command = binding.GroupAdd
		gs = append(gs[:1], &binding.GroupMod{Command: binding.GroupDelete, GroupID: add.GroupID}, &add)
		pl.flowAdds = append(pl.flowAdds, addMods(flowsToFragGroup(flows))...)
	}
	if changed {
		gm, err := groupMsgs(gs...)
		if err != nil {
			return fmt.Errorf("service %s port %s: %w", pl.name, p, err)
		}
		pl.groupMods = append(pl.groupMods, gm...)
	}
	if old == nil {
		pl.flowAdds = append(pl.flowAdds, addMods(flows)...)
		return nil
	}
	adds, dels := diffFlows(old.flows, flows)
	pl.flowAdds, pl.flowDels = append(pl.flowAdds, adds...), append(pl.flowDels, dels...)
	pl.learnDels = append(pl.learnDels, c.learnedToDelete(p, old, ps)...)
	return nil
}

// removePorts computes the deletes of the installed ports no longer
// wanted (their flows, learned flows and groups), and takes every
// installed port's endpoints out of their use.
func (pl *servicePlan) removePorts() {
	c := pl.c
	for _, p := range sortedPorts(pl.have) {
		for _, e := range pl.have[p].Endpoints {
			pl.refs[keyOf(p.Protocol, e)] = pl.refs[keyOf(p.Protocol, e)].add(use(e, -1))
		}
		if _, keep := pl.norm[p]; keep {
			continue
		}
		old := pl.st.ports[p]
		for _, f := range old.flows {
			pl.flowDels = append(pl.flowDels, binding.DeleteFlowStrict(f))
		}
		if on, _, _ := c.affinityOf(old.flows); on {
			pl.learnDels = append(pl.learnDels, c.b.deleteLearned(p, nil))
		}
		for _, g := range c.b.portGroups(binding.GroupDelete, old.groupID, p, PortState{}) {
			pl.groupDels = append(pl.groupDels, g)
		}
	}
}

// endpointMsgs are the EndpointDNAT flows of the endpoints that gain their
// first use (adopting an earlier run's flow as it is) and the deletes of
// those that lose their last; gone lists the endpoints no port uses any more.
func (pl *servicePlan) endpointMsgs() (adds, dels []binding.Message, gone []endpointKey) {
	for _, k := range sortedEndpointKeys(pl.refs) {
		before := pl.st.endpoints[k]
		after := before.add(pl.refs[k])
		for _, f := range []struct {
			hairpin       bool
			before, after int
		}{{false, before.ports, after.ports}, {true, before.local, after.local}} {
			switch {
			case f.before == 0 && f.after > 0:
				for _, ef := range pl.c.b.endpointFlows(k, f.hairpin) {
					if rec := pl.st.recovered.endpoints[ef.MatchKey()]; rec != nil {
						pl.adoptedFlows = append(pl.adoptedFlows, ef.MatchKey())
						if rec.String() == ef.String() {
							continue // left by the previous run as it is
						}
					}
					adds = append(adds, binding.AddFlow(ef))
				}
			case f.before > 0 && f.after == 0:
				for _, ef := range pl.c.b.endpointFlows(k, f.hairpin) {
					dels = append(dels, binding.DeleteFlowStrict(ef))
				}
				if !f.hairpin {
					gone = append(gone, k)
				}
			}
		}
	}
	return adds, dels, gone
}

// apply records the plan and returns what puts the record back.
func (pl *servicePlan) apply() (undo func()) {
	st, name := pl.st, pl.name
	undo = st.undoOf(name, pl.have, pl.newPorts, pl.refs, pl.adopted, pl.adoptedFlows)
	st.lastGroup = pl.lastGroup
	for p := range pl.adopted {
		delete(st.recovered.ports, p)
	}
	for _, k := range pl.adoptedFlows {
		delete(st.recovered.endpoints, k)
	}
	for p := range pl.have {
		delete(st.ports, p)
	}
	for p, ip := range pl.newPorts {
		st.ports[p] = ip
	}
	for k, d := range pl.refs {
		if u := st.endpoints[k].add(d); u.ports > 0 {
			st.endpoints[k] = u
		} else {
			delete(st.endpoints, k)
		}
	}
	if len(pl.norm) == 0 {
		delete(st.services, name)
	} else {
		st.services[name] = pl.norm
	}
	return undo
}

// undoOf returns what puts back the parts of the record a commit of Service
// name changes (its ports before and after, the endpoints' uses, the
// recovered ports and flows it adopts, the last group id).
func (st *serviceState) undoOf(name string, have ServiceState, newPorts map[ServicePort]*installedPort,
	refs map[endpointKey]endpointUse, adopted map[ServicePort]bool, adoptedFlows []string) func() {
	lastGroup := st.lastGroup
	svc, hadSvc := st.services[name]
	ports := make(map[ServicePort]*installedPort, len(have)+len(newPorts))
	for p := range have {
		ports[p] = st.ports[p]
	}
	for p := range newPorts {
		ports[p] = st.ports[p]
	}
	uses := make(map[endpointKey]endpointUse, len(refs))
	for k := range refs {
		uses[k] = st.endpoints[k]
	}
	recPorts := make(map[ServicePort]*recoveredPort, len(adopted))
	for p := range adopted {
		recPorts[p] = st.recovered.ports[p]
	}
	recFlows := make(map[string]*binding.Flow, len(adoptedFlows))
	for _, k := range adoptedFlows {
		recFlows[k] = st.recovered.endpoints[k]
	}
	return func() {
		st.lastGroup = lastGroup
		if hadSvc {
			st.services[name] = svc
		} else {
			delete(st.services, name)
		}
		for p, ip := range ports {
			if ip == nil {
				delete(st.ports, p)
			} else {
				st.ports[p] = ip
			}
		}
		for k, u := range uses {
			if u == (endpointUse{}) {
				delete(st.endpoints, k)
			} else {
				st.endpoints[k] = u
			}
		}
		for p, r := range recPorts {
			if r != nil {
				st.recovered.ports[p] = r
			}
		}
		for k, f := range recFlows {
			if f != nil {
				st.recovered.endpoints[k] = f
			}
		}
	}
}

// groupMsgs returns a group mod as the messages that carry it: one, or for a
// group larger than an OpenFlow message (about 700 endpoints without
// affinity) the add or modify with the first buckets and insert-bucket
// messages with the others, which the bundle applies at once.
func groupMsgs(gs ...*binding.GroupMod) ([]binding.Message, error) {
	var msgs []binding.Message
	for _, g := range gs {
		parts, err := g.Split(binding.MaxGroupModLen)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			msgs = append(msgs, p)
		}
	}
	return msgs, nil
}

// portFlows are the flows of one port: its ServiceLB flow and, with
// affinity, its lookup and exact-lookup flows and one learn flow per
// endpoint.
func (c *services) portFlows(p ServicePort, groupID uint32, digest []byte, ps PortState, fragFlow bool) []*binding.Flow {
	flows := []*binding.Flow{c.b.serviceLBFlow(p, groupID, digest)}
	if fragFlow {
		flows = append(flows, c.b.serviceFragLBFlows(p, groupID)...)
	}
	if ps.AffinityTimeout > 0 {
		flows = append(flows, c.b.affinityLookupFlow(p), c.b.affinityExactFlow(p))
		idle := c.affinityIdle(ps)
		for _, e := range ps.Endpoints {
			flows = append(flows, c.b.affinityLearnFlow(p, e, idle))
		}
	}
	return flows
}

// diffFlows returns the adds of the flows of after that before has no flow
// at the same place (table, priority, match) for, the strict modifies of
// those it has in another form (a modify keeps the flow's counters and
// age), and the strict deletes of the flows of before that after has no
// flow at the same place for.
func diffFlows(before, after []*binding.Flow) (adds, dels []binding.Message) {
	had := make(map[string]string, len(before))
	for _, f := range before {
		had[f.MatchKey()] = f.String()
	}
	keep := make(map[string]bool, len(after))
	for _, f := range after {
		keep[f.MatchKey()] = true
		switch old, ok := had[f.MatchKey()]; {
		case !ok:
			adds = append(adds, binding.AddFlow(f))
		case old != f.String():
			adds = append(adds, binding.ModifyFlowStrict(f))
		}
	}
	for _, f := range before {
		if !keep[f.MatchKey()] {
			dels = append(dels, binding.DeleteFlowStrict(f))
		}
	}
	return adds, dels
}

func sortedPorts(s ServiceState) []ServicePort {
	out := make([]ServicePort, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return comparePorts(out[i], out[j]) < 0 })
	return out
}

func comparePorts(a, b ServicePort) int {
	if c := a.IP.Compare(b.IP); c != 0 {
		return c
	}
	if a.Protocol != b.Protocol {
		return int(a.Protocol) - int(b.Protocol)
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	switch {
	case a.External == b.External:
		return 0
	case b.External:
		return -1
	}
	return 1
}

// use is what one port's endpoint adds to (n 1) or takes from (n -1) its use.
func use(e Endpoint, n int) endpointUse {
	if e.Local {
		return endpointUse{n, n}
	}
	return endpointUse{n, 0}
}

func sortedEndpointKeys(m map[endpointKey]endpointUse) []endpointKey {
	out := make([]endpointKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Protocol != out[j].Protocol {
			return out[i].Protocol < out[j].Protocol
		}
		if c := out[i].IP.Compare(out[j].IP); c != 0 {
			return c < 0
		}
		return out[i].Port < out[j].Port
	})
	return out
}

// serviceFlows lists the installed Service flows (for replay and Flows). c.mu is held.
func (c *services) serviceFlows() []*binding.Flow {
	var out []*binding.Flow
	for _, ip := range c.svc.ports {
		out = append(out, ip.flows...)
	}
	for k, u := range c.svc.endpoints {
		out = append(out, c.b.endpointFlows(k, false)...)
		if u.local > 0 {
			out = append(out, c.b.endpointFlows(k, true)...)
		}
	}
	return out
}

func (c *services) serviceGroups() []*binding.GroupMod {
	out := make([]*binding.GroupMod, 0, len(c.svc.ports))
	for p, ip := range c.svc.ports {
		out = append(out, c.b.portGroups(binding.GroupAdd, ip.groupID, p, ip.state)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupID < out[j].GroupID })
	return out
}

// groupStrings prints groups as `ovs-ofctl -O OpenFlow15 dump-groups` does,
// one line each.
func groupStrings(groups []*binding.GroupMod) []string {
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		out = append(out, g.String())
	}
	return out
}
