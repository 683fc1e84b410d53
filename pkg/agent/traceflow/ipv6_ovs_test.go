package traceflow

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	k8sfake "k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// snmp6 is a counter of a pod's kernel's /proc/net/snmp6: Ip6InReceives
// (IPv6 packets received), Icmp6InEchos (ICMPv6 echo requests taken: the
// kernel checked their checksum first, RFC 4443 2.3).
func snmp6(t *testing.T, p *bridgetest.Pod, counter string) int {
	t.Helper()
	out := bridgetest.Run(t, "ip", "netns", "exec", p.NS, "cat", "/proc/net/snmp6")
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == counter {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("%s %q: %v", counter, f[1], err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/net/snmp6 of %s:\n%s", counter, p.NS, out)
	return 0
}

func from(pod string) crdv1beta1.Source { return crdv1beta1.Source{Namespace: "default", Pod: pod} }

func toPod(pod string) crdv1beta1.Destination {
	return crdv1beta1.Destination{Namespace: "default", Pod: pod}
}

// v6 is the packet of upstream's IPv6 example: ipv6Header alone (an
// ICMPv6 echo request).
var v6 = crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{}}

// TestIPv6TraceflowOnARealDualStackNode: a dual-stack node (its own OVS,
// pods with an address of each family): IPv6 Traceflows from pod a are
// injected as IPv6 packets carrying the tag in their traffic class, and
// the node reports them delivered to pod b (whose kernel receives the
// packet), forwarded into the tunnel, out of the overlay, dropped by a
// named rule on a's IPv6 address and by isolation; a Traceflow without
// ipv6Header between the same dual-stack pods is IPv4's, and a live one
// captures a's next TCP connection over IPv6.
func TestIPv6TraceflowOnARealDualStackNode(t *testing.T) {
	ovsinstance.RequireRoot(t)
	n := startNodeOf(t, true)
	ctx := context.Background()

	t.Run("delivered to a local pod over IPv6", func(t *testing.T) {
		before := snmp6(t, n.b, "Icmp6InEchos")
		r, _ := n.traceSpec(t, "local6", 11, crdv1beta1.TraceflowSpec{Source: from("tfa"), Destination: toPod("tfb"), Packet: v6}, nil)
		want := "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Delivered pod=default/tfb"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		if last := r.Observations[len(r.Observations)-1]; last.DstMAC != n.b.MAC.String() || last.TTL != 64 {
			t.Fatalf("delivered with dst MAC %s hop limit %d, want %s and 64", last.DstMAC, last.TTL, n.b.MAC)
		}
		for i := 0; snmp6(t, n.b, "Icmp6InEchos") == before; i++ {
			if i > 200 {
				t.Fatal("pod b's kernel never took the traced ICMPv6 echo request")
			}
			time.Sleep(10 * time.Millisecond)
		}
		n.finish(t, "local6", 11)
	})

	t.Run("the same pods without ipv6Header are traced over IPv4", func(t *testing.T) {
		before4, before6 := n.b.IPReceived(t), snmp6(t, n.b, "Icmp6InEchos")
		r, _ := n.traceSpec(t, "local4", 12, crdv1beta1.TraceflowSpec{Source: from("tfa"), Destination: toPod("tfb")}, nil)
		if got, want := describe(r.Observations), "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Delivered pod=default/tfb"; got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		for i := 0; n.b.IPReceived(t) == before4; i++ {
			if i > 200 {
				t.Fatal("pod b's kernel never received the traced IPv4 packet")
			}
			time.Sleep(10 * time.Millisecond)
		}
		n.finish(t, "local4", 12)
		if got := snmp6(t, n.b, "Icmp6InEchos"); got != before6 {
			t.Errorf("pod b took %d ICMPv6 echo requests from a Traceflow without ipv6Header between dual-stack pods", got-before6)
		}
	})

	t.Run("forwarded into the tunnel to the remote pod's IPv6 address", func(t *testing.T) {
		r, _ := n.traceSpec(t, "remote6", 13, crdv1beta1.TraceflowSpec{Source: from("tfa"), Destination: toPod("remote"), Packet: v6}, nil)
		if got, want := describe(r.Observations), "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Forwarded tunnel=192.168.77.12"; got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "remote6", 13)
	})

	t.Run("an IPv6 destination IP is forwarded out of the overlay", func(t *testing.T) {
		r, _ := n.traceSpec(t, "outside6", 14, crdv1beta1.TraceflowSpec{Source: from("tfa"), Destination: crdv1beta1.Destination{IP: "2001:db8::10"},
			Packet: crdv1beta1.Packet{TransportHeader: crdv1beta1.TransportHeader{UDP: &crdv1beta1.UDPHeader{DstPort: 53}}}}, nil)
		if got, want := describe(r.Observations), "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/ForwardedOutOfOverlay"; got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "outside6", 14)
	})

	t.Run("dropped by an Antrea-native rule on the pod's IPv6 address, named", func(t *testing.T) {
		a6 := netip.PrefixFrom(netip.AddrFrom16([16]byte(n.a.IPv6.To16())), 128)
		rule := &agentof.PolicyRule{ID: 7, Key: "deny-a 0/", Direction: agentof.DirectionIngress, Peers: []netip.Prefix{a6},
			AppliedTo: []uint32{n.b.OFPort}, Action: agentof.ActionDrop, Tier: agentof.TierAntrea, Priority: 30000}
		if err := n.writer.Install(ctx, rule); err != nil {
			t.Fatal(err)
		}
		tcp := crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{}, TransportHeader: crdv1beta1.TransportHeader{TCP: &crdv1beta1.TCPHeader{DstPort: 80}}}
		r, _ := n.traceSpec(t, "drop6", 15, crdv1beta1.TraceflowSpec{Source: from("tfa"), Destination: toPod("tfb"), Packet: tcp}, nil)
		want := "SpoofGuard/SpoofGuard/Forwarded -> NetworkPolicy/AntreaPolicyIngressRule/Dropped policy=AntreaClusterNetworkPolicy:deny-a rule=drop-a"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "drop6", 15)
		// The same rule leaves a's IPv4 packets alone.
		r, _ = n.traceSpec(t, "pass4", 16, crdv1beta1.TraceflowSpec{Source: from("tfa"), Destination: toPod("tfb")}, nil)
		if got, want := describe(r.Observations), "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Delivered pod=default/tfb"; got != want {
			t.Fatalf("IPv4 under a rule on a's IPv6 address: got %s\nwant %s", got, want)
		}
		n.finish(t, "pass4", 16)
		if err := n.writer.Uninstall(ctx, 7); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("dropped by K8s NetworkPolicy isolation over IPv6", func(t *testing.T) {
		if err := n.writer.SetIsolatedPorts(ctx, agentof.DirectionIngress, []uint32{n.b.OFPort}); err != nil {
			t.Fatal(err)
		}
		r, _ := n.traceSpec(t, "isolated6", 17, crdv1beta1.TraceflowSpec{Source: from("tfa"), Destination: toPod("tfb"), Packet: v6}, nil)
		want := "SpoofGuard/SpoofGuard/Forwarded -> NetworkPolicy/IngressDefaultRule/Dropped policy=K8sNetworkPolicy:default/isolate-b"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "isolated6", 17)
		if err := n.writer.SetIsolatedPorts(ctx, agentof.DirectionIngress, nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("live traffic: the pod's next TCP connection over IPv6 is tagged and captured", func(t *testing.T) {
		n.b.ServeWho6(t, 8080)
		spec := crdv1beta1.TraceflowSpec{Source: from("tfa"), Destination: toPod("tfb"), LiveTraffic: true,
			Packet: crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{}, TransportHeader: crdv1beta1.TransportHeader{TCP: &crdv1beta1.TCPHeader{DstPort: 8080}}}}
		r, tf := n.traceSpec(t, "live6", 18, spec, func() {
			c, err := n.a.Dial(t, "tcp6", net.JoinHostPort(n.b.IPv6.String(), "8080"), 5*time.Second)
			if err != nil {
				t.Fatalf("the live IPv6 connection failed: %v", err)
			}
			_ = c.Close()
		})
		if got, want := describe(r.Observations), "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Delivered pod=default/tfb"; got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		cp := tf.Status.CapturedPacket
		if cp == nil || cp.SrcIP != n.a.IPv6.String() || cp.DstIP != n.b.IPv6.String() || cp.IPHeader != nil || cp.IPv6Header == nil ||
			cp.IPv6Header.NextHeader == nil || *cp.IPv6Header.NextHeader != 6 || cp.IPv6Header.HopLimit == 0 ||
			cp.TransportHeader.TCP == nil || cp.TransportHeader.TCP.DstPort != 8080 || cp.TransportHeader.TCP.Flags == nil ||
			*cp.TransportHeader.TCP.Flags != 0x02 {
			t.Fatalf("captured packet %+v (ipv6Header %+v), want the SYN [%s] -> [%s]:8080", cp, cp.IPv6Header, n.a.IPv6, n.b.IPv6)
		}
		n.finish(t, "live6", 18)
	})
}

