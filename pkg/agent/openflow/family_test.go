package openflow

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

func TestEthTypeIsTakenFromTheAddress(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want uint16
	}{
		{"10.96.0.10", binding.EthTypeIPv4},
		{"fd00:10:96::a", binding.EthTypeIPv6},
		{"::ffff:10.96.0.10", binding.EthTypeIPv6}, // netip's reading: mapped is IPv6
	} {
		if got := ethTypeOf(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("ethTypeOf(%s) = %#x, want %#x", tc.addr, got, tc.want)
		}
	}
}

func TestAddrKeepsItsFamilyWhateverTheSliceLength(t *testing.T) {
	if a := addr(net.ParseIP("10.10.0.1")); !a.Is4() || a.String() != "10.10.0.1" {
		t.Errorf("addr of a 16-byte IPv4 net.IP = %v, want IPv4 10.10.0.1", a)
	}
	if a := addr(net.ParseIP("fd00::1")); !a.Is6() || a.String() != "fd00::1" {
		t.Errorf("addr(fd00::1) = %v, want IPv6 fd00::1 (it was the zero Addr before)", a)
	}
	if p := prefix(&net.IPNet{IP: net.ParseIP("fd00:10:244:1::"), Mask: net.CIDRMask(64, 128)}); p.String() != "fd00:10:244:1::/64" {
		t.Errorf("prefix = %v", p)
	}
}

func TestAddrValueRoundTripsBothFamilies(t *testing.T) {
	for _, s := range []string{"10.244.1.7", "255.0.0.1", "fd00:10:244:1::7", "ffff::1"} {
		a := netip.MustParseAddr(s)
		if got := valueAddr(types.FamilyOf(a), addrValue(a)); got != a {
			t.Errorf("valueAddr(addrValue(%s)) = %s", a, got)
		}
	}
	if v := addrValue(netip.MustParseAddr("10.0.0.1")); v != binding.U64(0x0a000001) {
		t.Errorf("addrValue(10.0.0.1) = %+v", v)
	}
}

func TestEndpointIPFieldIsReg3ForIPv4AndXXReg3ForIPv6(t *testing.T) {
	if r := endpointIPField(types.IPv4); r != binding.Reg(3).All() {
		t.Errorf("IPv4 endpoint field = %+v, want reg3", r)
	}
	if r := endpointIPField(types.IPv6); r != binding.XXReg(3).All() || r.Bits() != 128 {
		t.Errorf("IPv6 endpoint field = %+v, want all 128 bits of xxreg3", r)
	}
	// xxreg3 is reg12..reg15: it overlaps none of the registers the
	// pipeline declares (reg0..reg7).
	for _, r := range []binding.FieldRange{PktSourceField, TargetOFPortField, EndpointIPField, EndpointPortField, PolicyRuleIDField, EgressRuleIDField, IngressRuleIDField} {
		if r.Field == EndpointIP6Field.Field {
			t.Errorf("%+v shares xxreg3", r)
		}
	}
}

func TestEndpointIPReadsBackFromEveryFormOVSReportsIt(t *testing.T) {
	v4 := netip.MustParseAddr("10.244.1.7")
	v6 := netip.MustParseAddr("fd00:10:244:1::7")
	for _, a := range []netip.Addr{v4, v6} {
		var m binding.Match
		matchEndpointIP(&m, a)
		if got, ok := endpointIPOf(&m); !ok || got != a {
			t.Errorf("endpointIPOf(match of %s) = %v, %v", a, got, ok)
		}
	}
	// A packet-in reports xxreg3 as the 32-bit registers reg12..reg15,
	// reg12 the most significant.
	var pin binding.Match
	val := addrValue(v6)
	pin.Set(binding.Reg(12), binding.U64(val.Hi>>32))
	pin.Set(binding.Reg(13), binding.U64(val.Hi&0xffffffff))
	pin.Set(binding.Reg(14), binding.U64(val.Lo>>32))
	pin.Set(binding.Reg(15), binding.U64(val.Lo&0xffffffff))
	if got, ok := endpointIPOf(&pin); !ok || got != v6 {
		t.Errorf("endpointIPOf(packet-in registers) = %v, %v; want %s", got, ok, v6)
	}
}

// TestAnIPv6EndpointIsBuiltInItsOwnFamily checks the flows an IPv6
// Service would have, built by the same code as IPv4's: the pipeline
// refuses to install them until dual-stack, but nothing in them is IPv4.
func TestAnIPv6EndpointIsBuiltInItsOwnFamily(t *testing.T) {
	c, _ := newServiceUnitClient(t)
	b := &c.b
	vip := ServicePort{IP: netip.MustParseAddr("fd00:10:96::a"), Protocol: binding.IPProtoTCP, Port: 80}
	ep := Endpoint{IP: netip.MustParseAddr("fd00:10:244:1::7"), Port: 8080}
	g := b.serviceGroup(binding.GroupAdd, 1, PortState{Endpoints: []Endpoint{ep}})
	bucket := g.Buckets[0].Actions[0].String()
	if !strings.Contains(bucket, "xxreg3") || !strings.Contains(bucket, "0xfd000010024400010000000000000007") {
		t.Errorf("IPv6 bucket loads %s, want the whole address into xxreg3", bucket)
	}
	dnat := b.endpointFlow(keyOf(vip.Protocol, ep), false, vip.Protocol).String()
	// Printed, as ovs-ofctl prints it, as the four registers of xxreg3.
	for _, want := range []string{"tcp6", "reg12=0xfd000010,reg13=0x2440001,reg14=0,reg15=0x7", "nat(dst=[fd00:10:244:1::7]:8080)"} {
		if !strings.Contains(dnat, want) {
			t.Errorf("IPv6 EndpointDNAT flow %s lacks %q", dnat, want)
		}
	}
	learn := b.affinityLearnFlow(vip, ep, 60).String()
	for _, want := range []string{"eth_type=0x86dd", "NXM_NX_IPV6_SRC[]", "NXM_NX_IPV6_DST[]"} {
		if !strings.Contains(learn, want) {
			t.Errorf("IPv6 affinity learn flow %s lacks %q", learn, want)
		}
	}
	if strings.Contains(learn, "NXM_OF_IP_SRC") || strings.Contains(dnat, "reg3=") {
		t.Errorf("IPv6 flows use IPv4 fields:\n%s\n%s", learn, dnat)
	}
}

