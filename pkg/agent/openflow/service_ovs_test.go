package openflow

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// inNetNS runs f with the calling goroutine's thread in the named netns;
// sockets f opens stay there.
func inNetNS(t *testing.T, name string, f func() error) error {
	t.Helper()
	n, err := ns.GetNS("/var/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	return n.Do(func(ns.NetNS) error { return f() })
}

// serveWho makes a pod answer on TCP and UDP port with "<name> <client
// address>": the test learns which endpoint answered and whom it saw.
func serveWho(t *testing.T, p *testPod, name string, port int) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	if err := inNetNS(t, p.ns, func() error {
		var err error
		if ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr())
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(fmt.Appendf(nil, "%s %s\n", name, from), from)
		}
	}()
}

// askWho connects from a pod to addr over network ("tcp4" or "udp4") and
// returns the answer of serveWho.
func askWho(t *testing.T, p *testPod, network, addr string, timeout time.Duration) (string, error) {
	t.Helper()
	var c net.Conn
	if err := inNetNS(t, p.ns, func() error {
		var err error
		c, err = net.DialTimeout(network, addr, timeout)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if network == "udp4" {
		if _, err := c.Write([]byte("who?")); err != nil {
			return "", err
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", fmt.Errorf("%s %s from %s: %w", network, addr, p.ip, err)
	}
	return strings.TrimSpace(line), nil
}

// askWhoEventually retries while the first packets resolve ARP.
func askWhoEventually(t *testing.T, p *testPod, network, addr string) string {
	t.Helper()
	var err error
	for i := 0; i < 5; i++ {
		var s string
		if s, err = askWho(t, p, network, addr, time.Second); err == nil {
			return s
		}
	}
	t.Fatal(err)
	return ""
}

// trace asks OVS what it does with a packet (ofproto/trace, the oracle).
func trace(t *testing.T, in interface {
	Appctl(args ...string) (string, error)
}, flow string, extra ...string) string {
	t.Helper()
	out, err := in.Appctl(append([]string{"ofproto/trace", "br-int", flow}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestServiceOnRealOVS(t *testing.T) {
	in, c := newRealBridge(t)
	rw := NewRuleWriter(c)
	ctx := context.Background()
	cli := addPod(t, in, "c1", "10.10.1.2/24")
	e1 := addPod(t, in, "e1", "10.10.1.3/24")
	e2 := addPod(t, in, "e2", "10.10.1.4/24")
	for _, p := range []*testPod{cli, e1, e2} {
		if err := c.InstallPodFlows(p.hostIF, []net.IP{p.ip}, p.mac, p.ofPort); err != nil {
			t.Fatal(err)
		}
	}
	// The node forwards, as a real node does: a packet the pipeline wrongly
	// sends to the gateway would come back in from it (and pass ingress
	// policy, which trusts the gateway).
	run(t, "ip", "netns", "exec", in.NetNS(), "sysctl", "-qw", "net.ipv4.ip_forward=1")
	serveWho(t, e1, "e1", 8080)
	serveWho(t, e2, "e2", 8080)
	if n, err := c.RecoverServices(ctx); err != nil || n != 0 {
		t.Fatalf("a fresh bridge should have no Service to recover: %d, %v", n, err)
	}
	vip := netip.MustParseAddr("10.96.0.10")
	tcpPort := ServicePort{IP: vip, Protocol: 6, Port: 80}
	udpPort := ServicePort{IP: vip, Protocol: 17, Port: 53}
	endpoints := func(pods ...*testPod) []Endpoint {
		var out []Endpoint
		for _, p := range pods {
			out = append(out, Endpoint{IP: addr(p.ip), Port: 8080, Local: true})
		}
		return out
	}
	if err := c.InstallService(ctx, "default/web", ServiceState{tcpPort: {Endpoints: endpoints(e1, e2)}, udpPort: {Endpoints: endpoints(e1, e2)}}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(dumpFlows(t, in), "\n"), strings.Join(clientFlows(c), "\n"); got != want {
		t.Fatalf("the bridge should hold exactly the client's flows\nbridge:\n%s\nclient:\n%s", got, want)
	}
	if got, want := strings.Join(dumpGroups(t, in), "\n"), strings.Join(groupStrings(c.Groups()), "\n"); got != want {
		t.Fatalf("the bridge should hold exactly the client's groups\nbridge:\n%s\nclient:\n%s", got, want)
	}

	// The oracle: a new TCP SYN from the client pod to the VIP goes through
	// the group, is DNATed to the bucket's endpoint and output to that
	// endpoint's port. The select group picks a bucket by the datapath's
	// dp_hash, which the trace is given: over 16 values both buckets occur.
	gwMAC := gatewayMAC(t, in)
	syn := func(hash int) string {
		return fmt.Sprintf("dp_hash=0x%x,in_port=%d,tcp,dl_src=%s,dl_dst=%s,nw_src=%s,nw_dst=%s,nw_ttl=64,tp_src=40000,tp_dst=80,tcp_flags=0x002",
			hash, cli.ofPort, cli.mac, gwMAC, cli.ip, vip)
	}
	traced := map[string]bool{}
	for hash := 1; hash <= 16; hash++ {
		out := trace(t, in, syn(hash))
		for _, e := range []*testPod{e1, e2} {
			if strings.Contains(out, fmt.Sprintf("nat(dst=%s:8080)", e.ip)) {
				if !strings.Contains(out, "group:1") || !strings.Contains(out, fmt.Sprintf("Modified flow: nw_src=%s,tp_src=40000,nw_dst=%s,tp_dst=8080", cli.ip, e.ip)) ||
					!strings.HasSuffix(strings.TrimSpace(out[:strings.LastIndex(out, "Final flow:")]), fmt.Sprintf("output:%d", e.ofPort)) {
					t.Fatalf("ofproto/trace should show the SYN going through group 1, DNATed to %s:8080 and output to port %d:\n%s", e.ip, e.ofPort, out)
				}
				traced[e.ip.String()] = true
			}
		}
		if hash == 1 {
			t.Logf("ofproto/trace of a SYN to the VIP:\n%s", out)
		}
	}
	if len(traced) != 2 {
		t.Fatalf("16 dp_hash values should select both endpoints, selected %v", traced)
	}

	// Real traffic: TCP and UDP through the VIP reach both endpoints (each
	// new connection picks a bucket), and they see the client's own address.
	seen := map[string]bool{}
	for i := 0; i < 30 && len(seen) < 2; i++ {
		who := askWhoEventually(t, cli, "tcp4", "10.96.0.10:80")
		f := strings.Fields(who)
		if len(f) != 2 || !strings.HasPrefix(f[1], cli.ip.String()+":") {
			t.Fatalf("the endpoint should see the client's address, answered %q", who)
		}
		seen[f[0]] = true
	}
	if !seen["e1"] || !seen["e2"] {
		t.Fatalf("30 connections through the VIP should reach both endpoints, reached %v", seen)
	}
	if who := askWhoEventually(t, cli, "udp4", "10.96.0.10:53"); !strings.HasPrefix(who, "e1 "+cli.ip.String()) && !strings.HasPrefix(who, "e2 "+cli.ip.String()) {
		t.Fatalf("a UDP datagram through the VIP should be answered by an endpoint, got %q", who)
	}

	// Hairpin: an endpoint reaching its own Service may land on itself; it
	// then sees the hairpin address, not its own.
	hairpinSeen := false
	for i := 0; i < 30 && !hairpinSeen; i++ {
		who := askWhoEventually(t, e1, "tcp4", "10.96.0.10:80")
		if strings.HasPrefix(who, "e1 ") {
			if !strings.HasPrefix(who, "e1 "+HairpinIP.String()+":") {
				t.Fatalf("a pod reaching itself through its Service should see the hairpin address, saw %q", who)
			}
			hairpinSeen = true
		}
	}
	if !hairpinSeen {
		t.Fatal("30 connections from e1 through the VIP never reached e1 itself")
	}

	// NetworkPolicy sees the endpoint after DNAT: with both endpoints isolated
	// for ingress, nothing gets through (not even SYN retransmissions of a
	// connection EndpointDNAT committed); a rule allowing the client on the
	// endpoints' port 8080 (not the Service port 80) lets it through.
	if err := rw.SetIsolatedPorts(ctx, DirectionIngress, []uint32{e1.ofPort, e2.ofPort}); err != nil {
		t.Fatal(err)
	}
	purgeDatapath(t, in)
	received := ipReceived(t, e1) + ipReceived(t, e2)
	for i := 0; i < 3; i++ {
		if who, err := askWho(t, cli, "tcp4", "10.96.0.10:80", 3*time.Second); err == nil {
			t.Fatalf("isolated endpoints should not be reachable through the VIP, %q answered", who)
		}
		if who, err := askWho(t, cli, "udp4", "10.96.0.10:53", time.Second); err == nil {
			t.Fatalf("isolated endpoints should not answer UDP through the VIP, %q answered", who)
		}
	}
	if n := ipReceived(t, e1) + ipReceived(t, e2) - received; n != 0 {
		t.Fatalf("no packet should reach an isolated endpoint, %d did (e.g. a retransmitted SYN sent round the gateway, past policy)", n)
	}
	if err := rw.Install(ctx, &PolicyRule{ID: 9, Direction: DirectionIngress,
		Peers: []netip.Prefix{netip.PrefixFrom(addr(cli.ip), 32)}, AppliedTo: []uint32{e1.ofPort, e2.ofPort},
		Services: []PolicyPort{{Protocol: 6, Port: 8080}}, Priority: PolicyRulePriority}); err != nil {
		t.Fatal(err)
	}
	purgeDatapath(t, in)
	askWhoEventually(t, cli, "tcp4", "10.96.0.10:80")
	if err := rw.Uninstall(ctx, 9); err != nil {
		t.Fatal(err)
	}
	if err := rw.SetIsolatedPorts(ctx, DirectionIngress, nil); err != nil {
		t.Fatal(err)
	}

	// e2 leaves: the group has one bucket, and every connection lands on e1.
	if err := c.InstallService(ctx, "default/web", ServiceState{tcpPort: {Endpoints: endpoints(e1)}, udpPort: {Endpoints: endpoints(e1)}}); err != nil {
		t.Fatal(err)
	}
	// Three groups: TCP's, UDP's and the group of UDP's fragments.
	groups := dumpGroups(t, in)
	if len(groups) != 3 || strings.Count(strings.Join(groups, "\n"), "bucket=") != 3 {
		t.Fatalf("after e2 left each group should have one bucket:\n%s", strings.Join(groups, "\n"))
	}
	for hash := 1; hash <= 4; hash++ {
		if out := trace(t, in, syn(hash)); !strings.Contains(out, "nat(dst=10.10.1.3:8080)") {
			t.Fatalf("with e1 alone the SYN should be DNATed to e1:\n%s", out)
		}
	}
	for i := 0; i < 20; i++ {
		if who := askWhoEventually(t, cli, "tcp4", "10.96.0.10:80"); !strings.HasPrefix(who, "e1 ") {
			t.Fatalf("with e1 alone, %q answered", who)
		}
	}

	// ovs-vswitchd restarts and loses flows and groups: the reconnect replays
	// both, and the Service works again.
	if err := in.RestartVSwitchd(ctx); err != nil {
		t.Fatal(err)
	}
	waitFlowsReplayed(t, in, c)
	if got, want := strings.Join(dumpGroups(t, in), "\n"), strings.Join(groupStrings(c.Groups()), "\n"); got != want {
		t.Fatalf("after the restart the bridge should hold the client's groups\nbridge:\n%s\nclient:\n%s", got, want)
	}
	if who := askWhoEventually(t, cli, "tcp4", "10.96.0.10:80"); !strings.HasPrefix(who, "e1 ") {
		t.Fatalf("after the restart, %q answered", who)
	}

	// The Service goes: no group, no Service flow left.
	if err := c.UninstallService(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	if g := dumpGroups(t, in); len(g) != 0 {
		t.Fatalf("no group should remain:\n%s", strings.Join(g, "\n"))
	}
	if got, want := strings.Join(dumpFlows(t, in), "\n"), strings.Join(clientFlows(c), "\n"); got != want {
		t.Fatalf("after removal the bridge should hold exactly the client's flows\nbridge:\n%s\nclient:\n%s", got, want)
	}
	if _, err := askWho(t, cli, "tcp4", "10.96.0.10:80", time.Second); err == nil {
		t.Fatal("the VIP should not answer once its Service is gone")
	}
}

// dumpGroups returns the groups of br-int as dump-groups prints them.
func dumpGroups(t *testing.T, in interface {
	Ofctl(cmd, bridge string, args ...string) (string, error)
}) []string {
	t.Helper()
	out, err := in.Ofctl("dump-groups", "br-int")
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "OFPST_GROUP") {
			groups = append(groups, l)
		}
	}
	bridgetest.SortGroups(groups)
	return groups
}

func gatewayMAC(t *testing.T, in interface{ NetNS() string }) string {
	t.Helper()
	out := run(t, "ip", "-n", in.NetNS(), "-o", "link", "show", "antrea-gw0")
	return strings.Fields(out[strings.Index(out, "link/ether"):])[1]
}

// purgeDatapath drops the datapath's cached flows, as the agent does after a
// policy change (see pkg/agent/app/revalidate.go).
func purgeDatapath(t *testing.T, in interface {
	Appctl(args ...string) (string, error)
}) {
	t.Helper()
	if _, err := in.Appctl("revalidator/purge"); err != nil {
		t.Fatal(err)
	}
}

// ipReceived is bridgetest's Pod.IPReceived for this file's older test pods.
func ipReceived(t *testing.T, p *testPod) int {
	t.Helper()
	return (&bridgetest.Pod{NS: p.ns}).IPReceived(t)
}

// countingBridge counts the messages of the bundles it passes on to the
// switch's client (whose other calls it leaves alone).
type countingBridge struct {
	*binding.Client
	mu       sync.Mutex
	bundles  int
	messages map[string]int // by kind: "group add", "insert bucket", "flow add", ...
}

func (c *countingBridge) Bundle(ctx context.Context, msgs ...binding.Message) error {
	c.mu.Lock()
	c.bundles++
	for _, m := range msgs {
		c.messages[messageKind(m)]++
	}
	c.mu.Unlock()
	return c.Client.Bundle(ctx, msgs...)
}

func messageKind(m binding.Message) string {
	switch m := m.(type) {
	case *binding.GroupMod:
		return map[binding.GroupModCommand]string{binding.GroupAdd: "group add", binding.GroupModify: "group modify",
			binding.GroupDelete: "group delete", binding.GroupInsertBucket: "insert bucket"}[m.Command]
	case *binding.FlowMod:
		return "flow " + strings.ToLower(m.Command.String())
	}
	return fmt.Sprintf("%T", m)
}

func (c *countingBridge) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.messages
	c.messages, c.bundles = map[string]int{}, 0
	return m
}

// groupBuckets reads the bucket count of each group from dump-group-stats,
// which, unlike dump-groups, Open vSwitch 3.1 can encode for groups larger
// than 64 KiB.
func groupBuckets(t *testing.T, br *bridgetest.Bridge) map[int]int {
	t.Helper()
	out, err := br.Ofctl("dump-group-stats", "br-int")
	if err != nil {
		t.Fatal(err)
	}
	res := map[int]int{}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "group_id=") {
			continue
		}
		id, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(l, ",", 2)[0], "group_id="))
		res[id] = strings.Count(l, ":packet_count=")
	}
	return res
}

func manyEndpoints(n int) []Endpoint {
	out := make([]Endpoint, n)
	for i := range out {
		out[i] = Endpoint{IP: netip.AddrFrom4([4]byte{10, 20, byte(i >> 8), byte(i)}), Port: 8080}
	}
	return out
}

// TestA2000EndpointServiceOnRealOVS: a Service port with 2,000 endpoints
// needs a group larger than an OpenFlow message: it is written as an add
// and insert-bucket messages in one bundle, and modified the same way.
func TestA2000EndpointServiceOnRealOVS(t *testing.T) {
	br := bridgetest.New(t)
	counting := &countingBridge{Client: br.OF, messages: map[string]int{}}
	c, err := NewClient(counting, 1)
	if err != nil {
		t.Fatal(err)
	}
	br.SetReplay(func(ctx context.Context, conn *binding.Conn) error { return c.Replay(ctx, conn) })
	ctx := context.Background()
	_, cidr, _ := net.ParseCIDR(bridgetest.PodCIDR)
	if err := c.Initialize(ctx, &NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort,
		GatewayIP: net.ParseIP(bridgetest.GatewayIP), GatewayMAC: br.GatewayMAC, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	vip := ServicePort{IP: netip.MustParseAddr("10.96.0.50"), Protocol: 6, Port: 80}
	eps := manyEndpoints(2000)

	for _, tc := range []struct {
		name     string
		eps      []Endpoint
		affinity uint32
	}{
		{"2000 endpoints", eps, 0},
		{"one endpoint fewer", eps[1:], 0},
		{"2000 endpoints with session affinity", eps, 10800},
	} {
		counting.reset()
		start := time.Now()
		if err := c.InstallService(ctx, "default/big", ServiceState{vip: {Endpoints: tc.eps, AffinityTimeout: tc.affinity}}); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		sent := counting.reset()
		t.Logf("%s: one bundle in %v: %v", tc.name, took.Round(time.Millisecond), sent)
		if counting.bundles != 0 {
			t.Fatal("reset should clear the bundle count")
		}
		if sent["insert bucket"] == 0 {
			t.Fatalf("%s: a group of %d buckets should need insert-bucket messages, sent %v", tc.name, len(tc.eps), sent)
		}
		if got := groupBuckets(t, br)[1]; got != len(tc.eps) {
			t.Fatalf("%s: the switch's group should have %d buckets, has %d", tc.name, len(tc.eps), got)
		}
	}
	// dump-groups cannot print it: Open vSwitch 3.1 encodes a group
	// description longer than 64 KiB with a truncated length.
	out, err := br.Ofctl("dump-groups", "br-int")
	first := strings.SplitN(out, "\n", 3)
	t.Logf("dump-groups of the 2000-bucket group (Open vSwitch 3.1): %d buckets decoded, error %v, it prints: %q", strings.Count(out, "bucket_id:"), err, first[:min(2, len(first))])

	// The oracle: SYNs to the VIP from 64 source ports land on many
	// different endpoints, each DNATed to the endpoint its bucket loaded.
	// (Above 256 buckets Open vSwitch does not select by the datapath's
	// dp_hash but by a hash of the flow's 5-tuple in the slow path.)
	hit := map[string]bool{}
	for h := 0; h < 64; h++ {
		out := br.Trace(t, fmt.Sprintf("in_port=%d,tcp,dl_src=0a:00:00:00:00:09,dl_dst=%s,nw_src=10.10.1.9,nw_dst=10.96.0.50,nw_ttl=64,tp_src=%d,tp_dst=80,tcp_flags=0x002",
			bridgetest.GatewayOFPort, br.GatewayMAC, 40000+h))
		if h == 0 {
			t.Logf("ofproto/trace of a SYN to the 2000-endpoint VIP:\n%s", out)
		}
		i := strings.Index(out, "nat(dst=10.20.")
		if i < 0 {
			t.Fatalf("the SYN should be DNATed to one of the 2000 endpoints:\n%s", out)
		}
		hit[out[i:i+strings.IndexByte(out[i:], ')')]] = true
	}
	t.Logf("64 traced source ports reached %d different endpoints", len(hit))
	if len(hit) < 32 {
		t.Fatalf("64 source ports should spread over many of 2000 endpoints, reached %d", len(hit))
	}

	// ovs-vswitchd restarts: the replay writes the big group again the same
	// way, in the replay's one bundle.
	if err := br.RestartVSwitchd(ctx); err != nil {
		t.Fatal(err)
	}
	var buckets int
	deadline := time.Now().Add(20 * time.Second)
	for buckets != len(eps) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		buckets = groupBuckets(t, br)[1]
	}
	if buckets != len(eps) {
		t.Fatalf("after an ovs-vswitchd restart the replay should restore the 2000 buckets, the group has %d", buckets)
	}

	// Gone: one bundle deletes the flow and the group.
	if err := c.UninstallService(ctx, "default/big"); err != nil {
		t.Fatal(err)
	}
	if g := groupBuckets(t, br); len(g) != 0 {
		t.Fatalf("no group should remain, have %v", g)
	}
}
