package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/agent/packetreply"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// ovsNode is the proxy running for real: informers on a fake API server,
// the agent's OpenFlow client on a real bridge in its own netns.
type ovsNode struct {
	*bridgetest.Bridge
	client *fake.Clientset
	flows  *agentof.Client
	proxy  *Proxy
	stop   context.CancelFunc
	done   chan struct{}
}

// newOVSNode starts a bridge, initializes the pipeline and runs a proxy
// (node-1) on it with the given objects already in the API.
func newOVSNode(t *testing.T, cfg Config, objs ...any) *ovsNode {
	t.Helper()
	return newOVSNodeOn(t, bridgetest.New(t), cfg, objs...)
}

// newOVSNodeOn is newOVSNode on a bridge the caller started. The proxy
// rejects through the bridge's channel unless cfg says otherwise.
func newOVSNodeOn(t *testing.T, br *bridgetest.Bridge, cfg Config, objs ...any) *ovsNode {
	t.Helper()
	if cfg.Packets == nil {
		cfg.Packets = packetIns(t, br.OF)
	}
	flows, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	br.SetReplay(func(ctx context.Context, conn *openflow.Conn) error { return flows.Replay(ctx, conn) })
	_, cidr, _ := net.ParseCIDR(bridgetest.PodCIDR)
	// A bridge the caller made dual-stack (AddGatewayIPv6) gives a
	// dual-stack node.
	if err := flows.Initialize(context.Background(), &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort,
		GatewayIP: net.ParseIP(bridgetest.GatewayIP), GatewayIPv6: br.GatewayIPv6, GatewayMAC: br.GatewayMAC, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	n := &ovsNode{Bridge: br, client: fake.NewClientset(), flows: flows}
	for _, o := range objs {
		create(t, n.client, o)
	}
	n.start(t, cfg)
	return n
}

// start runs a proxy on the node's client until restart or the test's end.
func (n *ovsNode) start(t *testing.T, cfg Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := informers.NewSharedInformerFactory(n.client, 0)
	if cfg.NodeName == "" {
		cfg.NodeName = "node-1"
	}
	p, err := NewWithConfig(cfg, f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), n.flows)
	if err != nil {
		t.Fatal(err)
	}
	n.proxy, n.stop, n.done = p, cancel, make(chan struct{})
	f.Start(ctx.Done())
	done := n.done
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; f.Shutdown() })
}

// waitGroups waits until the bridge's groups satisfy cond.
func (n *ovsNode) waitGroups(t *testing.T, what string, cond func(groups []string) bool) {
	t.Helper()
	var groups []string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		groups = n.DumpGroups(t)
		return cond(groups), nil
	})
	if err != nil {
		t.Fatalf("%s; the bridge has groups:\n%s", what, strings.Join(groups, "\n"))
	}
}

// answerers connects count times from the pod to addr and counts who answered.
func answerers(t *testing.T, from *bridgetest.Pod, network, addr string, count int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < count; i++ {
		who, _ := bridgetest.Answerer(from.AskWhoEventually(t, network, addr))
		seen[who]++
	}
	return seen
}

func bucketsOf(groups []string) int {
	n := 0
	for _, g := range groups {
		n += strings.Count(g, "bucket=")
	}
	return n
}

func nat(ip string, port int) string { return fmt.Sprintf("nat(dst=%s:%d)", ip, port) }

func hasAll(groups []string, parts ...string) bool {
	all := strings.Join(groups, "\n")
	for _, p := range parts {
		if !strings.Contains(all, p) {
			return false
		}
	}
	return true
}

