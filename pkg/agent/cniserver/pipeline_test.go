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
func withAgentPipeline(e *env) PodFlowInstaller {
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
	for _, args := range [][]string{
		{"addr", "add", "10.123.1.1/24", "dev", "antrea-gw0"},
		{"addr", "add", "10.200.0.1/32", "dev", "antrea-gw0"},
		{"link", "set", "antrea-gw0", "up"},
	} {
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
		GatewayOFPort: uint32(gwOFPort), GatewayIP: net.ParseIP("10.123.1.1"), GatewayMAC: gwMAC, PodCIDR: e.cfg.PodCIDRs[0],
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
