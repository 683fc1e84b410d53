package proxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/agent/route"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// pathNode is a node of a two-node cluster on an underlay, running what
// the agent runs for Services with proxyAll: the OpenFlow pipeline, the
// proxy and the node path (nftables and routes in the node's netns).
type pathNode struct {
	*bridgetest.Bridge
	name  string
	flows *agentof.Client
	path  *route.NodePath
}

// newPathNode starts a node on u and its agent parts; peers' flows and
// routes come with connectNodes.
func newPathNode(t *testing.T, u *bridgetest.Underlay, name, podCIDR, gwIP, nodeIP string) *pathNode {
	t.Helper()
	br := bridgetest.NewNode(t, bridgetest.NodeOptions{PodCIDR: podCIDR, GatewayIP: gwIP, Underlay: u, NodeIP: nodeIP})
	flows, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	br.SetReplay(func(ctx context.Context, conn *openflow.Conn) error { return flows.Replay(ctx, conn) })
	if err := flows.Initialize(context.Background(), &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayMAC: br.GatewayMAC, TunnelOFPort: bridgetest.TunnelOFPort, PodCIDR: br.PodCIDR, NodeIP: br.NodeIP}); err != nil {
		t.Fatal(err)
	}
	ones, _ := br.PodCIDR.Mask.Size()
	path, err := route.NewNodePath(route.NodePathConfig{GatewayName: "antrea-gw0", GatewayIP: netip.MustParseAddr(gwIP),
		NodeIP: netip.MustParsePrefix(nodeIP).Addr(), PodCIDR: netip.PrefixFrom(netip.MustParseAddr(br.PodCIDR.IP.String()), ones), ResyncPeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The agent's masquerade of pod traffic leaving the node.
	nodeNS, err := ns.GetNS("/var/run/netns/" + br.NetNS())
	if err != nil {
		t.Fatal(err)
	}
	defer nodeNS.Close()
	if err := nodeNS.Do(func(ns.NetNS) error {
		return nodenet.EnsureMasquerade(context.Background(), netip.MustParsePrefix(br.PodCIDR.String()), "antrea-gw0")
	}); err != nil {
		t.Fatal(err)
	}
	return &pathNode{Bridge: br, name: name, flows: flows, path: path}
}

// twoPathNodes starts node-1 (pods 10.10.1.0/24, address 192.168.77.11)
// and node-2 (10.10.2.0/24, 192.168.77.12) on one underlay, connected.
func twoPathNodes(t *testing.T) (u *bridgetest.Underlay, n1, n2 *pathNode) {
	t.Helper()
	u = bridgetest.NewUnderlay(t)
	n1 = newPathNode(t, u, "node-1", "10.10.1.0/24", "10.10.1.1", "192.168.77.11/24")
	n2 = newPathNode(t, u, "node-2", "10.10.2.0/24", "10.10.2.1", "192.168.77.12/24")
	connectNodes(t, n1, n2)
	return u, n1, n2
}

// connectNodes installs each node's flows and route to the other's pods.
func connectNodes(t *testing.T, a, b *pathNode) {
	t.Helper()
	for _, p := range [][2]*pathNode{{a, b}, {b, a}} {
		if err := p[0].flows.InstallNodeFlows(p[1].name, p[1].PodCIDR, p[1].GatewayIP, p[1].NodeIP); err != nil {
			t.Fatal(err)
		}
		p[0].ConnectPeer(t, p[1].Bridge)
	}
}

// run starts the node path (in the node's netns) and the proxy with
// proxyAll on client's objects, until the test ends or stop is called.
func (n *pathNode) run(t *testing.T, client *fake.Clientset) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nodeNS, err := ns.GetNS("/var/run/netns/" + n.NetNS())
	if err != nil {
		t.Fatal(err)
	}
	pathDone := make(chan struct{})
	go func() {
		defer close(pathDone)
		_ = nodeNS.Do(func(ns.NetNS) error { return n.path.Run(ctx) })
	}()
	f := informers.NewSharedInformerFactory(client, 0)
	p, err := NewWithConfig(Config{NodeName: n.name, Packets: packetIns(t, n.OF), ProxyAll: true, NodePath: n.path},
		f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), n.flows)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	proxyDone := make(chan struct{})
	go func() { _ = p.Run(ctx); close(proxyDone) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-proxyDone; <-pathDone; f.Shutdown(); nodeNS.Close() }) }
	t.Cleanup(stop)
	return stop
}

func (n *pathNode) addPod(t *testing.T, name, cidr string) *bridgetest.Pod {
	t.Helper()
	p := n.AddPod(t, name, cidr)
	if err := n.flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
		t.Fatal(err)
	}
	return p
}