func updateSlice(t *testing.T, c *fake.Clientset, name string, mutate func(*discoveryv1.EndpointSlice)) {
	t.Helper()
	ctx := context.Background()
	s, err := c.DiscoveryV1().EndpointSlices("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mutate(s)
	if _, err := c.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// reg3 is how a group's bucket names an endpoint: its address in reg3.
func reg3(p *bridgetest.Pod) string {
	ip := p.IP.To4()
	return fmt.Sprintf("set_field:0x%x->reg3", uint32(ip[0])<<24|uint32(ip[1])<<16|uint32(ip[2])<<8|uint32(ip[3]))
}

// TestEndpointConditionsAndSharedEndpointsOnRealOVS follows a rolling update
// with real connections: a serving terminating endpoint gets connections
// only while no endpoint is ready, and an endpoint two Services share keeps
// its flows until the last of them is gone.
func TestEndpointConditionsAndSharedEndpointsOnRealOVS(t *testing.T) {
	ports := slicePorts(epPort("", corev1.ProtocolTCP, 8080))
	n := newOVSNode(t, Config{},
		service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080)),
		slice("web-1", "web", ports,
			ep{ip: "10.10.1.3", node: "node-1", ready: ptr(true)},
			ep{ip: "10.10.1.4", node: "node-1", ready: ptr(false), serving: ptr(true), terminating: ptr(true)}),
		service("alias", "10.96.0.11", svcPort("", corev1.ProtocolTCP, 8080, 8080)),
		slice("alias-1", "alias", ports, ep{ip: "10.10.1.3", node: "node-1", ready: ptr(true)}),
	)
	cli, e1, e2 := n.clientAndTwoEndpoints(t)
	for _, p := range []*bridgetest.Pod{cli, e1, e2} {
		p.ServeWho(t, 8080)
	}

	// e1 ready, e2 terminating but serving: e2 gets nothing.
	n.waitGroups(t, "both Services should be installed, with e1 only", func(g []string) bool {
		return len(g) == 2 && bucketsOf(g) == 2 && !hasAll(g, reg3(e2))
	})
	if seen := answerers(t, cli, "tcp4", "10.96.0.10:80", 20); seen["e1"] != 20 {
		t.Fatalf("with e1 ready, every connection should reach e1, answered %v", seen)
	}

	// e1 terminates and stops serving: the terminating, serving e2 drains
	// the Service rather than nothing answering.
	updateSlice(t, n.client, "web-1", func(s *discoveryv1.EndpointSlice) {
		s.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(false), Terminating: ptr(true)}
	})
	n.waitGroups(t, "web should fall back to e2", func(g []string) bool { return bucketsOf(g) == 2 && hasAll(g, reg3(e2)) })
	if seen := answerers(t, cli, "tcp4", "10.96.0.10:80", 20); seen["e2"] != 20 {
		t.Fatalf("with no ready endpoint, every connection should reach the serving terminating e2, answered %v", seen)
	}
	// alias, which shares e1, is unaffected by web's slice.
	if seen := answerers(t, cli, "tcp4", "10.96.0.11:8080", 5); seen["e1"] != 5 {
		t.Fatalf("alias should still reach e1, answered %v", seen)
	}

	// A new ready endpoint (e1 back): terminating e2 is out again.
	updateSlice(t, n.client, "web-1", func(s *discoveryv1.EndpointSlice) {
		s.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: ptr(true)}
	})
	n.waitGroups(t, "web should be back on e1", func(g []string) bool { return bucketsOf(g) == 2 && !hasAll(g, reg3(e2)) })

	// web goes: e1's DNAT flows stay for alias, e2's (web only) go.
	ctx := context.Background()
	if err := n.client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitGroups(t, "only alias's group should remain", func(g []string) bool { return len(g) == 1 })
	dnat := n.DumpFlows(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.EndpointDNATTable).ID))
	if all := strings.Join(dnat, "\n"); !strings.Contains(all, nat("10.10.1.3", 8080)) || strings.Contains(all, nat("10.10.1.4", 8080)) {
		t.Fatalf("EndpointDNAT should keep e1's flows (alias uses e1) and drop e2's:\n%s", all)
	}
	if seen := answerers(t, cli, "tcp4", "10.96.0.11:8080", 5); seen["e1"] != 5 {
		t.Fatalf("alias should still reach e1 after web left, answered %v", seen)
	}
	if _, err := cli.AskWho(t, "tcp4", "10.96.0.10:80", time.Second); err == nil {
		t.Fatal("web's ClusterIP should not answer once web is gone")
	}

	// alias goes too: nothing of either Service is left.
	if err := n.client.CoreV1().Services("default").Delete(ctx, "alias", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitGroups(t, "no group should remain", func(g []string) bool { return len(g) == 0 })
	if dnat := n.DumpFlows(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.EndpointDNATTable).ID)); strings.Contains(strings.Join(dnat, "\n"), "nat(dst=") {
		t.Fatalf("EndpointDNAT should hold no endpoint flow:\n%s", strings.Join(dnat, "\n"))
	}
}

// synFrame is a TCP SYN from a pod (to the gateway MAC, as pods send
// off-subnet traffic) to addr:port.
func synFrame(from *bridgetest.Pod, gwMAC net.HardwareAddr, dst net.IP, srcPort, dstPort uint16) []byte {
	s, d := netip.AddrFrom4([4]byte(from.IP.To4())), netip.AddrFrom4([4]byte(dst.To4()))
	tcp := make([]byte, tcpMinLen)
	binary.BigEndian.PutUint16(tcp[0:], srcPort)
	binary.BigEndian.PutUint16(tcp[2:], dstPort)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	tcp[12], tcp[13] = 5<<4, tcpSYN
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	binary.BigEndian.PutUint16(tcp[16:], packetreply.Checksum(packetreply.PseudoHeader(s, d, protoTCP, tcpMinLen), tcp))
	return packetreply.Frame(gwMAC, from.MAC, s, d, protoTCP, tcp)
}

