package cniserver

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// withAgentPipeline gives the env the agent's real OpenFlow pipeline: the
// gateway antrea-gw0 (10.123.1.1/24) and the intent-level client that
// InstallPodFlows writes through.
func withAgentPipeline(e *env) PodFlowInstaller { return agentPipeline(e, false) }

// withDualStackPipeline is withAgentPipeline on a dual-stack node: the
// node's second pod CIDR is fd00:10:123:1::/64, antrea-gw0 also holds
// fd00:10:123:1::1, and the pipeline carries IPv6 (docs/ipv6.md).
func withDualStackPipeline(e *env) PodFlowInstaller { return agentPipeline(e, true) }

func agentPipeline(e *env, dual bool) PodFlowInstaller {
	t := e.t
	ctx := ctxT(t)
	gwUUID, err := e.ports.CreateInternalPort(ctx, "antrea-gw0", 2, "", nil)
	if err != nil || gwUUID == "" {
		t.Fatalf("create antrea-gw0: %v", err)
	}
	gwOFPort, err := e.ports.GetOFPort(ctx, "antrea-gw0")
	if err != nil {
		t.Fatal(err)
	}
	cmds := [][]string{
		{"addr", "add", "10.123.1.1/24", "dev", "antrea-gw0"},
		{"addr", "add", "10.200.0.1/32", "dev", "antrea-gw0"},
		{"link", "set", "antrea-gw0", "up"},
	}
	var gw6 net.IP
	if dual {
		_, cidr6, _ := net.ParseCIDR("fd00:10:123:1::/64")
		e.cfg.PodCIDRs = append(e.cfg.PodCIDRs, cidr6)
		gw6 = net.ParseIP("fd00:10:123:1::1")
		cmds = append(cmds, []string{"addr", "add", "fd00:10:123:1::1/64", "dev", "antrea-gw0", "nodad"})
	}
	for _, args := range cmds {
		if out, err := exec.Command("ip", append([]string{"-n", e.ovs.NetNS()}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	link, err := exec.Command("ip", "-n", e.ovs.NetNS(), "-o", "link", "show", "antrea-gw0").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(link)[strings.Index(string(link), "link/ether"):])
	gwMAC, err := net.ParseMAC(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ofc := binding.NewClient(e.ovs.BridgeMgmt(testBridge), binding.ClientOptions{})
	c, err := agentof.NewClient(ofc, 1)
	if err != nil {
		t.Fatal(err)
	}
	go ofc.Run(runCtx)
	if err := c.Initialize(ctx, &agentof.NodeConfig{
		GatewayOFPort: uint32(gwOFPort), GatewayIP: net.ParseIP("10.123.1.1"), GatewayIPv6: gw6, GatewayMAC: gwMAC, PodCIDR: e.cfg.PodCIDRs[0],
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

// podFlows returns the bridge's flows that name a pod (its IP, its MAC or
// its OpenFlow port).
func podFlows(t *testing.T, e *env, ip, mac string, ofPort int32) []string {
	t.Helper()
	out, err := e.ovs.Ofctl("dump-flows", testBridge, "--no-names")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, l := range strings.Split(out, "\n") {
		for _, needle := range []string{ip + ",", ip + " ", mac, "in_port=" + itoa(ofPort) + ",", "output:" + itoa(ofPort)} {
			if strings.Contains(l+" ", needle) {
				found = append(found, strings.TrimSpace(l))
				break
			}
		}
	}
	return found
}

// bridgeFlows is the bridge's flow table without counters.
func bridgeFlows(t *testing.T, e *env) string {
	t.Helper()
	out, err := e.ovs.Ofctl("dump-flows", testBridge, "--no-names", "--no-stats")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func TestWithTheAgentPipelinePodsTalkAndDelLeavesNoFlowOfThePod(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnvWith(t, true, withAgentPipeline)
	ctx := ctxT(t)
	a, b := e.newPod("client"), e.newPod("server")
	type added struct {
		ip, mac string
		ofPort  int32
	}
	var pods []added
	for _, p := range []*pod{a, b} {
		r, err := e.cni.AddNetworkList(ctx, e.list, p.rt)
		if err != nil {
			t.Fatalf("ADD %s: %v", p.name, err)
		}
		res, _ := current.NewResultFromResult(r)
		pd, err := e.ports.GetPortData(ctx, e.hostIfName(p))
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, added{res.IPs[0].Address.IP.String(), res.Interfaces[1].Mac, pd.OFPort})
	}
	if f := podFlows(t, e, pods[1].ip, pods[1].mac, pods[1].ofPort); len(f) == 0 {
		t.Fatalf("no flow names pod %s after ADD", b.name)
	}
	if err := e.cni.CheckNetworkList(ctx, e.list, b.rt); err != nil {
		t.Errorf("CHECK with the pipeline's flows in place: %v", err)
	}
	for _, tc := range []struct{ name, serverNS, addr string }{
		{"pod to pod", b.netns, net.JoinHostPort(pods[1].ip, "8080")},
		{"pod to the node through the gateway", "/var/run/netns/" + e.ovs.NetNS(), "10.200.0.1:8081"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			served := serveOnce(t, tc.serverNS, tc.addr)
			reply, err := talk(ctx, a.netns, tc.addr, a.name)
			if err != nil || reply != "hello client" {
				t.Fatalf("TCP from %s to %s: reply %q, %v", a.name, tc.addr, reply, err)
			}
			if err := <-served; err != nil {
				t.Errorf("server side: %v", err)
			}
		})
	}

	// An ADD that fails after its flows went in takes them out again: the
	// bridge holds the same flows as before it.
	before := bridgeFlows(t, e)
	e.srv.inject = func(step string) error {
		if step == stepFlows {
			return errors.New("injected failure after the flows")
		}
		return nil
	}
	doomed := e.newPod("doomed")
	if _, err := e.cni.AddNetworkList(ctx, e.list, doomed.rt); err == nil {
		t.Fatal("ADD with an injected failure succeeded")
	}
	e.srv.inject = nil
	if after := bridgeFlows(t, e); after != before {
		t.Errorf("flows changed by a rolled-back ADD:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	if err := e.cni.DelNetworkList(ctx, e.list, b.rt); err != nil {
		t.Fatalf("DEL %s: %v", b.name, err)
	}
	if f := podFlows(t, e, pods[1].ip, pods[1].mac, pods[1].ofPort); len(f) > 0 {
		t.Errorf("flows of the deleted pod remain:\n%s", strings.Join(f, "\n"))
	}
	if f := podFlows(t, e, pods[0].ip, pods[0].mac, pods[0].ofPort); len(f) == 0 {
		t.Errorf("the other pod's flows went too")
	}
	if err := e.cni.DelNetworkList(ctx, e.list, a.rt); err != nil {
		t.Fatalf("DEL %s: %v", a.name, err)
	}
	// The gateway's port stays, it is the node's; nothing else may.
	if left := e.leftovers(t); len(left) != 1 || left[0] != "OVS port antrea-gw0" {
		t.Errorf("after DEL: %v", left)
	}
}

// TestADualStackADDGivesThePodBothFamiliesAndIPv6Works: on a dual-stack
// node (two pod CIDRs, the gateway holding an address of each, the
// pipeline carrying IPv6) a real CNI ADD gives the pod an IPv4 and an IPv6
// address, each with its gateway, and the agent's flows for both: two pods
// speak TCP over IPv6 (their neighbour discovery through the pipeline),
// and DEL leaves no flow of the pod. About 3 s.
func TestADualStackADDGivesThePodBothFamiliesAndIPv6Works(t *testing.T) {
	ovsinstance.RequireRoot(t)
	e := newEnvWith(t, true, withDualStackPipeline)
	ctx := ctxT(t)
	a, b := e.newPod("client"), e.newPod("server")
	var v6 []string
	for _, p := range []*pod{a, b} {
		r, err := e.cni.AddNetworkList(ctx, e.list, p.rt)
		if err != nil {
			t.Fatalf("ADD %s: %v", p.name, err)
		}
		res, _ := current.NewResultFromResult(r)
		if len(res.IPs) != 2 || res.IPs[0].Address.IP.To4() == nil || res.IPs[1].Address.IP.To4() != nil {
			t.Fatalf("ADD %s: IPs %v, want an IPv4 and an IPv6 address", p.name, res.IPs)
		}
		if gw := res.IPs[1].Gateway.String(); gw != "fd00:10:123:1::1" {
			t.Errorf("ADD %s: IPv6 gateway %s, want fd00:10:123:1::1", p.name, gw)
		}
		if !e.cfg.PodCIDRs[1].Contains(res.IPs[1].Address.IP) {
			t.Errorf("ADD %s: IPv6 address %s outside the node's IPv6 pod CIDR", p.name, res.IPs[1].Address.IP)
		}
		v6 = append(v6, res.IPs[1].Address.IP.String())
	}
	addr := net.JoinHostPort(v6[1], "8080")
	served := serveOnce(t, b.netns, addr)
	reply, err := talk(ctx, a.netns, addr, a.name)
	if err != nil || reply != "hello client" {
		t.Fatalf("TCP over IPv6 from %s to %s: reply %q, %v", a.name, addr, reply, err)
	}
	if err := <-served; err != nil {
		t.Errorf("server side: %v", err)
	}
	for _, p := range []*pod{a, b} {
		if err := e.cni.DelNetworkList(ctx, e.list, p.rt); err != nil {
			t.Fatalf("DEL %s: %v", p.name, err)
		}
	}
	if flows := bridgeFlows(t, e); strings.Contains(flows, v6[0]) || strings.Contains(flows, v6[1]) {
		t.Errorf("flows of the deleted pods' IPv6 addresses remain:\n%s", flows)
	}
}
