package traceflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/l7engine"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// rules names the rules this test installs, as the NetworkPolicy
// controller names realized rules.
type rules map[uint32][2]string

func (r rules) TraceflowRule(id uint32) (string, string, bool) {
	n, ok := r[id]
	return n[0], n[1], ok
}

// l7Key is where rules holds the layer 7 rule of a layer 7 id.
func l7Key(id uint16) uint32 { return 1<<16 | uint32(id) }

func (r rules) TraceflowL7Rule(id uint16) (string, string, bool) {
	n, ok := r[l7Key(id)]
	return n[0], n[1], ok
}

func (r rules) TraceflowIsolation(uint32, agentof.Direction) []string {
	return []string{"K8sNetworkPolicy:default/isolate-b"}
}

// ovsNode is one real node: its own OVS with br-int, the agent's OpenFlow
// client and the Traceflow controller on fake API clients.
type ovsNode struct {
	br     *bridgetest.Bridge
	flows  *agentof.Client
	writer *agentof.RuleWriter
	client *fake.Clientset
	ctrl   *Controller
	a, b   *bridgetest.Pod
}

func startNode(t *testing.T) *ovsNode { return startNodeOf(t, false) }

// startNodeOf starts an IPv4 node, or with dual a dual-stack one: its
// gateway has fd00:10:244:1::1 beside 10.10.1.1 (bridgetest.AddGatewayIPv6),
// pods a and b fd00:10:244:1::2 and ::3 beside their IPv4 addresses, the
// peer node-2 both its pod CIDRs (10.10.2.0/24, fd00:10:244:2::/64), and
// the Pods' PodIPs say so.
func startNodeOf(t *testing.T, dual bool) *ovsNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	u := bridgetest.NewUnderlay(t)
	br := bridgetest.NewNode(t, bridgetest.NodeOptions{PodCIDR: "10.10.1.0/24", GatewayIP: "10.10.1.1", Underlay: u,
		NodeIP: "192.168.77.11/24"})
	if dual {
		br.AddGatewayIPv6(t, "fd00:10:244:1::1/64")
	}
	c, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, cidr, _ := net.ParseCIDR("10.10.1.0/24")
	if err := c.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayIPv6: br.GatewayIPv6, GatewayMAC: br.GatewayMAC, TunnelOFPort: bridgetest.TunnelOFPort, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	store := interfacestore.NewInterfaceStore()
	n := &ovsNode{br: br, flows: c, writer: agentof.NewRuleWriter(c)}
	n.a = br.AddPod(t, "tfa", "10.10.1.2/24")
	n.b = br.AddPod(t, "tfb", "10.10.1.3/24")
	var kubePods []runtime.Object
	for i, p := range []*bridgetest.Pod{n.a, n.b} {
		ips := []net.IP{p.IP}
		if dual {
			p.AddIPv6(t, br, []string{"fd00:10:244:1::2/64", "fd00:10:244:1::3/64"}[i])
			ips = append(ips, p.IPv6)
		}
		if err := c.InstallPodFlows(p.HostIF, ips, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		iface := interfacestore.NewContainerInterface(p.HostIF, "c-"+p.Name, p.Name, "default", "eth0", p.MAC, ips, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(p.OFPort)}
		store.AddInterface(iface)
		kubePods = append(kubePods, kubePod("default", p.Name, ips...))
	}
	_, peer, _ := net.ParseCIDR("10.10.2.0/24")
	if err := c.InstallNodeFlows("node-2", peer, net.ParseIP("10.10.2.1"), net.ParseIP("192.168.77.12")); err != nil {
		t.Fatal(err)
	}
	remote := []net.IP{net.ParseIP("10.10.2.5")}
	if dual {
		_, peer6, _ := net.ParseCIDR("fd00:10:244:2::/64")
		if err := c.InstallNodeFlows("node-2", peer6, net.ParseIP("fd00:10:244:2::1"), net.ParseIP("192.168.77.12")); err != nil {
			t.Fatal(err)
		}
		remote = append(remote, net.ParseIP("fd00:10:244:2::5"))
	}
	disp := agentof.NewPacketInDispatcher(br.OF)
	go disp.Run(ctx)

	kube := k8sfake.NewClientset(append(kubePods, kubePod("default", "remote", remote...))...)
	n.client = fake.NewSimpleClientset()
	factory := crdinformers.NewSharedInformerFactory(n.client, 0)
	n.ctrl = NewController(Config{NodeName: "node-1", Client: n.client, Kube: kube, Informer: factory.Crd().V1beta1().Traceflows(),
		Flows: c, IO: disp, Interfaces: store, Rules: rules{7: {"AntreaClusterNetworkPolicy:deny-a", "drop-a"},
			8: {"AntreaNetworkPolicy:default/allow-http-only", "http-only"}, l7Key(9): {"AntreaNetworkPolicy:default/allow-http-only", "http-only"}},
		Ports: Ports{Gateway: bridgetest.GatewayOFPort, Tunnel: bridgetest.TunnelOFPort}, GatewayMAC: br.GatewayMAC})
	factory.Start(ctx.Done())
	go n.ctrl.Run(ctx)
	return n
}

