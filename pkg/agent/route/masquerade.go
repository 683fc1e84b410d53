package route

import (
	"fmt"
	"net"
	"os/exec"
	"strings"

	"k8s.io/klog/v2"
)

// masqueradeChain holds the agent's SNAT rule, jumped to from nat POSTROUTING.
const masqueradeChain = "ANTREA-POSTROUTING"

// EnsureMasquerade makes the node SNAT traffic from its pods that leaves it
// through any interface but the gateway (to other nodes' underlay IPs, or off
// the cluster) to the node's own address, so replies come back to this node
// instead of being dropped as unexpected pod sources elsewhere. Pod-to-pod
// traffic never reaches the host stack and keeps its source. Idempotent.
func EnsureMasquerade(podCIDR *net.IPNet, gateway string) error {
	rule := []string{"-s", podCIDR.String(), "!", "-o", gateway, "-m", "comment", "--comment", "Antrea: masquerade pod traffic leaving the node", "-j", "MASQUERADE"}
	steps := [][]string{
		{"-t", "nat", "-N", masqueradeChain},
		{"-t", "nat", "-C", "POSTROUTING", "-j", masqueradeChain},
		{"-t", "nat", "-C", masqueradeChain},
	}
	// Create the chain unless it exists.
	if out, err := iptables(steps[0]...); err != nil && !strings.Contains(out, "exists") {
		return fmt.Errorf("iptables -N %s: %w: %s", masqueradeChain, err, out)
	}
	if _, err := iptables(steps[1]...); err != nil {
		if out, err := iptables("-t", "nat", "-A", "POSTROUTING", "-j", masqueradeChain); err != nil {
			return fmt.Errorf("iptables jump to %s: %w: %s", masqueradeChain, err, out)
		}
	}
	if _, err := iptables(append(steps[2], rule...)...); err != nil {
		if out, err := iptables(append([]string{"-t", "nat", "-A", masqueradeChain}, rule...)...); err != nil {
			return fmt.Errorf("iptables masquerade rule for %s: %w: %s", podCIDR, err, out)
		}
		klog.InfoS("Installed masquerade rule for pod traffic leaving the node", "podCIDR", podCIDR, "gateway", gateway)
	}
	return nil
}

func iptables(args ...string) (string, error) {
	out, err := exec.Command("iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	return string(out), err
}
