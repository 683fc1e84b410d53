package lab

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestADualStackLabsUnderlayAddressesEachHostInBothFamilies: the IPv6
// underlay address docs/ipv6.md gives each IPv4 one, the commands that
// put it on a host (without duplicate address detection), the routes
// between subnets via the router's IPv6 leg, and kubelet's --node-ip of a
// dual-stack node (IPv4 first).
func TestADualStackLabsUnderlayAddressesEachHostInBothFamilies(t *testing.T) {
	for _, tc := range []struct{ v4, v6 string }{
		{"172.30.0.11", "fd00:172:30::11"},
		{"172.30.1.13", "fd00:172:30:1::13"},
		{controlPlaneIP().String(), "fd00:172:30::2"},
	} {
		if got := underlayV6(netip.MustParseAddr(tc.v4)).String(); got != tc.v6 {
			t.Errorf("the IPv6 underlay address of %s is %s, want %s", tc.v4, got, tc.v6)
		}
		if !labUnderlay6.Contains(netip.MustParseAddr(tc.v6)) || !netip.MustParseAddr(tc.v6).IsPrivate() {
			t.Errorf("%s should be a unique local address in %s", tc.v6, labUnderlay6)
		}
	}
	if got := UnderlayIPv6("not an address"); got.IsValid() {
		t.Errorf("NodeIPv6 of a bad address = %s, want none", got)
	}
	if got, want := strings.Join(ipv6AddrCommand("ns", "eth0", netip.MustParseAddr("172.30.0.12")), " "),
		"ip -n ns -6 addr add fd00:172:30::12/64 dev eth0 nodad"; got != want {
		t.Errorf("address command %q, want %q", got, want)
	}
	if c := v6RouteCommands(true, "ns", 1, 1); len(c) != 0 {
		t.Errorf("one subnet needs no IPv6 route, got %v", c)
	}
	if c := v6RouteCommands(false, "ns", 2, 2); len(c) != 0 {
		t.Errorf("an IPv4 lab needs no IPv6 route, got %v", c)
	}
	c := v6RouteCommands(true, "ns", 2, 2)
	if len(c) != 1 || strings.Join(c[0], " ") != "ip -n ns -6 route replace fd00:172:30::/48 via fd00:172:30:1::1 dev eth0" {
		t.Errorf("IPv6 routes of subnet 2: %v", c)
	}
	if c := nodeForwardingCommands("ns", true); len(c) != 2 || !strings.Contains(strings.Join(c[1], " "), "net.ipv6.conf.all.forwarding=1") {
		t.Errorf("a dual-stack node forwards both families in its netns: %v", c)
	}
	if c := nodeForwardingCommands("ns", false); len(c) != 1 {
		t.Errorf("an IPv4 node forwards IPv4 only: %v", c)
	}
	if got := nodeIPFlag(NodeInfo{IP: "172.30.0.11", IPv6: "fd00:172:30::11"}); got != "172.30.0.11,fd00:172:30::11" {
		t.Errorf("--node-ip of a dual-stack node = %q", got)
	}
	if got := nodeIPFlag(NodeInfo{IP: "172.30.0.11"}); got != "172.30.0.11" {
		t.Errorf("--node-ip of an IPv4 node = %q", got)
	}
}

// TestTheRouterForwardsIPv6BetweenTheSubnetsOfAnIPv6Underlay: with an
// IPv6 underlay and two subnets the router forwards IPv6 as IPv4, each
// inside the router's netns (never the host's), and the outside host is
// routed to the other subnets in both families; an IPv4 lab's router
// forwards IPv4 alone.
func TestTheRouterForwardsIPv6BetweenTheSubnetsOfAnIPv6Underlay(t *testing.T) {
	joined := func(cmds [][]string) []string {
		var out []string
		for _, c := range cmds {
			out = append(out, strings.Join(c, " "))
		}
		return out
	}
	v6 := joined(routerCommands(true, 2))
	for _, want := range []string{
		"ip netns exec " + RouterNetNS + " sysctl -q -w net.ipv4.ip_forward=1",
		"ip netns exec " + RouterNetNS + " sysctl -q -w net.ipv6.conf.all.forwarding=1",
		"ip -n " + OutsideNetNS + " -6 route replace fd00:172:30::/48 via fd00:172:30::4 dev eth0",
	} {
		if !slices.Contains(v6, want) {
			t.Errorf("the router's commands with an IPv6 underlay %q lack %q", v6, want)
		}
	}
	for _, c := range v6 {
		if strings.Contains(c, "sysctl") && !strings.HasPrefix(c, "ip netns exec "+RouterNetNS+" ") {
			t.Errorf("a sysctl outside the router's netns: %q", c)
		}
	}
	for _, c := range joined(routerCommands(false, 2)) {
		if strings.Contains(c, "ipv6") || strings.Contains(c, "-6") {
			t.Errorf("an IPv4 lab's router got an IPv6 command: %q", c)
		}
	}
}
