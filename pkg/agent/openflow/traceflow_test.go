package openflow

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// traceflowNode is a client on a node (testNode, dual-stack with
// gatewayIPv6) with a pod of each family it carries, a policy rule and the
// pod's isolation, so that a Traceflow tag has output, rule and isolation
// flows to copy.
func traceflowNode(t *testing.T, gatewayIPv6 string) *Client {
	t.Helper()
	ctx := context.Background()
	n := testNode()
	ips := []net.IP{net.ParseIP("10.10.1.5")}
	if gatewayIPv6 != "" {
		n.GatewayIPv6 = net.ParseIP(gatewayIPv6)
		ips = append(ips, net.ParseIP("fd00:10:244:1::5"))
	}
	c, err := NewClient(newGroupBridge(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(ctx, n); err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("0a:00:00:00:00:09")
	if err := c.InstallPodFlows("pod-a", ips, mac, 5); err != nil {
		t.Fatal(err)
	}
	r := &PolicyRule{ID: 3, Direction: DirectionIngress, Peers: hostPrefixes(1, "10.10.2.7"), AppliedTo: []uint32{5},
		Action: ActionDrop, Tier: TierAntrea, Priority: 30000}
	if _, err := c.ApplyPolicyChange(ctx, PolicyChange{Rules: []RuleChange{{New: r}}, Isolate: [2][]uint32{{5}}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// ethTypes counts a tag's flows by the EtherType they match.
func ethTypes(t *testing.T, flows []*binding.Flow) map[uint16]int {
	t.Helper()
	out := map[uint16]int{}
	for _, f := range flows {
		v, ok := f.Match.Get(binding.FieldEthType)
		if !ok {
			t.Errorf("a Traceflow flow matches no eth_type (its ip_dscp needs one): %s", f)
			continue
		}
		if _, ok := f.Match.Get(binding.FieldIPDSCP); !ok {
			t.Errorf("a Traceflow flow does not match the tag: %s", f)
		}
		out[uint16(v.Value.Lo)]++
	}
	return out
}

func TestAnIPv4NodesTraceflowFlowsMatchIPv4TagsOnly(t *testing.T) {
	c := traceflowNode(t, "")
	flows := c.traceflowFlows(TraceflowFlows{Tag: 5})
	got := ethTypes(t, flows)
	if got[binding.EthTypeIPv6] != 0 || got[binding.EthTypeIPv4] == 0 {
		t.Fatalf("an IPv4 node's tag flows by EtherType: %v, want IPv4's only", got)
	}
	for _, f := range flows {
		if s := f.String(); !strings.Contains(s, "nw_tos=20") {
			t.Errorf("tag 5 is DSCP 5, nw_tos 20: %s", s)
		}
	}
}

// TestADualStackNodesTraceflowFlowsMatchTheTagInBothFamilies: each flow
// that decides a packet's fate without naming a family (Output's, the
// isolation drop, the misses, a rule's conj_id flow) is copied once per
// family, one naming a family once, for it; so a tagged IPv6 packet meets
// the same observation points as an IPv4 one, and the IPv4 copies are
// those of an IPv4 node.
func TestADualStackNodesTraceflowFlowsMatchTheTagInBothFamilies(t *testing.T) {
	v4 := traceflowNode(t, "")
	dual := traceflowNode(t, "fd00:10:244:1::1")
	v4Flows := map[string]bool{}
	for _, f := range v4.traceflowFlows(TraceflowFlows{Tag: 5}) {
		v4Flows[f.String()] = true
	}
	flows := dual.traceflowFlows(TraceflowFlows{Tag: 5})
	got := ethTypes(t, flows)
	if got[binding.EthTypeIPv6] == 0 || got[binding.EthTypeIPv4] != len(v4Flows) {
		t.Fatalf("a dual-stack node's tag flows by EtherType: %v, want the IPv4 node's %d and IPv6 ones", got, len(v4Flows))
	}
	var v6 []string
	for _, f := range flows {
		s := f.String()
		if v, _ := f.Match.Get(binding.FieldEthType); uint16(v.Value.Lo) == binding.EthTypeIPv4 {
			if !v4Flows[s] {
				t.Errorf("the dual-stack node's IPv4 tag flow is not the IPv4 node's: %s", s)
			}
			continue
		}
		v6 = append(v6, s)
	}
	joined := strings.Join(v6, "\n")
	for _, want := range []string{
		"reg1=0x5,nw_tos=20 actions=controller(userdata=03.05.01),output:5",   // the pod's output
		"priority=1,ipv6,nw_tos=20 actions=controller(userdata=03.05.02)",     // Output's miss
		"ipv6,reg1=0x5,nw_tos=20 actions=controller(userdata=03.05.04.00.01)", // the pod's isolation
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the IPv6 tag flows lack %q:\n%s", want, joined)
		}
	}
}

func TestTheLiveTrafficFlowTagsThePacketsOfItsAddressesFamily(t *testing.T) {
	c := traceflowNode(t, "fd00:10:244:1::1")
	for _, tc := range []struct {
		live TraceflowLive
		want string
	}{
		{TraceflowLive{Src: netip.MustParseAddr("10.10.1.5"), Dst: netip.MustParseAddr("10.10.1.6"), Proto: binding.IPProtoTCP, DstPort: 80},
			"tcp,nw_src=10.10.1.5,nw_dst=10.10.1.6,nw_tos=0,tp_dst=80 actions=set_field:7->ip_dscp"},
		{TraceflowLive{Src: netip.MustParseAddr("fd00:10:244:1::5"), Dst: netip.MustParseAddr("fd00:10:244:1::6"), Proto: binding.IPProtoTCP, DstPort: 80},
			"tcp6,ipv6_src=fd00:10:244:1::5,ipv6_dst=fd00:10:244:1::6,nw_tos=0,tp_dst=80 actions=set_field:7->ip_dscp"},
		{TraceflowLive{Src: netip.MustParseAddr("fd00:10:244:1::5"), Dst: netip.MustParseAddr("fd00:10:244:1::6"), Proto: binding.IPProtoICMPv6},
			"icmp6,ipv6_src=fd00:10:244:1::5,ipv6_dst=fd00:10:244:1::6,nw_tos=0 actions=set_field:7->ip_dscp"},
	} {
		f := c.liveFlow(TraceflowFlows{Tag: 7, Live: &tc.live})
		if s := f.String(); !strings.Contains(s, tc.want) {
			t.Errorf("live flow of %+v:\n%s\nwant it to contain %s", tc.live, s, tc.want)
		}
	}
}

func TestAnIPv6OnlyNodesTraceflowFlowsMatchIPv6TagsOnly(t *testing.T) {
	ctx := context.Background()
	n := testNode()
	n.GatewayIP = net.ParseIP("fd00:10:244:1::1")
	c, err := NewClient(newGroupBridge(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(ctx, n); err != nil {
		t.Fatal(err)
	}
	mac, _ := net.ParseMAC("0a:00:00:00:00:09")
	if err := c.InstallPodFlows("pod-a", []net.IP{net.ParseIP("fd00:10:244:1::5")}, mac, 5); err != nil {
		t.Fatal(err)
	}
	got := ethTypes(t, c.traceflowFlows(TraceflowFlows{Tag: 5}))
	if got[binding.EthTypeIPv4] != 0 || got[binding.EthTypeIPv6] == 0 {
		t.Fatalf("an IPv6-only node's tag flows by EtherType: %v, want IPv6's only", got)
	}
}