func TestAnIPv6ServiceIsRefusedOnANodeWithoutIPv6NamingItsFamily(t *testing.T) {
	c, _ := newServiceUnitClient(t)
	err := c.InstallService(context.Background(), "ns/v6", ServiceState{
		{IP: netip.MustParseAddr("fd00:10:96::a"), Protocol: binding.IPProtoTCP, Port: 80}: {},
	})
	if err == nil || !strings.Contains(err.Error(), "carries no IPv6") {
		t.Fatalf("InstallService(IPv6) = %v, want an error naming IPv6", err)
	}
	err = c.InstallService(context.Background(), "ns/mixed", ServiceState{
		{IP: netip.MustParseAddr("10.96.0.10"), Protocol: binding.IPProtoTCP, Port: 80}: {Endpoints: []Endpoint{{IP: netip.MustParseAddr("fd00::7"), Port: 80}}},
	})
	if err == nil || !strings.Contains(err.Error(), "IPv6") {
		t.Fatalf("InstallService(IPv6 endpoint) = %v, want an error naming IPv6", err)
	}
}

func TestTheNodeCarriesTheFamiliesOfItsGateway(t *testing.T) {
	n := testNode()
	if got := n.families(); len(got) != 1 || got[0] != types.IPv4 {
		t.Errorf("families of an IPv4 node = %v", got)
	}
	n.GatewayIPv6 = net.ParseIP("fd00:10:244:1::1")
	if got := n.families(); len(got) != 2 || got[0] != types.IPv4 || got[1] != types.IPv6 {
		t.Errorf("families of a dual-stack node = %v, want [IPv4 IPv6]", got)
	}
	n.GatewayIP, n.GatewayIPv6 = net.ParseIP("fd00:10:244:1::1"), nil
	if got := n.families(); len(got) != 1 || got[0] != types.IPv6 {
		t.Errorf("families of an IPv6 node = %v, want [IPv6]", got)
	}
}

// TestADualStackNodesIPv4FlowsAreThoseOfAnIPv4Node: adding IPv6 to a node
// adds flows and changes none: every flow of an IPv4 node (fixed, a pod's
// with an address of each family, a peer's, a policy rule's and its
// isolation, a Service's) is among the dual-stack node's, and each flow
// the dual-stack node has beyond them is about IPv6 (it matches ipv6 or
// icmp6, tcp6, ..., or names an IPv6 address).
func TestADualStackNodesIPv4FlowsAreThoseOfAnIPv4Node(t *testing.T) {
	ctx := context.Background()
	flowsOf := func(n *NodeConfig) map[string]bool {
		c, err := NewClient(newGroupBridge(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Initialize(ctx, n); err != nil {
			t.Fatal(err)
		}
		mac, _ := net.ParseMAC("0a:00:00:00:00:09")
		if err := c.InstallPodFlows("pod-a", []net.IP{net.ParseIP("10.10.1.5"), net.ParseIP("fd00:10:244:1::5")}, mac, 5); err != nil {
			t.Fatal(err)
		}
		_, peer, _ := net.ParseCIDR("10.10.2.0/24")
		if err := c.InstallNodeFlows("n2", peer, net.ParseIP("10.10.2.1"), net.ParseIP("172.30.0.12")); err != nil {
			t.Fatal(err)
		}
		r := &PolicyRule{ID: 3, Direction: DirectionIngress, Peers: hostPrefixes(1, "10.10.2.7"), AppliedTo: []uint32{5},
			Services: []PolicyPort{{Protocol: binding.IPProtoTCP, Port: 80}}, Priority: PolicyRulePriority}
		if _, err := c.ApplyPolicyChange(ctx, PolicyChange{Rules: []RuleChange{{New: r}}, Isolate: [2][]uint32{{5}}}); err != nil {
			t.Fatal(err)
		}
		if err := c.InstallService(ctx, "ns/web", ServiceState{webTCP: {Endpoints: []Endpoint{ep1}}}); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, f := range c.Flows() {
			out[f.String()] = true
		}
		return out
	}
	v4 := testNode()
	dual := testNode()
	dual.GatewayIPv6 = net.ParseIP("fd00:10:244:1::1")
	v4Flows, dualFlows := flowsOf(v4), flowsOf(dual)
	for f := range v4Flows {
		if !dualFlows[f] {
			t.Errorf("the IPv4 node's flow is not the dual-stack node's: %s", f)
		}
	}
	extra := 0
	for f := range dualFlows {
		if v4Flows[f] {
			continue
		}
		extra++
		ipv6 := false
		for _, tok := range []string{"ipv6", "icmp6", "tcp6", "udp6", "sctp6", "eth_type=0x86dd", "fd00:"} {
			ipv6 = ipv6 || strings.Contains(f, tok)
		}
		if !ipv6 {
			t.Errorf("a flow only the dual-stack node has is not about IPv6: %s", f)
		}
	}
	if extra == 0 {
		t.Error("the dual-stack node has no flow of its own")
	}
}