// flowPackets is n_packets of the one flow of dump-flows output containing part.
func flowPackets(t *testing.T, flows []string, part string) int {
	t.Helper()
	for _, f := range flows {
		if !strings.Contains(f, part) {
			continue
		}
		i := strings.Index(f, "n_packets=")
		n, err := strconv.Atoi(f[i+len("n_packets=") : i+strings.IndexByte(f[i:], ',')])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Fatalf("no flow with %q in:\n%s", part, strings.Join(flows, "\n"))
	return 0
}

// TestServiceWithoutEndpointsRejectsOnRealOVS: a real connect() to a Service
// without endpoints fails with ECONNREFUSED at once, a connected UDP socket
// gets ECONNREFUSED from the ICMP port unreachable; a burst of SYNs is
// bounded by the meter, and the generated resets never come back through
// the pipeline.
func TestServiceWithoutEndpointsRejectsOnRealOVS(t *testing.T) {
	br := bridgetest.New(t)
	n := newOVSNodeOn(t, br, Config{Packets: packetIns(t, br.OF)},
		service("empty", "10.96.0.20", svcPort("http", corev1.ProtocolTCP, 80, 8080), svcPort("dns", corev1.ProtocolUDP, 53, 53)),
		slice("empty-1", "empty", slicePorts(epPort("http", corev1.ProtocolTCP, 8080), epPort("dns", corev1.ProtocolUDP, 53)),
			ep{ip: "10.10.1.3", node: "node-1", ready: ptr(false), serving: ptr(false)}),
	)
	cli := n.AddPod(t, "c1", "10.10.1.2/24")
	if err := n.flows.InstallPodFlows(cli.HostIF, []net.IP{cli.IP}, cli.MAC, cli.OFPort); err != nil {
		t.Fatal(err)
	}
	// Three groups: TCP's, UDP's and the group of UDP's fragments.
	n.waitGroups(t, "both ports should have their reject bucket", func(g []string) bool {
		return len(g) == 3 && strings.Count(strings.Join(g, "\n"), "set_field:0x20000/0x20000->reg4") == 3
	})

	t.Logf("groups:\n%s\nEndpointDNAT:\n%s\nmeters:\n%s", strings.Join(n.DumpGroups(t), "\n"),
		strings.Join(n.DumpFlows(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.EndpointDNATTable).ID)), "\n"), dumpMeters(t, n))

	// TCP: connect() is refused, fast. The first attempt also resolves the
	// gateway's MAC.
	var took []time.Duration
	for i := 0; i < 20; i++ {
		start := time.Now()
		c, err := cli.Dial(t, "tcp4", "10.96.0.20:80", 5*time.Second)
		d := time.Since(start)
		if err == nil {
			c.Close()
			t.Fatal("connect to a Service without endpoints succeeded")
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("connect to a Service without endpoints should be refused, got %v after %v", err, d)
		}
		took = append(took, d)
	}
	first := took[0]
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("TCP connect to a Service without endpoints: ECONNREFUSED after p50 %v, max %v (20 connects; the first, which also resolved the gateway's MAC: %v)",
		took[len(took)/2], took[len(took)-1], first)

	// UDP: the datagram is answered by an ICMP port unreachable, which a
	// connected socket reports as ECONNREFUSED.
	c, err := cli.Dial(t, "udp4", "10.96.0.20:53", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Write([]byte("who?")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Read(make([]byte, 64)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a UDP datagram to a Service without endpoints should be refused, read returned %v", err)
	}
	t.Logf("UDP to a Service without endpoints: ECONNREFUSED after %v", time.Since(start))

	// A burst: 2000 SYNs injected at the client's port through the whole
	// pipeline, as fast as the switch takes them. The meter lets a bounded
	// number reach the agent; every reset goes straight to the client's
	// port, so the reject flow counts exactly the packets sent to the
	// Service (20 SYNs, 1 datagram and the burst), nothing more.
	dnat := fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.EndpointDNATTable).ID)
	const rejectFlow = "reg4=0x20000/0x20000"
	rejectedBefore := n.proxy.Rejected()
	const burst, sent = 2000, 20 + 1
	var msgs []openflow.Message
	for i := 0; i < burst; i++ {
		msgs = append(msgs, &openflow.PacketOut{InPort: cli.OFPort, Actions: []openflow.Action{&openflow.Output{Port: openflow.PortTable}},
			Data: synFrame(cli, n.GatewayMAC, net.ParseIP("10.96.0.20"), uint16(20000+i), 80)})
	}
	ctx := context.Background()
	if err := n.OF.Apply(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	var hits int
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		hits = flowPackets(t, n.DumpFlowsWithStats(t, dnat), rejectFlow)
		return hits >= sent+burst, nil
	})
	if err != nil || hits != sent+burst {
		t.Fatalf("the reject flow should count the %d packets sent to the Service and nothing else (a reset coming back would add to it), counted %d", sent+burst, hits)
	}
	time.Sleep(time.Second) // let the answers to the burst finish, and the datapath report them
	if hits := flowPackets(t, n.DumpFlowsWithStats(t, dnat), rejectFlow); hits != sent+burst {
		t.Fatalf("after the answers, the reject flow should still count exactly the %d packets sent, counted %d", sent+burst, hits)
	}
	answered := n.proxy.Rejected() - rejectedBefore
	meter, err := n.Ofctl("meter-stats", "br-int")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a burst of %d SYNs: %d answered by the agent; meter: %s", burst, answered, strings.Join(strings.Fields(meter), " "))
	if answered == 0 || answered >= burst {
		t.Fatalf("the meter should let some but not all of a burst of %d SYNs reach the agent, %d were answered", burst, answered)
	}
}

func dumpMeters(t *testing.T, n *ovsNode) string {
	t.Helper()
	out, err := n.Ofctl("dump-meters", "br-int")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func updateService(t *testing.T, c *fake.Clientset, name string, mutate func(*corev1.Service)) {
	t.Helper()
	ctx := context.Background()
	s, err := c.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mutate(s)
	if _, err := c.CoreV1().Services("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func clientIPAffinity(seconds int32) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if seconds == 0 {
			s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = corev1.ServiceAffinityNone, nil
			return
		}
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(seconds)}}
	}
}

// learned returns the flows SessionAffinity learned (cookie tag 0x5ec2).
func (n *ovsNode) learned(t *testing.T) []string {
	t.Helper()
	return n.DumpFlows(t, fmt.Sprintf("table=%d,cookie=0x5ec2000000000000/0xffff000000000000", n.flows.Pipeline().Table(agentof.SessionAffinityTable).ID))
}

