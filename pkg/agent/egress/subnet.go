package egress

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// Subnet is where the IPs of an ExternalIPPool with subnetInfo live: a
// subnet other than the Nodes', reached through its own gateway, on the
// Nodes' network or (VLAN > 0) on a VLAN of it.
//
// The node holding such an IP puts it on the subnet's link with the
// subnet's prefix (so the node reaches the subnet's hosts directly), and the
// traffic its pods send with that IP as source leaves through the subnet's
// gateway: an nftables rule in prerouting marks the packets of those pods
// (nodenet.EgressSNAT.Marks), and two ip rules per mark send them to the
// subnet's routing table where the node's main table would have used its
// default route (rule 1: main without its default routes, so the node's
// own subnet, the pod networks and every route an operator added keep
// working; rule 2: the subnet's table, whose default route is the
// gateway). Upstream marks such packets in OVS and routes by mark the same
// way; with the userspace datapath a mark set in OVS does not reach the
// node's stack, so the pod's source address sets it here, as for the SNAT.
type Subnet struct {
	// Prefix is the subnet (masked).
	Prefix netip.Prefix
	// Gateway is its router.
	Gateway netip.Addr
	// VLAN is its VLAN on the Nodes' network (0: untagged).
	VLAN int
}

// SubnetOf reads a pool's subnetInfo; ok is false without one (or with one
// the webhook would have refused).
func SubnetOf(si *crdv1beta1.SubnetInfo) (Subnet, bool) {
	if si == nil {
		return Subnet{}, false
	}
	gw, err := netip.ParseAddr(si.Gateway)
	if err != nil {
		return Subnet{}, false
	}
	p, err := gw.Prefix(int(si.PrefixLength))
	if err != nil || si.PrefixLength <= 0 {
		return Subnet{}, false
	}
	return Subnet{Prefix: p, Gateway: gw, VLAN: int(si.VLAN)}, true
}

// VLANLinkPrefix names the interfaces that hold the IPs of a subnet on a
// VLAN, "antrea-ext.<VLAN>", as upstream names its VLAN sub-interfaces. The
// agent owns every interface so named: each address on one is an external
// IP it added.
const VLANLinkPrefix = "antrea-ext."

// VLANLink is the name of the interface of VLAN vlan.
func VLANLink(vlan int) string { return fmt.Sprintf("%s%d", VLANLinkPrefix, vlan) }

// VLANLinks makes and removes the VLAN interfaces: with the userspace
// datapath, internal ports of br-phy tagged with the VLAN (this kernel has
// no 802.1Q devices, ENVIRONMENT.md; OVS tags the frames on the uplink).
type VLANLinks interface {
	// Ensure makes the interface of vlan exist and be up.
	Ensure(vlan int) error
	// Keep removes the VLAN interfaces of every VLAN but keep.
	Keep(keep []int) error
}

// The routing tables and marks of the subnets: table SubnetTableBase+i and
// mark SubnetMarkBase+i for the i-th subnet (in the order of
// subnetRoutes), the ip rules at priorities SubnetRulePriority (main
// without its default routes) and SubnetRulePriority+1 (the subnet's
// table). Everything in these ranges is the agent's.
const (
	SubnetTableBase    = 0xa0e0 // 41184
	SubnetMarkBase     = 0xa0e00000
	SubnetRulePriority = 5100
	maxSubnets         = 256
)

// SubnetRoute is one subnet's routing: packets marked Mark leave through
// Gateway on Link, from table Table.
type SubnetRoute struct {
	Subnet
	Link  string
	Table int
	Mark  uint32
}

// subnetRoutes numbers the distinct subnets (sorted, so every sync of the
// same subnets gives the same tables and marks), each on link (VLAN 0) or
// its VLAN's link.
func subnetRoutes(subnets []Subnet, link string) []SubnetRoute {
	subnets = slices.Clone(subnets)
	slices.SortFunc(subnets, func(a, b Subnet) int {
		return cmp.Or(a.Prefix.Addr().Compare(b.Prefix.Addr()), cmp.Compare(a.Prefix.Bits(), b.Prefix.Bits()),
			a.Gateway.Compare(b.Gateway), cmp.Compare(a.VLAN, b.VLAN))
	})
	subnets = slices.Compact(subnets)
	var out []SubnetRoute
	for i, s := range subnets {
		if i == maxSubnets {
			klog.ErrorS(nil, "Too many subnets of external IP pools on one node: the others leave by the default route", "max", maxSubnets)
			break
		}
		l := link
		if s.VLAN > 0 {
			l = VLANLink(s.VLAN)
		}
		out = append(out, SubnetRoute{Subnet: s, Link: l, Table: SubnetTableBase + i, Mark: SubnetMarkBase + uint32(i)})
	}
	return out
}

