package openflow

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/agent/route"
)

// TestDualStackPodsOnTwoRoutedNodesReachEachOtherOverIPv6OnRealOVS: the
// routed path (noEncap, hybrid within a subnet) of two dual-stack nodes on
// a dual-stack underlay, as the agent makes it: no tunnel port in the
// pipeline, each peer's flows installed without a tunnel destination (so
// none), and the peer's routes of both families from route.UnderlayRoutes
// on br-phy (its IPv6 pod CIDR via its IPv6 node address). Pods speak TCP
// across the nodes over IPv6 and IPv4 through the userspace datapath and
// both node kernels, the server seeing the client's pod address, and no
// flow on either node sets a tunnel destination. 2-4 s.
func TestDualStackPodsOnTwoRoutedNodesReachEachOtherOverIPv6OnRealOVS(t *testing.T) {
	u := bridgetest.NewUnderlay(t)
	type node struct {
		br  *bridgetest.Bridge
		c   *Client
		ip6 net.IP
	}
	var nodes []node
	for i := 1; i <= 2; i++ {
		n := strconv.Itoa(i)
		br := bridgetest.NewNode(t, bridgetest.NodeOptions{PodCIDR: "10.10." + n + ".0/24", GatewayIP: "10.10." + n + ".1",
			Underlay: u, NodeIP: "192.168.77.1" + n + "/24"})
		br.AddGatewayIPv6(t, "fd00:10:244:"+n+"::1/64")
		// The node's IPv6 underlay address beside its IPv4 one, on br-phy's
		// internal port, as nodeinit moves both there.
		ip6 := "fd00:172:30::1" + n
		bridgetest.Run(t, "ip", "-n", br.NetNS(), "addr", "add", ip6+"/64", "dev", "br-phy", "nodad")
		c, err := NewClient(br.OF, 1)
		if err != nil {
			t.Fatal(err)
		}
		// noEncap: no tunnel port in the pipeline.
		if err := c.Initialize(context.Background(), &NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
			GatewayIPv6: br.GatewayIPv6, GatewayMAC: br.GatewayMAC, PodCIDR: br.PodCIDR, NodeIP: br.NodeIP}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, node{br, c, net.ParseIP(ip6)})
	}
	for _, p := range [][2]node{{nodes[0], nodes[1]}, {nodes[1], nodes[0]}} {
		self, peer := p[0], p[1].br
		name := "node-" + peer.GatewayIP.String()
		for _, fam := range [][2]any{{peer.PodCIDR, peer.GatewayIP}, {peer.PodCIDRv6, peer.GatewayIPv6}} {
			if err := self.c.InstallNodeFlows(name, fam[0].(*net.IPNet), fam[1].(net.IP), nil); err != nil {
				t.Fatal(err)
			}
		}
		nodeNS, err := ns.GetNS("/var/run/netns/" + self.br.NetNS())
		if err != nil {
			t.Fatal(err)
		}
		err = nodeNS.Do(func(ns.NetNS) error {
			return (&route.UnderlayRoutes{LinkName: "br-phy"}).Add(&route.PeerRoute{NodeName: name,
				PodCIDR: peer.PodCIDR, GatewayIP: peer.GatewayIP, NodeIP: peer.NodeIP,
				PodCIDRv6: peer.PodCIDRv6, GatewayIPv6: peer.GatewayIPv6, NodeIPv6: p[1].ip6})
		})
		nodeNS.Close()
		if err != nil {
			t.Fatalf("routes of %s: %v", name, err)
		}
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
	client, web := pods[0], pods[1]
	web.ServeWho(t, 8080)
	web.ServeWho6(t, 8080)
	for _, tc := range []struct {
		network        string
		server, client net.IP
	}{{"tcp6", web.IPv6, client.IPv6}, {"tcp4", web.IP, client.IP}} {
		who, seen := bridgetest.Answerer(client.AskWhoEventually(t, tc.network, net.JoinHostPort(tc.server.String(), "8080")))
		if host, _, _ := net.SplitHostPort(seen); who != "p2" || host != tc.client.String() {
			t.Errorf("%s across routed nodes: answered by %q seeing %q, want p2 seeing %s", tc.network, who, seen, tc.client)
		}
	}
	for i, n := range nodes {
		for _, f := range n.br.DumpFlows(t) {
			if strings.Contains(f, "tun_dst") || strings.Contains(f, "tun_ipv6_dst") {
				t.Errorf("node %d has a flow into the tunnel on the routed path: %s", i+1, f)
			}
		}
	}
}
