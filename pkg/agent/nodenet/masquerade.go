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
// chain of earlier agents.
func (t *Table) Masquerade(ctx context.Context, podCIDR netip.Prefix, gateway string) error {
	fam, nfproto := "ip", "ipv4"
	if podCIDR.Addr().Is6() {
		fam, nfproto = "ip6", "ipv6"
	}
	err := t.run(ctx, func(tx *knftables.Transaction) {
		c := baseChain(masqueradePostrouting, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority)
		tx.Add(c)
		tx.Flush(c)
		tx.Add(&knftables.Rule{Chain: masqueradePostrouting,
			Rule:    knftables.Concat("meta nfproto", nfproto, fam, "saddr", podCIDR.Masked(), "oifname !=", quote(gateway), "masquerade"),
			Comment: knftables.PtrTo("Antrea: masquerade pod traffic leaving the node")})
	})
	if err != nil {
		return fmt.Errorf("masquerade of pod CIDR %s: %w", podCIDR, err)
	}
	removeLegacyMasquerade()
	return nil
}

// EnsureMasquerade opens the node's table (in the caller's network
// namespace) and writes the masquerade of podCIDR.
func EnsureMasquerade(ctx context.Context, podCIDR netip.Prefix, gateway string) error {
	t, err := New()
	if err != nil {
		return err
	}
	return t.Masquerade(ctx, podCIDR, gateway)
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
