package route

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestNodePortsAreServedOnTheNodesOwnAddresses(t *testing.T) {
	node := addrs("192.168.77.11", "127.0.0.1", "10.10.1.1", "169.254.0.252", "172.30.0.11", "192.168.77.11", "fd00::1")
	gw := netip.MustParseAddr("10.10.1.1")
	if got, want := SelectNodePortAddresses(node, nil, gw), addrs("172.30.0.11", "192.168.77.11"); !reflect.DeepEqual(got, want) {
		t.Errorf("by default every IPv4 address but loopback, link-local and the gateway's, got %v, want %v", got, want)
	}
	only := []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16"), netip.MustParsePrefix("127.0.0.0/8")}
	if got, want := SelectNodePortAddresses(node, only, gw), addrs("172.30.0.11"); !reflect.DeepEqual(got, want) {
		t.Errorf("nodePortAddresses selects by prefix (never loopback), got %v, want %v", got, want)
	}
}

func TestNodePathTransactionsWriteOnlyTheDifference(t *testing.T) {
	tcp80, udp53, tcp90 := NodePort{Protocol: 6, Port: 30080}, NodePort{Protocol: 17, Port: 30053}, NodePort{Protocol: 6, Port: 30090}
	set := func(ps ...NodePort) map[NodePort]bool {
		m := map[NodePort]bool{}
		for _, p := range ps {
			m[p] = true
		}
		return m
	}
	a := addrs("192.168.77.11")
	for _, tc := range []struct {
		name         string
		addrs, haveA []netip.Addr
		want, have   map[NodePort]bool
		full, synced bool
		script       []string
		after        map[NodePort]bool
	}{
		{
			name:  "at start (addresses not written yet, Services not synced): addresses written, NodePorts only added",
			addrs: a, want: set(tcp80), have: set(),
			script: []string{"flush set ip antrea-proxy nodeport-addrs", "add element ip antrea-proxy nodeport-addrs { 192.168.77.11 }",
				"add element ip antrea-proxy nodeports { tcp . 30080 }"},
			after: set(tcp80),
		},
		{
			name: "not synced yet: a NodePort no Service wants stays", addrs: a, haveA: a, want: set(tcp80), have: set(tcp80, tcp90),
			after: set(tcp80, tcp90),
		},
		{
			name: "once synced, the full reconcile rewrites both sets atomically", addrs: a, haveA: a, want: set(tcp80, udp53), have: set(tcp80, tcp90),
			full: true, synced: true,
			script: []string{"flush set ip antrea-proxy nodeport-addrs", "add element ip antrea-proxy nodeport-addrs { 192.168.77.11 }",
				"flush set ip antrea-proxy nodeports", "add element ip antrea-proxy nodeports { tcp . 30080, udp . 30053 }"},
			after: set(tcp80, udp53),
		},
		{
			name: "then only the difference", addrs: a, haveA: a, want: set(tcp80, tcp90), have: set(tcp80, udp53), synced: true,
			script: []string{"delete element ip antrea-proxy nodeports { udp . 30053 }", "add element ip antrea-proxy nodeports { tcp . 30090 }"},
			after:  set(tcp80, tcp90),
		},
		{
			name: "an address change rewrites the address set only", addrs: addrs("192.168.77.12", "192.168.77.11"), haveA: a, want: set(tcp80), have: set(tcp80), synced: true,
			script: []string{"flush set ip antrea-proxy nodeport-addrs", "add element ip antrea-proxy nodeport-addrs { 192.168.77.12, 192.168.77.11 }"},
			after:  set(tcp80),
		},
		{
			name: "nothing changed: no transaction", addrs: a, haveA: a, want: set(tcp80), have: set(tcp80), synced: true, after: set(tcp80),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script, after := nftDiff(tc.addrs, tc.haveA, tc.want, tc.have, tc.full, tc.synced)
			var lines []string
			if script != "" {
				lines = strings.Split(strings.TrimSuffix(script, "\n"), "\n")
			}
			if !reflect.DeepEqual(lines, tc.script) {
				t.Errorf("script:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tc.script, "\n"))
			}
			if !reflect.DeepEqual(after, tc.after) {
				t.Errorf("NodePorts after: %v, want %v", after, tc.after)
			}
		})
	}
}

func TestTheNodePathTableDNATsNodePortsAndMasqueradesTheNodesOwnTraffic(t *testing.T) {
	n, err := NewNodePath(NodePathConfig{GatewayName: "antrea-gw0", GatewayIP: netip.MustParseAddr("10.10.1.1"), PodCIDR: netip.MustParsePrefix("10.10.1.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	script := n.baseScript()
	for _, want := range []string{
		"add table ip antrea-proxy\n",
		"add chain ip antrea-proxy prerouting { type nat hook prerouting priority dstnat; policy accept; }\nflush chain ip antrea-proxy prerouting\n",
		"add rule ip antrea-proxy prerouting ip daddr @nodeport-addrs meta l4proto . th dport @nodeports dnat ip to 169.254.0.252 ",
		"add rule ip antrea-proxy output ip daddr @nodeport-addrs meta l4proto . th dport @nodeports dnat ip to 169.254.0.252 ",
		`add rule ip antrea-proxy postrouting oifname "antrea-gw0" ip daddr 169.254.0.252 ip saddr 10.10.1.0/24 masquerade `,
		`add rule ip antrea-proxy postrouting oifname "antrea-gw0" ip saddr != 10.10.1.1 fib saddr type local masquerade `,
		`add rule ip antrea-proxy postrouting oifname != "antrea-gw0" ip saddr 169.254.0.253 masquerade `,
	} {
		if !strings.Contains(script, want) {
			t.Errorf("the table should hold %q; script:\n%s", want, script)
		}
	}
	if strings.Contains(script, "flush set") || strings.Contains(script, "delete") {
		t.Errorf("setting the table up must keep the sets' elements (NodePorts keep working across a restart):\n%s", script)
	}
}
