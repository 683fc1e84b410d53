package nodenet

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"antrea.io/antrea/pkg/agent/types"
)

func TestNodePortLocalWritesOneMapPerFamilyAndRefusesTwoRulesOnOnePort(t *testing.T) {
	fake := knftables.NewFake(TableFamily, TableName)
	table := NewWith(fake)
	ctx := context.Background()
	rules := []NodePortLocalRule{
		{Protocol: types.ProtocolUDP, NodePort: 61000, Pod: netip.MustParseAddrPort("10.10.0.5:53")},
		{Protocol: types.ProtocolTCP, NodePort: 61000, Pod: netip.MustParseAddrPort("10.10.0.5:8080")},
		{Protocol: types.ProtocolTCP, NodePort: 61000, Pod: netip.MustParseAddrPort("[fd00:10::5]:8080")},
	}
	if err := table.SetNodePortLocal(ctx, "antrea-gw0", rules); err != nil {
		t.Fatal(err)
	}
	dump := fake.Dump()
	for _, want := range []string{
		"add rule inet antrea nodeportlocal-prerouting meta nfproto ipv4 fib daddr type local dnat ip to meta l4proto . th dport map @nodeportlocal-v4",
		"add rule inet antrea nodeportlocal-output meta nfproto ipv6 fib daddr type local dnat ip6 to meta l4proto . th dport map @nodeportlocal-v6",
		`add rule inet antrea nodeportlocal-postrouting meta nfproto ipv4 iifname "antrea-gw0" oifname "antrea-gw0" ct status dnat meta l4proto tcp ct original proto-dst @nodeportlocal-ports-tcp masquerade`,
		"tcp . 61000 comment \"tcp/61000->10.10.0.5:8080\" : 10.10.0.5 . 8080",
		"udp . 61000 comment \"udp/61000->10.10.0.5:53\" : 10.10.0.5 . 53",
		"tcp . 61000 comment \"tcp/61000->[fd00:10::5]:8080\" : fd00:10::5 . 8080",
		"add element inet antrea nodeportlocal-ports-tcp { 61000 }",
		"add element inet antrea nodeportlocal-ports-udp { 61000 }",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("the table lacks %q:\n%s", want, dump)
		}
	}
	for _, bad := range [][]NodePortLocalRule{
		{rules[1], {Protocol: types.ProtocolTCP, NodePort: 61000, Pod: netip.MustParseAddrPort("10.10.0.6:8080")}},
		{{Protocol: types.ProtocolSCTP, NodePort: 61001, Pod: netip.MustParseAddrPort("10.10.0.5:9")}},
	} {
		if err := table.SetNodePortLocal(ctx, "antrea-gw0", bad); err == nil {
			t.Errorf("SetNodePortLocal(%v) succeeded, want an error", bad)
		}
	}
	if fake.Dump() != dump {
		t.Error("a refused state was written")
	}
	// An empty state keeps the chains and empties the maps.
	if err := table.SetNodePortLocal(ctx, "antrea-gw0", nil); err != nil {
		t.Fatal(err)
	}
	if d := fake.Dump(); strings.Contains(d, "10.10.0.5") || !strings.Contains(d, "nodeportlocal-prerouting") {
		t.Errorf("the empty state:\n%s", d)
	}
	if err := table.RemoveNodePortLocal(ctx); err != nil {
		t.Fatal(err)
	}
	if d := fake.Dump(); strings.Contains(d, "nodeportlocal") {
		t.Errorf("RemoveNodePortLocal left the feature's objects:\n%s", d)
	}
}
