package openflow

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// The IPv6 half of a dual-stack node, on a real switch: a node whose
// gateway has an address of each family (bridgetest.AddGatewayIPv6), its
// pods with one of each (Pod.AddIPv6), and the agent's client installing
// both families' flows.

// dualStackNode is a real node with an IPv6 gateway address beside its
// IPv4 one, its pipeline installed for both families, and two pods with
// an address of each family, their flows installed.
func dualStackNode(t *testing.T) (*bridgetest.Bridge, *Client, *bridgetest.Pod, *bridgetest.Pod) {
	t.Helper()
	br := bridgetest.New(t)
	br.AddGatewayIPv6(t, "fd00:10:244:1::1/64")
	c, err := NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(context.Background(), &NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayIPv6: br.GatewayIPv6, GatewayMAC: br.GatewayMAC, PodCIDR: br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	var pods []*bridgetest.Pod
	for i, name := range []string{"a", "b"} {
		p := br.AddPod(t, name, []string{"10.10.1.2/24", "10.10.1.3/24"}[i])
		p.AddIPv6(t, br, []string{"fd00:10:244:1::2/64", "fd00:10:244:1::3/64"}[i])
		if err := c.InstallPodFlows(p.HostIF, []net.IP{p.IP, p.IPv6}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	return br, c, pods[0], pods[1]
}

// neighbourMAC is the MAC the pod's kernel resolved ip to ("" if none).
func neighbourMAC(t *testing.T, p *bridgetest.Pod, ip net.IP) string {
	t.Helper()
	out := bridgetest.Run(t, "ip", "-n", p.NS, "-6", "neigh", "show", ip.String(), "dev", "eth0")
	if f := strings.Fields(out); len(f) >= 3 && f[1] == "lladdr" {
		return f[2]
	}
	return ""
}

// ping6 pings ip once from the pod, ICMPv6 echo (no retry).
func ping6(p *bridgetest.Pod, ip net.IP) error { return ping(p.NS, ip) }

// TestIPv6PodsReachTheGatewayAndEachOtherThroughNDPOnRealOVS: the pods
// resolve the gateway's IPv6 address and each other's with neighbour
// discovery (the gateway's kernel and the other pod answer through the
// pipeline's NDP flows), then ping and speak TCP over IPv6, while IPv4
// keeps working beside it. 2-3 s.
func TestIPv6PodsReachTheGatewayAndEachOtherThroughNDPOnRealOVS(t *testing.T) {
	br, c, a, b := dualStackNode(t)
	pingEventually(t, a.NS, br.GatewayIPv6)
	if got := neighbourMAC(t, a, br.GatewayIPv6); got != br.GatewayMAC.String() {
		t.Errorf("pod a resolved the gateway's IPv6 address to %q, want the gateway's MAC %s", got, br.GatewayMAC)
	}
	pingEventually(t, a.NS, b.IPv6)
	if got := neighbourMAC(t, a, b.IPv6); got != b.MAC.String() {
		t.Errorf("pod a resolved pod b's IPv6 address to %q, want b's MAC %s", got, b.MAC)
	}
	pingEventually(t, a.NS, b.IP) // IPv4 beside it
	b.ServeWho6(t, 8080)
	who, client := bridgetest.Answerer(a.AskWhoEventually(t, "tcp6", net.JoinHostPort(b.IPv6.String(), "8080")))
	if who != "b" || !strings.HasPrefix(client, "["+a.IPv6.String()+"]:") {
		t.Errorf("TCP over IPv6 from a to b: answered by %q seeing client %q, want b seeing [%s]", who, client, a.IPv6)
	}
	// The connection went through IPv6's own conntrack zone.
	out, err := br.Appctl("dpctl/dump-conntrack", "zone=65510")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "src="+a.IPv6.String()) || !strings.Contains(out, "dport=8080") {
		t.Errorf("conntrack zone 65510 (CtZoneV6) lacks a's connection to b:8080:\n%s", out)
	}
	if got, want := strings.Join(br.DumpFlows(t), "\n"), strings.Join(clientFlows(c), "\n"); got != want {
		t.Errorf("the bridge should hold exactly the client's flows\nbridge:\n%s\nclient:\n%s", got, want)
	}
}

// TestTheSpoofGuardDropsIPv6AndNDPThatClaimAnotherPodsAddressOnRealOVS:
// pod a sending from pod b's IPv6 address, and a Neighbor Advertisement
// from a for b's address, meet the spoof guard's drop; a's own pass.
func TestTheSpoofGuardDropsIPv6AndNDPThatClaimAnotherPodsAddressOnRealOVS(t *testing.T) {
	br, c, a, b := dualStackNode(t)
	from := func(extra string) string {
		return "in_port=" + strconv.FormatUint(uint64(a.OFPort), 10) + ",dl_src=" + a.MAC.String() + ",dl_dst=" + b.MAC.String() + "," + extra
	}
	tests := []struct {
		name, flow string
		pass       bool
	}{
		{"an NA for a's own address", from("icmp6,ipv6_src=" + a.IPv6.String() + ",ipv6_dst=" + b.IPv6.String() + ",icmpv6_type=136,nd_target=" + a.IPv6.String()), true},
		{"an NA for a's link-local address", from("icmp6,ipv6_src=fe80::1,ipv6_dst=fe80::2,icmpv6_type=136,nd_target=fe80::1"), true},
		{"an NA claiming b's address", from("icmp6,ipv6_src=" + a.IPv6.String() + ",ipv6_dst=" + b.IPv6.String() + ",icmpv6_type=136,nd_target=" + b.IPv6.String()), false},
		{"an NS from a's address", from("icmp6,ipv6_src=" + a.IPv6.String() + ",ipv6_dst=ff02::1:ff00:3,icmpv6_type=135,nd_target=" + b.IPv6.String()), true},
		{"an NS from b's address", from("icmp6,ipv6_src=" + b.IPv6.String() + ",ipv6_dst=ff02::1:ff00:1,icmpv6_type=135,nd_target=" + br.GatewayIPv6.String()), false},
		{"TCP from b's address", from("tcp6,ipv6_src=" + b.IPv6.String() + ",ipv6_dst=" + br.GatewayIPv6.String() + ",tcp_dst=80"), false},
	}
	for _, tt := range tests {
		trace := br.Trace(t, tt.flow)
		final := trace[strings.LastIndex(trace, "Datapath actions:"):]
		if dropped := strings.Contains(final, "Datapath actions: drop"); dropped == tt.pass {
			t.Errorf("%s: passed = %v, want %v:\n%s", tt.name, !dropped, tt.pass, trace)
		}
	}
	// And for real: echo requests a sends from b's address are dropped
	// by the spoof guard's miss flow, and none reaches the gateway.
	pingEventually(t, a.NS, br.GatewayIPv6) // a and the gateway know each other
	missDrops := func() int {
		out, err := br.Ofctl("dump-flows", "br-int", "table="+strconv.Itoa(int(c.p.Table(SpoofGuardTable).ID)))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if i := strings.Index(line, "n_packets="); i >= 0 && strings.Contains(line, " priority=0 actions=drop") {
				n, _ := strconv.Atoi(strings.SplitN(line[i+len("n_packets="):], ",", 2)[0])
				return n
			}
		}
		t.Fatalf("no SpoofGuard miss flow:\n%s", out)
		return 0
	}
	before := missDrops()
	bridgetest.Run(t, "ip", "-n", a.NS, "addr", "add", "fd00:10:244:1::3/128", "dev", "eth0", "nodad")
	if out, err := exec.Command("ip", "netns", "exec", a.NS, "ping", "-6", "-c", "2", "-W", "1", "-I", b.IPv6.String(), br.GatewayIPv6.String()).CombinedOutput(); err == nil {
		t.Errorf("a pinged the gateway from b's IPv6 address through the spoof guard:\n%s", out)
	}
	if after := missDrops(); after-before < 2 {
		t.Errorf("the spoof guard's miss flow dropped %d packets while a sent 2 echo requests from b's address", after-before)
	}
}

// TestANetworkPolicyDeniesIPv6AsItDeniesIPv4OnRealOVS: pod b isolated for
// ingress with a rule allowing pod a's IPv4 address only: a reaches b over
// IPv4 and not over IPv6; once the rule's peers hold a's IPv6 address (an
// ipBlock or a pod peer of IPv6), a reaches b over IPv6 too. 3-4 s.
func TestANetworkPolicyDeniesIPv6AsItDeniesIPv4OnRealOVS(t *testing.T) {
	br, c, a, b := dualStackNode(t)
	ctx := context.Background()
	pingEventually(t, a.NS, b.IPv6)
	rw := NewRuleWriter(c)
	rule := func(peers ...net.IP) *PolicyRule {
		var ps []netip.Prefix
		for _, p := range peers {
			ps = append(ps, netip.PrefixFrom(addr(p), addr(p).BitLen()))
		}
		return &PolicyRule{ID: 9, Direction: DirectionIngress, Peers: ps, AppliedTo: []uint32{b.OFPort}, Priority: PolicyRulePriority,
			Services: []PolicyPort{{Protocol: binding.IPProtoTCP, Port: 8080}}}
	}
	if err := rw.Install(ctx, rule(a.IP)); err != nil {
		t.Fatal(err)
	}
	if err := rw.SetIsolatedPorts(ctx, DirectionIngress, []uint32{b.OFPort}); err != nil {
		t.Fatal(err)
	}
	// The datapath's cached flows of the ping above go, as the agent
	// purges them after a policy change (pkg/agent/dpcache).
	br.PurgeDatapath(t)
	b.ServeWho(t, 8080)
	b.ServeWho6(t, 8080)
	if who, _ := bridgetest.Answerer(a.AskWhoEventually(t, "tcp4", net.JoinHostPort(b.IP.String(), "8080"))); who != "b" {
		t.Fatalf("the rule allows a's IPv4 address, yet b did not answer a over IPv4")
	}
	if _, err := a.AskWho(t, "tcp6", net.JoinHostPort(b.IPv6.String(), "8080"), time.Second); err == nil {
		t.Fatal("b is isolated and no rule allows a's IPv6 address, yet a reached b over IPv6")
	}
	if err := ping6(a, b.IPv6); err == nil {
		t.Error("b is isolated and allows TCP 8080 only, yet a pinged it over IPv6")
	}
	if err := rw.Install(ctx, rule(a.IP, a.IPv6)); err != nil {
		t.Fatal(err)
	}
	br.PurgeDatapath(t)
	if who, client := bridgetest.Answerer(a.AskWhoEventually(t, "tcp6", net.JoinHostPort(b.IPv6.String(), "8080"))); who != "b" ||
		!strings.HasPrefix(client, "["+a.IPv6.String()+"]:") {
		t.Errorf("with a's IPv6 address among the rule's peers, a should reach b over IPv6: answered by %q seeing %q", who, client)
	}
}

// TestIPv6PodsOnTwoNodesReachEachOtherThroughTheTunnelOnRealOVS: two
// dual-stack nodes on an IPv4 underlay, each with the other's IPv4 and
// IPv6 pod CIDRs installed (InstallNodeFlows once per family): a pod on
// node 1 pings and speaks TCP to a pod on node 2 over IPv6, the inner IPv6
// frame carried by Geneve over IPv4, and over IPv4 beside it; removing the
// peer removes both families' flows. 3-4 s.
func TestIPv6PodsOnTwoNodesReachEachOtherThroughTheTunnelOnRealOVS(t *testing.T) {
	nodes, client, web := twoDualStackNodes(t, func(i int) string { return "192.168.77.1" + strconv.Itoa(i) + "/24" })
	web.ServeWho6(t, 8080)
	who, seen := bridgetest.Answerer(client.AskWhoEventually(t, "tcp6", net.JoinHostPort(web.IPv6.String(), "8080")))
	if who != "p2" || !strings.HasPrefix(seen, "["+client.IPv6.String()+"]:") {
		t.Errorf("TCP over IPv6 across nodes: answered by %q seeing %q, want p2 seeing [%s]", who, seen, client.IPv6)
	}
	// The tunnel flow of the IPv6 CIDR sets an IPv4 tunnel destination.
	var v6Tunnel string
	for _, f := range nodes[0].br.DumpFlows(t) {
		if strings.Contains(f, "ipv6_dst=fd00:10:244:2::/64") {
			v6Tunnel = f
		}
	}
	if !strings.Contains(v6Tunnel, "set_field:"+nodes[1].br.NodeIP.String()+"->tun_dst") {
		t.Errorf("node 1's flow to node 2's IPv6 pod CIDR should tunnel to %s: %q", nodes[1].br.NodeIP, v6Tunnel)
	}
	if err := nodes[0].c.UninstallNodeFlows("node-" + nodes[1].br.GatewayIP.String()); err != nil {
		t.Fatal(err)
	}
	for _, f := range nodes[0].br.DumpFlows(t) {
		if strings.Contains(f, "fd00:10:244:2::") || strings.Contains(f, "10.10.2.0/24") {
			t.Errorf("after UninstallNodeFlows node 1 still holds a flow to node 2: %s", f)
		}
	}
	if err := ping6(client, web.IPv6); err == nil {
		t.Error("after UninstallNodeFlows pod p1 still reaches p2 over IPv6")
	}
}

// TestAnIPv6ClusterIPIsDNATedToItsEndpointsOnRealOVS: an IPv6 Service
// port (the IPv6 ClusterIP of a dual-stack Service) beside an IPv4 one of
// the same Service: a pod's TCP to each ClusterIP is answered by the
// endpoint of its family, which sees the pod's own address (no SNAT), and
// the IPv6 connection's DNAT is in IPv6's conntrack zone. 2-3 s.
func TestAnIPv6ClusterIPIsDNATedToItsEndpointsOnRealOVS(t *testing.T) {
	br, c, a, b := dualStackNode(t)
	ctx := context.Background()
	b.ServeWho(t, 8080)
	b.ServeWho6(t, 8080)
	v4 := ServicePort{IP: netip.MustParseAddr("10.96.0.10"), Protocol: binding.IPProtoTCP, Port: 80}
	v6 := ServicePort{IP: netip.MustParseAddr("fd00:10:96::a"), Protocol: binding.IPProtoTCP, Port: 80}
	if err := c.InstallService(ctx, "default/web", ServiceState{
		v4: {Endpoints: []Endpoint{{IP: addr(b.IP), Port: 8080, Local: true}}},
		v6: {Endpoints: []Endpoint{{IP: addr(b.IPv6), Port: 8080, Local: true}}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		network string
		vip     netip.Addr
		client  net.IP
	}{{"tcp6", v6.IP, a.IPv6}, {"tcp4", v4.IP, a.IP}} {
		who, seen := bridgetest.Answerer(a.AskWhoEventually(t, tc.network, net.JoinHostPort(tc.vip.String(), "80")))
		host, _, _ := net.SplitHostPort(seen)
		if who != "b" || host != tc.client.String() {
			t.Errorf("%s to ClusterIP %s: answered by %q seeing %q, want b seeing %s", tc.network, tc.vip, who, seen, tc.client)
		}
	}
	out, err := br.Appctl("dpctl/dump-conntrack", "zone=65510")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "dst=fd00:10:96::a") || !strings.Contains(out, "src="+b.IPv6.String()) {
		t.Errorf("conntrack zone 65510 (CtZoneV6) lacks the DNAT of a's connection to [fd00:10:96::a]:80:\n%s", out)
	}
}

// dualNode is a node of twoDualStackNodes: its bridge and its client.
type dualNode struct {
	br *bridgetest.Bridge
	c  *Client
}

// twoDualStackNodes brings up two dual-stack nodes on one underlay, node i
// at address nodeIP(i) (IPv4 or IPv6: the tunnel's family), each with the
// other's IPv4 and IPv6 pod CIDRs installed (InstallNodeFlows once per
// family) and the tunnel neighbour pinned, and a pod on each (p1, p2) with
// an address of each family; it returns once p1 pings p2 over both.
func twoDualStackNodes(t *testing.T, nodeIP func(i int) string) (nodes []dualNode, client, web *bridgetest.Pod) {
	t.Helper()
	u := bridgetest.NewUnderlay(t)
	for i := 1; i <= 2; i++ {
		br := bridgetest.NewNode(t, bridgetest.NodeOptions{PodCIDR: "10.10." + strconv.Itoa(i) + ".0/24", GatewayIP: "10.10." + strconv.Itoa(i) + ".1",
			Underlay: u, NodeIP: nodeIP(i)})
		br.AddGatewayIPv6(t, "fd00:10:244:"+strconv.Itoa(i)+"::1/64")
		c, err := NewClient(br.OF, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Initialize(context.Background(), &NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
			GatewayIPv6: br.GatewayIPv6, GatewayMAC: br.GatewayMAC, TunnelOFPort: bridgetest.TunnelOFPort, PodCIDR: br.PodCIDR,
			NodeIP: br.NodeIP}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, dualNode{br, c})
	}
	for _, p := range [][2]dualNode{{nodes[0], nodes[1]}, {nodes[1], nodes[0]}} {
		peer := p[1].br
		name := "node-" + peer.GatewayIP.String()
		if err := p[0].c.InstallNodeFlows(name, peer.PodCIDR, peer.GatewayIP, peer.NodeIP); err != nil {
			t.Fatal(err)
		}
		if err := p[0].c.InstallNodeFlows(name, peer.PodCIDRv6, peer.GatewayIPv6, peer.NodeIP); err != nil {
			t.Fatal(err)
		}
		p[0].br.ConnectPeer(t, peer) // tnl/neigh/set br-phy <the peer's address> <its MAC>
	}
	var pods []*bridgetest.Pod
	for i, n := range nodes {
		p := n.br.AddPod(t, "p"+strconv.Itoa(i+1), "10.10."+strconv.Itoa(i+1)+".2/24")
		p.AddIPv6(t, n.br, "fd00:10:244:"+strconv.Itoa(i+1)+"::2/64")
		if err := n.c.InstallPodFlows(p.HostIF, []net.IP{p.IP, p.IPv6}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	client, web = pods[0], pods[1]
	pingEventually(t, client.NS, web.IPv6)
	pingEventually(t, client.NS, web.IP)
	return nodes, client, web
}