// learnFlows returns the learn flows of SessionAffinity (one per affinity
// port and endpoint).
func (n *ovsNode) learnFlows(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, f := range n.DumpFlows(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.SessionAffinityTable).ID)) {
		if strings.Contains(f, "actions=learn(") {
			out = append(out, f)
		}
	}
	return out
}

func (n *ovsNode) waitLearnFlows(t *testing.T, what string, cond func([]string) bool) {
	t.Helper()
	var flows []string
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		flows = n.learnFlows(t)
		return cond(flows), nil
	})
	if err != nil {
		t.Fatalf("%s; SessionAffinity has learn flows:\n%s", what, strings.Join(flows, "\n"))
	}
}

// waitLearned waits until the learned flows satisfy cond.
func (n *ovsNode) waitLearned(t *testing.T, what string, timeout time.Duration, cond func([]string) bool) {
	t.Helper()
	var flows []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		flows = n.learned(t)
		return cond(flows), nil
	})
	if err != nil {
		t.Fatalf("%s; SessionAffinity learned:\n%s", what, strings.Join(flows, "\n"))
	}
}

// TestSessionAffinityOnRealOVS: under ClientIP affinity 15 connections get
// the same endpoint; without it they spread; affinity switches on and off;
// a learned affinity expires after its timeout, the switch's idle_timeout
// up to 65535 s and the agent's ageing above (run here in seconds); the
// clients of an endpoint that leaves are balanced again.
func TestSessionAffinityOnRealOVS(t *testing.T) {
	ports := slicePorts(epPort("", corev1.ProtocolTCP, 8080))
	web := service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080))
	clientIPAffinity(10800)(web)
	n := newOVSNode(t, Config{AffinityAgingPeriod: 200 * time.Millisecond}, web,
		slice("web-1", "web", ports, ep{ip: "10.10.1.3", node: "node-1"}, ep{ip: "10.10.1.4", node: "node-1"}, ep{ip: "10.10.1.5", node: "node-1"}))
	cli := n.AddPod(t, "c1", "10.10.1.2/24")
	eps := []*bridgetest.Pod{n.AddPod(t, "e1", "10.10.1.3/24"), n.AddPod(t, "e2", "10.10.1.4/24"), n.AddPod(t, "e3", "10.10.1.5/24")}
	for _, p := range append([]*bridgetest.Pod{cli}, eps...) {
		if err := n.flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		p.ServeWho(t, 8080)
	}
	n.waitGroups(t, "web should be installed with learning buckets", func(g []string) bool {
		return len(g) == 1 && strings.Count(g[0], "set_field:0x80000/0x80000->reg4") == 3
	})
	sticky := func(what string) string {
		t.Helper()
		seen := map[string]int{}
		var order []string
		for i := 0; i < 15; i++ {
			answer, err := cli.AskWho(t, "tcp4", "10.96.0.10:80", 2*time.Second)
			if err != nil {
				order = append(order, "error: "+err.Error())
				i--
				if len(order) > 30 {
					break
				}
				continue
			}
			who, _ := bridgetest.Answerer(answer)
			seen[who]++
			order = append(order, who)
		}
		if len(seen) != 1 {
			t.Fatalf("%s: 15 connections under ClientIP affinity should all reach one endpoint, reached %v (in order: %v)\nSessionAffinity:\n%s\nServiceLB:\n%s\ngroups:\n%s", what, seen, order,
				strings.Join(n.DumpFlowsWithStats(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.SessionAffinityTable).ID)), "\n"),
				strings.Join(n.DumpFlowsWithStats(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.ServiceLBTable).ID)), "\n"),
				strings.Join(n.DumpGroups(t), "\n"))
		}
		for who := range seen {
			return who
		}
		return ""
	}
	first := sticky("affinity on")
	t.Logf("15 connections under affinity all reached %s; SessionAffinity:\n%s\ngroup:\n%s", first,
		strings.Join(n.DumpFlows(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.SessionAffinityTable).ID)), "\n"),
		strings.Join(n.DumpGroups(t), "\n"))
	if l := n.learned(t); len(l) != 1 || !strings.Contains(l[0], "idle_timeout=10800") || !strings.Contains(l[0], "nw_src=10.10.1.2") {
		t.Fatalf("one flow with the Service's timeout should be learned for the client, have:\n%s", strings.Join(l, "\n"))
	}

	// Affinity off: connections spread again, learned flows are gone.
	updateService(t, n.client, "web", clientIPAffinity(0))
	n.waitGroups(t, "the buckets should stop learning", func(g []string) bool { return len(g) == 1 && !strings.Contains(g[0], "0x80000/0x80000->reg4") })
	if l := n.learned(t); len(l) != 0 {
		t.Fatalf("switching affinity off should delete the learned flows, have:\n%s", strings.Join(l, "\n"))
	}
	if seen := answerers(t, cli, "tcp4", "10.96.0.10:80", 30); len(seen) < 2 {
		t.Fatalf("without affinity 30 connections should spread over the endpoints, reached %v", seen)
	}

	// On again, with a 2 s timeout the switch ages: sticky, then expired.
	updateService(t, n.client, "web", clientIPAffinity(2))
	n.waitLearnFlows(t, "the learn flows should learn with 2 s", func(l []string) bool {
		return len(l) == 3 && strings.Count(strings.Join(l, "\n"), "idle_timeout=2,") == 3
	})
	sticky("affinity on again")
	expiry := time.Now()
	n.waitLearned(t, "the switch should expire the affinity after 2 s without a new connection", 15*time.Second, func(l []string) bool { return len(l) == 0 })
	t.Logf("a 2 s affinity (switch idle_timeout) expired %v after the last connection", time.Since(expiry).Round(100*time.Millisecond))

	// A timeout above what the switch holds (here: above 1 s, as if above
	// 65535 s): the learned flow has no timeout and the agent ages it.
	n.flows.SetMaxSwitchTimeout(1)
	updateService(t, n.client, "web", clientIPAffinity(3))
	n.waitLearnFlows(t, "the learn flows should learn without a timeout", func(l []string) bool {
		return len(l) == 3 && !strings.Contains(strings.Join(l, "\n"), "idle_timeout")
	})
	who := sticky("affinity aged by the agent")
	if l := n.learned(t); len(l) != 1 || strings.Contains(l[0], "idle_timeout") {
		t.Fatalf("one flow without idle_timeout should be learned, have:\n%s", strings.Join(l, "\n"))
	}
	// Connections within the timeout keep it (checked only when this slow
	// machine really made them within 2 s of the last).
	last := time.Now()
	for i := 0; i < 4; i++ {
		time.Sleep(time.Second)
		got, _ := bridgetest.Answerer(cli.AskWhoEventually(t, "tcp4", "10.96.0.10:80"))
		if gap := time.Since(last); got != who && gap < 2*time.Second {
			t.Fatalf("a connection %v after the last should keep the affinity to %s, reached %s", gap, who, got)
		}
		last = time.Now()
	}
	start := time.Now()
	n.waitLearned(t, "the agent should expire the affinity after 3 s without a new connection", 15*time.Second, func(l []string) bool { return len(l) == 0 })
	t.Logf("a 3 s affinity aged by the agent (every 200 ms) expired %v after the last connection", time.Since(start).Round(100*time.Millisecond))

	// The endpoint a client sticks to leaves: its learned flow goes, the
	// client lands on another endpoint and sticks there.
	n.flows.SetMaxSwitchTimeout(agentof.DefaultMaxSwitchTimeout)
	updateService(t, n.client, "web", clientIPAffinity(10800))
	n.waitLearnFlows(t, "the learn flows should learn with 10800 s", func(l []string) bool {
		return len(l) == 3 && strings.Count(strings.Join(l, "\n"), "idle_timeout=10800,") == 3
	})
	who = sticky("before the endpoint leaves")
	updateSlice(t, n.client, "web-1", func(s *discoveryv1.EndpointSlice) {
		var keep []discoveryv1.Endpoint
		for i, e := range s.Endpoints {
			if eps[i].Name != who {
				keep = append(keep, e)
			}
		}
		s.Endpoints = keep
	})
	n.waitGroups(t, "the group should lose the endpoint", func(g []string) bool { return len(g) == 1 && strings.Count(g[0], "bucket=") == 2 })
	if l := n.learnFlows(t); len(l) != 2 {
		t.Fatalf("the learn flow of the endpoint that left should be deleted with its bucket, have:\n%s", strings.Join(l, "\n"))
	}
	if l := n.learned(t); len(l) != 0 {
		t.Fatalf("the learned flow to the endpoint that left should be deleted, have:\n%s", strings.Join(l, "\n"))
	}
	if again := sticky("after the endpoint left"); again == who {
		t.Fatalf("the client should have left %s, which is gone", who)
	}
}

