package datapath

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// TestHybridIPv6 judges hybrid with IPv6 (docs/ipv6.md, "noEncap and
// hybrid with IPv6") on `antrea-lab up --nodes 4 --subnets 2
// --traffic-mode hybrid --ip-family F`, F from ANTREA_E2E_IP_FAMILY (dual
// or ipv6), under ANTREA_DATAPATH_HYBRID=1: node-1's kernel routes
// node-2's IPv6 pod CIDR (same subnet) via node-2's IPv6 InternalIP on
// br-phy and has no tunnel flow for it, and tunnels node-3's (the other
// subnet); pods on every node reach each other over IPv6; a policy that
// lets only p1 into p2 and p3 lets p1's IPv6 connections in on both paths
// (so p1's pod source is kept, never masqueraded to its node's address)
// and keeps p4's out of p2.
func TestHybridIPv6(t *testing.T) {
	family := os.Getenv(envIPFamily)
	if os.Getenv(envHybrid) == "" || (family != lab.IPFamilyDual && family != lab.IPFamilyV6) {
		t.Skipf("a 4-node lab over two subnets with IPv6: set %s=1 and %s=dual or ipv6", envHybrid, envIPFamily)
	}
	opts := labtest.Options()
	opts.Nodes, opts.Subnets, opts.TrafficMode, opts.IPFamily = 4, 2, "hybrid", family
	e := upWith(t, opts, "hybrid over 2 subnets, "+family)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	node6, cidr6 := map[string]string{}, map[string]string{}
	for _, name := range e.Nodes {
		node, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range node.Status.Addresses {
			if ip := net.ParseIP(a.Address); a.Type == corev1.NodeInternalIP && ip != nil && ip.To4() == nil && node6[name] == "" {
				node6[name] = a.Address
			}
		}
		for _, c := range node.Spec.PodCIDRs {
			if strings.Contains(c, ":") {
				cidr6[name] = c
			}
		}
		if node6[name] == "" || cidr6[name] == "" {
			t.Fatalf("node %s: no IPv6 InternalIP or pod CIDR: %v, %v", name, node.Status.Addresses, node.Spec.PodCIDRs)
		}
	}

	t.Run("node-1 routes node-2's IPv6 pod CIDR over the underlay and tunnels node-3's", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, "ip", "-n", lab.NodeNetNS("node-1"), "-6", "route", "show", "proto", "0x8a").CombinedOutput()
		if err != nil {
			t.Fatalf("ip -6 route: %v: %s", err, out)
		}
		routes := string(out)
		if want := cidr6["node-2"] + " via " + node6["node-2"] + " dev br-phy"; !strings.Contains(routes, want) {
			t.Errorf("node-1's routes lack %q:\n%s", want, routes)
		}
		if strings.Contains(routes, cidr6["node-3"]) {
			t.Errorf("node-1 routes node-3's IPv6 pod CIDR over the underlay (node-3 is behind the router):\n%s", routes)
		}
		flows, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "dump-flows", e.BridgeSocket("node-1")).CombinedOutput()
		if err != nil {
			t.Fatalf("dump-flows: %v: %s", err, flows)
		}
		var toNode2, toNode3 []string
		for _, l := range strings.Split(string(flows), "\n") {
			if !strings.Contains(l, "tun") {
				continue
			}
			if strings.Contains(l, "ipv6_dst="+cidr6["node-2"]) {
				toNode2 = append(toNode2, l)
			}
			if strings.Contains(l, "ipv6_dst="+cidr6["node-3"]) {
				toNode3 = append(toNode3, l)
			}
		}
		if len(toNode2) != 0 {
			t.Errorf("node-1 tunnels node-2's IPv6 pod CIDR (same subnet):\n%s", strings.Join(toNode2, "\n"))
		}
		if len(toNode3) == 0 {
			t.Errorf("node-1 has no tunnel flow for node-3's IPv6 pod CIDR %s:\n%s", cidr6["node-3"], flows)
		}
	})

	e.createPods(t, ctx, map[string]*corev1.Pod{
		"p1": pinned("node-1"), "p2": pinned("node-2"), "p3": pinned("node-3"), "p4": pinned("node-4"),
	})
	ip6 := func(pod string) string {
		for _, ip := range e.pods[pod].Status.PodIPs {
			if net.ParseIP(ip.IP).To4() == nil {
				return ip.IP
			}
		}
		t.Fatalf("pod %s has no IPv6 address: %v", pod, e.pods[pod].Status.PodIPs)
		return ""
	}
	pods := []string{"p1", "p2", "p3", "p4"}

	t.Run("pods on every node reach each other over IPv6", func(t *testing.T) {
		for _, from := range pods {
			for _, to := range pods {
				if from == to {
					continue
				}
				if err := e.probeEventually(ctx, from, "tcp", ip6(to)); err != nil {
					t.Errorf("%s -> %s (%s): %v", from, to, ip6(to), err)
				}
			}
		}
		if err := e.probeEventually(ctx, "p1", "icmp", ip6("p2")); err != nil {
			t.Errorf("ping p1 -> p2 over IPv6: %v", err)
		}
	})

	t.Run("the receiving node sees the sender's IPv6 pod address on both paths", func(t *testing.T) {
		// Only p1 may reach p2 (routed from node-1) and p3 (tunnelled): a
		// source masqueraded to node-1's address would be denied.
		e.createPolicy(t, ctx, ingressFrom("p2-only-from-p1", "p2", "p1", 80))
		e.createPolicy(t, ctx, ingressFrom("p3-only-from-p1", "p3", "p1", 80))
		labtest.WaitFor(t, ctx, "p4 -> p2 denied over IPv6", func() error {
			if e.probe(ctx, "p4", "tcp", ip6("p2")) == nil {
				return fmt.Errorf("p4 still connects to p2")
			}
			return nil
		})
		for _, to := range []string{"p2", "p3"} {
			if err := e.probeEventually(ctx, "p1", "tcp", ip6(to)); err != nil {
				t.Errorf("p1 -> %s over IPv6, which the policy allows by p1's pod address: %v", to, err)
			}
		}
	})
}
