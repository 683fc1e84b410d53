package openflow

import (
	"net"
	"net/netip"

	"antrea.io/antrea/pkg/ovs/openflow"
)

// Register fields and marks, declared once. reg0 carries small marks about
// where a packet came from and what the pipeline decided; reg1 carries the
// output port chosen by L2ForwardingCalc; reg3 and reg4 carry the endpoint a
// Service's group chose, from ServiceLB to EndpointDNAT.
var (
	// PktSourceField (reg0[0..3]) says where the packet entered the bridge.
	PktSourceField = openflow.Reg(0).Range(0, 3)
	// PktDestinationField (reg0[4..7]) says where L3Forwarding decided it goes.
	PktDestinationField = openflow.Reg(0).Range(4, 7)
	// OFPortFoundField (reg0[8]) is set once TargetOFPortField holds a port.
	OFPortFoundField = openflow.Reg(0).Range(8, 8)
	// RewriteMACField (reg0[9]) asks L3Forwarding to route the packet (rewrite
	// its MACs) and L3DecTTL to decrement its TTL.
	RewriteMACField = openflow.Reg(0).Range(9, 9)
	// HairpinField (reg0[10]) marks a packet a pod sent to itself through a
	// Service (request or reply): Output sends it back through IN_PORT.
	HairpinField = openflow.Reg(0).Range(10, 10)
	// FromOutsideField (reg0[11]) marks a packet that entered from the
	// gateway with a source other than the gateway IP: traffic from outside
	// the node that the node forwards into the bridge (a NodePort it DNATed,
	// an external address it routes). The node's own traffic, and its pods'
	// traffic to NodePorts, leaves the node's netfilter with the gateway IP
	// as source (pkg/agent/route, NodePath). externalTrafficPolicy Local
	// applies to traffic with this mark, and its Service connections to
	// endpoints behind the tunnel are source-NATed.
	FromOutsideField = openflow.Reg(0).Range(11, 11)
	// TargetOFPortField (reg1) is the port Output sends the packet to.
	TargetOFPortField = openflow.Reg(1).All()
	// EndpointIPField (reg3) is the IPv4 address of the endpoint chosen by a
	// Service group's bucket.
	EndpointIPField = openflow.Reg(3).All()
	// EndpointPortField (reg4[0..15]) is that endpoint's port.
	EndpointPortField = openflow.Reg(4).Range(0, 15)
	// EndpointSelectedField (reg4[16]) is set by the bucket that filled
	// EndpointIPField and EndpointPortField: EndpointDNAT acts only then.
	EndpointSelectedField = openflow.Reg(4).Range(16, 16)
	// EndpointRejectField (reg4[17]) is set by the one bucket of a Service
	// port without endpoints: EndpointDNAT sends the packet to the agent,
	// which answers with a TCP reset or an ICMP port unreachable.
	EndpointRejectField = openflow.Reg(4).Range(17, 17)
	// AffinityLookupField (reg4[18]) is set while SessionAffinity is looked
	// up for the first packet of a connection to a port with ClientIP
	// affinity: only then do its learned flows match.
	AffinityLookupField = openflow.Reg(4).Range(18, 18)
	// AffinityLearnField (reg4[19]) is set by the bucket of a port with
	// ClientIP affinity before it resubmits to SessionAffinity, where the
	// flow of its port and endpoint learns the client's affinity.
	AffinityLearnField = openflow.Reg(4).Range(19, 19)
)

// Conntrack marks (ct_mark bits), set when EndpointDNAT commits a connection
// and read back from conntrack on its later packets and replies.
var (
	// ServiceCTMark (ct_mark[0]) marks a connection to a Service: it is
	// committed (with its DNAT) by EndpointDNAT, so ConntrackCommit leaves it.
	ServiceCTMark = openflow.FieldCTMark.Range(0, 0)
	// HairpinCTMark (ct_mark[1]) marks a Service connection from a pod to
	// itself, which is also source-NATed (to HairpinIP, in SNATCtZone).
	HairpinCTMark = openflow.FieldCTMark.Range(1, 1)
)

// Values of PktSourceField and PktDestinationField.
const (
	FromTunnel  = 1
	FromGateway = 2
	FromLocal   = 3

	ToTunnel  = 1
	ToGateway = 2
	ToLocal   = 3
)

