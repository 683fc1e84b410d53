package nodenet

import (
	"context"
	"fmt"
	"net/netip"

	"sigs.k8s.io/knftables"

	"antrea.io/antrea/pkg/agent/types"
)

// The nodeport feature's chains and sets (AntreaProxy's node path,
// proxyAll; route.NodePath drives it).
const (
	nodePortPrerouting  = "nodeport-prerouting"
	nodePortOutput      = "nodeport-output"
	nodePortPostrouting = "nodeport-postrouting"
	// NodePortAddrSet holds the node's IPv4 addresses serving NodePorts,
	// NodePortAddrSetV6 its IPv6 ones (a dual-stack node's).
	NodePortAddrSet   = "nodeport-addrs"
	NodePortAddrSetV6 = "nodeport-addrs-v6"
	// NodePortSet holds the NodePorts (inet_proto . inet_service).
	NodePortSet = "nodeports"
)

// LegacyNodePortTable is the table (family ip) earlier agents kept the
// node path in.
const LegacyNodePortTable = "antrea-proxy"

// NodePortConfig is the fixed part of the node path.
type NodePortConfig struct {
	// GatewayName is the gateway (antrea-gw0), GatewayIP its IPv4
	// address, PodCIDR this node's IPv4 pod CIDR; both unset on an
	// IPv6-only node, whose table has no IPv4 rule.
	GatewayName string
	GatewayIP   netip.Addr
	PodCIDR     netip.Prefix
	// GatewayIPv6 and PodCIDRv6 are a dual-stack node's IPv6 gateway
	// address and pod CIDR; unset on an IPv4 node, whose table has no
	// IPv6 set or rule.
	GatewayIPv6 netip.Addr
	PodCIDRv6   netip.Prefix
}

// v4 says the node path serves IPv4 (every node but an IPv6-only one).
func (c NodePortConfig) v4() bool { return c.GatewayIP.IsValid() && c.PodCIDR.IsValid() }

// v6 says the node path serves IPv6 too.
func (c NodePortConfig) v6() bool { return c.GatewayIPv6.IsValid() && c.PodCIDRv6.IsValid() }

// NodePortChange is one write of the sets: the node addresses (rewritten
// when SetAddrs), the NodePorts (flushed first when FlushPorts; then Del
// removed and Add added).
type NodePortChange struct {
	SetAddrs bool
	Addrs    []netip.Addr
	// V6 says the node path serves IPv6 (NodePortConfig's IPv6 part was
	// set up): the IPv6 addresses go to their own set, rewritten with the
	// IPv4 one; without it IPv6 addresses are left out.
	V6         bool
	FlushPorts bool
	Del, Add   []types.NodePort
}

// Empty says the change writes nothing.
func (c NodePortChange) Empty() bool {
	return !c.SetAddrs && !c.FlushPorts && len(c.Del) == 0 && len(c.Add) == 0
}

// NodePorts is the nodeport feature: NAT prerouting (traffic entering the
// node) and output (the node's own) DNAT every connection to one of the
// node's NodePort addresses and a NodePort to types.NodePortVirtualIP,
// keeping the port (on a dual-stack node the same for its IPv6 addresses,
// to types.NodePortVirtualIPv6); postrouting masquerades to the gateway address what
// goes to the bridge from the node's other addresses and the pods' NodePort
// traffic, and HairpinIP leaving by another interface (pkg/agent/route's
// nodepath.go says why each).
type NodePorts struct {
	table *Table
}

// NodePorts returns the table's nodeport feature.
func (t *Table) NodePorts() *NodePorts { return &NodePorts{table: t} }

// Setup declares the sets (their elements kept, so NodePorts keep working
// while an agent restarts) and rewrites the chains, in one transaction. The
// node path of earlier agents (table ip antrea-proxy) is deleted first.
func (n *NodePorts) Setup(ctx context.Context, cfg NodePortConfig) error {
	if err := n.table.deleteOtherTable(ctx, knftables.IPv4Family, LegacyNodePortTable); err != nil {
		return err
	}
	return n.table.run(ctx, func(tx *knftables.Transaction) {
		tx.Add(&knftables.Set{Name: NodePortAddrSet, Type: "ipv4_addr", Comment: knftables.PtrTo("node addresses serving NodePorts")})
		tx.Add(&knftables.Set{Name: NodePortSet, Type: "inet_proto . inet_service", Comment: knftables.PtrTo("NodePorts of Services")})
		if cfg.v6() {
			tx.Add(&knftables.Set{Name: NodePortAddrSetV6, Type: "ipv6_addr", Comment: knftables.PtrTo("node IPv6 addresses serving NodePorts")})
		}
		for _, c := range []*knftables.Chain{
			baseChain(nodePortPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority),
			baseChain(nodePortOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority),
			baseChain(nodePortPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority),
		} {
			tx.Add(c)
			tx.Flush(c)
		}
		if cfg.v4() {
			for _, r := range nodePortRules(cfg) {
				tx.Add(r)
			}
		}
		if cfg.v6() {
			for _, r := range nodePortRulesV6(cfg) {
				tx.Add(r)
			}
		}
	})
}

