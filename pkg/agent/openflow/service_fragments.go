package openflow

import (
	"net/netip"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Fragmented UDP through a Service.
//
// A UDP datagram larger than the path's MTU travels as IP fragments, and
// only the first one carries the UDP header. Open vSwitch's default
// fragment handling (OFPC_FRAG_NORMAL) gives every fragment ports 0 in the
// OpenFlow match, so a port's ServiceLB flow (udp,tp_dst=PORT) never
// matches one: before this, every datagram larger than the MTU sent to a
// ClusterIP or NodePort was dropped (issue 34: upstream's "Networking
// Granular Checks: Services should be able to handle large requests: udp").
//
// What makes fragments workable is conntrack: the first ct action
// (ConntrackZone) hands the fragments to the datapath's reassembler, which
// runs conntrack on the whole datagram and then releases every fragment,
// together, with the datagram's ct state. A ct action that NATs the
// datagram reassembles it again and rewrites every fragment's addresses
// and the first fragment's UDP header, provided every fragment reaches
// that same ct action (the reassembler keys a datagram by its recirculation
// id). So all fragments of one datagram must choose the same endpoint:
//
//   - a port's select group hashes the 5-tuple (hash(l4(0))), which the
//     first fragment has and the others do not (ports 0), so fragments go
//     to a second group with the same buckets, the port's fragment group,
//     which hashes without UDP ports (OVS_HASH_ALG_SYM_L4, computed by the
//     userspace datapath over addresses and protocol for UDP): the same
//     bucket for every fragment, at the same recirculation;
//   - the fragment group's id is the port group's with fragGroupBit set,
//     so it needs no allocation of its own; it is written, modified and
//     deleted with the port's group, in the same bundle;
//   - fragments are matched by address and protocol (nw_frag=yes,udp,
//     nw_dst=VIP): the later fragments carry no port, and the datapath
//     gives them no conntrack original-tuple port either (ct_tp_dst is 0
//     for them, measured). A fragment can therefore name its port only if
//     it is the only UDP port of its Service at that address, the common
//     case (DNS: 53/UDP beside 53/TCP). Fragments to a Service address
//     with several UDP ports, or to NodePorts (every NodePort shares one
//     virtual address), still have no flow and are dropped.
//
// A new connection whose first datagram is fragmented therefore picks its
// endpoint by the client's address alone; once committed, its later
// datagrams, fragmented or not, follow the conntrack entry. TCP and SCTP
// avoid fragmentation (MSS, path MTU discovery) and keep one group.
//
// IPv6 differs in one way: Open vSwitch extracts a fragment after the
// first with nw_proto=44 (the fragment header; the UDP header's protocol
// is in the first fragment only), where an IPv4 fragment keeps its
// protocol. So for an IPv6 port
//
//   - a second ServiceLB flow takes the later fragments
//     (ipv6,nw_frag=later,nw_proto=44,ipv6_dst=VIP) to the fragment group;
//   - the fragment group hashes the two addresses alone
//     (selection_method=hash,fields(ipv6_src,ipv6_dst)): the symmetric L4
//     hash includes nw_proto and would send the later fragments to
//     another bucket than the first;
//   - each UDP endpoint has a second EndpointDNAT flow for nw_proto=44 with
//     the same DNAT commit: the fragments reach the same ct action at the
//     same recirculation, so the reassembler completes the datagram and
//     NATs every fragment with it.
//
// Before, the later fragments of every UDP datagram larger than the MTU
// sent to an IPv6 ClusterIP matched no flow and were dropped (upstream's
// "[Feature:IPv6DualStack] ... service endpoints using hostNetwork" and
// "handle large requests: udp" over IPv6; docs/ipv6.md).

// fragGroupBit marks a fragment group's id: a port's group ids come from a
// counter far below it.
const fragGroupBit uint32 = 1 << 30

// fragSelectionParam selects OVS_HASH_ALG_SYM_L4 (1, in the upper 32
// bits of selection_method_param) with basis 0.
const fragSelectionParam uint64 = 1 << 32

// fragGroupID is the id of the fragment group of the port group id.
func fragGroupID(id uint32) uint32 { return id | fragGroupBit }

// isFragGroupID reports whether id is a fragment group's.
func isFragGroupID(id uint32) bool { return id&fragGroupBit != 0 }

// fragmentsApart reports whether a port's fragments need their own flow and
// group: UDP, whose datagrams are fragmented.
func fragmentsApart(p ServicePort) bool { return p.Protocol == binding.IPProtoUDP }

// ipProtoFragment is the protocol Open vSwitch gives an IPv6 fragment
// after the first: the fragment header's.
const ipProtoFragment uint8 = 44

// laterFragmentsApart reports whether the later fragments of a port's (or
// an endpoint's) datagrams need flows of their own: IPv6 UDP.
func laterFragmentsApart(ip netip.Addr, proto uint8) bool {
	return ip.Is6() && proto == binding.IPProtoUDP
}

// fragGroup is the fragment group of port group g of a port at ip: the
// same command and buckets, a hash that leaves UDP ports out (and, for
// IPv6, the protocol: later fragments carry the fragment header's).
func fragGroup(g *binding.GroupMod, ip netip.Addr) *binding.GroupMod {
	f := *g
	f.GroupID = fragGroupID(g.GroupID)
	if f.Command == binding.GroupDelete {
		return &f
	}
	if ip.Is6() {
		f.SelectionMethod, f.SelectionMethodParam = "hash", 0
		f.Fields = []binding.Field{binding.FieldIPv6Src, binding.FieldIPv6Dst}
		return &f
	}
	f.SelectionMethodParam = fragSelectionParam
	return &f
}

// portGroups are the groups of a port: its select group and, if its
// fragments go apart, its fragment group.
func (b *flowBuilder) portGroups(cmd binding.GroupModCommand, id uint32, p ServicePort, ps PortState) []*binding.GroupMod {
	g := b.serviceGroup(cmd, id, ps)
	if !fragmentsApart(p) {
		return []*binding.GroupMod{g}
	}
	return []*binding.GroupMod{g, fragGroup(g, p.IP)}
}

// serviceFragLBFlows send the fragments of a new connection to a port's
// address to the port's fragment group: one flow, and for IPv6 a second
// one for the fragments after the first.
func (b *flowBuilder) serviceFragLBFlows(p ServicePort, groupID uint32) []*binding.Flow {
	flow := func(frag, fragMask, proto uint8) *binding.Flow {
		return b.serviceFlow(ServiceLBTable, p.priority(priorityNormal), func(m *binding.Match) {
			m.EthType(ethTypeOf(p.IP)).IPFrag(frag, fragMask).IPProto(proto).IPDst(p.IP)
			m.CTState(binding.CTStateNew|binding.CTStateTrk, binding.CTStateNew|binding.CTStateTrk)
			if p.External {
				matchField(m, FromOutsideField, 1)
			}
		}, &binding.Group{ID: fragGroupID(groupID)})
	}
	flows := []*binding.Flow{flow(binding.IPFragAny, binding.IPFragAny, p.Protocol)}
	if laterFragmentsApart(p.IP, p.Protocol) {
		flows = append(flows, flow(binding.IPFragLater, binding.IPFragLater, ipProtoFragment))
	}
	return flows
}

// endpointFlows are the EndpointDNAT flows of an endpoint: endpointFlow,
// and for IPv6 UDP the same commit for the later fragments.
func (b *flowBuilder) endpointFlows(k endpointKey, hairpin bool) []*binding.Flow {
	flows := []*binding.Flow{b.endpointFlow(k, hairpin, k.Protocol)}
	if laterFragmentsApart(k.IP, k.Protocol) {
		flows = append(flows, b.endpointFlow(k, hairpin, ipProtoFragment))
	}
	return flows
}

// fragFlowPorts are the ports of a Service whose fragments get a flow: UDP
// ports that are their Service's only UDP port at their address (and
// External flag), NodePorts excepted.
func fragFlowPorts(s ServiceState) map[ServicePort]bool {
	type at struct {
		ip       netip.Addr
		external bool
	}
	n := map[at]int{}
	for p := range s {
		if fragmentsApart(p) {
			n[at{p.IP, p.External}]++
		}
	}
	out := map[ServicePort]bool{}
	for p := range s {
		if fragmentsApart(p) && p.IP != types.NodePortVirtualIPOf(types.FamilyOf(p.IP)) && n[at{p.IP, p.External}] == 1 {
			out[p] = true
		}
	}
	return out
}

// flowsToFragGroup are the flows that send to a fragment group.
func flowsToFragGroup(flows []*binding.Flow) []*binding.Flow {
	var out []*binding.Flow
	for _, f := range flows {
		if _, ok := fragGroupOf(f); ok {
			out = append(out, f)
		}
	}
	return out
}

// fragGroupOf returns the id of the port group whose fragment group a
// flow sends to.
func fragGroupOf(f *binding.Flow) (portGroup uint32, ok bool) {
	for _, a := range f.Actions {
		if g, isGroup := a.(*binding.Group); isGroup && isFragGroupID(g.ID) {
			return g.ID &^ fragGroupBit, true
		}
	}
	return 0, false
}
