package nodenet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"

	"antrea.io/antrea/pkg/agent/types"
)

// The nodepolicy feature's chains and sets (NodeNetworkPolicy: Antrea
// ClusterNetworkPolicies applied to Nodes, driven by
// pkg/agent/controller/networkpolicy). docs/antrea-node-network-policy.md
// says what users see.
const (
	// nodePolicyInput and nodePolicyOutput (filter, at filter priority) see
	// the packets delivered to the node's own addresses and those the node
	// sends: first the always-allowed traffic, then the rules.
	nodePolicyInput  = "nodepolicy-input"
	nodePolicyOutput = "nodepolicy-output"
	// nodePolicyIngress and nodePolicyEgress hold the rules of the tiers
	// before the baseline, in evaluation order; Pass returns from them.
	nodePolicyIngress = "nodepolicy-ingress"
	nodePolicyEgress  = "nodepolicy-egress"
	// nodePolicyIngressBaseline and nodePolicyEgressBaseline hold the
	// baseline tier's rules, evaluated when no earlier rule decided.
	nodePolicyIngressBaseline = "nodepolicy-ingress-baseline"
	nodePolicyEgressBaseline  = "nodepolicy-egress-baseline"
	// NodePolicySetPrefix starts the name of each rule's peer set:
	// "nodepolicy-<in|out>-<n>-<v4|v6>", n the rule's index.
	NodePolicySetPrefix = "nodepolicy-"
	// nodePolicyAPIServerSet holds, per family, the Kubernetes API server's
	// addresses (always allowed).
	nodePolicyAPIServerSet = "nodepolicy-apiservers"
)

// NodePolicyAction is what a rule does with the packets it matches.
type NodePolicyAction int

// The actions of Antrea-native rules (crd.antrea.io RuleAction).
const (
	NodePolicyAllow NodePolicyAction = iota
	NodePolicyDrop
	NodePolicyReject
	// NodePolicyPass skips the remaining rules of the tiers before the
	// baseline; the baseline tier's rules still apply.
	NodePolicyPass
)

func (a NodePolicyAction) String() string {
	return [...]string{"Allow", "Drop", "Reject", "Pass"}[a]
}

// NodePolicyService is one protocol/port match of a rule.
type NodePolicyService struct {
	// Protocol is an IP protocol number (types.ProtocolTCP, ProtocolUDP,
	// ProtocolSCTP, or 1 for ICMP: ICMPv6 in an IPv6 rule); 0 is any.
	Protocol uint8
	// Port and EndPort (a range when EndPort > Port) match the
	// destination port; SrcPort and SrcEndPort the source port; 0: any.
	Port, EndPort       uint16
	SrcPort, SrcEndPort uint16
	// ICMPType and ICMPCode, when set, match ICMP messages.
	ICMPType, ICMPCode *uint8
}

// protocolICMP is ICMP's protocol number (ICMPv6 is 58).
const protocolICMP = 1

// NodePolicyRule is one rule of a Node policy as it applies to this node.
type NodePolicyRule struct {
	// Name names the rule in its comment and log prefix
	// ("<policy> <rule name>").
	Name string
	// Egress: the rule matches the node's outgoing traffic by destination;
	// otherwise its incoming traffic by source.
	Egress bool
	// Baseline: the rule is in the baseline tier, after every other.
	Baseline bool
	Action   NodePolicyAction
	// Peers are the addresses the rule matches (sources for ingress,
	// destinations for egress); a rule without peers matches nothing, a
	// /0 prefix matches every address of its family.
	Peers []netip.Prefix
	// Services are the protocols and ports it matches; none: every packet.
	Services []NodePolicyService
	// Log writes each new connection the rule matches to the kernel log.
	Log bool
}

// NodePolicyAlways is the traffic no Node policy rule ever sees, so that a
// deny-all Node policy never cuts the node off (the list is in
// docs/antrea-node-network-policy.md).
type NodePolicyAlways struct {
	// APIServers are the Kubernetes API server's addresses: the node's
	// traffic to them and theirs to the node (kubelet, the agent and the
	// aggregated controlplane API).
	APIServers []netip.Addr
	// TunnelProtocol and TunnelPort are the encapsulation between nodes
	// (types.ProtocolUDP with 4789 or 6081; 47 for GRE with port 0); none
	// when TunnelProtocol is 0.
	TunnelProtocol uint8
	TunnelPort     uint16
	// Gateway and PodCIDRs: the node's own traffic to its local pods
	// through the gateway (kubelet's probes).
	Gateway  string
	PodCIDRs []netip.Prefix
}