// nodePortRulesV6 are nodePortRules for IPv6 (a dual-stack node): the
// same DNAT of the node's IPv6 NodePort addresses, to NodePortVirtualIPv6,
// and the same masquerades with the IPv6 addresses.
func nodePortRulesV6(cfg NodePortConfig) []*knftables.Rule {
	return nodePortRulesOf(nodePortFamily{ip: "ip6", addrSet: NodePortAddrSetV6, vip: types.NodePortVirtualIPv6,
		hairpin: types.HairpinIPv6, podCIDR: cfg.PodCIDRv6.Masked(), gatewayIP: cfg.GatewayIPv6, label: "IPv6 "}, cfg.GatewayName)
}

func nodePortRules(cfg NodePortConfig) []*knftables.Rule {
	return nodePortRulesOf(nodePortFamily{ip: "ip", addrSet: NodePortAddrSet, vip: types.NodePortVirtualIP,
		hairpin: types.HairpinIP, podCIDR: cfg.PodCIDR.Masked(), gatewayIP: cfg.GatewayIP}, cfg.GatewayName)
}

// nodePortFamily is what the NodePort rules of one IP family name: nft's
// family keyword, the set of the node's NodePort addresses, the bridge's
// virtual addresses, the local pod CIDR and the gateway's address; label
// goes into the comments ("" for IPv4, "IPv6 ").
type nodePortFamily struct {
	ip, addrSet, label string
	vip, hairpin       any
	podCIDR, gatewayIP any
}

func nodePortRulesOf(f nodePortFamily, gateway string) []*knftables.Rule {
	gw := quote(gateway)
	dnat := knftables.Concat(f.ip, "daddr", "@"+f.addrSet, "meta l4proto . th dport", "@"+NodePortSet, "dnat", f.ip, "to", f.vip)
	rule := func(chain, rule, comment string) *knftables.Rule {
		return &knftables.Rule{Chain: chain, Rule: rule, Comment: knftables.PtrTo(comment)}
	}
	return []*knftables.Rule{
		rule(nodePortPrerouting, dnat, "Antrea: DNAT "+f.label+"NodePorts to the bridge"),
		rule(nodePortOutput, dnat, "Antrea: DNAT the node's "+f.label+"NodePort traffic to the bridge"),
		rule(nodePortPostrouting, knftables.Concat("oifname", gw, f.ip, "daddr", f.vip, f.ip, "saddr", f.podCIDR, "masquerade"),
			"Antrea: pods' "+f.label+"NodePort traffic from the gateway IP"),
		rule(nodePortPostrouting, knftables.Concat("oifname", gw, f.ip, "saddr !=", f.gatewayIP, "fib saddr type local", "masquerade"),
			"Antrea: the node's "+f.label+"traffic to the bridge from the gateway IP"),
		rule(nodePortPostrouting, knftables.Concat("oifname !=", gw, f.ip, "saddr", f.hairpin, "masquerade"),
			"Antrea: masquerade the bridge's "+f.label+"hairpin address"),
	}
}

// Apply writes one change of the sets in one transaction.
func (n *NodePorts) Apply(ctx context.Context, c NodePortChange) error {
	if c.Empty() {
		return nil
	}
	elem := func(p types.NodePort) *knftables.Element {
		return &knftables.Element{Set: NodePortSet, Key: []string{types.ProtocolName(p.Protocol), fmt.Sprint(p.Port)}}
	}
	return n.table.run(ctx, func(tx *knftables.Transaction) {
		if c.SetAddrs {
			tx.Flush(&knftables.Set{Name: NodePortAddrSet})
			if c.V6 {
				tx.Flush(&knftables.Set{Name: NodePortAddrSetV6})
			}
			for _, a := range c.Addrs {
				set := NodePortAddrSet
				if a.Is6() {
					if !c.V6 {
						continue
					}
					set = NodePortAddrSetV6
				}
				tx.Add(&knftables.Element{Set: set, Key: []string{a.String()}})
			}
		}
		if c.FlushPorts {
			tx.Flush(&knftables.Set{Name: NodePortSet})
		}
		for _, p := range c.Del {
			tx.Delete(elem(p))
		}
		for _, p := range c.Add {
			tx.Add(elem(p))
		}
	})
}

// Remove deletes the feature's chains and sets, and the table of earlier
// agents; what is not there is no error.
func (n *NodePorts) Remove(ctx context.Context) error {
	if err := n.table.deleteOtherTable(ctx, knftables.IPv4Family, LegacyNodePortTable); err != nil {
		return err
	}
	return n.table.run(ctx, func(tx *knftables.Transaction) {
		for _, c := range []string{nodePortPrerouting, nodePortOutput, nodePortPostrouting} {
			ch := &knftables.Chain{Name: c}
			tx.Add(ch)
			tx.Flush(ch)
			tx.Delete(ch)
		}
		for _, s := range []*knftables.Set{
			{Name: NodePortAddrSet, Type: "ipv4_addr"},
			{Name: NodePortAddrSetV6, Type: "ipv6_addr"},
			{Name: NodePortSet, Type: "inet_proto . inet_service"},
		} {
			tx.Add(s)
			tx.Delete(s)
		}
	})
}
