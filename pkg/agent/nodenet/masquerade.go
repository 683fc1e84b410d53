package nodenet

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"

	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"
)

// masqueradePostrouting (nat, srcnat) is the masquerade feature's chain.
const masqueradePostrouting = "masquerade-postrouting"

// legacyMasqueradeChain is the iptables chain (nat table) earlier agents
// kept the same rule in, jumped to from POSTROUTING.
const legacyMasqueradeChain = "ANTREA-POSTROUTING"

// Masquerade makes the node SNAT traffic from its pods that leaves it
// through any interface but the gateway (to other nodes' underlay IPs, or
// off the cluster) to the node's own address, so replies come back to this
// node instead of being dropped as unexpected pod sources elsewhere.
// Pod-to-pod traffic never reaches the node's stack and keeps its source.
// It rewrites the feature's chain (idempotent) and removes the iptables
// chain of earlier agents. Each of the node's pod CIDRs gets its rule, in
// one transaction: a dual-stack node's pods' IPv6 traffic leaving the node
// is masqueraded to the node's IPv6 address.
func (t *Table) Masquerade(ctx context.Context, podCIDRs []netip.Prefix, gateway string) error {
	return t.masquerade(ctx, podCIDRs, gateway, false)
}

// MasqueradeRouted is Masquerade for a node whose pod traffic to other
// nodes' pods is routed by the underlay (trafficEncapMode noEncap): that
// traffic leaves through the uplink too, and must keep its pod source
// (NetworkPolicy on the receiving node matches it), so the rule spares the
// destinations in the set ClusterPodCIDRSet (per family), which
// SetClusterPodCIDRs fills. Each of the node's pod CIDRs gets its rule
// and its family's set: a dual-stack node's pods keep their IPv6 source to
// other nodes' IPv6 pods too.
func (t *Table) MasqueradeRouted(ctx context.Context, podCIDRs []netip.Prefix, gateway string) error {
	return t.masquerade(ctx, podCIDRs, gateway, true)
}

// NoMasquerade empties the masquerade chain (noSNAT): pod traffic leaves
// with its pod address, which the underlay routes.
func (t *Table) NoMasquerade(ctx context.Context) error {
	err := t.run(ctx, func(tx *knftables.Transaction) {
		c := baseChain(masqueradePostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority)
		tx.Add(c)
		tx.Flush(c)
	})
	if err != nil {
		return fmt.Errorf("no masquerade: %w", err)
	}
	removeLegacyMasquerade()
	return nil
}

// ClusterPodCIDRSet is the set of every node's pod CIDR of one family
// (suffix "-v4" or "-v6") that MasqueradeRouted's rule spares.
const ClusterPodCIDRSet = "cluster-pod-cidrs"

func clusterPodCIDRSet(v6 bool) string {
	if v6 {
		return ClusterPodCIDRSet + "-v6"
	}
	return ClusterPodCIDRSet + "-v4"
}

// clusterPodCIDRSetObj declares the set of every node's pod CIDR of one
// family (the masquerade and Egress rules of a routed node spare them).
func clusterPodCIDRSetObj(v6 bool) *knftables.Set {
	typ := "ipv4_addr"
	if v6 {
		typ = "ipv6_addr"
	}
	return &knftables.Set{Name: clusterPodCIDRSet(v6), Type: typ, Flags: []knftables.SetFlag{knftables.IntervalFlag},
		Comment: knftables.PtrTo("every node's pod CIDR: pod traffic to them keeps its source")}
}

func (t *Table) masquerade(ctx context.Context, podCIDRs []netip.Prefix, gateway string, routed bool) error {
	var rules []*knftables.Rule
	var sets []*knftables.Set
	for _, podCIDR := range podCIDRs {
		fam, nfproto := "ip", "ipv4"
		if podCIDR.Addr().Is6() {
			fam, nfproto = "ip6", "ipv6"
		}
		rule := []any{"meta nfproto", nfproto, fam, "saddr", podCIDR.Masked()}
		set := clusterPodCIDRSet(podCIDR.Addr().Is6())
		if routed {
			rule = append(rule, fam, "daddr !=", "@"+set)
			sets = append(sets, clusterPodCIDRSetObj(podCIDR.Addr().Is6()))
		}
		rule = append(rule, "oifname !=", quote(gateway), "masquerade")
		rules = append(rules, &knftables.Rule{Chain: masqueradePostrouting,
			Rule:    knftables.Concat(rule...),
			Comment: knftables.PtrTo("Antrea: masquerade pod traffic leaving the node")})
	}
	err := t.run(ctx, func(tx *knftables.Transaction) {
		c := baseChain(masqueradePostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority)
		tx.Add(c)
		tx.Flush(c)
		for _, s := range sets {
			tx.Add(s)
		}
		for _, r := range rules {
			tx.Add(r)
		}
	})
	if err != nil {
		if len(podCIDRs) == 1 {
			return fmt.Errorf("masquerade of pod CIDR %s: %w", podCIDRs[0], err)
		}
		return fmt.Errorf("masquerade of pod CIDRs %v: %w", podCIDRs, err)
	}
	removeLegacyMasquerade()
	return nil
}

// SetClusterPodCIDRs makes the sets of MasqueradeRouted's rule hold exactly
// cidrs (this node's and its peers'), of each family whose set exists.
func (t *Table) SetClusterPodCIDRs(ctx context.Context, cidrs []netip.Prefix) error {
	err := t.run(ctx, func(tx *knftables.Transaction) {
		for _, v6 := range []bool{false, true} {
			var elems []*knftables.Element
			for _, c := range cidrs {
				if c.Addr().Is6() == v6 {
					elems = append(elems, &knftables.Element{Set: clusterPodCIDRSet(v6), Key: []string{c.Masked().String()}})
				}
			}
			if len(elems) == 0 {
				continue
			}
			tx.Flush(&knftables.Set{Name: clusterPodCIDRSet(v6)})
			for _, e := range elems {
				tx.Add(e)
			}
		}
	})
	if err != nil {
		return fmt.Errorf("cluster pod CIDRs %v: %w", cidrs, err)
	}
	return nil
}

// EnsureMasquerade opens the node's table (in the caller's network
// namespace) and writes the masquerade of podCIDR.
func EnsureMasquerade(ctx context.Context, podCIDR netip.Prefix, gateway string) error {
	t, err := New()
	if err != nil {
		return err
	}
	return t.Masquerade(ctx, []netip.Prefix{podCIDR}, gateway)
}

// removeLegacyMasquerade deletes the iptables chain an earlier agent kept
// the masquerade in, and its jump; what is not there (or no iptables) is
// no error. Its rule would do no harm beside ours, but the node's netfilter
// has one owner and one place.
func removeLegacyMasquerade() {
	if _, err := exec.LookPath("iptables"); err != nil {
		return
	}
	ipt := func(args ...string) (string, error) {
		out, err := exec.Command("iptables", append([]string{"-w", "5", "-t", "nat"}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if _, err := ipt("-S", legacyMasqueradeChain); err != nil {
		return // no such chain
	}
	for {
		if _, err := ipt("-D", "POSTROUTING", "-j", legacyMasqueradeChain); err != nil {
			break
		}
	}
	for _, args := range [][]string{{"-F", legacyMasqueradeChain}, {"-X", legacyMasqueradeChain}} {
		if out, err := ipt(args...); err != nil {
			klog.ErrorS(err, "Cannot remove the iptables masquerade chain of an earlier agent", "chain", legacyMasqueradeChain, "output", out)
			return
		}
	}
	klog.InfoS("Removed the iptables masquerade chain of an earlier agent", "chain", legacyMasqueradeChain)
}