// SubnetRouter writes the subnets' ip rules and routing tables.
type SubnetRouter struct{}

// Sync makes the ip rules and tables of the subnet range exactly want.
func (SubnetRouter) Sync(want []SubnetRoute) error {
	var errs []error
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := netlink.RuleList(family)
		if err != nil {
			return fmt.Errorf("egress subnets: list ip rules: %w", err)
		}
		for _, r := range rules {
			if r.Priority != SubnetRulePriority && r.Priority != SubnetRulePriority+1 {
				continue
			}
			if slices.ContainsFunc(want, func(w SubnetRoute) bool { return ruleOf(w, r.Priority, family) != nil && sameRule(r, w) }) {
				continue
			}
			if err := netlink.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("egress subnets: remove ip rule %s: %w", r.String(), err))
			}
		}
		for _, w := range want {
			for _, prio := range []int{SubnetRulePriority, SubnetRulePriority + 1} {
				r := ruleOf(w, prio, family)
				if r == nil || slices.ContainsFunc(rules, func(have netlink.Rule) bool { return have.Priority == prio && sameRule(have, w) }) {
					continue
				}
				if err := netlink.RuleAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
					errs = append(errs, fmt.Errorf("egress subnets: add ip rule for %s: %w", w.Prefix, err))
				}
			}
		}
	}
	// The tables: each wanted one holds exactly its default route. One
	// dump of every table's routes (the filter on table 0 takes all).
	all, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("egress subnets: list routes: %w", err))...)
	}
	for _, r := range all {
		if r.Table < SubnetTableBase || r.Table >= SubnetTableBase+maxSubnets {
			continue
		}
		j := slices.IndexFunc(want, func(w SubnetRoute) bool { return w.Table == r.Table })
		if j >= 0 {
			if link, err := netlink.LinkByName(want[j].Link); err == nil && r.LinkIndex == link.Attrs().Index &&
				r.Gw.Equal(net.IP(want[j].Gateway.AsSlice())) && (r.Dst == nil || isDefault(r.Dst)) {
				continue
			}
		}
		if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("egress subnets: remove a route of table %d: %w", r.Table, err))
		}
	}
	for _, w := range want {
		link, err := netlink.LinkByName(w.Link)
		if err != nil {
			errs = append(errs, fmt.Errorf("egress subnets: link %s of subnet %s: %w", w.Link, w.Prefix, err))
			continue
		}
		unspecified := netip.IPv4Unspecified()
		if w.Gateway.Is6() {
			unspecified = netip.IPv6Unspecified()
		}
		def := &netlink.Route{Table: w.Table, LinkIndex: link.Attrs().Index, Gw: net.IP(w.Gateway.AsSlice()),
			Dst: &net.IPNet{IP: net.IP(unspecified.AsSlice()), Mask: net.CIDRMask(0, unspecified.BitLen())}, Flags: int(netlink.FLAG_ONLINK)}
		if err := netlink.RouteReplace(def); err != nil {
			errs = append(errs, fmt.Errorf("egress subnets: default route via %s dev %s in table %d: %w", w.Gateway, w.Link, w.Table, err))
		}
	}
	return errors.Join(errs...)
}

func isDefault(n *net.IPNet) bool { ones, _ := n.Mask.Size(); return ones == 0 }

// ruleOf is w's ip rule at priority prio in family (nil: w is of the other
// family): prio looks up main without its default routes, prio+1 w's
// table.
func ruleOf(w SubnetRoute, prio, family int) *netlink.Rule {
	if w.Gateway.Is6() != (family == netlink.FAMILY_V6) {
		return nil
	}
	r := netlink.NewRule()
	r.Family, r.Priority, r.Mark = family, prio, w.Mark
	mask := uint32(0xffffffff)
	r.Mask = &mask
	if prio == SubnetRulePriority {
		r.Table, r.SuppressPrefixlen = unix.RT_TABLE_MAIN, 0
	} else {
		r.Table = w.Table
	}
	return r
}

func sameRule(r netlink.Rule, w SubnetRoute) bool {
	if r.Mark != w.Mark {
		return false
	}
	if r.Priority == SubnetRulePriority {
		return r.Table == unix.RT_TABLE_MAIN && r.SuppressPrefixlen == 0
	}
	return r.Table == w.Table
}

// isVLANLink says whether an interface name is one of the VLAN links.
func isVLANLink(name string) bool { return strings.HasPrefix(name, VLANLinkPrefix) }
