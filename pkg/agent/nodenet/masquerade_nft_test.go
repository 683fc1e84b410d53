package nodenet

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
)

func TestMasqueradeIsOneRuleInTheTableAndReplacesTheIptablesChain(t *testing.T) {
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
	_, iptErr := exec.LookPath("iptables")
	err = netns.Do(func(ns.NetNS) error {
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
	if err != nil {
		t.Fatal(err)
	}
}
