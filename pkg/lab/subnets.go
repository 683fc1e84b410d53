package lab

import (
	"fmt"
	"net/netip"
	"strings"
)

// Underlay subnets (--subnets N): subnet 1 is underlayPrefix, 172.30.0.0/24,
// on the bridge br-underlay, with the control plane, the outside host, the
// router's first leg (RouterIP, .4) and the free external-IP range; subnet
// s (2..N) is 172.30.(s-1).0/24 on its own bridge br-underlay-s, where the
// router holds .1. Nodes are spread evenly over the subnets, in order
// (--nodes 4 --subnets 2: node-1 and node-2 in subnet 1, node-3 and
// node-4 in subnet 2), node i at host address 10+i of its subnet. With more
// than one subnet the router forwards between them (in its netns only) and
// the nodes and the outside host route labUnderlay, the whole lab's range,
// via the router's address in their own subnet; the control plane has a leg
// in every subnet (.2). The router knows nothing of pod CIDRs: only
// tunnelled (encap, or hybrid across subnets) pod traffic crosses it.

// MaxSubnets is the most underlay subnets a lab may have.
const MaxSubnets = 8

// labUnderlay holds every subnet of the lab's underlay.
var labUnderlay = netip.MustParsePrefix("172.30.0.0/16")

// subnetPrefix is underlay subnet s (1-based).
func subnetPrefix(s int) netip.Prefix {
	b := underlayPrefix.Addr().As4()
	b[2] += byte(s - 1)
	return netip.PrefixFrom(netip.AddrFrom4(b), underlayPrefix.Bits())
}

// subnetAddr is host address host of subnet s.
func subnetAddr(s, host int) netip.Addr {
	b := subnetPrefix(s).Addr().As4()
	b[3] += byte(host)
	return netip.AddrFrom4(b)
}

// subnetBridge is the underlay netns's bridge of subnet s.
func subnetBridge(s int) string {
	if s <= 1 {
		return underlayBridge
	}
	return fmt.Sprintf("%s-%d", underlayBridge, s)
}

// routerIPIn is the router's address in subnet s: RouterIP in subnet 1,
// .1 in the others.
func routerIPIn(s int) netip.Addr {
	if s <= 1 {
		return RouterIP()
	}
	return subnetAddr(s, 1)
}

// nodeSubnet is the subnet (1-based) of node i of n nodes spread over
// subnets subnets.
func nodeSubnet(i, n, subnets int) int {
	if subnets <= 1 || n <= 0 {
		return 1
	}
	return (i-1)*subnets/n + 1
}

// nodeIPIn is the underlay address of node i in subnet s.
func nodeIPIn(i, s int) netip.Addr { return subnetAddr(s, 10+i) }

// subnets is Subnets, 1 when unset (a state file written before the option).
func (o Options) subnets() int {
	if o.Subnets < 1 {
		return 1
	}
	return o.Subnets
}

// routeCommands are the commands that give a host of subnet s (its netns)
// the routes to the client host (client.go) and to the lab's other subnets
// (with more than one), via the router.
func routeCommands(netns string, s, subnets int) [][]string {
	cmds := [][]string{clientRoute(netns, s)}
	if subnets > 1 {
		cmds = append(cmds, []string{"ip", "-n", netns, "route", "replace", labUnderlay.String(), "via", routerIPIn(s).String(), "dev", "eth0"})
	}
	return cmds
}

// subnet is the subnet of a recorded node (0 in a state file written
// before the option: subnet 1).
func (n NodeInfo) subnet() int {
	if n.Subnet < 1 {
		return 1
	}
	return n.Subnet
}

// SubnetOfNode is the underlay subnet (1-based) of the node named name in
// st, 0 when st has no such node.
func (st *State) SubnetOfNode(name string) int {
	for _, n := range st.Nodes {
		if n.Name == name {
			return n.subnet()
		}
	}
	return 0
}

// underlayLine is `antrea-lab status`'s line of the underlay: each subnet
// with its nodes.
func underlayLine(st *State) string {
	subnets := st.Options.subnets()
	line := fmt.Sprintf("underlay: %d subnet(s):", subnets)
	for s := 1; s <= subnets; s++ {
		var names []string
		for _, n := range st.Nodes {
			if n.subnet() == s {
				names = append(names, n.Name)
			}
		}
		line += fmt.Sprintf(" %s (bridge %s) %s;", subnetPrefix(s), subnetBridge(s), strings.Join(names, ","))
	}
	return strings.TrimSuffix(line, ";")
}

// routerLegs lists the router's address in each subnet.
func routerLegs(subnets int) string {
	var legs []string
	for s := 1; s <= subnets; s++ {
		legs = append(legs, routerIPIn(s).String())
	}
	return strings.Join(legs, ", ")
}

// RouterInterface is the router's interface (in RouterNetNS) on subnet s.
func RouterInterface(s int) string { return fmt.Sprintf("eth%d", s-1) }

// UnderlayPort is the underlay netns's bridge port of node name: where a
// capture sees exactly what the node sends and receives on the wire.
func UnderlayPort(node string) string { return "v-" + node }