// Conntrack zones.
const (
	// CtZone is the conntrack zone of pod traffic (and of Service DNAT).
	CtZone = 0xfff0
	// SNATCtZone is the zone of the source NATs of Service traffic: a pod
	// reaching itself (to HairpinIP), a connection from the gateway that
	// leaves through the gateway again (to HairpinIP), a connection from
	// outside the node to an endpoint behind the tunnel (to the gateway IP).
	SNATCtZone = 0xfff1
)

// HairpinIP is the source address a pod sees on a connection it made to
// itself through a Service: without the source NAT the pod would receive a
// packet from its own address, which its kernel drops as martian. It is
// link-local, so it never collides with a pod, node or Service address.
// Service connections that enter from the gateway and leave through it
// again (an endpoint on a node's host network, or outside the cluster) are
// source-NATed to it too, so their replies come back through the bridge to
// be un-DNATed: the node routes it to the gateway through a neighbour
// pinned to GlobalVirtualMAC, and masquerades it when it leaves by another
// interface (pkg/agent/route, NodePath). Upstream's VirtualServiceIPv4.
var HairpinIP = netip.MustParseAddr("169.254.0.253")

// NodePortVirtualIP is where the node's netfilter DNATs NodePort traffic
// (to one of the node's addresses, from outside or from the node itself),
// keeping the port; the node routes it to the gateway through a neighbour
// pinned to GlobalVirtualMAC, and ServiceLB matches each NodePort on it. It
// is also the next hop of the node's routes to Service addresses (proxyAll).
// Upstream's VirtualNodePortDNATIPv4.
var NodePortVirtualIP = netip.MustParseAddr("169.254.0.252")

// GlobalVirtualMAC is the destination MAC of packets sent through the tunnel
// and the MAC the ARP responder gives for remote gateways.
var GlobalVirtualMAC = net.HardwareAddr{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}

// matchField makes m match a register range holding v, keeping what m
// already matches in other bits of the same register.
func matchField(m *openflow.Match, r openflow.FieldRange, v uint64) {
	width := uint(r.End) - uint(r.Start) + 1
	mask := (uint64(1)<<width - 1) << r.Start
	val := v << r.Start & mask
	if old, ok := m.Get(r.Field); ok {
		mask |= old.Mask.Lo
		val |= old.Value.Lo &^ ((uint64(1)<<width - 1) << r.Start)
	}
	m.SetMasked(r.Field, openflow.U64(val), openflow.U64(mask))
}

func macValue(mac net.HardwareAddr) openflow.U128 {
	var v uint64
	for _, b := range mac {
		v = v<<8 | uint64(b)
	}
	return openflow.U64(v)
}

func ip4Value(ip net.IP) openflow.U128 {
	ip4 := ip.To4()
	return openflow.U64(uint64(ip4[0])<<24 | uint64(ip4[1])<<16 | uint64(ip4[2])<<8 | uint64(ip4[3]))
}

func setEthSrc(mac net.HardwareAddr) openflow.Action {
	return &openflow.SetField{Field: openflow.FieldEthSrc, Value: macValue(mac)}
}

func setEthDst(mac net.HardwareAddr) openflow.Action {
	return &openflow.SetField{Field: openflow.FieldEthDst, Value: macValue(mac)}
}

func setTunDst(ip net.IP) openflow.Action {
	return &openflow.SetField{Field: openflow.FieldTunDst, Value: ip4Value(ip)}
}

func setARPSpa(ip net.IP) openflow.Action {
	return &openflow.SetField{Field: openflow.FieldARPSpa, Value: ip4Value(ip)}
}

func setARPSha(mac net.HardwareAddr) openflow.Action {
	return &openflow.SetField{Field: openflow.FieldARPSha, Value: macValue(mac)}
}

func load(r openflow.FieldRange, v uint64) openflow.Action { return openflow.Load(r, v) }

func move(src, dst openflow.FieldRange) openflow.Action { return &openflow.RegMove{Src: src, Dst: dst} }

func addr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip.To4())
	return a
}

func prefix(n *net.IPNet) netip.Prefix {
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(addr(n.IP), ones)
}
