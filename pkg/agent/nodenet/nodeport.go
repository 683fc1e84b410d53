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
	// NodePortAddrSet holds the node addresses serving NodePorts.
	NodePortAddrSet = "nodeport-addrs"
	// NodePortSet holds the NodePorts (inet_proto . inet_service).
	NodePortSet = "nodeports"
)

// LegacyNodePortTable is the table (family ip) earlier agents kept the
// node path in.
const LegacyNodePortTable = "antrea-proxy"

// NodePortConfig is the fixed part of the node path.
type NodePortConfig struct {
	// GatewayName is the gateway (antrea-gw0), GatewayIP its address,
	// PodCIDR this node's pod CIDR.
	GatewayName string
	GatewayIP   netip.Addr
	PodCIDR     netip.Prefix
}

// NodePortChange is one write of the sets: the node addresses (rewritten
// when SetAddrs), the NodePorts (flushed first when FlushPorts; then Del
// removed and Add added).
type NodePortChange struct {
	SetAddrs   bool
	Addrs      []netip.Addr
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
// keeping the port; postrouting masquerades to the gateway address what
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
		for _, c := range []*knftables.Chain{
			baseChain(nodePortPrerouting, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority),
			baseChain(nodePortOutput, knftables.NATType, knftables.OutputHook, knftables.DNATPriority),
			baseChain(nodePortPostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority),
		} {
			tx.Add(c)
			tx.Flush(c)
		}
		for _, r := range nodePortRules(cfg) {
			tx.Add(r)
		}
	})
}

func nodePortRules(cfg NodePortConfig) []*knftables.Rule {
	vip, hairpin, gw := types.NodePortVirtualIP, types.HairpinIP, quote(cfg.GatewayName)
	dnat := knftables.Concat("ip daddr", "@"+NodePortAddrSet, "meta l4proto . th dport", "@"+NodePortSet, "dnat ip to", vip)
	rule := func(chain, rule, comment string) *knftables.Rule {
		return &knftables.Rule{Chain: chain, Rule: rule, Comment: knftables.PtrTo(comment)}
	}
	return []*knftables.Rule{
		rule(nodePortPrerouting, dnat, "Antrea: DNAT NodePorts to the bridge"),
		rule(nodePortOutput, dnat, "Antrea: DNAT the node's NodePort traffic to the bridge"),
		rule(nodePortPostrouting, knftables.Concat("oifname", gw, "ip daddr", vip, "ip saddr", cfg.PodCIDR.Masked(), "masquerade"),
			"Antrea: pods' NodePort traffic from the gateway IP"),
		rule(nodePortPostrouting, knftables.Concat("oifname", gw, "ip saddr !=", cfg.GatewayIP, "fib saddr type local", "masquerade"),
			"Antrea: the node's traffic to the bridge from the gateway IP"),
		rule(nodePortPostrouting, knftables.Concat("oifname !=", gw, "ip saddr", hairpin, "masquerade"),
			"Antrea: masquerade the bridge's hairpin address"),
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
			for _, a := range c.Addrs {
				tx.Add(&knftables.Element{Set: NodePortAddrSet, Key: []string{a.String()}})
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
			{Name: NodePortSet, Type: "inet_proto . inet_service"},
		} {
			tx.Add(s)
			tx.Delete(s)
		}
	})
}
