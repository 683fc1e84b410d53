package openflow

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// testPod is a pod netns with eth0 whose peer is an OVS port on br-int.
type testPod struct {
	ns, hostIF string
	ip         net.IP
	mac        net.HardwareAddr
	ofPort     uint32
}

func addPod(t *testing.T, in *ovsinstance.Instance, name, cidr string) *testPod {
	t.Helper()
	podNS := ovsinstance.NewNetNS(t, "agentofpod")
	host := "veth-" + name
	run(t, "ip", "-n", podNS, "link", "add", "eth0", "type", "veth", "peer", "name", host, "netns", in.NetNS())
	run(t, "ip", "-n", podNS, "addr", "add", cidr, "dev", "eth0")
	run(t, "ip", "-n", podNS, "link", "set", "eth0", "up")
	run(t, "ip", "-n", podNS, "route", "add", "default", "via", "10.10.1.1")
	// netdev datapath pitfalls (ENVIRONMENT.md): no TX checksum offload in the pod, no kernel ARP on the host side.
	run(t, "ip", "netns", "exec", podNS, "ethtool", "-K", "eth0", "tx", "off")
	run(t, "ip", "-n", in.NetNS(), "link", "set", host, "arp", "off", "up")
	if _, err := in.Vsctl("add-port", "br-int", host); err != nil {
		t.Fatal(err)
	}
	port, err := in.Vsctl("get", "interface", host, "ofport")
	if err != nil {
		t.Fatal(err)
	}
	var ofPort uint32
	fmt.Sscan(port, &ofPort)
	macOut := run(t, "ip", "-n", podNS, "-o", "link", "show", "eth0")
	f := strings.Fields(macOut[strings.Index(macOut, "link/ether"):])
	mac, _ := net.ParseMAC(f[1])
	ip, _, _ := net.ParseCIDR(cidr)
	return &testPod{ns: podNS, hostIF: host, ip: ip, mac: mac, ofPort: ofPort}
}

func ping(ns string, ip net.IP) error {
	out, err := exec.Command("ip", "netns", "exec", ns, "ping", "-c", "1", "-W", "1", ip.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %s from %s: %v: %s", ip, ns, err, out)
	}
	return nil
}

func pingEventually(t *testing.T, ns string, ip net.IP) {
	t.Helper()
	var err error
	for i := 0; i < 5; i++ { // the first packet may be lost while ARP resolves
		if err = ping(ns, ip); err == nil {
			return
		}
	}
	t.Fatal(err)
}

// dumpFlows returns the flows of br-int as dump-flows prints them, without statistics.
func dumpFlows(t *testing.T, in *ovsinstance.Instance) []string {
	t.Helper()
	out, err := in.Ofctl("dump-flows", "br-int", "--no-stats")
	if err != nil {
		t.Fatal(err)
	}
	var flows []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "OFPST_FLOW") {
			flows = append(flows, l)
		}
	}
	sort.Strings(flows)
	return flows
}

func clientFlows(c *Client) []string {
	var s []string
	for _, f := range c.Flows() {
		s = append(s, f.String())
	}
	sort.Strings(s)
	return s
}

