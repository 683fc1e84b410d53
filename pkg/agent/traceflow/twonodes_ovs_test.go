package traceflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	tfcontroller "antrea.io/antrea/pkg/controller/traceflow"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// agentNode is one node of a two-node cluster on an underlay: its OVS,
// the agent's OpenFlow client and Traceflow controller.
type agentNode struct {
	name   string
	br     *bridgetest.Bridge
	flows  *agentof.Client
	writer *agentof.RuleWriter
	store  interfacestore.InterfaceStore
}

// newAgentNode starts a node; gw6, when not "", makes it dual-stack: the
// gateway's IPv6 address with its pod CIDR's length.
func newAgentNode(t *testing.T, u *bridgetest.Underlay, name, cidr, gw, gw6, nodeIP string, tunnel ovsconfig.TunnelType) *agentNode {
	t.Helper()
	br := bridgetest.NewNode(t, bridgetest.NodeOptions{PodCIDR: cidr, GatewayIP: gw, Underlay: u, NodeIP: nodeIP, TunnelType: tunnel})
	if gw6 != "" {
		br.AddGatewayIPv6(t, gw6)
	}
	c, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(context.Background(), &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayIPv6: br.GatewayIPv6, GatewayMAC: br.GatewayMAC, TunnelOFPort: bridgetest.TunnelOFPort, PodCIDR: br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	return &agentNode{name: name, br: br, flows: c, writer: agentof.NewRuleWriter(c), store: interfacestore.NewInterfaceStore()}
}

// addPod adds a pod of address cidr, and of cidr6 too when not "".
func (n *agentNode) addPod(t *testing.T, ns, name, cidr, cidr6 string) (*bridgetest.Pod, *corev1.Pod) {
	t.Helper()
	p := n.br.AddPod(t, name, cidr)
	ips := []net.IP{p.IP}
	if cidr6 != "" {
		p.AddIPv6(t, n.br, cidr6)
		ips = append(ips, p.IPv6)
	}
	if err := n.flows.InstallPodFlows(p.HostIF, ips, p.MAC, p.OFPort); err != nil {
		t.Fatal(err)
	}
	iface := interfacestore.NewContainerInterface(p.HostIF, "c-"+name, name, ns, "eth0", p.MAC, ips, 0)
	iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(p.OFPort)}
	n.store.AddInterface(iface)
	pod := kubePod(ns, name, ips...)
	pod.Spec.NodeName = n.name
	return p, pod
}

func (n *agentNode) run(ctx context.Context, client *fake.Clientset, kube *k8sfake.Clientset, r Rules) {
	disp := agentof.NewPacketInDispatcher(n.br.OF)
	go disp.Run(ctx)
	f := crdinformers.NewSharedInformerFactory(client, 0)
	c := NewController(Config{NodeName: n.name, Client: client, Kube: kube, Informer: f.Crd().V1beta1().Traceflows(),
		Flows: n.flows, IO: disp, Interfaces: n.store, Rules: r,
		Ports: Ports{Gateway: bridgetest.GatewayOFPort, Tunnel: bridgetest.TunnelOFPort}, GatewayMAC: n.br.GatewayMAC})
	f.Start(ctx.Done())
	go c.Run(ctx)
}

// cluster is two agent nodes joined by a tunnel over an underlay, with a pod
// "client" on node-1 and "web" on node-2, and the Traceflow controllers of
// both agents and of antrea-controller on one fake API.
type cluster struct {
	ctx    context.Context
	n1, n2 *agentNode
	client *bridgetest.Pod
	web    *bridgetest.Pod
	crd    *fake.Clientset
}

func newCluster(t *testing.T, ctx context.Context, tunnel ovsconfig.TunnelType) *cluster {
	return newClusterOf(t, ctx, tunnel, false)
}

