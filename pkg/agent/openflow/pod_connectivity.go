package openflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Tables of the PodConnectivity feature: the paths between local pods, the
// gateway and remote nodes' pods through the tunnel.
var (
	PipelineRootClassifierTable = &TableSpec{Name: "PipelineRootClassifier", Stage: ClassifierStage, Pipeline: PipelineRoot, Miss: MissDrop,
		Doc: "Sends ARP packets to the ARP pipeline and IPv4 and IPv6 packets (those of the families the node carries) to the IP pipeline; drops everything else."}
	ARPSpoofGuardTable = &TableSpec{Name: "ARPSpoofGuard", Stage: ValidationStage, Pipeline: PipelineARP, Miss: MissDrop,
		Doc: "Lets through ARP from the gateway and from each pod with its own IP and MAC; drops spoofed ARP."}
	ARPResponderTable = &TableSpec{Name: "ARPResponder", Stage: OutputStage, Pipeline: PipelineARP, Miss: MissNormal,
		Doc: "Answers ARP requests for remote nodes' gateway IPs with the global virtual MAC; other ARP is switched by NORMAL."}
	ClassifierTable = &TableSpec{Name: "Classifier", Stage: ClassifierStage, Pipeline: PipelineIP, Miss: MissDrop,
		Doc: "Marks where a packet entered (gateway, tunnel, local pod) in reg0[0..3]; packets from unknown ports are dropped."}
	SpoofGuardTable = &TableSpec{Name: "SpoofGuard", Stage: ValidationStage, Pipeline: PipelineIP, Miss: MissDrop,
		Doc: "Lets through IP from each pod port only with the pod's own IP and MAC, and everything from the gateway and tunnel; hands IPv6 neighbour discovery to NORMAL, from a pod only for its own addresses (nd_target), and drops other NDP."}
	ConntrackZoneTable = &TableSpec{Name: "ConntrackZone", Stage: ConntrackStateStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Sends IP packets through conntrack in the pod zone, applying the NAT of their connection (Service DNAT, un-DNAT of replies); they come back in ConntrackState."}
	ConntrackStateTable = &TableSpec{Name: "ConntrackState", Stage: ConntrackStateStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Drops packets conntrack marks invalid."}
	L3ForwardingTable = &TableSpec{Name: "L3Forwarding", Stage: RoutingStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Routes: rewrites MACs for packets to local pods that arrived routed, and sends packets for remote pod CIDRs to the tunnel (tun_dst = the node's IP); other packets keep their MACs."}
	L3DecTTLTable = &TableSpec{Name: "L3DecTTL", Stage: RoutingStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Decrements the TTL of routed packets."}
	L2ForwardingCalcTable = &TableSpec{Name: "L2ForwardingCalc", Stage: SwitchingStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Looks up the destination MAC and writes the output port into reg1 (with reg0[8] set)."}
	ConntrackCommitTable = &TableSpec{Name: "ConntrackCommit", Stage: ConntrackStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Commits new connections to conntrack so replies are recognised as established."}
	OutputTable = &TableSpec{Name: "Output", Stage: OutputStage, Pipeline: PipelineIP, Miss: MissDrop,
		Doc: "Outputs the packet to the port in reg1; packets with no known port are dropped."}
)

// podConnectivity is the feature that connects pods, the gateway and the
// tunnel: this node's fixed flows, each local pod's flows and each remote
// node's, recorded per pod port and per node under podMu.
type podConnectivity struct {
	*datapath
	featureDefaults
	podMu sync.Mutex
	pods  map[string][]*binding.Flow // by host interface name
	peers map[string][]*binding.Flow // by remote node name
}

func newPodConnectivity(d *datapath) *podConnectivity {
	return &podConnectivity{datapath: d, pods: map[string][]*binding.Flow{}, peers: map[string][]*binding.Flow{}}
}

// Name implements Feature.
func (*podConnectivity) Name() string { return "PodConnectivity" }

// Tables implements Feature.
func (*podConnectivity) Tables() []*TableSpec {
	return []*TableSpec{PipelineRootClassifierTable, ARPSpoofGuardTable, ARPResponderTable, ClassifierTable,
		SpoofGuardTable, ConntrackZoneTable, ConntrackStateTable, L3ForwardingTable, L3DecTTLTable,
		L2ForwardingCalcTable, ConntrackCommitTable, OutputTable}
}

// FixedFlows implements Feature: the node's flows (the table-miss flows
// are the client's, from the pipeline).
func (c *podConnectivity) FixedFlows(node *NodeConfig) []*binding.Flow { return c.b.nodeFlows(node) }

// Installed implements Feature: the pods' and peer nodes' flows.
func (c *podConnectivity) Installed() ([]*binding.GroupMod, []*binding.Flow) {
	c.podMu.Lock()
	defer c.podMu.Unlock()
	var all []*binding.Flow
	for _, fs := range c.pods {
		all = append(all, fs...)
	}
	for _, fs := range c.peers {
		all = append(all, fs...)
	}
	return nil, all
}

// podOutputFlows are the pods' flows in the table t (above its miss flow),
// for Traceflow's copies.
func (c *podConnectivity) podOutputFlows(t uint8) []*binding.Flow {
	c.podMu.Lock()
	defer c.podMu.Unlock()
	var out []*binding.Flow
	for _, fs := range c.pods {
		for _, f := range fs {
			if f.Table == t && f.Priority > priorityMiss {
				out = append(out, f)
			}
		}
	}
	return out
}

// NodeConfig is what the pipeline needs to know about this node.
type NodeConfig struct {
	GatewayOFPort uint32
	// GatewayIP is the gateway's address (its IPv4 one on a dual-stack
	// node), GatewayIPv6 its IPv6 address on a dual-stack node (nil
	// otherwise): the node carries the families of these addresses.
	GatewayIP    net.IP
	GatewayIPv6  net.IP
	GatewayMAC   net.HardwareAddr
	TunnelOFPort uint32
	PodCIDR      *net.IPNet
	// NodeIP is the node's transport address (the InternalIP hostNetwork
	// endpoints have); nil leaves out the flows that need it.
	NodeIP net.IP
	// NodeIPv6 is a dual-stack node's IPv6 address beside an IPv4 NodeIP
	// (the IPv6 InternalIP its hostNetwork endpoints have); nil leaves out
	// the IPv6 flows that need it.
	NodeIPv6 net.IP
	// PolicyOnly (trafficEncapMode networkPolicyOnly): another CNI gave
	// the pods their addresses and routes them all through a gateway,
	// whatever it is; the pipeline answers every pod's ARP with the
	// gateway's MAC and routes what pods send to it (policy_only.go).
	PolicyOnly bool
}

const (
	priorityMiss   = 0
	priorityLow    = 100
	priorityNormal = 200
	priorityHigh   = 210
)

// flowBuilder makes flows of one client with its cookie and table numbers.
type flowBuilder struct {
	p      *Pipeline
	cookie uint64
	// fams are the families the node carries (set once by Initialize,
	// before any feature builds a flow); empty: IPv4.
	fams []types.IPFamily
}

func (b *flowBuilder) flow(t *TableSpec, priority uint16, match func(*binding.Match), actions ...binding.Action) *binding.Flow {
	f := &binding.Flow{Table: b.p.Table(t).ID, Priority: priority, Cookie: b.cookie}
	if match != nil {
		match(&f.Match)
	}
	f.Actions = actions
	return f
}

// next is the instruction that continues in the table after t.
func (b *flowBuilder) next(t *TableSpec) binding.Action {
	n := b.p.Table(t).Next()
	if n == nil {
		panic("pipeline: table " + t.Name + " has no next table")
	}
	return &binding.GotoTable{Table: n.ID}
}

func (b *flowBuilder) gotoTable(t *TableSpec) binding.Action {
	return &binding.GotoTable{Table: b.p.Table(t).ID}
}

// missFlows are the priority-0 flows that make every table's miss explicit.
func (b *flowBuilder) missFlows() []*binding.Flow {
	var out []*binding.Flow
	for _, t := range b.p.Tables() {
		switch t.Miss {
		case MissDrop:
			out = append(out, b.flow(t.TableSpec, priorityMiss, nil))
		case MissNormal:
			out = append(out, b.flow(t.TableSpec, priorityMiss, nil, &binding.Output{Port: binding.PortNormal}))
		case MissNext:
			if t.Next() != nil {
				out = append(out, b.flow(t.TableSpec, priorityMiss, nil, &binding.GotoTable{Table: t.Next().ID}))
			}
		}
	}
	return out
}

// nodeFlows are this node's fixed flows: pipeline entry, gateway and tunnel
// ports, conntrack; those that match IP packets once per family.
func (b *flowBuilder) nodeFlows(n *NodeConfig) []*binding.Flow {
	gw, tun := n.GatewayOFPort, n.TunnelOFPort
	flows := []*binding.Flow{
		b.flow(PipelineRootClassifierTable, priorityNormal, func(m *binding.Match) { m.EthType(binding.EthTypeARP) }, b.gotoTable(ARPSpoofGuardTable)),
		// ARP from the gateway is trusted: the node owns it.
		b.flow(ARPSpoofGuardTable, priorityNormal, func(m *binding.Match) { m.InPort(gw).EthType(binding.EthTypeARP) }, b.next(ARPSpoofGuardTable)),
		// From the gateway: from outside the node, unless its source is the
		// gateway IP, which the node's own traffic has (see FromOutsideField).
		b.flow(ClassifierTable, priorityNormal, func(m *binding.Match) { m.InPort(gw) },
			load(PktSourceField, FromGateway), load(FromOutsideField, on), b.next(ClassifierTable)),
		b.flow(L2ForwardingCalcTable, priorityNormal, func(m *binding.Match) { m.EthDst(n.GatewayMAC) },
			load(TargetOFPortField, uint64(gw)), load(OFPortFoundField, on), b.next(L2ForwardingCalcTable)),
		b.outputFlow(gw),
	}
	if tun != 0 {
		flows = append(flows,
			// Tunnelled packets were routed by the sending node: mark them for MAC rewrite and TTL.
			b.flow(ClassifierTable, priorityNormal, func(m *binding.Match) { m.InPort(tun) },
				load(PktSourceField, FromTunnel), load(RewriteMACField, on), b.next(ClassifierTable)),
			b.flow(L2ForwardingCalcTable, priorityNormal, func(m *binding.Match) {
				m.EthDst(GlobalVirtualMAC)
				matchField(m, PktDestinationField, ToTunnel)
			}, load(TargetOFPortField, uint64(tun)), load(OFPortFoundField, on), b.next(L2ForwardingCalcTable)),
			b.outputFlow(tun),
		)
	}
	for _, f := range n.families() {
		flows = append(flows, b.nodeFamilyFlows(n, f)...)
	}
	if n.PolicyOnly {
		flows = append(flows, b.policyOnlyNodeFlows(n)...)
	}
	return flows
}

// nodeFamilyFlows are the node's fixed flows for the IP packets of family f.
func (b *flowBuilder) nodeFamilyFlows(n *NodeConfig, f types.IPFamily) []*binding.Flow {
	gw, tun, ip, gwIP := n.GatewayOFPort, n.TunnelOFPort, ethType(f), n.gatewayIP(f)
	newTrk := binding.CTStateNew | binding.CTStateTrk
	flows := []*binding.Flow{
		b.flow(PipelineRootClassifierTable, priorityNormal, func(m *binding.Match) { m.EthType(ip) }, b.gotoTable(ClassifierTable)),
		b.flow(ClassifierTable, priorityHigh, func(m *binding.Match) { m.InPort(gw).EthType(ip).IPSrc(gwIP) },
			load(PktSourceField, FromGateway), b.next(ClassifierTable)),
		b.flow(SpoofGuardTable, priorityNormal, func(m *binding.Match) { m.InPort(gw).EthType(ip) }, b.next(SpoofGuardTable)),
		// nat: packets of a DNATed (Service) connection are DNATed again, its
		// replies un-DNATed; other connections pass unchanged.
		b.flow(ConntrackZoneTable, priorityNormal, func(m *binding.Match) { m.EthType(ip) },
			&binding.CT{Zone: ctZone(f), Table: b.p.Table(ConntrackStateTable).ID, Actions: []binding.Action{&binding.NAT{}}}),
		b.flow(ConntrackStateTable, priorityNormal, func(m *binding.Match) {
			m.EthType(ip).CTState(binding.CTStateInv|binding.CTStateTrk, binding.CTStateInv|binding.CTStateTrk)
		}),
		// Packets routed to this node's gateway IP from the tunnel get the gateway's MAC.
		b.flow(L3ForwardingTable, priorityNormal, func(m *binding.Match) {
			m.EthType(ip).IPDst(gwIP)
			matchField(m, RewriteMACField, on)
		}, setEthDst(n.GatewayMAC), load(PktDestinationField, ToGateway), b.next(L3ForwardingTable)),
		b.flow(L3DecTTLTable, priorityNormal, func(m *binding.Match) {
			m.EthType(ip)
			matchField(m, RewriteMACField, on)
		}, &binding.DecTTL{}, b.next(L3DecTTLTable)),
		// The commit stores the ids of the rules that allowed the
		// connection in its ct_label (NetworkPolicy's metric tables).
		b.flow(ConntrackCommitTable, priorityNormal, func(m *binding.Match) {
			m.EthType(ip).CTState(newTrk, newTrk)
		}, &binding.CT{Commit: true, Zone: ctZone(f), Table: b.p.Table(ConntrackCommitTable).Next().ID, Actions: ruleLabels()}),
		// A connection from the gateway is committed with FromGatewayCTMark
		// (Service connections, committed by EndpointDNAT, are left above).
		b.flow(ConntrackCommitTable, priorityNormal+1, func(m *binding.Match) {
			m.EthType(ip).CTState(newTrk, newTrk)
			matchField(m, PktSourceField, FromGateway)
		}, &binding.CT{Commit: true, Zone: ctZone(f), Table: b.p.Table(ConntrackCommitTable).Next().ID,
			Actions: append([]binding.Action{load(FromGatewayCTMark, on)}, ruleLabels()...)}),
		// ... and its replies return to the gateway, wherever they are
		// addressed: the node's netfilter un-NATs them and routes them on.
		b.flow(L3ForwardingTable, priorityHigh, func(m *binding.Match) {
			m.EthType(ip).CTState(binding.CTStateRpl|binding.CTStateTrk, binding.CTStateRpl|binding.CTStateTrk)
			matchField(m, FromGatewayCTMark, on)
		}, setEthDst(n.GatewayMAC), load(PktDestinationField, ToGateway), b.next(L3ForwardingTable)),
	}
	if tun != 0 {
		flows = append(flows, b.flow(SpoofGuardTable, priorityNormal, func(m *binding.Match) { m.InPort(tun).EthType(ip) }, b.next(SpoofGuardTable)))
	}
	if f == types.IPv6 {
		flows = append(flows, b.ndpFlows(n)...)
	}
	return flows
}

// IPv6 neighbour discovery (RFC 4861) takes ARP's place: a pod resolves
// the gateway and the pods of its subnet with Neighbor Solicitations sent
// to their solicited-node multicast groups, and each answers with a
// Neighbor Advertisement. The pipeline switches them with NORMAL, as
// upstream Antrea does; the gateway's kernel answers for the gateway's
// address, each pod for its own. The spoof guard checks them first: a
// pod's solicitation must come from its MAC and one of its addresses (or
// its link-local one), a pod's advertisement must be for one of its
// addresses (nd_target) or its link-local one, so no pod can claim
// another's address; the gateway's are trusted, as its ARP is. What fails
// the checks is dropped (ndpDrop), never sent on into the IP pipeline.
const (
	icmp6NeighborSolicitation  = 135
	icmp6NeighborAdvertisement = 136
	// priorityNDP is above the pods' and the gateway's spoof guard flows
	// (priorityNormal), priorityNDPDrop between them.
	priorityNDP     = priorityHigh
	priorityNDPDrop = priorityNormal + 5
)

// ipv6LinkLocal is fe80::/10, the prefix of link-local addresses.
var ipv6LinkLocal = netip.MustParsePrefix("fe80::/10")

// matchNDP matches ICMPv6 neighbour discovery messages of type typ.
func matchNDP(m *binding.Match, typ uint8) *binding.Match {
	return m.EthType(binding.EthTypeIPv6).IPProto(binding.IPProtoICMPv6).ICMPv6Type(typ)
}

// ndpFlows are the node's neighbour discovery flows: the gateway's NDP
// goes to NORMAL, any other NDP that no pod's flow lets through drops.
func (b *flowBuilder) ndpFlows(n *NodeConfig) []*binding.Flow {
	var out []*binding.Flow
	for _, typ := range []uint8{icmp6NeighborSolicitation, icmp6NeighborAdvertisement} {
		out = append(out,
			b.flow(SpoofGuardTable, priorityNDP, func(m *binding.Match) { matchNDP(m.InPort(n.GatewayOFPort), typ) },
				&binding.Output{Port: binding.PortNormal}),
			b.flow(SpoofGuardTable, priorityNDPDrop, func(m *binding.Match) { matchNDP(m, typ) }))
	}
	return out
}

// podNDPFlows let a pod's neighbour discovery for its IPv6 address a
// (and its link-local address) through to NORMAL.
func (b *flowBuilder) podNDPFlows(ofPort uint32, a netip.Addr, mac net.HardwareAddr) []*binding.Flow {
	normal := &binding.Output{Port: binding.PortNormal}
	from := func(m *binding.Match, typ uint8) *binding.Match { return matchNDP(m.InPort(ofPort).EthSrc(mac), typ) }
	return []*binding.Flow{
		b.flow(SpoofGuardTable, priorityNDP, func(m *binding.Match) { from(m, icmp6NeighborSolicitation).IPSrc(a) }, normal),
		b.flow(SpoofGuardTable, priorityNDP, func(m *binding.Match) { from(m, icmp6NeighborSolicitation).IPSrcPrefix(ipv6LinkLocal) }, normal),
		b.flow(SpoofGuardTable, priorityNDP, func(m *binding.Match) { from(m, icmp6NeighborAdvertisement).NDTarget(a) }, normal),
		b.flow(SpoofGuardTable, priorityNDP, func(m *binding.Match) { from(m, icmp6NeighborAdvertisement).NDTargetPrefix(ipv6LinkLocal) }, normal),
	}
}

func (b *flowBuilder) outputFlow(port uint32) *binding.Flow {
	return b.flow(OutputTable, priorityNormal, func(m *binding.Match) {
		matchField(m, OFPortFoundField, on)
		matchField(m, TargetOFPortField, uint64(port))
	}, &binding.Output{Port: port})
}

// podFlows are the flows of one local pod port.
func (b *flowBuilder) podFlows(n *NodeConfig, ofPort uint32, ips []net.IP, mac net.HardwareAddr) []*binding.Flow {
	flows := []*binding.Flow{
		b.flow(ClassifierTable, priorityLow, func(m *binding.Match) { m.InPort(ofPort) },
			load(PktSourceField, FromLocal), b.next(ClassifierTable)),
		b.flow(L2ForwardingCalcTable, priorityNormal, func(m *binding.Match) { m.EthDst(mac) },
			load(TargetOFPortField, uint64(ofPort)), load(OFPortFoundField, on), b.next(L2ForwardingCalcTable)),
		b.outputFlow(ofPort),
	}
	for _, ip := range ips {
		a := addr(ip)
		if !n.gatewayIP(types.FamilyOf(a)).IsValid() {
			continue // a family the node does not carry
		}
		if a.Is6() {
			flows = append(flows, b.podNDPFlows(ofPort, a, mac)...)
		}
		if a.Is4() {
			flows = append(flows, b.flow(ARPSpoofGuardTable, priorityNormal, func(m *binding.Match) {
				m.InPort(ofPort).EthType(binding.EthTypeARP).ARPSpa(a).ARPSha(mac)
			}, b.next(ARPSpoofGuardTable)))
		}
		flows = append(flows,
			b.flow(SpoofGuardTable, priorityNormal, func(m *binding.Match) {
				m.InPort(ofPort).EthSrc(mac).EthType(ethTypeOf(a)).IPSrc(a)
			}, b.next(SpoofGuardTable)),
			// Routed packets (from the tunnel) for this pod get its MAC.
			b.flow(L3ForwardingTable, priorityNormal, func(m *binding.Match) {
				m.EthType(ethTypeOf(a)).IPDst(a)
				matchField(m, RewriteMACField, on)
			}, setEthSrc(n.GatewayMAC), setEthDst(mac), load(PktDestinationField, ToLocal), b.next(L3ForwardingTable)),
		)
		if n.PolicyOnly {
			flows = append(flows, b.policyOnlyPodFlow(n, a, mac))
		}
	}
	return flows
}

// peerFlows are the flows towards one remote node's pod CIDR through the
// tunnel to tunnelPeerIP. A peer the underlay routes to (tunnelPeerIP nil,
// trafficEncapMode noEncap) has none: its pods' packets, addressed to the
// gateway's MAC by the pods, leave through the gateway like any other
// traffic off the node, and the node routes them to the peer's node IP
// (docs/design/traffic-modes.md).
func (b *flowBuilder) peerFlows(n *NodeConfig, peerCIDR *net.IPNet, peerGatewayIP, tunnelPeerIP net.IP) []*binding.Flow {
	if tunnelPeerIP == nil {
		return nil
	}
	toTunnel := b.flow(L3ForwardingTable, priorityNormal, func(m *binding.Match) {
		m.EthType(ethTypeOf(addr(peerCIDR.IP))).IPDstPrefix(prefix(peerCIDR))
	}, setEthSrc(n.GatewayMAC), setEthDst(GlobalVirtualMAC), setTunDst(tunnelPeerIP),
		load(PktDestinationField, ToTunnel), load(RewriteMACField, on), b.next(L3ForwardingTable))
	if peerGatewayIP.To4() == nil {
		// An IPv6 peer gateway has no ARP: the node's neighbour entry for
		// it (the global virtual MAC) is the route package's, as upstream
		// pins it.
		return []*binding.Flow{toTunnel}
	}
	return []*binding.Flow{
		// The node routes to a remote pod CIDR via the remote gateway IP; answer its ARP
		// with the global virtual MAC so the packets enter OVS and go to the tunnel.
		b.flow(ARPResponderTable, priorityNormal, func(m *binding.Match) {
			m.EthType(binding.EthTypeARP).ARPOp(1).ARPTpa(addr(peerGatewayIP))
		},
			move(binding.FieldEthSrc.All(), binding.FieldEthDst.All()),
			setEthSrc(GlobalVirtualMAC),
			load(binding.FieldARPOp.All(), 2),
			move(binding.FieldARPSha.All(), binding.FieldARPTha.All()),
			setARPSha(GlobalVirtualMAC),
			move(binding.FieldARPSpa.All(), binding.FieldARPTpa.All()),
			setARPSpa(peerGatewayIP),
			&binding.Output{Port: binding.PortInPort}),
		toTunnel,
	}
}

// replace writes the new flows of one pod or peer node and deletes the ones
// it had that are no longer wanted, in one bundle, and records them.
func (c *podConnectivity) replace(ctx context.Context, what string, cache map[string][]*binding.Flow, key string, flows []*binding.Flow) error {
	c.podMu.Lock()
	defer c.podMu.Unlock()
	var b deltaBatch
	b.add(replaceDelta(cache, key, flows))
	return b.commit(ctx, c, what)
}

// replaceDelta takes the flows recorded in cache under key to flows (nil:
// none): strict deletes of the old flows whose place (table, priority,
// match) no new flow takes, then adds of every new flow.
func replaceDelta(cache map[string][]*binding.Flow, key string, flows []*binding.Flow) delta {
	keep := make(map[string]bool, len(flows))
	for _, f := range flows {
		keep[f.MatchKey()] = true
	}
	var msgs []binding.Message
	for _, f := range cache[key] {
		if !keep[f.MatchKey()] {
			msgs = append(msgs, binding.DeleteFlowStrict(f))
		}
	}
	msgs = append(msgs, addMods(flows)...)
	return delta{msgs: msgs, apply: func() func() {
		e := editOf(cache)
		if flows == nil {
			e.del(key)
		} else {
			e.set(key, flows)
		}
		return e.revert
	}}
}

// InstallPodFlows installs the flows of one local pod port as one bundle.
func (c *podConnectivity) InstallPodFlows(ifName string, podIPs []net.IP, podMAC net.HardwareAddr, ofPort uint32) error {
	return c.install("pod "+ifName, c.pods, ifName, func(node *NodeConfig) []*binding.Flow {
		return c.b.podFlows(node, ofPort, podIPs, podMAC)
	})
}

// UninstallPodFlows removes the flows of a pod port; unknown ports are a no-op.
func (c *podConnectivity) UninstallPodFlows(ifName string) error {
	return c.install("pod "+ifName, c.pods, ifName, nil)
}

// PodFlowsInstalled reports whether the client installed flows for a pod port.
func (c *podConnectivity) PodFlowsInstalled(ifName string) bool {
	c.podMu.Lock()
	defer c.podMu.Unlock()
	return len(c.pods[ifName]) > 0
}

// InstallNodeFlows installs the flows towards one remote node's pod CIDR
// of one family; a dual-stack peer has one call per family, each family's
// flows kept apart (peerKey).
func (c *podConnectivity) InstallNodeFlows(nodeName string, peerPodCIDR *net.IPNet, peerGatewayIP, tunnelPeerIP net.IP) error {
	return c.install("node "+nodeName, c.peers, peerKey(nodeName, types.FamilyOfIP(peerPodCIDR.IP)), func(node *NodeConfig) []*binding.Flow {
		return c.b.peerFlows(node, peerPodCIDR, peerGatewayIP, tunnelPeerIP)
	})
}

// UninstallNodeFlows removes the flows towards a remote node, of both
// families.
func (c *podConnectivity) UninstallNodeFlows(nodeName string) error {
	for _, f := range types.IPFamilies {
		if err := c.install("node "+nodeName, c.peers, peerKey(nodeName, f), nil); err != nil {
			return err
		}
	}
	return nil
}

// peerKey is where a peer's flows of family f are recorded: its name for
// IPv4 (as before dual-stack), "name/IPv6" for IPv6.
func peerKey(nodeName string, f types.IPFamily) string {
	if f == types.IPv6 {
		return nodeName + "/" + f.String()
	}
	return nodeName
}

// install makes the flows recorded in cache under key those build makes
// for this node (build nil: none), within opTimeout.
func (c *podConnectivity) install(what string, cache map[string][]*binding.Flow, key string, build func(*NodeConfig) []*binding.Flow) error {
	var flows []*binding.Flow
	if build != nil {
		node := c.node.Load()
		if node == nil {
			return fmt.Errorf("%s: pipeline not initialized", what)
		}
		flows = build(node)
	}
	ctx, cancel := withTimeout()
	defer cancel()
	return c.replace(ctx, what, cache, key, flows)
}
