package nodenet

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
)

// inNewNetNS runs f in a network namespace of its own (root and the nft
// binary only), removed afterwards; an error of f fails the test.
func inNewNetNS(t *testing.T, f func() error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace and nftables")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs the nft binary")
	}
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Close(); _ = testutils.UnmountNS(netns) })
	if err := netns.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

func TestMasqueradeIsOneRuleInTheTableAndReplacesTheIptablesChain(t *testing.T) {
	_, iptErr := exec.LookPath("iptables")
	inNewNetNS(t, func() error {
		if iptErr == nil {
			// What an earlier agent left.
			for _, args := range [][]string{{"-N", legacyMasqueradeChain}, {"-A", "POSTROUTING", "-j", legacyMasqueradeChain},
				{"-A", legacyMasqueradeChain, "-s", "10.10.1.0/24", "!", "-o", "antrea-gw0", "-j", "MASQUERADE"}} {
				if out, err := exec.Command("iptables", append([]string{"-t", "nat"}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("iptables %v: %v: %s", args, err, out)
				}
			}
		}
		for i := 0; i < 2; i++ {
			if err := EnsureMasquerade(context.Background(), netip.MustParsePrefix("10.10.1.0/24"), "antrea-gw0"); err != nil {
				return err
			}
		}
		out, err := exec.Command("nft", "list", "chain", "inet", TableName, masqueradePostrouting).CombinedOutput()
		if err != nil {
			t.Fatalf("nft list chain: %v: %s", err, out)
		}
		if n := strings.Count(string(out), " masquerade comment"); n != 1 {
			t.Errorf("want one masquerade rule after two runs:\n%s", out)
		}
		if !strings.Contains(string(out), `ip saddr 10.10.1.0/24 oifname != "antrea-gw0" masquerade`) {
			t.Errorf("the rule does not masquerade the pod CIDR leaving by another interface than the gateway:\n%s", out)
		}
		if iptErr == nil {
			out, _ := exec.Command("iptables", "-t", "nat", "-S").CombinedOutput()
			if strings.Contains(string(out), legacyMasqueradeChain) {
				t.Errorf("the iptables chain of an earlier agent is still there:\n%s", out)
			}
		}
		return nil
	})
}

// TestMasqueradeRoutedSparesTheClusterPodCIDRs: in noEncap the rule spares
// the set of pod CIDRs, which SetClusterPodCIDRs makes exactly what it is
// given; NoMasquerade leaves no rule.
func TestMasqueradeRoutedSparesTheClusterPodCIDRs(t *testing.T) {
	inNewNetNS(t, func() error {
		ctx := context.Background()
		tb, err := New()
		if err != nil {
			return err
		}
		if err := tb.MasqueradeRouted(ctx, []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24")}, "antrea-gw0"); err != nil {
			return err
		}
		list := func(what ...string) string {
			out, err := exec.Command("nft", append([]string{"list"}, what...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("nft list %v: %v: %s", what, err, out)
			}
			return string(out)
		}
		if out := list("chain", "inet", TableName, masqueradePostrouting); !strings.Contains(out,
			`ip saddr 10.10.1.0/24 ip daddr != @cluster-pod-cidrs-v4 oifname != "antrea-gw0" masquerade`) {
			t.Errorf("the rule does not spare the cluster's pod CIDRs:\n%s", out)
		}
		for _, cidrs := range [][]string{{"10.10.1.0/24", "10.10.2.0/24", "10.10.3.0/24"}, {"10.10.1.0/24", "10.10.3.0/24"}} {
			var ps []netip.Prefix
			for _, c := range cidrs {
				ps = append(ps, netip.MustParsePrefix(c))
			}
			if err := tb.SetClusterPodCIDRs(ctx, ps); err != nil {
				return err
			}
			out := list("set", "inet", TableName, "cluster-pod-cidrs-v4")
			for _, c := range []string{"10.10.1.0/24", "10.10.2.0/24", "10.10.3.0/24"} {
				if want := slices.Contains(cidrs, c); strings.Contains(out, c) != want {
					t.Errorf("after setting %v, %s in the set is %t:\n%s", cidrs, c, !want, out)
				}
			}
		}
		if err := tb.NoMasquerade(ctx); err != nil {
			return err
		}
		if out := list("chain", "inet", TableName, masqueradePostrouting); strings.Contains(out, "masquerade comment") {
			t.Errorf("noSNAT left a masquerade rule:\n%s", out)
		}
		return nil
	})
}

// TestADualStackNodeMasqueradesEachFamilyOfItsPodsInOneChain: a rule per
// pod CIDR, in the real nft of a netns of its own, written twice (an agent
// restart) without duplicates.
func TestADualStackNodeMasqueradesEachFamilyOfItsPodsInOneChain(t *testing.T) {
	inNewNetNS(t, func() error {
		table, err := New()
		if err != nil {
			return err
		}
		cidrs := []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
		for i := 0; i < 2; i++ {
			if err := table.Masquerade(context.Background(), cidrs, "antrea-gw0"); err != nil {
				return err
			}
		}
		out, err := exec.Command("nft", "list", "chain", "inet", TableName, masqueradePostrouting).CombinedOutput()
		if err != nil {
			t.Fatalf("nft list chain: %v: %s", err, out)
		}
		for _, want := range []string{`ip saddr 10.10.1.0/24 oifname != "antrea-gw0" masquerade`, `ip6 saddr fd00:10:244:1::/64 oifname != "antrea-gw0" masquerade`} {
			if strings.Count(string(out), want) != 1 {
				t.Errorf("want one rule %q:\n%s", want, out)
			}
		}
		return nil
	})
}

// TestARoutedDualStackNodeSparesTheClusterPodCIDRsOfEachFamily: in noEncap
// and hybrid on a dual-stack node each family's rule spares its own set,
// in the real nft; SetClusterPodCIDRs fills both sets from one list (a
// peer gone from it leaves both), and noSNAT (NoMasquerade) leaves no
// rule of either family.
func TestARoutedDualStackNodeSparesTheClusterPodCIDRsOfEachFamily(t *testing.T) {
	inNewNetNS(t, func() error {
		ctx := context.Background()
		tb, err := New()
		if err != nil {
			return err
		}
		local := []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
		for i := 0; i < 2; i++ { // an agent restart writes it again
			if err := tb.MasqueradeRouted(ctx, local, "antrea-gw0"); err != nil {
				return err
			}
		}
		list := func(what ...string) string {
			out, err := exec.Command("nft", append([]string{"list"}, what...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("nft list %v: %v: %s", what, err, out)
			}
			return string(out)
		}
		chain := list("chain", "inet", TableName, masqueradePostrouting)
		for _, want := range []string{
			`ip saddr 10.10.1.0/24 ip daddr != @cluster-pod-cidrs-v4 oifname != "antrea-gw0" masquerade`,
			`ip6 saddr fd00:10:244:1::/64 ip6 daddr != @cluster-pod-cidrs-v6 oifname != "antrea-gw0" masquerade`,
		} {
			if strings.Count(chain, want) != 1 {
				t.Errorf("want the rule %q once:\n%s", want, chain)
			}
		}
		all := []string{"10.10.1.0/24", "10.10.2.0/24", "fd00:10:244:1::/64", "fd00:10:244:2::/64", "fd00:10:244:3::/64"}
		for _, cidrs := range [][]string{all, {"10.10.1.0/24", "fd00:10:244:1::/64", "fd00:10:244:3::/64"}} {
			var ps []netip.Prefix
			for _, c := range cidrs {
				ps = append(ps, netip.MustParsePrefix(c))
			}
			if err := tb.SetClusterPodCIDRs(ctx, ps); err != nil {
				return err
			}
			sets := list("set", "inet", TableName, "cluster-pod-cidrs-v4") + list("set", "inet", TableName, "cluster-pod-cidrs-v6")
			for _, c := range all {
				if want := slices.Contains(cidrs, c); strings.Contains(sets, c) != want {
					t.Errorf("after setting %v, %s in the sets is %t:\n%s", cidrs, c, !want, sets)
				}
			}
		}
		if err := tb.NoMasquerade(ctx); err != nil {
			return err
		}
		if out := list("chain", "inet", TableName, masqueradePostrouting); strings.Contains(out, "masquerade") && strings.Contains(out, "saddr") {
			t.Errorf("noSNAT left a masquerade rule:\n%s", out)
		}
		return nil
	})
}