// newClusterOf is newCluster, dual-stack with dual: the nodes' IPv6 pod
// CIDRs fd00:10:244:1::/64 and fd00:10:244:2::/64 (installed on the peer
// beside the IPv4 ones, through the same IPv4 tunnel), client and web with
// fd00:10:244:1::2 and fd00:10:244:2::3.
func newClusterOf(t *testing.T, ctx context.Context, tunnel ovsconfig.TunnelType, dual bool) *cluster {
	t.Helper()
	u := bridgetest.NewUnderlay(t)
	gw6 := func(i string) string {
		if !dual {
			return ""
		}
		return "fd00:10:244:" + i + "::1/64"
	}
	pod6 := func(s string) string {
		if !dual {
			return ""
		}
		return s
	}
	n1 := newAgentNode(t, u, "node-1", "10.10.1.0/24", "10.10.1.1", gw6("1"), "192.168.77.11/24", tunnel)
	n2 := newAgentNode(t, u, "node-2", "10.10.2.0/24", "10.10.2.1", gw6("2"), "192.168.77.12/24", tunnel)
	for _, p := range [][2]*agentNode{{n1, n2}, {n2, n1}} {
		if err := p[0].flows.InstallNodeFlows(p[1].name, p[1].br.PodCIDR, p[1].br.GatewayIP, p[1].br.NodeIP); err != nil {
			t.Fatal(err)
		}
		if dual {
			if err := p[0].flows.InstallNodeFlows(p[1].name, p[1].br.PodCIDRv6, p[1].br.GatewayIPv6, p[1].br.NodeIP); err != nil {
				t.Fatal(err)
			}
		}
		p[0].br.ConnectPeer(t, p[1].br)
	}
	client, clientPod := n1.addPod(t, "demo", "client", "10.10.1.2/24", pod6("fd00:10:244:1::2/64"))
	web, webPod := n2.addPod(t, "demo", "web", "10.10.2.3/24", pod6("fd00:10:244:2::3/64"))

	kube := k8sfake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, clientPod, webPod)
	crd := fake.NewSimpleClientset()
	names := rules{9: {"AntreaClusterNetworkPolicy:deny-client", "drop-client"}}
	n1.run(ctx, crd, kube, names)
	n2.run(ctx, crd, kube, names)
	kf := informers.NewSharedInformerFactory(kube, 0)
	cf := crdinformers.NewSharedInformerFactory(crd, 0)
	ctrl := tfcontroller.NewController(crd, cf.Crd().V1beta1().Traceflows(), kf.Core().V1().Pods().Informer(),
		kf.Core().V1().Namespaces().Informer(), kf.Core().V1().Services().Informer())
	kf.Start(ctx.Done())
	cf.Start(ctx.Done())
	go ctrl.Run(ctx)
	return &cluster{ctx: ctx, n1: n1, n2: n2, client: client, web: web, crd: crd}
}

// run creates a Traceflow of TCP port 80 from client to web and returns it
// once it Succeeded or Failed.
func (c *cluster) run(t *testing.T, name string) *crdv1beta1.Traceflow {
	t.Helper()
	return c.runPacket(t, name, crdv1beta1.Packet{TransportHeader: crdv1beta1.TransportHeader{TCP: &crdv1beta1.TCPHeader{DstPort: 80}}})
}

// runPacket is run with this packet.
func (c *cluster) runPacket(t *testing.T, name string, p crdv1beta1.Packet) *crdv1beta1.Traceflow {
	t.Helper()
	tf := &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.TraceflowSpec{
		Source: crdv1beta1.Source{Namespace: "demo", Pod: "client"}, Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "web"},
		Packet: p}}
	if _, err := c.crd.CrdV1beta1().Traceflows().Create(c.ctx, tf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		got, err := c.crd.CrdV1beta1().Traceflows().Get(c.ctx, name, metav1.GetOptions{})
		if err == nil && (got.Status.Phase == crdv1beta1.TraceflowSucceeded || got.Status.Phase == crdv1beta1.TraceflowFailed) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, _ := c.crd.CrdV1beta1().Traceflows().Get(c.ctx, name, metav1.GetOptions{})
	t.Fatalf("Traceflow %s did not finish: %+v", name, got.Status)
	return nil
}

// check fails unless node's result has the role and observations wanted.
func check(t *testing.T, tf *crdv1beta1.Traceflow, node, role, want string) {
	t.Helper()
	for _, r := range tf.Status.Results {
		if r.Node == node {
			if got := describe(r.Observations); r.Role != role || got != want {
				t.Fatalf("%s (%s): %s\nwant %s (%s)", node, r.Role, got, want, role)
			}
			return
		}
	}
	t.Fatalf("no result from %s: %+v", node, tf.Status.Results)
}

