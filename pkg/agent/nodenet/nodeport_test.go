package nodenet

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"antrea.io/antrea/pkg/agent/types"
)

func TestNodePortsDNATToTheVirtualIPAndKeepTheSetsAcrossASetup(t *testing.T) {
	fake := knftables.NewFake(TableFamily, TableName)
	np := NewWith(fake).NodePorts()
	ctx := context.Background()
	cfg := NodePortConfig{GatewayName: "antrea-gw0", GatewayIP: netip.MustParseAddr("10.10.1.1"), PodCIDR: netip.MustParsePrefix("10.10.1.0/24")}
	if err := np.Setup(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	tcp, udp := types.NodePort{Protocol: types.ProtocolTCP, Port: 30080}, types.NodePort{Protocol: types.ProtocolUDP, Port: 30053}
	if err := np.Apply(ctx, NodePortChange{SetAddrs: true, Addrs: []netip.Addr{netip.MustParseAddr("172.30.0.11")}, Add: []types.NodePort{tcp, udp}}); err != nil {
		t.Fatal(err)
	}
	// An agent restart sets the chains up again: the sets keep their
	// elements, so NodePorts keep working meanwhile.
	if err := np.Setup(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	dump := fake.Dump()
	for _, want := range []string{
		"add rule inet antrea nodeport-prerouting ip daddr @nodeport-addrs meta l4proto . th dport @nodeports dnat ip to 169.254.0.252",
		"add rule inet antrea nodeport-output ip daddr @nodeport-addrs meta l4proto . th dport @nodeports dnat ip to 169.254.0.252",
		`add rule inet antrea nodeport-postrouting oifname "antrea-gw0" ip daddr 169.254.0.252 ip saddr 10.10.1.0/24 masquerade`,
		`add rule inet antrea nodeport-postrouting oifname "antrea-gw0" ip saddr != 10.10.1.1 fib saddr type local masquerade`,
		`add rule inet antrea nodeport-postrouting oifname != "antrea-gw0" ip saddr 169.254.0.253 masquerade`,
		"add element inet antrea nodeport-addrs { 172.30.0.11 }",
		"add element inet antrea nodeports { tcp . 30080 }",
		"add element inet antrea nodeports { udp . 30053 }",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("the table lacks %q:\n%s", want, dump)
		}
	}
	if err := np.Apply(ctx, NodePortChange{Del: []types.NodePort{udp}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fake.Dump(), "udp . 30053") {
		t.Errorf("a deleted NodePort is still in the set:\n%s", fake.Dump())
	}
	if err := np.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if d := fake.Dump(); strings.Contains(d, "nodeport") {
		t.Errorf("Remove left the feature's objects:\n%s", d)
	}
}

func TestOnADualStackNodeNodePortsAreDNATedOnItsIPv6AddressesToTheIPv6VirtualIP(t *testing.T) {
	fake := knftables.NewFake(TableFamily, TableName)
	np := NewWith(fake).NodePorts()
	ctx := context.Background()
	v4 := NodePortConfig{GatewayName: "antrea-gw0", GatewayIP: netip.MustParseAddr("10.10.1.1"), PodCIDR: netip.MustParsePrefix("10.10.1.0/24")}
	if err := np.Setup(ctx, v4); err != nil {
		t.Fatal(err)
	}
	if d := fake.Dump(); strings.Contains(d, "ip6") || strings.Contains(d, NodePortAddrSetV6) {
		t.Errorf("an IPv4 node's table should hold nothing of IPv6:\n%s", d)
	}
	dual := v4
	dual.GatewayIPv6, dual.PodCIDRv6 = netip.MustParseAddr("fd00:10:244:1::1"), netip.MustParsePrefix("fd00:10:244:1::/64")
	if err := np.Setup(ctx, dual); err != nil {
		t.Fatal(err)
	}
	addrs := []netip.Addr{netip.MustParseAddr("172.30.0.11"), netip.MustParseAddr("fd00:172:30::11")}
	if err := np.Apply(ctx, NodePortChange{SetAddrs: true, V6: true, Addrs: addrs, Add: []types.NodePort{{Protocol: types.ProtocolTCP, Port: 30080}}}); err != nil {
		t.Fatal(err)
	}
	dump := fake.Dump()
	for _, want := range []string{
		"add rule inet antrea nodeport-prerouting ip6 daddr @nodeport-addrs-v6 meta l4proto . th dport @nodeports dnat ip6 to fc01::aabb:ccdd:eefe",
		"add rule inet antrea nodeport-output ip6 daddr @nodeport-addrs-v6 meta l4proto . th dport @nodeports dnat ip6 to fc01::aabb:ccdd:eefe",
		`add rule inet antrea nodeport-postrouting oifname "antrea-gw0" ip6 daddr fc01::aabb:ccdd:eefe ip6 saddr fd00:10:244:1::/64 masquerade`,
		`add rule inet antrea nodeport-postrouting oifname "antrea-gw0" ip6 saddr != fd00:10:244:1::1 fib saddr type local masquerade`,
		`add rule inet antrea nodeport-postrouting oifname != "antrea-gw0" ip6 saddr fc01::aabb:ccdd:eeff masquerade`,
		// The IPv4 rules are those of an IPv4 node.
		"add rule inet antrea nodeport-prerouting ip daddr @nodeport-addrs meta l4proto . th dport @nodeports dnat ip to 169.254.0.252",
		"add element inet antrea nodeport-addrs { 172.30.0.11 }",
		"add element inet antrea nodeport-addrs-v6 { fd00:172:30::11 }",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("the table lacks %q:\n%s", want, dump)
		}
	}
	if strings.Contains(dump, "nodeport-addrs { fd00") || strings.Contains(dump, "nodeport-addrs-v6 { 172") {
		t.Errorf("an address is in the other family's set:\n%s", dump)
	}
	if err := np.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if d := fake.Dump(); strings.Contains(d, "nodeport") {
		t.Errorf("Remove left the feature's objects:\n%s", d)
	}
}

// TestOnAnIPv6OnlyNodeNodePortsHaveIPv6RulesAlone: a node path without an
// IPv4 gateway address (an IPv6-only node) has the IPv6 DNAT and
// masquerades and no IPv4 rule (none could name its IPv4 gateway or pod
// CIDR).
func TestOnAnIPv6OnlyNodeNodePortsHaveIPv6RulesAlone(t *testing.T) {
	fake := knftables.NewFake(TableFamily, TableName)
	np := NewWith(fake).NodePorts()
	ctx := context.Background()
	v6 := NodePortConfig{GatewayName: "antrea-gw0", GatewayIPv6: netip.MustParseAddr("fd00:10:244:1::1"), PodCIDRv6: netip.MustParsePrefix("fd00:10:244:1::/64")}
	if err := np.Setup(ctx, v6); err != nil {
		t.Fatal(err)
	}
	if err := np.Apply(ctx, NodePortChange{SetAddrs: true, V6: true, Addrs: []netip.Addr{netip.MustParseAddr("fd00:172:30::11")},
		Add: []types.NodePort{{Protocol: types.ProtocolTCP, Port: 30080}}}); err != nil {
		t.Fatal(err)
	}
	dump := fake.Dump()
	for _, want := range []string{
		"add rule inet antrea nodeport-prerouting ip6 daddr @nodeport-addrs-v6 meta l4proto . th dport @nodeports dnat ip6 to fc01::aabb:ccdd:eefe",
		`add rule inet antrea nodeport-postrouting oifname "antrea-gw0" ip6 saddr != fd00:10:244:1::1 fib saddr type local masquerade`,
		"add element inet antrea nodeport-addrs-v6 { fd00:172:30::11 }",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("the table lacks %q:\n%s", want, dump)
		}
	}
	if strings.Contains(dump, " ip daddr") || strings.Contains(dump, " ip saddr") {
		t.Errorf("an IPv6-only node's table holds IPv4 rules:\n%s", dump)
	}
}