// kubePod is a Pod object with these addresses (PodIP the first).
func kubePod(ns, name string, ips ...net.IP) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: corev1.PodStatus{PodIP: ips[0].String()}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip.String()})
	}
	return p
}

// trace creates a running Traceflow (as the controller leaves it) from pod
// a and waits for this node's result.
func (n *ovsNode) trace(t *testing.T, name string, tag int8, dst crdv1beta1.Destination) crdv1beta1.NodeResult {
	t.Helper()
	r, _ := n.traceSpec(t, name, tag, crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "default", Pod: "tfa"}, Destination: dst}, nil)
	return r
}

// traceSpec creates a running Traceflow of this spec, runs then (the live
// traffic) once its flows are in, and waits for this node's result.
func (n *ovsNode) traceSpec(t *testing.T, name string, tag int8, spec crdv1beta1.TraceflowSpec, then func()) (crdv1beta1.NodeResult, *crdv1beta1.Traceflow) {
	t.Helper()
	ctx := context.Background()
	tf := &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: spec,
		Status: crdv1beta1.TraceflowStatus{Phase: crdv1beta1.TraceflowRunning, DataplaneTag: tag}}
	if _, err := n.client.CrdV1beta1().Traceflows().Create(ctx, tf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if then != nil {
		for i := 0; len(n.flows.TraceflowFlowsOf(uint8(tag))) == 0; i++ {
			if i > 500 {
				t.Fatal("the Traceflow's flows were never installed")
			}
			time.Sleep(10 * time.Millisecond)
		}
		then()
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		got, err := n.client.CrdV1beta1().Traceflows().Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(got.Status.Results) > 0 {
			return got.Status.Results[0], got
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("Traceflow %s: no result from the node; flows of tag %d:\n%s", name, tag,
		bridgetest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", n.br.BridgeMgmt("br-int")))
	return crdv1beta1.NodeResult{}, nil
}

// finish ends a Traceflow (as the controller does) and checks its flows go.
func (n *ovsNode) finish(t *testing.T, name string, tag int8) {
	t.Helper()
	ctx := context.Background()
	tf, err := n.client.CrdV1beta1().Traceflows().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tf.Status.Phase = crdv1beta1.TraceflowSucceeded
	if _, err := n.client.CrdV1beta1().Traceflows().UpdateStatus(ctx, tf, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cookie := fmt.Sprintf("cookie=0x1%08x", 0x7f000000|int(tag))
	for range 500 {
		out, err := n.br.Ofctl("dump-flows", "br-int")
		if err == nil && !strings.Contains(out, cookie) && len(n.flows.TraceflowFlowsOf(uint8(tag))) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the flows of tag %d (%s) are still there after the Traceflow ended", tag, cookie)
}

func describe(obs []crdv1beta1.Observation) string {
	var parts []string
	for _, o := range obs {
		s := fmt.Sprintf("%s/%s/%s", o.Component, o.ComponentInfo, o.Action)
		for _, kv := range [][2]string{{"pod", o.Pod}, {"tunnel", o.TunnelDstIP}, {"policy", o.NetworkPolicy}, {"rule", o.NetworkPolicyRule}} {
			if kv[1] != "" {
				s += " " + kv[0] + "=" + kv[1]
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " -> ")
}

func TestTraceflowOnRealOVS(t *testing.T) {
	ovsinstance.RequireRoot(t)
	n := startNode(t)

	t.Run("delivered to a local pod", func(t *testing.T) {
		before := n.b.IPReceived(t)
		r := n.trace(t, "local", 1, crdv1beta1.Destination{Namespace: "default", Pod: "tfb"})
		want := "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Delivered pod=default/tfb"
		if got := describe(r.Observations); got != want || r.Role != crdv1beta1.RoleSender || r.Node != "node-1" {
			t.Fatalf("result %s %s: %s\nwant %s", r.Node, r.Role, got, want)
		}
		last := r.Observations[len(r.Observations)-1]
		if last.DstMAC != n.b.MAC.String() || last.TTL != 64 {
			t.Fatalf("delivered with dst MAC %s TTL %d, want %s and 64", last.DstMAC, last.TTL, n.b.MAC)
		}
		// The injected packet really reached the pod.
		for i := 0; n.b.IPReceived(t) == before; i++ {
			if i > 200 {
				t.Fatal("pod b's kernel never received the traced packet")
			}
			time.Sleep(10 * time.Millisecond)
		}
		n.finish(t, "local", 1)
	})

	t.Run("forwarded into the tunnel to the remote pod's node", func(t *testing.T) {
		r := n.trace(t, "remote", 2, crdv1beta1.Destination{Namespace: "default", Pod: "remote"})
		want := "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Forwarded tunnel=192.168.77.12"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "remote", 2)
	})

	t.Run("forwarded out of the overlay", func(t *testing.T) {
		r := n.trace(t, "outside", 3, crdv1beta1.Destination{IP: "192.0.2.10"})
		want := "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/ForwardedOutOfOverlay"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "outside", 3)
	})

	t.Run("dropped by an Antrea-native rule that is named", func(t *testing.T) {
		ctx := context.Background()
		a := netip.PrefixFrom(netip.AddrFrom4([4]byte(n.a.IP.To4())), 32)
		rule := &agentof.PolicyRule{ID: 7, Key: "deny-a 0/", Direction: agentof.DirectionIngress, Peers: []netip.Prefix{a},
			AppliedTo: []uint32{n.b.OFPort}, Action: agentof.ActionDrop, Tier: agentof.TierAntrea, Priority: 30000}
		if err := n.writer.Install(ctx, rule); err != nil {
			t.Fatal(err)
		}
		r := n.trace(t, "acnp-drop", 4, crdv1beta1.Destination{Namespace: "default", Pod: "tfb"})
		want := "SpoofGuard/SpoofGuard/Forwarded -> NetworkPolicy/AntreaPolicyIngressRule/Dropped policy=AntreaClusterNetworkPolicy:deny-a rule=drop-a"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		// The tag's flows, as ovs-ofctl shows them (quoted by docs/design/ovs-pipeline.md).
		cookie := fmt.Sprintf("cookie=0x1%08x", 0x7f000000|4)
		var dump []string
		for _, l := range strings.Split(bridgetest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", n.br.BridgeMgmt("br-int")), "\n") {
			if strings.Contains(l, cookie) {
				dump = append(dump, strings.TrimSpace(l))
			}
		}
		t.Logf("flows of tag 4:\n%s", strings.Join(dump, "\n"))
		n.finish(t, "acnp-drop", 4)
		if err := n.writer.Uninstall(ctx, 7); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("dropped by K8s NetworkPolicy isolation", func(t *testing.T) {
		ctx := context.Background()
		if err := n.writer.SetIsolatedPorts(ctx, agentof.DirectionIngress, []uint32{n.b.OFPort}); err != nil {
			t.Fatal(err)
		}
		r := n.trace(t, "isolated", 5, crdv1beta1.Destination{Namespace: "default", Pod: "tfb"})
		want := "SpoofGuard/SpoofGuard/Forwarded -> NetworkPolicy/IngressDefaultRule/Dropped policy=K8sNetworkPolicy:default/isolate-b"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "isolated", 5)
		if err := n.writer.SetIsolatedPorts(ctx, agentof.DirectionIngress, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("dropped by a LoadBalancer's source ranges", func(t *testing.T) {
		ctx := context.Background()
		lb := agentof.ServicePort{IP: netip.MustParseAddr("192.168.100.11"), Protocol: 6, Port: 80}
		b := netip.AddrFrom4([4]byte(n.b.IP.To4()))
		if err := n.flows.InstallService(ctx, "default/lb", agentof.ServiceState{lb: {Endpoints: []agentof.Endpoint{{IP: b, Port: 8080, Local: true}}}}); err != nil {
			t.Fatal(err)
		}
		if err := n.flows.SetLoadBalancerSourceRanges(ctx, "default/lb", agentof.SourceRanges{lb: {netip.MustParsePrefix("192.0.2.0/24")}}); err != nil {
			t.Fatal(err)
		}
		r, _ := n.traceSpec(t, "lbsr", 7, crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "default", Pod: "tfa"},
			Destination: crdv1beta1.Destination{IP: "192.168.100.11"},
			Packet:      crdv1beta1.Packet{TransportHeader: crdv1beta1.TransportHeader{TCP: &crdv1beta1.TCPHeader{DstPort: 80}}}}, nil)
		want := "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/LoadBalancerSourceRanges/Dropped"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "lbsr", 7)
		if err := n.flows.SetLoadBalancerSourceRanges(ctx, "default/lb", nil); err != nil {
			t.Fatal(err)
		}
		if err := n.flows.UninstallService(ctx, "default/lb"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("sent to the layer 7 engine by a named layer 7 rule, or dropped by it when not TCP", func(t *testing.T) {
		ctx := context.Background()
		startL7Engine(t, n)
		a := netip.PrefixFrom(netip.AddrFrom4([4]byte(n.a.IP.To4())), 32)
		// Upstream's "http-only" rule: an Allow with l7Protocols and no
		// ports, ingress to b from a.
		rule := &agentof.PolicyRule{ID: 8, Key: "allow-http-only 0/", Direction: agentof.DirectionIngress, Peers: []netip.Prefix{a},
			AppliedTo: []uint32{n.b.OFPort}, Action: agentof.ActionAllow, Tier: agentof.TierAntrea, Priority: 30000, L7VLAN: 9}
		if err := n.writer.Install(ctx, rule); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := n.writer.Uninstall(ctx, 8); err != nil {
				t.Error(err)
			}
		}()
		tcp := crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "default", Pod: "tfa"},
			Destination: crdv1beta1.Destination{Namespace: "default", Pod: "tfb"},
			Packet:      crdv1beta1.Packet{TransportHeader: crdv1beta1.TransportHeader{TCP: &crdv1beta1.TCPHeader{DstPort: 80}}}}
		r, _ := n.traceSpec(t, "l7-tcp", 8, tcp, nil)
		// The rule allows the SYN's L3/L4 part, the SYN goes to the engine
		// (which judges the requests after it, and lets the handshake
		// through), then on to b.
		const allowed = "NetworkPolicy/AntreaPolicyIngressRule/Forwarded policy=AntreaNetworkPolicy:default/allow-http-only rule=http-only"
		want := "SpoofGuard/SpoofGuard/Forwarded -> " + allowed + " -> NetworkPolicy/L7Engine/Forwarded policy=AntreaNetworkPolicy:default/allow-http-only rule=http-only" +
			" -> Forwarding/Output/Delivered pod=default/tfb"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "l7-tcp", 8)
		r = n.trace(t, "l7-icmp", 9, crdv1beta1.Destination{Namespace: "default", Pod: "tfb"})
		want = "SpoofGuard/SpoofGuard/Forwarded -> " + allowed + " -> NetworkPolicy/L7Engine/Dropped policy=AntreaNetworkPolicy:default/allow-http-only rule=http-only"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "l7-icmp", 9)
	})

	t.Run("live traffic: the pod's next matching connection is tagged and captured", func(t *testing.T) {
		n.b.ServeEcho(t, 8080)
		spec := crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "default", Pod: "tfa"},
			Destination: crdv1beta1.Destination{Namespace: "default", Pod: "tfb"}, LiveTraffic: true,
			Packet: crdv1beta1.Packet{TransportHeader: crdv1beta1.TransportHeader{TCP: &crdv1beta1.TCPHeader{DstPort: 8080}}}}
		r, tf := n.traceSpec(t, "live", 6, spec, func() {
			c, err := n.a.Dial(t, "tcp4", "10.10.1.3:8080", 5*time.Second)
			if err != nil {
				t.Fatalf("the live connection failed: %v", err)
			}
			_ = c.Close()
		})
		want := "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Delivered pod=default/tfb"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		cp := tf.Status.CapturedPacket
		if cp == nil || cp.SrcIP != "10.10.1.2" || cp.DstIP != "10.10.1.3" || cp.TransportHeader.TCP == nil ||
			cp.TransportHeader.TCP.DstPort != 8080 || cp.TransportHeader.TCP.Flags == nil || *cp.TransportHeader.TCP.Flags != 0x02 {
			t.Fatalf("captured packet %+v, want the SYN 10.10.1.2 -> 10.10.1.3:8080", cp)
		}
		n.finish(t, "live", 6)
	})
}

// startL7Engine runs a layer 7 engine on a veth pair of the node
// (antrea-l7-tap0 on br-int) and installs the steering flows to it.
func startL7Engine(t *testing.T, n *ovsNode) {
	t.Helper()
	node := n.br.NetNS()
	bridgetest.Run(t, "ip", "-n", node, "link", "add", "antrea-l7-tap0", "type", "veth", "peer", "name", "l7-engine")
	for _, l := range []string{"antrea-l7-tap0", "l7-engine"} {
		bridgetest.Run(t, "ip", "-n", node, "link", "set", l, "arp", "off", "up")
	}
	if _, err := n.br.Vsctl("add-port", "br-int", "antrea-l7-tap0"); err != nil {
		t.Fatal(err)
	}
	out, err := n.br.Vsctl("get", "interface", "antrea-l7-tap0", "ofport")
	if err != nil {
		t.Fatal(err)
	}
	var ofport uint32
	if _, err := fmt.Sscan(strings.TrimSpace(out), &ofport); err != nil {
		t.Fatal(err)
	}
	netns, err := ns.GetNS("/var/run/netns/" + node)
	if err != nil {
		t.Fatal(err)
	}
	defer netns.Close()
	var port *l7engine.Port
	if err := netns.Do(func(ns.NetNS) error {
		port, err = l7engine.OpenPort("l7-engine")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e := l7engine.New()
	e.SetRules(map[uint16]*l7engine.Rule{9: {Policy: "AntreaNetworkPolicy:default/allow-http-only", Name: "http-only",
		HTTP: []l7engine.HTTPMatch{{}}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, port) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine: %v", err)
		}
		port.Close()
	})
	if err := n.flows.SetL7EnginePort(ctx, ofport); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.flows.SetL7EnginePort(context.Background(), 0); err != nil {
			t.Error(err)
		}
	})
}