// nft lists the node's netfilter table (the node path's chains and sets) in the node's netns.
func (n *pathNode) nft(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", n.NetNS(), "nft", "list", "table", string(nodenet.TableFamily), nodenet.TableName).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(no table: %v: %s)", err, out)
	}
	return string(out)
}

// ask connects count times from c to addr (IPv4 or IPv6) and returns who answered and
// the client addresses they saw (without ports); a failed connection counts
// under its outcome ("timeout", "refused").
func ask(t *testing.T, c *bridgetest.Pod, addr string, count int) (who map[string]int, seen map[string]bool) {
	t.Helper()
	who, seen = map[string]int{}, map[string]bool{}
	for i := 0; i < count; i++ {
		answer, err := c.AskWho(t, tcpOf(addr), addr, 2*time.Second)
		if err != nil {
			who[connectOutcome(t, c, addr)]++
			continue
		}
		w, client := bridgetest.Answerer(answer)
		who[w]++
		if h, _, err := net.SplitHostPort(client); err == nil {
			seen[w+" saw "+h] = true
		}
	}
	return who, seen
}

// TestNodePortsAndTheNodePathOnTwoRealNodes runs two nodes on an underlay,
// as the lab's: each node's address on br-phy's internal port, a Geneve
// tunnel between them, the pipeline, the proxy with proxyAll and the node
// path in each node's netns; a host outside the cluster on the underlay.
// The expectations are Kubernetes' Service semantics (kube-proxy's):
//   - a NodePort answers on every node's address, from outside, from the
//     node itself, from pods of either node, with every endpoint;
//   - externalTrafficPolicy Cluster: an endpoint on another node than the
//     one the client reached answers through that node, so it must not see
//     the client's address (source NAT);
//   - externalTrafficPolicy Local: only a node with a local endpoint
//     answers clients from outside, and the endpoint sees the client's
//     address; the node's own traffic still reaches the endpoints elsewhere;
//   - a pod reaching itself through its node's NodePort is answered (hairpin);
//   - the node reaches ClusterIPs, and an outside host reaches an external
//     IP the node routes, with the same rules;
//   - a NodePort without endpoints refuses; with proxyAll removed nothing
//     of the node path stays.
func TestNodePortsAndTheNodePathOnTwoRealNodes(t *testing.T) {
	u, n1, n2 := twoPathNodes(t)
	out := u.AddHost(t, "outside", "192.168.77.100/24")
	// The outside host reaches external IPs through node-1 (as a router
	// announcing them would send it).
	bridgetest.Run(t, "ip", "-n", out.NS, "route", "add", "192.168.100.0/24", "via", "192.168.77.11")

	c1 := n1.addPod(t, "c1", "10.10.1.2/24")
	e1 := n1.addPod(t, "e1", "10.10.1.3/24")
	e2 := n2.addPod(t, "e2", "10.10.2.3/24")
	e1.ServeWho(t, 8080)
	e2.ServeWho(t, 8080)

	nodePortSvc := func(name, clusterIP string, nodePort int32, f func(*corev1.Service)) *corev1.Service {
		sp := svcPort("", corev1.ProtocolTCP, 80, 8080)
		sp.NodePort = nodePort
		s := service(name, clusterIP, sp)
		s.Spec.Type = corev1.ServiceTypeNodePort
		if f != nil {
			f(s)
		}
		return s
	}
	ports := slicePorts(epPort("", corev1.ProtocolTCP, 8080))
	both := []ep{{ip: "10.10.1.3", node: "node-1"}, {ip: "10.10.2.3", node: "node-2"}}
	client := fake.NewClientset()
	for _, o := range []any{
		// web: ETP Cluster, an endpoint on each node, an external IP.
		nodePortSvc("web", "10.96.0.10", 30080, func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.168.100.10"} }),
		slice("web-1", "web", ports, both...),
		// remote: ETP Cluster, its only endpoint on node-2.
		nodePortSvc("remote", "10.96.0.11", 30081, nil),
		slice("remote-1", "remote", ports, ep{ip: "10.10.2.3", node: "node-2"}),
		// loc: ETP Local, its only endpoint on node-1.
		nodePortSvc("loc", "10.96.0.12", 30082, func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }),
		slice("loc-1", "loc", ports, ep{ip: "10.10.1.3", node: "node-1"}),
		// none: no endpoints.
		nodePortSvc("none", "10.96.0.13", 30083, nil),
	} {
		create(t, client, o)
	}
	n1.run(t, client)
	stop2 := n2.run(t, client)
	node1, node2 := n1.NodeHost("node-1"), n2.NodeHost("node-2")

	// Both nodes programmed: their NodePorts DNATed, the NodePort
	// addresses known.
	for _, n := range []*pathNode{n1, n2} {
		waitFor(t, n.name+"'s node path should DNAT the four NodePorts on its address", func() (bool, string) {
			table := n.nft(t)
			return strings.Contains(table, "tcp . 30083") && strings.Contains(table, n.NodeIP.String()), table
		})
	}
	t.Logf("node-1's node path:\n%s\nroutes:\n%s", n1.nft(t), bridgetest.Run(t, "ip", "-n", n1.NetNS(), "route", "show", "dev", "antrea-gw0"))

	const count = 12
	// NodePort, ETP Cluster, from outside, on each node's address: every
	// endpoint answers; the one on the other node must not see the client.
	for _, tc := range []struct {
		addr, remote string
	}{{"192.168.77.11:30080", "e2"}, {"192.168.77.12:30080", "e1"}} {
		who, seen := ask(t, out, tc.addr, count)
		if who["e1"]+who["e2"] != count || who["e1"] == 0 || who["e2"] == 0 {
			t.Fatalf("from outside %s (externalTrafficPolicy Cluster) should reach both endpoints, answered %v", tc.addr, who)
		}
		if seen[tc.remote+" saw 192.168.77.100"] {
			t.Fatalf("through %s, the endpoint on the other node (%s) answers through the node the client reached: it must see a source-NATed address, saw %v", tc.addr, tc.remote, seen)
		}
		t.Logf("from outside to %s: %v, %v", tc.addr, who, seen)
	}
	who, seen := ask(t, out, "192.168.77.11:30081", count)
	if who["e2"] != count || seen["e2 saw 192.168.77.100"] {
		t.Fatalf("a NodePort whose only endpoint is on the other node should answer from it, source-NATed; answered %v, %v", who, seen)
	}

	// ETP Local: only node-1 has the endpoint; it sees the client.
	who, seen = ask(t, out, "192.168.77.11:30082", count)
	if who["e1"] != count || len(seen) != 1 || !seen["e1 saw 192.168.77.100"] {
		t.Fatalf("externalTrafficPolicy Local on the node with the endpoint: e1 should answer, seeing the client's address; answered %v, %v", who, seen)
	}
	// A pod's traffic to another node's address is outside traffic there
	// (it leaves its node masqueraded), as with kube-proxy.
	for _, c := range []*bridgetest.Pod{out, c1} {
		if got := connectOutcome(t, c, "192.168.77.12:30082"); got != "timeout" {
			t.Fatalf("externalTrafficPolicy Local on a node without a local endpoint should not answer %s, got %s", c.Name, got)
		}
	}

	// From the nodes themselves (hostNetwork processes): every endpoint,
	// also under ETP Local on the node without a local endpoint.
	for _, tc := range []struct {
		from *bridgetest.Pod
		addr string
		want []string
	}{
		{node1, "192.168.77.11:30080", []string{"e1", "e2"}},
		{node2, "192.168.77.12:30080", []string{"e1", "e2"}},
		{node1, "192.168.77.11:30081", []string{"e2"}},
		{node2, "192.168.77.12:30082", []string{"e1"}},
		{node1, "192.168.77.12:30080", []string{"e1", "e2"}},
		// Node -> ClusterIP.
		{node1, "10.96.0.10:80", []string{"e1", "e2"}},
		{node2, "10.96.0.12:80", []string{"e1"}},
		// Pods: to their own node's and the other node's address.
		{c1, "192.168.77.11:30080", []string{"e1", "e2"}},
		{c1, "192.168.77.12:30080", []string{"e1", "e2"}},
		{c1, "192.168.77.11:30082", []string{"e1"}},
		// Hairpin: e1 through its own node's NodePort, landing on itself.
		{e1, "192.168.77.11:30082", []string{"e1"}},
	} {
		who, seen := ask(t, tc.from, tc.addr, count)
		n := 0
		for _, w := range tc.want {
			if who[w] == 0 {
				t.Fatalf("%s from %s should reach %v, answered %v", tc.addr, tc.from.Name, tc.want, who)
			}
			n += who[w]
		}
		if n != count {
			t.Fatalf("%s from %s should reach only %v, answered %v", tc.addr, tc.from.Name, tc.want, who)
		}
		t.Logf("%s from %s: %v, %v", tc.addr, tc.from.Name, who, seen)
	}

	// An external IP reached from outside, ETP Cluster: the same rules.
	who, seen = ask(t, out, "192.168.100.10:80", count)
	if who["e1"]+who["e2"] != count || who["e2"] == 0 || seen["e2 saw 192.168.77.100"] {
		t.Fatalf("the external IP from outside should reach both endpoints, e2 source-NATed; answered %v, %v", who, seen)
	}

	// No endpoints: refused at once, from outside and from the node.
	for _, c := range []*bridgetest.Pod{out, node1} {
		if got := connectOutcome(t, c, "192.168.77.11:30083"); got != "refused" {
			t.Fatalf("a NodePort without endpoints should refuse %s, got %s", c.Name, got)
		}
	}
	// A port no Service has is not the bridge's: the node refuses it itself.
	if got := connectOutcome(t, out, "192.168.77.11:30099"); got != "refused" {
		t.Fatalf("a port that is no NodePort should be refused by the node, got %s", got)
	}

	for _, table := range []*agentof.TableSpec{agentof.ClassifierTable, agentof.ConntrackZoneTable, agentof.ServiceLBTable,
		agentof.L3ForwardingTable, agentof.ServiceSNATTable, agentof.OutputTable} {
		t.Logf("node-1's %s:\n%s", table.Name, strings.Join(n1.DumpFlows(t, fmt.Sprintf("table=%d", n1.flows.Pipeline().Table(table).ID)), "\n"))
	}

	// Uninstall (node-2's agent stopped): the node path leaves nothing behind.
	stop2()
	nodeNS, err := ns.GetNS("/var/run/netns/" + n2.NetNS())
	if err != nil {
		t.Fatal(err)
	}
	defer nodeNS.Close()
	if err := nodeNS.Do(func(ns.NetNS) error { return route.RemoveNodePath(context.Background(), "antrea-gw0") }); err != nil {
		t.Fatal(err)
	}
	// The node's table stays (the masquerade is another feature's), without
	// any chain or set of the node path.
	if table := n2.nft(t); strings.Contains(table, "nodeport") {
		t.Fatalf("the node path's chains and sets should be gone:\n%s", table)
	}
	if routes := bridgetest.Run(t, "ip", "-n", n2.NetNS(), "route", "show", "dev", "antrea-gw0"); strings.Contains(routes, "169.254.0.25") {
		t.Fatalf("the node path's routes should be gone:\n%s", routes)
	}
}