// NodePolicy is the nodepolicy feature of the node's table: it filters the
// traffic to and from the node's own addresses (netfilter's input and
// output hooks; traffic the node forwards, such as pod traffic, is not
// seen). Each write rewrites the feature's chains and sets from the whole
// desired state in one transaction, so the kernel switches from one rule
// set to the next atomically.
type NodePolicy struct {
	table *Table
}

// NodePolicy returns the table's nodepolicy feature.
func (t *Table) NodePolicy() *NodePolicy { return &NodePolicy{table: t} }

// Set writes the always-allowed traffic and rules, which are in evaluation
// order (tier priority, policy priority, rule index: the caller sorts),
// ingress and egress rules mixed.
func (n *NodePolicy) Set(ctx context.Context, always NodePolicyAlways, rules []NodePolicyRule) error {
	old, err := n.existingSets(ctx)
	if err != nil {
		return err
	}
	err = n.table.run(ctx, func(tx *knftables.Transaction) { nodePolicyTx(tx, always, rules, old) })
	if err != nil {
		return fmt.Errorf("node policy of %d rules: %w", len(rules), err)
	}
	return nil
}

// Remove deletes the feature's chains and sets (no Node policy at all).
func (n *NodePolicy) Remove(ctx context.Context) error {
	old, err := n.existingSets(ctx)
	if err != nil {
		return err
	}
	return n.table.run(ctx, func(tx *knftables.Transaction) {
		for _, c := range nodePolicyChains() {
			tx.Add(c)
			tx.Delete(&knftables.Chain{Name: c.Name})
		}
		for _, s := range old {
			tx.Delete(&knftables.Set{Name: s})
		}
	})
}

// existingSets lists the feature's sets in the kernel: those a write no
// longer uses are deleted by it.
func (n *NodePolicy) existingSets(ctx context.Context) ([]string, error) {
	names, err := n.table.nft.List(ctx, "sets")
	if err != nil && !knftables.IsNotFound(err) {
		return nil, fmt.Errorf("list the sets of table %s %s: %w", TableFamily, TableName, err)
	}
	return slices.DeleteFunc(names, func(s string) bool { return !strings.HasPrefix(s, NodePolicySetPrefix) }), nil
}

func nodePolicyChains() []*knftables.Chain {
	return []*knftables.Chain{
		baseChain(nodePolicyInput, knftables.FilterType, knftables.InputHook, knftables.FilterPriority),
		baseChain(nodePolicyOutput, knftables.FilterType, knftables.OutputHook, knftables.FilterPriority),
		{Name: nodePolicyIngress, Comment: knftables.PtrTo("Antrea: Node policy ingress rules before the baseline tier")},
		{Name: nodePolicyEgress, Comment: knftables.PtrTo("Antrea: Node policy egress rules before the baseline tier")},
		{Name: nodePolicyIngressBaseline, Comment: knftables.PtrTo("Antrea: Node policy ingress rules of the baseline tier")},
		{Name: nodePolicyEgressBaseline, Comment: knftables.PtrTo("Antrea: Node policy egress rules of the baseline tier")},
	}
}