// crossesTheTunnel traces client -> web: forwarded into the tunnel on
// node-1, received and delivered on node-2, and web's kernel really
// receives the packet, routed by each node (TTL 62).
func (c *cluster) crossesTheTunnel(t *testing.T, name string) {
	t.Helper()
	before := c.web.IPReceived(t)
	tf := c.run(t, name)
	if tf.Status.Phase != crdv1beta1.TraceflowSucceeded || tf.Status.DataplaneTag < 1 {
		t.Fatalf("status %+v", tf.Status)
	}
	check(t, tf, "node-1", crdv1beta1.RoleSender, "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Forwarded tunnel=192.168.77.12")
	check(t, tf, "node-2", crdv1beta1.RoleReceiver, "Forwarding/Classifier/Received -> Forwarding/Output/Delivered pod=demo/web")
	if tf.Status.Results[0].Node != "node-1" {
		t.Errorf("the sender's result is not first: %+v", tf.Status.Results)
	}
	if c.web.IPReceived(t) == before {
		t.Error("web's kernel received no packet")
	}
	if last := tf.Status.Results[1].Observations[1]; last.TTL != 62 || last.DstMAC != c.web.MAC.String() {
		t.Errorf("delivered with TTL %d to %s, want 62 (each node routes it) to %s", last.TTL, last.DstMAC, c.web.MAC)
	}
}