// TestIPv6TraceflowOnARealIPv6OnlyNode: a node whose gateway has an IPv6
// address alone (its pipeline carries IPv6 alone) and pods with one IPv6
// address: a Traceflow without any header is IPv6's (the Pods have no
// IPv4 address), delivered to pod b, whose kernel takes the echo request;
// and dropped by isolation.
func TestIPv6TraceflowOnARealIPv6OnlyNode(t *testing.T) {
	ovsinstance.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	br := bridgetest.NewNode(t, bridgetest.NodeOptions{PodCIDR: "fd00:10:244:1::/64", GatewayIP: "fd00:10:244:1::1"})
	c, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayMAC: br.GatewayMAC, PodCIDR: br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	n := &ovsNode{br: br, flows: c, writer: agentof.NewRuleWriter(c)}
	store := addIPv6OnlyPods(t, c, br, n, "fd00:10:244:1::2/64", "fd00:10:244:1::3/64")
	disp := agentof.NewPacketInDispatcher(br.OF)
	go disp.Run(ctx)
	n.client = fake.NewSimpleClientset()
	factory := crdinformers.NewSharedInformerFactory(n.client, 0)
	kube := k8sfake.NewClientset(kubePod("default", "tfa", n.a.IP), kubePod("default", "tfb", n.b.IP))
	n.ctrl = NewController(Config{NodeName: "node-1", Client: n.client, Kube: kube, Informer: factory.Crd().V1beta1().Traceflows(),
		Flows: c, IO: disp, Interfaces: store, Rules: rules{}, Ports: Ports{Gateway: bridgetest.GatewayOFPort}, GatewayMAC: br.GatewayMAC})
	factory.Start(ctx.Done())
	go n.ctrl.Run(ctx)

	t.Run("delivered without a header", func(t *testing.T) {
		before := snmp6(t, n.b, "Icmp6InEchos")
		r, _ := n.traceSpec(t, "v6only", 21, crdv1beta1.TraceflowSpec{Source: from("tfa"), Destination: toPod("tfb")}, nil)
		if got, want := describe(r.Observations), "SpoofGuard/SpoofGuard/Forwarded -> Forwarding/Output/Delivered pod=default/tfb"; got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		flows := c.TraceflowFlowsOf(21)
		for _, f := range flows {
			if v, ok := f.Match.Get(binding.FieldEthType); !ok || uint16(v.Value.Lo) != binding.EthTypeIPv6 {
				t.Errorf("an IPv6-only node's tag flow is not IPv6's: %s", f)
			}
		}
		if len(flows) == 0 {
			t.Error("no flows of tag 21")
		}
		for i := 0; snmp6(t, n.b, "Icmp6InEchos") == before; i++ {
			if i > 200 {
				t.Fatal("pod b's kernel never took the traced ICMPv6 echo request")
			}
			time.Sleep(10 * time.Millisecond)
		}
		n.finish(t, "v6only", 21)
	})

	t.Run("dropped by isolation", func(t *testing.T) {
		if err := n.writer.SetIsolatedPorts(ctx, agentof.DirectionIngress, []uint32{n.b.OFPort}); err != nil {
			t.Fatal(err)
		}
		r, _ := n.traceSpec(t, "v6only-isolated", 22, crdv1beta1.TraceflowSpec{Source: from("tfa"), Destination: toPod("tfb")}, nil)
		want := "SpoofGuard/SpoofGuard/Forwarded -> NetworkPolicy/IngressDefaultRule/Dropped policy=K8sNetworkPolicy:default/isolate-b"
		if got := describe(r.Observations); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		n.finish(t, "v6only-isolated", 22)
	})
}

// addIPv6OnlyPods adds pods a and b of these IPv6 addresses (made usable
// at once: no duplicate address detection) to the node, their flows
// installed, and returns the interface store holding them.
func addIPv6OnlyPods(t *testing.T, c *agentof.Client, br *bridgetest.Bridge, n *ovsNode, a, b string) interfacestore.InterfaceStore {
	t.Helper()
	store := interfacestore.NewInterfaceStore()
	for i, cidr := range []string{a, b} {
		p := br.AddPod(t, []string{"tfa", "tfb"}[i], cidr)
		bridgetest.Run(t, "ip", "-n", p.NS, "addr", "del", cidr, "dev", "eth0")
		bridgetest.Run(t, "ip", "-n", p.NS, "addr", "add", cidr, "dev", "eth0", "nodad")
		bridgetest.Run(t, "ip", "-n", p.NS, "-6", "route", "replace", "default", "via", br.GatewayIP.String())
		if err := c.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		iface := interfacestore.NewContainerInterface(p.HostIF, "c-"+p.Name, p.Name, "default", "eth0", p.MAC, []net.IP{p.IP}, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(p.OFPort)}
		store.AddInterface(iface)
		if i == 0 {
			n.a = p
		} else {
			n.b = p
		}
	}
	return store
}
