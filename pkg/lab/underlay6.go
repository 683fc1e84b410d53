package lab

import (
	"fmt"
	"net/netip"
)

// The IPv6 underlay of a dual-stack lab (--ip-family dual): every host of
// the underlay (the nodes, the control plane, the outside host, the
// router's legs) holds, beside its IPv4 address 172.30.C.D, the unique
// local address fd00:172:30:C::D (the IPv4 address's last two bytes
// written as the last two groups, so one reads as the other), on a /64 per
// subnet (fd00:172:30:C::/64), inside the lab's netns only. The nodes are
// then dual-stack nodes (kubelet --node-ip=IPv4,IPv6): upstream's
// [Feature:IPv6DualStack] specs need the nodes' IPv6 addresses (NodePorts
// on them, hostNetwork endpoints of IPv6). The addresses are added with
// nodad: the lab made them unique, and a tentative address would fail
// what starts at once on it.

// labUnderlay6 holds every subnet of the lab's IPv6 underlay.
var labUnderlay6 = netip.MustParsePrefix("fd00:172:30::/48")

// underlay6Bits is the prefix length of an IPv6 underlay subnet.
const underlay6Bits = 64

// underlayV6 is the IPv6 underlay address of the host whose IPv4 underlay
// address is a (172.30.C.D → fd00:172:30:C::D).
func underlayV6(a netip.Addr) netip.Addr {
	b := a.As4()
	return netip.MustParseAddr(fmt.Sprintf("fd00:172:30:%d::%d", b[2], b[3]))
}

// UnderlayIPv6 is the IPv6 underlay address of the host whose IPv4 one is ip
// (a dual-stack lab's), the zero Addr when ip is not an IPv4 address.
func UnderlayIPv6(ip string) netip.Addr {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return netip.Addr{}
	}
	return underlayV6(a)
}

// ipv6AddrCommand is the command that gives dev in netns the IPv6
// underlay address of its IPv4 one, v4.
func ipv6AddrCommand(netns, dev string, v4 netip.Addr) []string {
	return []string{"ip", "-n", netns, "-6", "addr", "add", fmt.Sprintf("%s/%d", underlayV6(v4), underlay6Bits), "dev", dev, "nodad"}
}

// ipv6ForwardingCommand is the command that makes netns (a node, the
// router) forward IPv6, in that netns only.
func ipv6ForwardingCommand(netns string) []string {
	return []string{"ip", "netns", "exec", netns, "sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"}
}

// ipv6RouteCommand is the command that routes a host of subnet s to the
// lab's other IPv6 subnets via the router (with more than one subnet).
func ipv6RouteCommand(netns string, s int) []string {
	return []string{"ip", "-n", netns, "-6", "route", "replace", labUnderlay6.String(), "via", underlayV6(routerIPIn(s)).String(), "dev", "eth0"}
}

// v6RouteCommands are, with v6 and more than one subnet, the commands
// that route a host of subnet s to the lab's other IPv6 subnets; none
// otherwise.
func v6RouteCommands(v6 bool, netns string, s, subnets int) [][]string {
	if !v6 || subnets <= 1 {
		return nil
	}
	return [][]string{ipv6RouteCommand(netns, s)}
}