// TestTraceflowAcrossTwoRealNodes: two nodes (each its own OVS) joined by a
// Geneve tunnel over an underlay, the agents' Traceflow controllers and the
// antrea-controller's, all on one fake API. A Traceflow from a pod on
// node-1 to one on node-2 is tagged by the controller, injected on node-1,
// forwarded into the tunnel, received and delivered on node-2 (the packet
// really arrives), and Succeeded; with a Drop rule on node-2 the receiver
// names it.
func TestTraceflowAcrossTwoRealNodes(t *testing.T) {
	ovsinstance.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCluster(t, ctx, ovsconfig.GeneveTunnel)
	n2, web, run := c.n2, c.web, c.run

	t.Run("forwarded into the tunnel, received and delivered", func(t *testing.T) {
		c.crossesTheTunnel(t, "across")
	})

	t.Run("dropped on the receiver by a named rule", func(t *testing.T) {
		rule := &agentof.PolicyRule{ID: 9, Key: "deny-client 0/", Direction: agentof.DirectionIngress,
			Peers: []netip.Prefix{netip.MustParsePrefix("10.10.1.2/32")}, AppliedTo: []uint32{web.OFPort},
			Action: agentof.ActionDrop, Tier: agentof.TierAntrea, Priority: 30000}
		if err := n2.writer.Install(ctx, rule); err != nil {
			t.Fatal(err)
		}
		// As the agent does after a policy change that narrows what is
		// allowed (package dpcache): datapath flows cached before it would
		// still deliver the packet until the revalidators catch up.
		if _, err := n2.br.Appctl("revalidator/purge"); err != nil {
			t.Fatal(err)
		}
		tf := run(t, "dropped")
		check(t, tf, "node-1", crdv1beta1.RoleSender, "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Forwarded tunnel=192.168.77.12")
		check(t, tf, "node-2", crdv1beta1.RoleReceiver,
			"Forwarding/Classifier/Received -> NetworkPolicy/AntreaPolicyIngressRule/Dropped policy=AntreaClusterNetworkPolicy:deny-client rule=drop-client")
	})

	t.Run("latency from create to Succeeded (logged)", func(t *testing.T) {
		if err := n2.writer.Uninstall(ctx, 9); err != nil {
			t.Fatal(err)
		}
		var lat []time.Duration
		for i := 0; i < 10; i++ {
			start := time.Now()
			tf := run(t, fmt.Sprintf("lat-%d", i))
			if tf.Status.Phase != crdv1beta1.TraceflowSucceeded {
				t.Fatalf("status %+v", tf.Status)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		t.Logf("two real OVS nodes, fake API: create -> Succeeded p50 %v (min %v, max %v, %d runs, polled every 20 ms)",
			lat[len(lat)/2], lat[0], lat[len(lat)-1], len(lat))
	})
}

// TestTraceflowAcrossVXLANAndGRE: the same trace across the other tunnel
// types the agent offers (tunnelType vxlan and gre; Geneve above), each
// pair of nodes with its own OVS and underlay: the pipeline sends the packet
// into the tunnel, the peer receives it from the tunnel and delivers it.
func TestTraceflowAcrossVXLANAndGRE(t *testing.T) {
	ovsinstance.RequireRoot(t)
	for _, tunnel := range []ovsconfig.TunnelType{ovsconfig.VXLANTunnel, ovsconfig.GRETunnel} {
		t.Run(string(tunnel), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := newCluster(t, ctx, tunnel)
			c.crossesTheTunnel(t, "across-"+string(tunnel))
		})
	}
}

// TestIPv6TraceflowAcrossTwoRealDualStackNodes: the two nodes of
// TestTraceflowAcrossTwoRealNodes made dual-stack (their IPv6 pod CIDRs
// through the same Geneve tunnel over IPv4): an IPv6 Traceflow from client
// to web (ipv6Header, TCP) is validated and tagged by the controller,
// injected on node-1 as an IPv6 packet, forwarded into the tunnel,
// received and delivered on node-2 (web's kernel takes an ICMPv6 echo
// request traced the same way), with the hop limit each node's routing
// decremented; with a Drop rule on client's IPv6 address on node-2 the
// receiver names it, and the IPv4 Traceflow between the same pods still
// passes.
func TestIPv6TraceflowAcrossTwoRealDualStackNodes(t *testing.T) {
	ovsinstance.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newClusterOf(t, ctx, ovsconfig.GeneveTunnel, true)
	tcp6 := crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{}, TransportHeader: crdv1beta1.TransportHeader{TCP: &crdv1beta1.TCPHeader{DstPort: 80}}}

	t.Run("forwarded into the tunnel, received and delivered", func(t *testing.T) {
		tf := c.runPacket(t, "across6", tcp6)
		if tf.Status.Phase != crdv1beta1.TraceflowSucceeded {
			t.Fatalf("status %+v", tf.Status)
		}
		check(t, tf, "node-1", crdv1beta1.RoleSender, "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Forwarded tunnel=192.168.77.12")
		check(t, tf, "node-2", crdv1beta1.RoleReceiver, "Forwarding/Classifier/Received -> Forwarding/Output/Delivered pod=demo/web")
		last := tf.Status.Results[1].Observations[1]
		if last.DstMAC != c.web.MAC.String() || last.TTL != 62 {
			t.Errorf("delivered with hop limit %d to %s, want 62 (each node routes it) to %s", last.TTL, last.DstMAC, c.web.MAC)
		}
		before := snmp6(t, c.web, "Icmp6InEchos")
		tf = c.runPacket(t, "echo6", crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{}})
		check(t, tf, "node-2", crdv1beta1.RoleReceiver, "Forwarding/Classifier/Received -> Forwarding/Output/Delivered pod=demo/web")
		for i := 0; snmp6(t, c.web, "Icmp6InEchos") == before; i++ {
			if i > 200 {
				t.Fatal("web's kernel never took the traced ICMPv6 echo request")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("dropped on the receiver by a rule on the client's IPv6 address, named", func(t *testing.T) {
		rule := &agentof.PolicyRule{ID: 9, Key: "deny-client 0/", Direction: agentof.DirectionIngress,
			Peers: []netip.Prefix{netip.MustParsePrefix("fd00:10:244:1::2/128")}, AppliedTo: []uint32{c.web.OFPort},
			Action: agentof.ActionDrop, Tier: agentof.TierAntrea, Priority: 30000}
		if err := c.n2.writer.Install(ctx, rule); err != nil {
			t.Fatal(err)
		}
		if _, err := c.n2.br.Appctl("revalidator/purge"); err != nil {
			t.Fatal(err)
		}
		tf := c.runPacket(t, "dropped6", tcp6)
		check(t, tf, "node-1", crdv1beta1.RoleSender, "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Forwarded tunnel=192.168.77.12")
		check(t, tf, "node-2", crdv1beta1.RoleReceiver,
			"Forwarding/Classifier/Received -> NetworkPolicy/AntreaPolicyIngressRule/Dropped policy=AntreaClusterNetworkPolicy:deny-client rule=drop-client")
		tf = c.run(t, "passed4")
		check(t, tf, "node-2", crdv1beta1.RoleReceiver, "Forwarding/Classifier/Received -> Forwarding/Output/Delivered pod=demo/web")
		if err := c.n2.writer.Uninstall(ctx, 9); err != nil {
			t.Fatal(err)
		}
	})
}
