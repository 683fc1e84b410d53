package proxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/agent/route"
	"antrea.io/antrea/pkg/agent/types"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// dualPathNode is a pathNode of a dual-stack node on a dual-stack
// underlay: an IPv6 pod CIDR and gateway address beside the IPv4 ones,
// and an IPv6 node address on br-phy beside the IPv4 one (the tunnel stays
// IPv4), as a dual-stack lab's node (docs/ipv6.md).
type dualPathNode struct {
	*pathNode
	nodeIPv6 netip.Addr
}

// newDualPathNode starts node i (1 or 2): pods 10.10.i.0/24 and
// fd00:10:244:i::/64, addresses 192.168.77.1i and fd00:172:30::1i.
func newDualPathNode(t *testing.T, u *bridgetest.Underlay, i int) *dualPathNode {
	t.Helper()
	br := bridgetest.NewNode(t, bridgetest.NodeOptions{PodCIDR: fmt.Sprintf("10.10.%d.0/24", i), GatewayIP: fmt.Sprintf("10.10.%d.1", i),
		Underlay: u, NodeIP: fmt.Sprintf("192.168.77.1%d/24", i)})
	br.AddGatewayIPv6(t, fmt.Sprintf("fd00:10:244:%d::1/64", i))
	nodeIPv6 := netip.MustParseAddr(fmt.Sprintf("fd00:172:30::1%d", i))
	bridgetest.Run(t, "ip", "-n", br.NetNS(), "-6", "addr", "add", nodeIPv6.String()+"/64", "dev", "br-phy", "nodad")
	flows, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	br.SetReplay(func(ctx context.Context, conn *openflow.Conn) error { return flows.Replay(ctx, conn) })
	if err := flows.Initialize(context.Background(), &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayIPv6: br.GatewayIPv6, GatewayMAC: br.GatewayMAC, TunnelOFPort: bridgetest.TunnelOFPort, PodCIDR: br.PodCIDR, NodeIP: br.NodeIP,
		NodeIPv6: net.IP(nodeIPv6.AsSlice())}); err != nil {
		t.Fatal(err)
	}
	podCIDR := netip.MustParsePrefix(br.PodCIDR.String())
	podCIDRv6 := netip.MustParsePrefix(br.PodCIDRv6.String())
	path, err := route.NewNodePath(route.NodePathConfig{GatewayName: "antrea-gw0", GatewayIP: netip.MustParseAddr(br.GatewayIP.String()),
		NodeIP: netip.MustParseAddr(br.NodeIP.String()), PodCIDR: podCIDR,
		GatewayIPv6: netip.MustParseAddr(br.GatewayIPv6.String()), PodCIDRv6: podCIDRv6, NodeIPv6: nodeIPv6, ResyncPeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The agent's masquerade of pod traffic leaving the node, of both families.
	nodeNS, err := ns.GetNS("/var/run/netns/" + br.NetNS())
	if err != nil {
		t.Fatal(err)
	}
	defer nodeNS.Close()
	if err := nodeNS.Do(func(ns.NetNS) error {
		table, err := nodenet.New()
		if err != nil {
			return err
		}
		return table.Masquerade(context.Background(), []netip.Prefix{podCIDR, podCIDRv6}, "antrea-gw0")
	}); err != nil {
		t.Fatal(err)
	}
	return &dualPathNode{pathNode: &pathNode{Bridge: br, name: fmt.Sprintf("node-%d", i), flows: flows, path: path}, nodeIPv6: nodeIPv6}
}

// connectDualNodes installs each node's flows and routes to the other's
// pods of both families, as the route controller does on a dual-stack
// node (the IPv6 CIDR's gateway pinned to the global virtual MAC).
func connectDualNodes(t *testing.T, a, b *dualPathNode) {
	t.Helper()
	connectNodes(t, a.pathNode, b.pathNode)
	for _, p := range [][2]*dualPathNode{{a, b}, {b, a}} {
		peer := p[1].Bridge
		if err := p[0].flows.InstallNodeFlows(p[1].name, peer.PodCIDRv6, peer.GatewayIPv6, peer.NodeIP); err != nil {
			t.Fatal(err)
		}
		bridgetest.Run(t, "ip", "-n", p[0].NetNS(), "-6", "neigh", "replace", peer.GatewayIPv6.String(), "lladdr", types.GlobalVirtualMAC.String(),
			"dev", "antrea-gw0", "nud", "permanent")
		bridgetest.Run(t, "ip", "-n", p[0].NetNS(), "-6", "route", "replace", peer.PodCIDRv6.String(), "via", peer.GatewayIPv6.String(),
			"dev", "antrea-gw0", "onlink")
	}
}

// runDual is pathNode.run with the proxy realizing IPv6 (a dual-stack node).
func (n *dualPathNode) runDual(t *testing.T, client *fake.Clientset) (stop func()) {
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
	p, err := NewWithConfig(Config{NodeName: n.name, Packets: packetIns(t, n.OF), ProxyAll: true, NodePath: n.path, IPv6: true},
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

// TestIPv6NodePortsAndTheNodePathOnTwoRealDualStackNodes is the IPv6 half
// of TestNodePortsAndTheNodePathOnTwoRealNodes on two dual-stack nodes
// whose underlay is dual-stack too (each node has an IPv6 address on
// br-phy; the tunnel stays IPv4), with what upstream's [Feature:IPv6DualStack]
// Granular Checks ask of it: a dual-stack NodePort Service answers on each
// node's IPv6 address, from outside the cluster (an endpoint on the other
// node must not see the client's address), from a pod (to its own node's
// and the other node's IPv6 address: it leaves its node masqueraded to the
// node's IPv6 address) and from the node itself; the node reaches the IPv6
// ClusterIP; and the node path's IPv6 part (the set of the node's IPv6
// NodePort addresses, the route of the ClusterIP via NodePortVirtualIPv6)
// goes with RemoveNodePath. 5-8 s.
func TestIPv6NodePortsAndTheNodePathOnTwoRealDualStackNodes(t *testing.T) {
	u := bridgetest.NewUnderlay(t)
	n1, n2 := newDualPathNode(t, u, 1), newDualPathNode(t, u, 2)
	connectDualNodes(t, n1, n2)
	out := u.AddHost(t, "outside", "192.168.77.100/24")
	bridgetest.Run(t, "ip", "-n", out.NS, "-6", "addr", "add", "fd00:172:30::100/64", "dev", "eth0", "nodad")

	c1 := n1.addPod(t, "c1", "10.10.1.2/24")
	e1 := n1.addPod(t, "e1", "10.10.1.3/24")
	e2 := n2.addPod(t, "e2", "10.10.2.3/24")
	for _, p := range []struct {
		pod  *bridgetest.Pod
		node *dualPathNode
		ip   string
	}{{c1, n1, "fd00:10:244:1::2/64"}, {e1, n1, "fd00:10:244:1::3/64"}, {e2, n2, "fd00:10:244:2::3/64"}} {
		p.pod.AddIPv6(t, p.node.Bridge, p.ip)
		if err := p.node.flows.InstallPodFlows(p.pod.HostIF, []net.IP{p.pod.IP, p.pod.IPv6}, p.pod.MAC, p.pod.OFPort); err != nil {
			t.Fatal(err)
		}
	}
	e1.ServeWho6(t, 8080)
	e2.ServeWho6(t, 8080)

	sp := svcPort("", corev1.ProtocolTCP, 80, 8080)
	sp.NodePort = 30080
	web := service("web", "10.96.0.10", sp)
	web.Spec.Type = corev1.ServiceTypeNodePort
	web.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:10:96::a"}
	web.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	v6 := slice("web-v6", "web", slicePorts(epPort("", corev1.ProtocolTCP, 8080)),
		ep{ip: "fd00:10:244:1::3", node: "node-1"}, ep{ip: "fd00:10:244:2::3", node: "node-2"})
	v6.AddressType = discoveryv1.AddressTypeIPv6
	client := fake.NewClientset()
	create(t, client, web)
	create(t, client, v6)
	n1.runDual(t, client)
	stop2 := n2.runDual(t, client)

	for _, n := range []*dualPathNode{n1, n2} {
		waitFor(t, n.name+"'s node path should serve NodePorts on its IPv6 address and route the IPv6 ClusterIP", func() (bool, string) {
			table := n.nft(t)
			routes := bridgetest.Run(t, "ip", "-n", n.NetNS(), "-6", "route", "show", "dev", "antrea-gw0")
			return strings.Contains(table, "tcp . 30080") && strings.Contains(table, n.nodeIPv6.String()) &&
				strings.Contains(routes, "fd00:10:96::a via "+types.NodePortVirtualIPv6.String()), table + routes
		})
	}
	t.Logf("node-1's node path:\n%s\nIPv6 routes:\n%s", n1.nft(t), bridgetest.Run(t, "ip", "-n", n1.NetNS(), "-6", "route", "show", "dev", "antrea-gw0"))

	const count = 12
	node1, node2 := n1.NodeHost("node-1"), n2.NodeHost("node-2")
	addr1, addr2 := "[fd00:172:30::11]:30080", "[fd00:172:30::12]:30080"
	// From outside, on each node's IPv6 address: both endpoints; the one
	// on the other node answers through the node the client reached.
	for _, tc := range []struct{ addr, remote string }{{addr1, "e2"}, {addr2, "e1"}} {
		who, seen := ask(t, out, tc.addr, count)
		if who["e1"]+who["e2"] != count || who["e1"] == 0 || who["e2"] == 0 {
			t.Fatalf("from outside %s should reach both endpoints, answered %v", tc.addr, who)
		}
		if seen[tc.remote+" saw fd00:172:30::100"] {
			t.Fatalf("through %s the endpoint on the other node (%s) must see a source-NATed address, saw %v", tc.addr, tc.remote, seen)
		}
		t.Logf("from outside to %s: %v, %v", tc.addr, who, seen)
	}
	for _, tc := range []struct {
		from *bridgetest.Pod
		addr string
	}{
		{node1, addr1}, {node2, addr2}, {node1, addr2}, // the nodes' own NodePort traffic
		{node1, "[fd00:10:96::a]:80"}, {node2, "[fd00:10:96::a]:80"}, // node -> IPv6 ClusterIP
		{c1, addr1}, {c1, addr2}, // a pod to its own and the other node's IPv6 address
		{c1, "[fd00:10:96::a]:80"}, // and to the IPv6 ClusterIP
	} {
		who, seen := ask(t, tc.from, tc.addr, count)
		if who["e1"]+who["e2"] != count || who["e1"] == 0 || who["e2"] == 0 {
			t.Fatalf("%s from %s should reach both endpoints, answered %v", tc.addr, tc.from.Name, who)
		}
		t.Logf("%s from %s: %v, %v", tc.addr, tc.from.Name, who, seen)
	}

	// Uninstall on node-2 (its agent stopped): the node path's IPv6 part
	// goes too.
	stop2()
	nodeNS, err := ns.GetNS("/var/run/netns/" + n2.NetNS())
	if err != nil {
		t.Fatal(err)
	}
	defer nodeNS.Close()
	if err := nodeNS.Do(func(ns.NetNS) error { return route.RemoveNodePath(context.Background(), "antrea-gw0") }); err != nil {
		t.Fatal(err)
	}
	if table := n2.nft(t); strings.Contains(table, "nodeport") {
		t.Fatalf("the node path's chains and sets should be gone:\n%s", table)
	}
	routes := bridgetest.Run(t, "ip", "-n", n2.NetNS(), "-6", "route", "show", "dev", "antrea-gw0")
	neigh := bridgetest.Run(t, "ip", "-n", n2.NetNS(), "-6", "neigh", "show", "dev", "antrea-gw0")
	if strings.Contains(routes, types.NodePortVirtualIPv6.String()) || strings.Contains(neigh, types.NodePortVirtualIPv6.String()) ||
		strings.Contains(neigh, types.HairpinIPv6.String()) {
		t.Fatalf("the node path's IPv6 routes and neighbours should be gone:\n%s\n%s", routes, neigh)
	}
}

// TestIPv6HostNetworkEndpointsAnswerUDPThroughAServiceOnTwoRealDualStackNodes
// is TestHostNetworkEndpointsAnswerUDPThroughAServiceOnTwoRealNodes over
// IPv6: an IPv6 Service whose endpoints are the nodes' IPv6 addresses,
// each node running a UDP server bound to the wildcard address. From a pod
// and from the node itself new connections to the IPv6 ClusterIP must be
// answered by both nodes, the client's own included: a pod's datagram
// DNATed to its own node leaves the bridge from HairpinIPv6, whose route
// has the node's IPv6 address as source (NodeConfig.NodeIPv6), or the
// node would answer from the gateway's address and match no connection.
// 3-5 s.
func TestIPv6HostNetworkEndpointsAnswerUDPThroughAServiceOnTwoRealDualStackNodes(t *testing.T) {
	u := bridgetest.NewUnderlay(t)
	n1, n2 := newDualPathNode(t, u, 1), newDualPathNode(t, u, 2)
	connectDualNodes(t, n1, n2)
	c1 := n1.addPod(t, "c1", "10.10.1.2/24")
	c1.AddIPv6(t, n1.Bridge, "fd00:10:244:1::2/64")
	if err := n1.flows.InstallPodFlows(c1.HostIF, []net.IP{c1.IP, c1.IPv6}, c1.MAC, c1.OFPort); err != nil {
		t.Fatal(err)
	}
	node1, node2 := n1.NodeHost("node-1"), n2.NodeHost("node-2")
	node1.ServeWho6(t, 8081)
	node2.ServeWho6(t, 8081)
	hn := service("hostnet6", "fd00:10:96::20", svcPort("udp", corev1.ProtocolUDP, 90, 8081))
	hn.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	s := slice("hostnet6-1", "hostnet6", slicePorts(epPort("udp", corev1.ProtocolUDP, 8081)),
		ep{ip: "fd00:172:30::11", node: "node-1"}, ep{ip: "fd00:172:30::12", node: "node-2"})
	s.AddressType = discoveryv1.AddressTypeIPv6
	client := fake.NewClientset()
	create(t, client, hn)
	create(t, client, s)
	n1.runDual(t, client)
	n2.runDual(t, client)
	waitFor(t, "node-1 should route the IPv6 ClusterIP to the gateway", func() (bool, string) {
		routes := bridgetest.Run(t, "ip", "-n", n1.NetNS(), "-6", "route")
		return strings.Contains(routes, "fd00:10:96::20 via "+types.NodePortVirtualIPv6.String()), routes
	})
	for _, from := range []*bridgetest.Pod{c1, node1} {
		who := map[string]int{}
		for i := 0; i < 24 && (who["node-1"] == 0 || who["node-2"] == 0); i++ {
			answer, err := from.AskWho(t, "udp6", "[fd00:10:96::20]:90", time.Second)
			if err != nil {
				who["no answer"]++
				continue
			}
			w, _ := bridgetest.Answerer(answer)
			who[w]++
		}
		if who["node-1"] == 0 || who["node-2"] == 0 {
			t.Errorf("from %s: new UDP connections to the IPv6 ClusterIP should be answered by both nodes' hostNetwork endpoints, answered %v", from.Name, who)
		}
		t.Logf("from %s: %v", from.Name, who)
	}
}