// TestHostNetworkEndpointsAnswerUDPThroughAServiceOnTwoRealNodes follows
// upstream's e2e "Networking Granular Checks: Services should function for
// service endpoints using hostNetwork": a Service's endpoints are the
// nodes' own addresses, each node running a UDP server bound to the
// wildcard address, which answers from the address of its route back to
// the client. From a pod and from the node itself, new connections to the
// ClusterIP must be answered by both nodes, the client's own included:
// before, a pod's datagram DNATed to its own node was answered from the
// gateway's address (the route to the pod CIDR) and a node's own from the
// gateway's too (the route to HairpinIP), and neither answer matched the
// connection.
func TestHostNetworkEndpointsAnswerUDPThroughAServiceOnTwoRealNodes(t *testing.T) {
	_, n1, n2 := twoPathNodes(t)
	c1 := n1.addPod(t, "c1", "10.10.1.2/24")
	node1, node2 := n1.NodeHost("node-1"), n2.NodeHost("node-2")
	node1.ServeWho(t, 8081)
	node2.ServeWho(t, 8081)
	client := fake.NewClientset()
	for _, o := range []interface{}{
		service("hostnet", "10.96.0.20", svcPort("udp", corev1.ProtocolUDP, 90, 8081)),
		slice("hostnet-1", "hostnet", slicePorts(epPort("udp", corev1.ProtocolUDP, 8081)),
			ep{ip: "192.168.77.11", node: "node-1"}, ep{ip: "192.168.77.12", node: "node-2"}),
	} {
		create(t, client, o)
	}
	n1.run(t, client)
	n2.run(t, client)
	waitFor(t, "node-1 should have the Service's group", func() (bool, string) {
		g := n1.DumpGroups(t)
		return hasAll(g, "0xc0a84d0b->reg3", "0xc0a84d0c->reg3"), strings.Join(g, "\n")
	})
	waitFor(t, "node-1 should route the ClusterIP to the gateway", func() (bool, string) {
		routes := bridgetest.Run(t, "ip", "-n", n1.NetNS(), "route")
		return strings.Contains(routes, "10.96.0.20 via 169.254.0.252"), routes
	})
	for _, from := range []*bridgetest.Pod{c1, node1} {
		who := map[string]int{}
		for i := 0; i < 24 && (who["node-1"] == 0 || who["node-2"] == 0); i++ {
			answer, err := from.AskWho(t, "udp4", "10.96.0.20:90", time.Second)
			if err != nil {
				who["no answer"]++
				continue
			}
			w, _ := bridgetest.Answerer(answer)
			who[w]++
		}
		if who["node-1"] == 0 || who["node-2"] == 0 {
			t.Errorf("from %s: new UDP connections to the ClusterIP should be answered by both nodes' hostNetwork endpoints, answered %v", from.Name, who)
		}
		t.Logf("from %s: %v", from.Name, who)
	}
}

// waitFor polls cond (which also says what it saw) for 15 s.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s; saw:\n%s", what, saw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