// newRealBridge starts OVS in a netns with br-int and the gateway
// antrea-gw0 (10.10.1.1/24, OpenFlow port 2) and returns an initialized
// client connected through the binding, replaying its flows on reconnect.
func newRealBridge(t *testing.T) (*ovsinstance.Instance, *Client) {
	t.Helper()
	in := ovsinstance.StartForTest(t, "agentof")
	if _, err := in.Vsctl("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev",
		"protocols=OpenFlow13,OpenFlow15", "fail_mode=secure",
		"--", "add-port", "br-int", "antrea-gw0", "--", "set", "interface", "antrea-gw0", "type=internal", "ofport_request=2"); err != nil {
		t.Fatal(err)
	}
	run(t, "ip", "-n", in.NetNS(), "addr", "add", "10.10.1.1/24", "dev", "antrea-gw0")
	run(t, "ip", "-n", in.NetNS(), "link", "set", "antrea-gw0", "up")
	gwMACOut := run(t, "ip", "-n", in.NetNS(), "-o", "link", "show", "antrea-gw0")
	gwMAC, _ := net.ParseMAC(strings.Fields(gwMACOut[strings.Index(gwMACOut, "link/ether"):])[1])

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var c *Client
	ofc := binding.NewClient(in.BridgeMgmt("br-int"), binding.ClientOptions{
		OnConnect: func(ctx context.Context, conn *binding.Conn, reconnect bool) error {
			if reconnect {
				return c.Replay(ctx, conn)
			}
			return nil
		},
	})
	c, err := NewClient(ofc, 1)
	if err != nil {
		t.Fatal(err)
	}
	go ofc.Run(ctx)
	_, cidr, _ := net.ParseCIDR("10.10.1.0/24")
	if err := c.Initialize(ctx, &NodeConfig{GatewayOFPort: 2, GatewayIP: net.ParseIP("10.10.1.1"), GatewayMAC: gwMAC, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	return in, c
}

func TestPodFlowsConnectPodsAndGatewayOnRealOVS(t *testing.T) {
	in, c := newRealBridge(t)
	ctx := context.Background()
	pod1 := addPod(t, in, "p1", "10.10.1.2/24")
	pod2 := addPod(t, in, "p2", "10.10.1.3/24")
	for _, p := range []*testPod{pod1, pod2} {
		if err := c.InstallPodFlows(p.hostIF, []net.IP{p.ip}, p.mac, p.ofPort); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := dumpFlows(t, in), clientFlows(c); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the bridge should hold exactly the client's flows, printed the same way\nbridge:\n%s\nclient:\n%s",
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	pingEventually(t, pod1.ns, pod2.ip)
	pingEventually(t, pod2.ns, net.ParseIP("10.10.1.1"))
	pingEventually(t, in.NetNS(), pod1.ip)

	// A spoofed source address is dropped by SpoofGuard.
	run(t, "ip", "-n", pod1.ns, "addr", "add", "10.10.1.99/24", "dev", "eth0")
	if out, err := exec.Command("ip", "netns", "exec", pod1.ns, "ping", "-c", "1", "-W", "1", "-I", "10.10.1.99", pod2.ip.String()).CombinedOutput(); err == nil {
		t.Fatalf("a packet from a spoofed source should be dropped, ping said: %s", out)
	}

	// Without its flows, pod2 is unreachable; uninstalling twice is fine.
	for i := 0; i < 2; i++ {
		if err := c.UninstallPodFlows(pod2.hostIF); err != nil {
			t.Fatal(err)
		}
	}
	if err := ping(pod1.ns, pod2.ip); err == nil {
		t.Fatal("pod2 should be unreachable once its flows are gone")
	}
	if err := c.InstallPodFlows(pod2.hostIF, []net.IP{pod2.ip}, pod2.mac, pod2.ofPort); err != nil {
		t.Fatal(err)
	}

	// ovs-vswitchd restarts and loses its flows: the reconnect replays them.
	if err := in.RestartVSwitchd(ctx); err != nil {
		t.Fatal(err)
	}
	waitFlowsReplayed(t, in, c)
	pingEventually(t, pod1.ns, pod2.ip)
}

func TestDeleteRoundRemovesOnlyStaleFlows(t *testing.T) {
	in := ovsinstance.StartForTest(t, "agentof")
	if _, err := in.Vsctl("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev",
		"protocols=OpenFlow13,OpenFlow15", "fail_mode=secure"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := binding.Dial(ctx, in.BridgeMgmt("br-int"), binding.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	mac, _ := net.ParseMAC("00:00:00:00:00:01")
	node := &NodeConfig{GatewayOFPort: 2, GatewayIP: net.ParseIP("10.10.1.1"), GatewayMAC: mac}
	old, _ := NewClient(conn, 7)
	if err := old.Initialize(ctx, node); err != nil {
		t.Fatal(err)
	}
	_, peer, _ := net.ParseCIDR("10.10.2.0/24")
	if err := old.InstallNodeFlows("gone", peer, net.ParseIP("10.10.2.1"), net.ParseIP("172.30.0.12")); err != nil {
		t.Fatal(err)
	}
	// The next agent run installs its node flows (not the gone peer) and deletes round 7.
	cur, _ := NewClient(conn, 8)
	if err := cur.Initialize(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := cur.DeleteRound(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(dumpFlows(t, in), "\n"), strings.Join(clientFlows(cur), "\n"); got != want {
		t.Fatalf("after DeleteRound only the current round's flows should remain\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// waitFlowsReplayed waits until the bridge holds exactly the client's flows
// again, as the reconnect after an ovs-vswitchd restart replays them.
func waitFlowsReplayed(t *testing.T, in *ovsinstance.Instance, c *Client) {
	t.Helper()
	want := strings.Join(clientFlows(c), "\n")
	deadline := time.Now().Add(20 * time.Second)
	for strings.Join(dumpFlows(t, in), "\n") != want {
		if time.Now().After(deadline) {
			t.Fatalf("flows were not replayed after an ovs-vswitchd restart; bridge has:\n%s", strings.Join(dumpFlows(t, in), "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
