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
