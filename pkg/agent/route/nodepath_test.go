package route

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"antrea.io/antrea/pkg/agent/nodenet"
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
		change       nodenet.NodePortChange
		after        map[NodePort]bool
	}{
		{
			name:  "at start (addresses not written yet, Services not synced): addresses written, NodePorts only added",
			addrs: a, want: set(tcp80), have: set(),
			change: nodenet.NodePortChange{SetAddrs: true, Addrs: a, Add: []NodePort{tcp80}},
			after:  set(tcp80),
		},
		{
			name: "not synced yet: a NodePort no Service wants stays", addrs: a, haveA: a, want: set(tcp80), have: set(tcp80, tcp90),
			after: set(tcp80, tcp90),
		},
		{
			name: "once synced, the full reconcile rewrites both sets atomically", addrs: a, haveA: a, want: set(tcp80, udp53), have: set(tcp80, tcp90),
			full: true, synced: true,
			change: nodenet.NodePortChange{SetAddrs: true, Addrs: a, FlushPorts: true, Add: []NodePort{tcp80, udp53}},
			after:  set(tcp80, udp53),
		},
		{
			name: "then only the difference", addrs: a, haveA: a, want: set(tcp80, tcp90), have: set(tcp80, udp53), synced: true,
			change: nodenet.NodePortChange{Del: []NodePort{udp53}, Add: []NodePort{tcp90}},
			after:  set(tcp80, tcp90),
		},
		{
			name: "an address change rewrites the address set only", addrs: addrs("192.168.77.12", "192.168.77.11"), haveA: a, want: set(tcp80), have: set(tcp80), synced: true,
			change: nodenet.NodePortChange{SetAddrs: true, Addrs: addrs("192.168.77.12", "192.168.77.11")},
			after:  set(tcp80),
		},
		{
			name: "nothing changed: no transaction", addrs: a, haveA: a, want: set(tcp80), have: set(tcp80), synced: true, after: set(tcp80),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			change, after := nftDiff(tc.addrs, tc.haveA, tc.want, tc.have, tc.full, tc.synced)
			if fmt.Sprint(change) != fmt.Sprint(tc.change) || change.Empty() != tc.change.Empty() {
				t.Errorf("change %+v, want %+v", change, tc.change)
			}
			if !reflect.DeepEqual(after, tc.after) {
				t.Errorf("NodePorts after: %v, want %v", after, tc.after)
			}
		})
	}
}

// TestTheNodePathServesTheFamiliesOfItsGatewayAddresses: an IPv6-only
// node's node path (an IPv6 gateway address and pod CIDR, no IPv4 ones)
// serves IPv6 alone, a dual-stack one both, an IPv4 one IPv4; a half-given
// family, or none, is refused.
func TestTheNodePathServesTheFamiliesOfItsGatewayAddresses(t *testing.T) {
	gw4, cidr4 := netip.MustParseAddr("10.10.1.1"), netip.MustParsePrefix("10.10.1.0/24")
	gw6, cidr6 := netip.MustParseAddr("fd00:10:244:1::1"), netip.MustParsePrefix("fd00:10:244:1::/64")
	for _, tc := range []struct {
		name string
		cfg  NodePathConfig
		want string // families, or "refused"
	}{
		{"IPv4", NodePathConfig{GatewayIP: gw4, PodCIDR: cidr4}, "[IPv4]"},
		{"dual-stack", NodePathConfig{GatewayIP: gw4, PodCIDR: cidr4, GatewayIPv6: gw6, PodCIDRv6: cidr6}, "[IPv4 IPv6]"},
		{"IPv6-only", NodePathConfig{GatewayIPv6: gw6, PodCIDRv6: cidr6}, "[IPv6]"},
		{"no family", NodePathConfig{}, "refused"},
		{"an IPv4 gateway without its pod CIDR", NodePathConfig{GatewayIP: gw4, GatewayIPv6: gw6, PodCIDRv6: cidr6}, "refused"},
		{"an IPv6 gateway in the IPv4 fields", NodePathConfig{GatewayIP: gw6, PodCIDR: cidr6}, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.GatewayName = "antrea-gw0"
			np, err := NewNodePath(tc.cfg)
			got := "refused"
			if err == nil {
				got = fmt.Sprint(np.cfg.families())
			}
			if got != tc.want {
				t.Errorf("families = %s (err %v), want %s", got, err, tc.want)
			}
		})
	}
}