// nodePolicyTx declares the chains, empties them, replaces the sets (old
// lists those in the kernel) and writes the rules.
func nodePolicyTx(tx *knftables.Transaction, always NodePolicyAlways, rules []NodePolicyRule, old []string) {
	for _, c := range nodePolicyChains() {
		tx.Add(c)
		tx.Flush(c)
	}
	wanted := map[string]bool{}
	addSet := func(name string, v6 bool, comment string, prefixes []netip.Prefix) {
		typ := "ipv4_addr"
		if v6 {
			typ = "ipv6_addr"
		}
		s := &knftables.Set{Name: name, Type: typ, Flags: []knftables.SetFlag{knftables.IntervalFlag},
			Comment: knftables.PtrTo(truncate(comment, knftables.CommentLengthMax))}
		tx.Add(s)
		tx.Flush(s)
		for _, p := range prefixes {
			tx.Add(&knftables.Element{Set: name, Key: []string{p.String()}})
		}
		wanted[name] = true
	}
	// Sets no rule uses any more go once the flush above removed the rules
	// that referenced them.
	defer func() {
		for _, s := range old {
			if !wanted[s] {
				tx.Delete(&knftables.Set{Name: s})
			}
		}
	}()

	for _, r := range alwaysRules(always, addSet) {
		tx.Add(r)
	}
	for _, c := range []struct{ base, first, baseline string }{
		{nodePolicyInput, nodePolicyIngress, nodePolicyIngressBaseline},
		{nodePolicyOutput, nodePolicyEgress, nodePolicyEgressBaseline},
	} {
		tx.Add(&knftables.Rule{Chain: c.base, Rule: knftables.Concat("jump", c.first)})
		tx.Add(&knftables.Rule{Chain: c.base, Rule: knftables.Concat("jump", c.baseline)})
	}
	for i, r := range rules {
		dir := "in"
		if r.Egress {
			dir = "out"
		}
		for _, v6 := range []bool{false, true} {
			var peers []netip.Prefix
			for _, p := range r.Peers {
				if p.Addr().Is6() == v6 {
					peers = append(peers, p.Masked())
				}
			}
			if len(peers) == 0 {
				continue // no peer of this family: the rule matches none of its packets
			}
			fam, nfproto, suffix := "ip", "ipv4", "v4"
			if v6 {
				fam, nfproto, suffix = "ip6", "ipv6", "v6"
			}
			match := []any{"meta nfproto", nfproto}
			if peers = disjoint(peers); peers[0].Bits() != 0 {
				set := fmt.Sprintf("%s%s-%d-%s", NodePolicySetPrefix, dir, i, suffix)
				addSet(set, v6, r.Name, peers)
				addr := "saddr"
				if r.Egress {
					addr = "daddr"
				}
				match = append(match, fam, addr, "@"+set)
			}
			for _, svc := range servicesOrAny(r.Services) {
				parts := append(slices.Clone(match), serviceMatch(svc, v6)...)
				comment := knftables.PtrTo(truncate(r.Name, knftables.CommentLengthMax))
				if r.Log {
					// Its own rule, without a verdict: the packet goes on
					// to the rule that decides.
					tx.Add(&knftables.Rule{Chain: ruleChain(r), Comment: comment,
						Rule: knftables.Concat(append(slices.Clone(parts), "log prefix", quote(logPrefix(r)), "level info")...)})
				}
				tx.Add(&knftables.Rule{Chain: ruleChain(r), Comment: comment,
					Rule: knftables.Concat(append(parts, "counter", verdict(r.Action, svc))...)})
			}
		}
	}
}

// alwaysRules are the first rules of the base chains: what no Node policy
// rule sees (NodePolicyAlways).
func alwaysRules(a NodePolicyAlways, addSet func(name string, v6 bool, comment string, prefixes []netip.Prefix)) []*knftables.Rule {
	rule := func(chain, comment string, parts ...any) *knftables.Rule {
		return &knftables.Rule{Chain: chain, Rule: knftables.Concat(parts...), Comment: knftables.PtrTo(comment)}
	}
	var out []*knftables.Rule
	for _, c := range []struct{ chain, iface, addr string }{{nodePolicyInput, "iifname", "saddr"}, {nodePolicyOutput, "oifname", "daddr"}} {
		out = append(out,
			rule(c.chain, "Antrea: always allowed, connections already allowed and their replies", "ct state established,related accept"),
			rule(c.chain, "Antrea: always allowed, the node's own loopback traffic", c.iface, quote("lo"), "accept"),
			rule(c.chain, "Antrea: always allowed, IPv6 neighbour discovery",
				"meta l4proto ipv6-icmp icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert } accept"))
		for _, v6 := range []bool{false, true} {
			var addrs []netip.Prefix
			for _, ip := range a.APIServers {
				if ip.Is6() == v6 {
					addrs = append(addrs, netip.PrefixFrom(ip, ip.BitLen()))
				}
			}
			if len(addrs) == 0 {
				continue
			}
			fam, suffix := "ip", "-v4"
			if v6 {
				fam, suffix = "ip6", "-v6"
			}
			addSet(nodePolicyAPIServerSet+suffix, v6, "the Kubernetes API server's addresses", disjoint(addrs))
			out = append(out, rule(c.chain, "Antrea: always allowed, the Kubernetes API server", fam, c.addr, "@"+nodePolicyAPIServerSet+suffix, "accept"))
		}
		switch {
		case a.TunnelProtocol == 0:
		case a.TunnelPort == 0:
			out = append(out, rule(c.chain, "Antrea: always allowed, the tunnel between nodes", "meta l4proto", int(a.TunnelProtocol), "accept"))
		default:
			out = append(out, rule(c.chain, "Antrea: always allowed, the tunnel between nodes",
				"meta l4proto", types.ProtocolName(a.TunnelProtocol), "th dport", a.TunnelPort, "accept"))
		}
	}
	if a.Gateway != "" {
		for _, p := range a.PodCIDRs {
			fam := "ip"
			if p.Addr().Is6() {
				fam = "ip6"
			}
			out = append(out, rule(nodePolicyOutput, "Antrea: always allowed, the node to its own pods (kubelet's probes)",
				"oifname", quote(a.Gateway), fam, "daddr", p.Masked(), "accept"))
		}
	}
	return out
}