// tcpOf is the network to dial addr ("host:port") with: tcp6 for an IPv6
// host, else tcp4.
func tcpOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil && strings.Contains(h, ":") {
		return "tcp6"
	}
	return "tcp4"
}

// connectOutcome connects and says how it failed: "refused", "timeout",
// or the answerer.
func connectOutcome(t *testing.T, from *bridgetest.Pod, addr string) string {
	t.Helper()
	answer, err := from.AskWho(t, tcpOf(addr), addr, time.Second)
	switch {
	case err == nil:
		who, _ := bridgetest.Answerer(answer)
		return who
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, os.ErrDeadlineExceeded) || strings.Contains(err.Error(), "timeout"):
		return "timeout"
	}
	return err.Error()
}

// TestExternalAddressesAndTrafficPoliciesOnRealOVS: external IPs and
// LoadBalancer ingress IPs work for pods like ClusterIPs; under
// externalTrafficPolicy Local a host outside the cluster reaches only the
// local endpoints and they see its own address; internalTrafficPolicy Local
// keeps pods on local endpoints; without local endpoints such traffic drops,
// without any it is refused. The pod e2 is on this bridge, but its slice
// says node-2: for the proxy it is remote.
func TestExternalAddressesAndTrafficPoliciesOnRealOVS(t *testing.T) {
	ports := slicePorts(epPort("", corev1.ProtocolTCP, 8080))
	eps := []ep{{ip: "10.10.1.3", node: "node-1"}, {ip: "10.10.1.4", node: "node-2"}}
	web := withSpec(service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080)), func(s *corev1.Service) {
		s.Spec.ExternalIPs = []string{"192.168.100.10"}
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	loc := withSpec(service("loc", "10.96.0.11", svcPort("", corev1.ProtocolTCP, 80, 8080)), func(s *corev1.Service) {
		s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
	})
	lb := withSpec(service("lb", "10.96.0.12", svcPort("", corev1.ProtocolTCP, 80, 8080)), func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.168.100.11"}, {IP: "192.168.100.12", IPMode: ptr(corev1.LoadBalancerIPModeProxy)}}
	})
	n := newOVSNode(t, Config{}, web, slice("web-1", "web", ports, eps...), loc, slice("loc-1", "loc", ports, eps...), lb, slice("lb-1", "lb", ports, eps...))
	cli, e1, e2 := n.clientAndTwoEndpoints(t)
	e1.ServeWho(t, 8080)
	e2.ServeWho(t, 8080)
	out := n.AddOutsideHost(t, "out", bridgetest.HostLink{Node: "192.168.77.1/24", Host: "192.168.77.2/24"})
	n.RouteToBridge(t, "192.168.100.0/24", agentof.GlobalVirtualMAC)
	// web: ClusterIP, external IP, external IP from outside; loc; lb: ClusterIP, ingress IP.
	n.waitGroups(t, "every port should be installed", func(g []string) bool { return len(g) == 6 })
	t.Logf("ServiceLB:\n%s\nEndpointDNAT:\n%s\ngroups:\n%s", strings.Join(n.DumpFlows(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.ServiceLBTable).ID)), "\n"),
		strings.Join(n.DumpFlows(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.EndpointDNATTable).ID)), "\n"), strings.Join(n.DumpGroups(t), "\n"))

	// From outside, under externalTrafficPolicy Local: e1 only, and e1 sees
	// the outside host's own address.
	for i := 0; i < 20; i++ {
		who, client := bridgetest.Answerer(out.AskWhoEventually(t, "tcp4", "192.168.100.10:80"))
		if who != "e1" || !strings.HasPrefix(client, "192.168.77.2:") {
			t.Fatalf("from outside under externalTrafficPolicy Local only the local e1 should answer, seeing the client's address; %s answered, seeing %s", who, client)
		}
	}
	// From a pod, the same external IP spreads over every endpoint.
	if seen := answerers(t, cli, "tcp4", "192.168.100.10:80", 30); seen["e1"] == 0 || seen["e2"] == 0 {
		t.Fatalf("from a pod the external IP should reach every endpoint, reached %v", seen)
	}
	// internalTrafficPolicy Local: pods reach the local endpoint only.
	if seen := answerers(t, cli, "tcp4", "10.96.0.11:80", 20); seen["e1"] != 20 {
		t.Fatalf("under internalTrafficPolicy Local only the local e1 should answer, answered %v", seen)
	}
	// A LoadBalancer's ingress IP works for pods like its ClusterIP; one
	// whose load balancer proxies is not realized.
	if seen := answerers(t, cli, "tcp4", "192.168.100.11:80", 30); seen["e1"] == 0 || seen["e2"] == 0 {
		t.Fatalf("the LoadBalancer ingress IP should reach every endpoint, reached %v", seen)
	}
	if got := connectOutcome(t, cli, "192.168.100.12:80"); got != "timeout" {
		t.Fatalf("an ingress IP with ipMode Proxy should not be realized, connect: %s", got)
	}

	// The local endpoint goes: Local traffic drops (times out), pods still
	// reach e2 through the external IP.
	for _, name := range []string{"web-1", "loc-1"} {
		updateSlice(t, n.client, name, func(s *discoveryv1.EndpointSlice) { s.Endpoints = s.Endpoints[1:] })
	}
	n.waitGroups(t, "the Local ports should have empty groups", func(g []string) bool {
		empty := 0
		for _, x := range g {
			if !strings.Contains(x, "bucket=") {
				empty++
			}
		}
		return empty == 2
	})
	if got := connectOutcome(t, out, "192.168.100.10:80"); got != "timeout" {
		t.Fatalf("from outside without a local endpoint (externalTrafficPolicy Local) the connection should be dropped, got %s", got)
	}
	if got := connectOutcome(t, cli, "10.96.0.11:80"); got != "timeout" {
		t.Fatalf("internalTrafficPolicy Local without a local endpoint should drop, got %s", got)
	}
	if seen := answerers(t, cli, "tcp4", "192.168.100.10:80", 5); seen["e2"] != 5 {
		t.Fatalf("pods should still reach e2 through the external IP, reached %v", seen)
	}

	// No endpoint at all: refused, also from outside (the reset goes back
	// through the gateway and the node).
	for _, name := range []string{"web-1", "loc-1"} {
		updateSlice(t, n.client, name, func(s *discoveryv1.EndpointSlice) { s.Endpoints = nil })
	}
	n.waitGroups(t, "web's and loc's ports should reject", func(g []string) bool {
		return strings.Count(strings.Join(g, "\n"), "set_field:0x20000/0x20000->reg4") == 4
	})
	for _, c := range []struct {
		from *bridgetest.Pod
		addr string
	}{{out, "192.168.100.10:80"}, {cli, "192.168.100.10:80"}, {cli, "10.96.0.11:80"}, {cli, "10.96.0.10:80"}} {
		if got := connectOutcome(t, c.from, c.addr); got != "refused" {
			t.Fatalf("%s from %s without any endpoint should be refused, got %s", c.addr, c.from.Name, got)
		}
	}
}

