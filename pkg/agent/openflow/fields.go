package openflow

import (
	"net"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Register fields and marks, declared once. reg0 carries small marks about
// where a packet came from and what the pipeline decided; reg1 carries the
// output port chosen by L2ForwardingCalc; reg3 (an IPv4 endpoint) or xxreg3
// (an IPv6 endpoint) and reg4 carry the endpoint a Service's group chose,
// from ServiceLB to EndpointDNAT.
var (
	// PktSourceField (reg0[0..3]) says where the packet entered the bridge.
	PktSourceField = binding.Reg(0).Range(0, 3)
	// PktDestinationField (reg0[4..7]) says where L3Forwarding decided it goes.
	PktDestinationField = binding.Reg(0).Range(4, 7)
	// OFPortFoundField (reg0[8]) is set once TargetOFPortField holds a port.
	OFPortFoundField = binding.Reg(0).Range(8, 8)
	// RewriteMACField (reg0[9]) asks L3Forwarding to route the packet (rewrite
	// its MACs) and L3DecTTL to decrement its TTL.
	RewriteMACField = binding.Reg(0).Range(9, 9)
	// HairpinField (reg0[10]) marks a packet a pod sent to itself through a
	// Service (request or reply): Output sends it back through IN_PORT.
	HairpinField = binding.Reg(0).Range(10, 10)
	// FromOutsideField (reg0[11]) marks a packet that entered from the
	// gateway with a source other than the gateway IP: traffic from outside
	// the node that the node forwards into the bridge (a NodePort it DNATed,
	// an external address it routes). The node's own traffic, and its pods'
	// traffic to NodePorts, leaves the node's netfilter with the gateway IP
	// as source (pkg/agent/route, NodePath). externalTrafficPolicy Local
	// applies to traffic with this mark, and its Service connections to
	// endpoints behind the tunnel are source-NATed.
	FromOutsideField = binding.Reg(0).Range(11, 11)
	// TrafficControlDoneField (reg0[12]) marks a packet TrafficControl has
	// mirrored, or one that came back through a return port: Output takes
	// no TrafficControl action on it again (traffic_control.go).
	TrafficControlDoneField = binding.Reg(0).Range(12, 12)
	// MulticastCountedField (reg0[13]) marks a local pod's multicast packet
	// whose sender's counter flow has counted it (multicast.go): the flow
	// resubmits it to L3Forwarding, where it then meets its group's flow.
	MulticastCountedField = binding.Reg(0).Range(13, 13)
	// MulticastDeliverField (reg0[14]) marks a copy a multicast group's
	// bucket hands to its member's delivery flow (the port in reg1), whose
	// counter is the member's inbound counter (multicast.go).
	MulticastDeliverField = binding.Reg(0).Range(14, 14)
	// L7RedirectField (reg0[15]) is set by the conj_id flow of an Allow
	// rule with l7Protocols: ConntrackCommit stores it in L7RedirectCTMark
	// and Output sends the packet to the layer 7 engine (l7_policy.go).
	L7RedirectField = binding.Reg(0).Range(15, 15)
	// L7RuleVLANField (reg8[0..11]) is that rule's layer 7 id, the VLAN id
	// the engine reads to know the rule (stored in L7RuleVLANCTMark).
	L7RuleVLANField = binding.Reg(8).Range(0, 11)
	// TargetOFPortField (reg1) is the port Output sends the packet to.
	TargetOFPortField = binding.Reg(1).All()
	// EndpointIPField (reg3) is the IPv4 address of the endpoint chosen by a
	// Service group's bucket; EndpointIP6Field (xxreg3, the 128 bits of
	// reg12..reg15) an IPv6 endpoint's. A bucket loads the field of its
	// endpoint's family (endpointIPField), so IPv4 keeps the 32-bit
	// register it always had and neither family's field overlaps another
	// field (upstream Antrea's layout).
	EndpointIPField  = binding.Reg(3).All()
	EndpointIP6Field = binding.XXReg(3).All()
	// EndpointPortField (reg4[0..15]) is that endpoint's port.
	EndpointPortField = binding.Reg(4).Range(0, 15)
	// EndpointSelectedField (reg4[16]) is set by the bucket that filled
	// EndpointIPField and EndpointPortField: EndpointDNAT acts only then.
	EndpointSelectedField = binding.Reg(4).Range(16, 16)
	// EndpointRejectField (reg4[17]) is set by the one bucket of a Service
	// port without endpoints: EndpointDNAT sends the packet to the agent,
	// which answers with a TCP reset or an ICMP port unreachable.
	EndpointRejectField = binding.Reg(4).Range(17, 17)
	// AffinityLookupField (reg4[18]) is set while SessionAffinity is looked
	// up for the first packet of a connection to a port with ClientIP
	// affinity: only then do its learned flows match.
	AffinityLookupField = binding.Reg(4).Range(18, 18)
	// AffinityLearnField (reg4[19]) is set by the bucket of a port with
	// ClientIP affinity before it resubmits to SessionAffinity, where the
	// flow of its port and endpoint learns the client's affinity.
	AffinityLearnField = binding.Reg(4).Range(19, 19)
	// PolicyRuleIDField (reg5) holds the conjunction id of the policy rule
	// that sends a packet to the agent (to reject or log it): the agent
	// reads it back from the packet-in to find the rule.
	PolicyRuleIDField = binding.Reg(5).All()
	// EgressRuleIDField (reg6) and IngressRuleIDField (reg7) hold the
	// conjunction id of the egress and the ingress rule that allowed a new
	// connection (0: none): the metric tables count its first packet for
	// them, and ConntrackCommit stores them in the connection's ct_label
	// (EgressRuleCTLabel, IngressRuleCTLabel) for its later packets.
	EgressRuleIDField  = binding.Reg(6).All()
	IngressRuleIDField = binding.Reg(7).All()
)

// Conntrack label fields, written by ConntrackCommit when it commits a
// connection and read back on every later packet of either direction: the
// ids of the rules that allowed the connection, which the metric tables
// count its packets for. Upstream Antrea's bits.
var (
	// IngressRuleCTLabel (ct_label[0..31]) is the ingress rule's id.
	IngressRuleCTLabel = binding.FieldCTLabel.Range(0, 31)
	// EgressRuleCTLabel (ct_label[32..63]) is the egress rule's id.
	EgressRuleCTLabel = binding.FieldCTLabel.Range(32, 63)
)

// Conntrack marks (ct_mark bits), set when EndpointDNAT commits a connection
// and read back from conntrack on its later packets and replies.
var (
	// ServiceCTMark (ct_mark[0]) marks a connection to a Service: it is
	// committed (with its DNAT) by EndpointDNAT, so ConntrackCommit leaves it.
	ServiceCTMark = binding.FieldCTMark.Range(0, 0)
	// HairpinCTMark (ct_mark[1]) marks a Service connection from a pod to
	// itself, which is also source-NATed (to HairpinIP, in SNATCtZone).
	HairpinCTMark = binding.FieldCTMark.Range(1, 1)
	// FromGatewayCTMark (ct_mark[2]) marks a connection, other than a
	// Service's, whose first packet came from the gateway: its replies go
	// back to the gateway even when their destination is a local pod or a
	// pod behind the tunnel, so that the node's netfilter, which may have
	// rewritten the connection (kube-proxy's DNAT when AntreaProxy is off),
	// sees both directions.
	FromGatewayCTMark = binding.FieldCTMark.Range(2, 2)
	// L7RedirectCTMark (ct_mark[3]) marks a connection a layer 7 rule
	// allowed: every later packet of either direction goes to the layer 7
	// engine, tagged with L7RuleVLANCTMark (ct_mark[16..27]).
	L7RedirectCTMark = binding.FieldCTMark.Range(3, 3)
	L7RuleVLANCTMark = binding.FieldCTMark.Range(16, 27)
)

// PktSource is a value of PktSourceField: where a packet entered the bridge.
type PktSource uint64

// PktDestination is a value of PktDestinationField: where L3Forwarding
// decided a packet goes.
type PktDestination uint64

// Values of PktSourceField.
const (
	FromTunnel  PktSource = 1
	FromGateway PktSource = 2
	FromLocal   PktSource = 3
	// FromTrafficControlReturn: a TrafficControl return port (redirected
	// traffic coming back).
	FromTrafficControlReturn PktSource = 4
	// FromL7Engine: the layer 7 engine's port (packets it let through or
	// made, which resume after the policy stage).
	FromL7Engine PktSource = 5
)

// Values of PktDestinationField.
const (
	ToTunnel  PktDestination = 1
	ToGateway PktDestination = 2
	ToLocal   PktDestination = 3
)

// regValue is what a register field holds: a typed value (PktSource,
// PktDestination), a port number, or a bit.
type regValue interface {
	~uint64 | ~uint32 | ~uint16 | ~int
}

// bit is the value of a one-bit mark.
type bit uint64

// on sets (or matches) a one-bit mark such as FromOutsideField; off
// matches it unset.
const (
	on  bit = 1
	off bit = 0
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
	// CtZoneV6 and SNATCtZoneV6 are the same zones for IPv6 connections:
	// each family has its own zones, as upstream Antrea has them (an IPv6
	// tuple never meets an IPv4 one, and ct flushes and dumps stay per
	// family).
	CtZoneV6     = 0xffe6
	SNATCtZoneV6 = 0xffe7
)

// ctZone is family f's pod zone (CtZone or CtZoneV6).
func ctZone(f types.IPFamily) uint16 { return types.ByFamily[uint16](f, CtZone, CtZoneV6) }

// snatCtZone is family f's SNAT zone (SNATCtZone or SNATCtZoneV6).
func snatCtZone(f types.IPFamily) uint16 { return types.ByFamily[uint16](f, SNATCtZone, SNATCtZoneV6) }

// CtZones are the pod zones of both families, for those who read conntrack
// (the FlowExporter, the policy controller's live check).
func CtZones() []uint16 { return []uint16{CtZone, CtZoneV6} }

// The virtual addresses the pipeline and the node's netfilter agree on,
// declared once in pkg/agent/types (which says what each is for).
var (
	HairpinIP         = types.HairpinIP
	NodePortVirtualIP = types.NodePortVirtualIP
	GlobalVirtualMAC  = types.GlobalVirtualMAC
)

// matchField makes m match a register range holding v, keeping what m
// already matches in other bits of the same register.
func matchField[V regValue](m *binding.Match, r binding.FieldRange, value V) {
	v := uint64(value)
	width := uint(r.End) - uint(r.Start) + 1
	mask := (uint64(1)<<width - 1) << r.Start
	val := v << r.Start & mask
	if old, ok := m.Get(r.Field); ok {
		mask |= old.Mask.Lo
		val |= old.Value.Lo &^ ((uint64(1)<<width - 1) << r.Start)
	}
	m.SetMasked(r.Field, binding.U64(val), binding.U64(mask))
}

func macValue(mac net.HardwareAddr) binding.U128 {
	var v uint64
	for _, b := range mac {
		v = v<<8 | uint64(b)
	}
	return binding.U64(v)
}

func setEthSrc(mac net.HardwareAddr) binding.Action {
	return &binding.SetField{Field: binding.FieldEthSrc, Value: macValue(mac)}
}

func setEthDst(mac net.HardwareAddr) binding.Action {
	return &binding.SetField{Field: binding.FieldEthDst, Value: macValue(mac)}
}

// setTunDst sets the remote end of the tunnel: tun_dst, or tun_ipv6_dst
// for a peer on an IPv6 underlay.
func setTunDst(ip net.IP) binding.Action {
	a := addr(ip)
	f := types.ByFamily(types.FamilyOf(a), binding.FieldTunDst, binding.FieldTunIPv6Dst)
	return &binding.SetField{Field: f, Value: addrValue(a)}
}

func setARPSpa(ip net.IP) binding.Action {
	return &binding.SetField{Field: binding.FieldARPSpa, Value: addrValue(addr(ip))}
}

func setARPSha(mac net.HardwareAddr) binding.Action {
	return &binding.SetField{Field: binding.FieldARPSha, Value: macValue(mac)}
}

func load[V regValue](r binding.FieldRange, v V) binding.Action { return binding.Load(r, uint64(v)) }

func move(src, dst binding.FieldRange) binding.Action { return &binding.RegMove{Src: src, Dst: dst} }