func ruleChain(r NodePolicyRule) string {
	switch {
	case r.Egress && r.Baseline:
		return nodePolicyEgressBaseline
	case r.Egress:
		return nodePolicyEgress
	case r.Baseline:
		return nodePolicyIngressBaseline
	}
	return nodePolicyIngress
}

// servicesOrAny is the rule's services, or one that matches every packet.
func servicesOrAny(s []NodePolicyService) []NodePolicyService {
	if len(s) == 0 {
		return []NodePolicyService{{}}
	}
	return s
}

// serviceMatch is the nft match of one service in a rule of a family.
func serviceMatch(s NodePolicyService, v6 bool) []any {
	if s.Protocol == 0 {
		return nil
	}
	if s.Protocol == protocolICMP {
		proto, kw := "icmp", "icmp"
		if v6 {
			proto, kw = "ipv6-icmp", "icmpv6"
		}
		out := []any{"meta l4proto", proto}
		if s.ICMPType != nil {
			out = append(out, kw, "type", int(*s.ICMPType))
		}
		if s.ICMPCode != nil {
			out = append(out, kw, "code", int(*s.ICMPCode))
		}
		return out
	}
	out := []any{"meta l4proto", types.ProtocolName(s.Protocol)}
	if s.SrcPort != 0 {
		out = append(out, "th sport", portRange(s.SrcPort, s.SrcEndPort))
	}
	if s.Port != 0 {
		out = append(out, "th dport", portRange(s.Port, s.EndPort))
	}
	return out
}

func portRange(p, end uint16) string {
	if end > p {
		return fmt.Sprintf("%d-%d", p, end)
	}
	return fmt.Sprint(p)
}

// verdict is the nft verdict of an action. A Reject answers TCP with a
// reset and anything else with an ICMP "administratively prohibited".
func verdict(a NodePolicyAction, s NodePolicyService) string {
	switch a {
	case NodePolicyDrop:
		return "drop"
	case NodePolicyReject:
		if s.Protocol == types.ProtocolTCP {
			return "reject with tcp reset"
		}
		return "reject with icmpx admin-prohibited"
	case NodePolicyPass:
		return "return"
	}
	return "accept"
}

// logPrefix is a rule's kernel log prefix: "Antrea:<I|O>:<action>:<name> "
// (upstream's audit line starts with the direction and action too).
func logPrefix(r NodePolicyRule) string {
	dir := "I"
	if r.Egress {
		dir = "O"
	}
	name := strings.NewReplacer(`"`, "", `\`, "").Replace(r.Name)
	// The kernel takes at most 127 bytes of prefix.
	return truncate(fmt.Sprintf("Antrea:%s:%s:%s ", dir, r.Action, name), 127)
}

// disjoint sorts prefixes and drops those inside another (prefixes nest or
// are disjoint), so that an interval set takes them without conflict.
func disjoint(ps []netip.Prefix) []netip.Prefix {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	out := ps[:0]
	for _, p := range ps {
		if len(out) > 0 && out[len(out)-1].Contains(p.Addr()) {
			continue
		}
		out = append(out, p)
	}
	return out
}