// recordingOF passes bundles on to the switch's client and keeps their
// messages, printed.
type recordingOF struct {
	*openflow.Client
	mu   sync.Mutex
	msgs []string
}

func (r *recordingOF) Bundle(ctx context.Context, msgs ...openflow.Message) error {
	r.mu.Lock()
	for _, m := range msgs {
		r.msgs = append(r.msgs, messageText(m))
	}
	r.mu.Unlock()
	return r.Client.Bundle(ctx, msgs...)
}

func (r *recordingOF) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.msgs
	r.msgs = nil
	return out
}

func messageText(m openflow.Message) string {
	switch m := m.(type) {
	case *openflow.GroupMod:
		return fmt.Sprintf("group %s %s", map[openflow.GroupModCommand]string{openflow.GroupAdd: "add", openflow.GroupModify: "modify",
			openflow.GroupDelete: "delete", openflow.GroupInsertBucket: "insert-bucket"}[m.Command], m)
	case *openflow.FlowMod:
		return fmt.Sprintf("flow %s %s", strings.ToLower(m.Command.String()), m.Flow.String())
	}
	return fmt.Sprint(m)
}

// durations returns the age in seconds of each flow of a dump with stats
// (keyed by the flow without its statistics) and of each group.
func durations(t *testing.T, n *ovsNode) (flows map[string]float64, groups map[int]float64) {
	t.Helper()
	flows = map[string]float64{}
	for _, f := range n.DumpFlowsWithStats(t, "cookie=0x5ec1000000000000/0xffff000000000000") {
		d := field(f, "duration=")
		flows[withoutStats(f)] = d
	}
	out, err := n.Ofctl("dump-group-stats", "br-int")
	if err != nil {
		t.Fatal(err)
	}
	groups = map[int]float64{}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "group_id=") {
			id, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(l, ",", 2)[0], "group_id="))
			groups[id] = field(l, "duration=")
		}
	}
	return flows, groups
}

func field(s, name string) float64 {
	i := strings.Index(s, name)
	if i < 0 {
		return -1
	}
	v := s[i+len(name):]
	v = v[:strings.IndexAny(v, "s,")]
	f, _ := strconv.ParseFloat(v, 64)
	return f
}

// withoutStats drops duration, counters and ages from a dump-flows line.
func withoutStats(f string) string {
	var keep []string
	for _, part := range strings.Split(f, ", ") {
		if strings.HasPrefix(part, "duration=") || strings.HasPrefix(part, "n_packets=") || strings.HasPrefix(part, "n_bytes=") ||
			strings.HasPrefix(part, "idle_age=") || strings.HasPrefix(part, "hard_age=") {
			continue
		}
		keep = append(keep, part)
	}
	return strings.Join(keep, ", ")
}

// TestAnAgentRestartKeepsUnchangedServicesOnRealOVS: the agent restarts (a
// new OpenFlow client with a new cookie round, and a new proxy, on the same
// bridge) while one Service is deleted and another loses an endpoint. The
// new run sends OVS only that difference: the unchanged Services' groups and
// flows are the same ones (their durations were not reset), a connection
// opened before the restart keeps working, and a client keeps its session
// affinity.
func TestAnAgentRestartKeepsUnchangedServicesOnRealOVS(t *testing.T) {
	ports := slicePorts(epPort("", corev1.ProtocolTCP, 8080), epPort("echo", corev1.ProtocolTCP, 9090))
	svcPorts := []corev1.ServicePort{svcPort("", corev1.ProtocolTCP, 80, 8080), svcPort("echo", corev1.ProtocolTCP, 90, 9090)}
	eps := []ep{{ip: "10.10.1.3", node: "node-1"}, {ip: "10.10.1.4", node: "node-1"}}
	sticky := service("sticky", "10.96.0.11", svcPorts...)
	clientIPAffinity(10800)(sticky)
	// keep also has a UDP port, whose fragment flow and group must be kept too.
	keepPorts := append(slicePorts(epPort("dns", corev1.ProtocolUDP, 8080)), ports...)
	n := newOVSNode(t, Config{},
		service("keep", "10.96.0.10", append([]corev1.ServicePort{svcPort("dns", corev1.ProtocolUDP, 53, 8080)}, svcPorts...)...),
		slice("keep-1", "keep", keepPorts, eps...),
		sticky, slice("sticky-1", "sticky", ports, eps...),
		service("gone", "10.96.0.12", svcPorts...), slice("gone-1", "gone", ports, eps...),
		service("moved", "10.96.0.13", svcPorts...), slice("moved-1", "moved", ports, eps...),
	)
	cli := n.AddPod(t, "c1", "10.10.1.2/24")
	e1 := n.AddPod(t, "e1", "10.10.1.3/24")
	e2 := n.AddPod(t, "e2", "10.10.1.4/24")
	pods := []*bridgetest.Pod{cli, e1, e2}
	for _, p := range pods {
		if err := n.flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []*bridgetest.Pod{e1, e2} {
		e.ServeWho(t, 8080)
		e.ServeEcho(t, 9090)
	}
	n.waitGroups(t, "the four Services should be installed", func(g []string) bool { return len(g) == 10 })
	held, err := cli.Dial(t, "tcp4", "10.96.0.10:90", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	echo := func(what string) {
		t.Helper()
		_ = held.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := held.Write([]byte(what + "\n")); err != nil {
			t.Fatalf("write on the held connection (%s): %v", what, err)
		}
		line, err := bufio.NewReader(held).ReadString('\n')
		if err != nil || line != what+"\n" {
			t.Fatalf("the held connection (%s) should echo, got %q, %v", what, line, err)
		}
	}
	echo("before the restart")
	stuck, _ := bridgetest.Answerer(cli.AskWhoEventually(t, "tcp4", "10.96.0.11:80"))
	flowsBefore, groupsBefore := durations(t, n)
	time.Sleep(2 * time.Second) // ages of 2 s or more tell kept flows and groups from rewritten ones

	// The agent stops; while it is down, gone is deleted and moved loses e2.
	n.stop()
	<-n.done
	ctx := context.Background()
	if err := n.client.CoreV1().Services("default").Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	updateSlice(t, n.client, "moved-1", func(s *discoveryv1.EndpointSlice) { s.Endpoints = s.Endpoints[:1] })

	// The next run: a new client (cookie round 2) initializes the pipeline
	// and puts back the pods' flows, as the agent does; then a new proxy.
	rec := &recordingOF{Client: n.OF}
	flows, err := agentof.NewClient(rec, 2)
	if err != nil {
		t.Fatal(err)
	}
	n.SetReplay(func(ctx context.Context, conn *openflow.Conn) error { return flows.Replay(ctx, conn) })
	_, cidr, _ := net.ParseCIDR(bridgetest.PodCIDR)
	if err := flows.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort,
		GatewayIP: net.ParseIP(bridgetest.GatewayIP), GatewayMAC: n.GatewayMAC, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
	}
	rec.take()
	n.flows = flows
	start := time.Now()
	n.start(t, Config{Packets: packetIns(t, n.OF)})
	n.waitGroups(t, "gone's groups should go and moved's lose e2", func(g []string) bool {
		return len(g) == 8 && bucketsOf(g) == 14
	})
	// The recovery finishes once every Service was synced, deleting gone's
	// groups; then nothing more comes.
	var sent []string
	var programmed time.Duration
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		sent = append(sent, rec.take()...)
		if strings.Count(strings.Join(sent, "\n"), "group delete") == 2 {
			programmed = time.Since(start)
			break
		}
	}
	time.Sleep(time.Second)
	sent = append(sent, rec.take()...)
	t.Logf("the new run programmed the changes %v after the proxy started, with %d OpenFlow messages:\n%s", programmed.Round(time.Millisecond), len(sent), strings.Join(sent, "\n"))
	if len(sent) != 8 {
		t.Fatalf("the difference is 8 messages (moved: 2 group modifies and 2 notes; gone: 2 ServiceLB flows and 2 groups), sent %d", len(sent))
	}
	for _, m := range sent {
		if strings.Contains(m, "10.96.0.10") || strings.Contains(m, "10.96.0.11") {
			t.Fatalf("the new run should send nothing about the unchanged Services keep and sticky, sent %s", m)
		}
	}
	if err := flows.DeleteRound(ctx, 1); err != nil { // as the agent does, once its flows are back
		t.Fatal(err)
	}

	// The unchanged Services' flows and groups are the same ones: older
	// than the restart.
	since := time.Since(start).Seconds()
	flowsAfter, groupsAfter := durations(t, n)
	kept := 0
	for f, before := range flowsBefore {
		if !strings.Contains(f, "10.96.0.10") && !strings.Contains(f, "10.96.0.11") {
			continue
		}
		after, ok := flowsAfter[f]
		if !ok || after < before+2 {
			t.Fatalf("the flow %s should have been kept (age %.1f s before, %.1f s after, restart %.1f s ago)", f, before, after, since)
		}
		kept++
	}
	for id, before := range groupsBefore {
		after, ok := groupsAfter[id]
		if ok && after < before+2 {
			t.Fatalf("group %d should not have been rewritten: %.1f s old before, %.1f s after", id, before, after)
		}
	}
	t.Logf("%d ServiceLB and SessionAffinity flows of the unchanged Services and %d groups kept across the restart", kept, len(groupsAfter))
	echo("after the restart")
	if seen := answerers(t, cli, "tcp4", "10.96.0.11:80", 15); seen[stuck] != 15 {
		t.Fatalf("the client's affinity to %s should survive the restart, answered %v", stuck, seen)
	}
	if seen := answerers(t, cli, "tcp4", "10.96.0.13:80", 10); seen["e1"] != 10 {
		t.Fatalf("moved should reach e1 only now, answered %v", seen)
	}
}

// clientAndTwoEndpoints adds the pods most tests use: a client c1
// (10.10.1.2) and the endpoints e1 (10.10.1.3) and e2 (10.10.1.4).
func (n *ovsNode) clientAndTwoEndpoints(t *testing.T) (cli, e1, e2 *bridgetest.Pod) {
	t.Helper()
	return n.addPod(t, "c1", "10.10.1.2/24"), n.addPod(t, "e1", "10.10.1.3/24"), n.addPod(t, "e2", "10.10.1.4/24")
}

// addPod adds a pod to the node with the flows a CNI ADD installs for it.
func (n *ovsNode) addPod(t *testing.T, name, addr string) *bridgetest.Pod {
	t.Helper()
	p := n.AddPod(t, name, addr)
	if err := n.flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
		t.Fatal(err)
	}
	return p
}
