package openflow

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
)

// TestPodsOnTwoNodesOfAnIPv6UnderlayReachEachOtherThroughGeneveOverIPv6OnRealOVS:
// two dual-stack nodes whose underlay is IPv6 only (each node's address,
// fd00:172:30::1i, on br-phy's internal port; no IPv4 on the underlay):
// the flows of the peer's pod CIDRs, IPv4 and IPv6 alike, set
// tun_ipv6_dst to the peer's IPv6 address, and the userspace datapath
// carries Geneve over IPv6 (its tunnel neighbour pinned with
// tnl/neigh/set, an IPv6 address). Pods ping and speak TCP across the
// nodes over both inner families. 2-4 s.
func TestPodsOnTwoNodesOfAnIPv6UnderlayReachEachOtherThroughGeneveOverIPv6OnRealOVS(t *testing.T) {
	nodes, client, web := twoDualStackNodes(t, func(i int) string { return "fd00:172:30::1" + strconv.Itoa(i) + "/64" })
	web.ServeWho(t, 8080)
	web.ServeWho6(t, 8080)
	for _, tc := range []struct {
		network string
		server  net.IP
		client  net.IP
	}{{"tcp6", web.IPv6, client.IPv6}, {"tcp4", web.IP, client.IP}} {
		who, seen := bridgetest.Answerer(client.AskWhoEventually(t, tc.network, net.JoinHostPort(tc.server.String(), "8080")))
		if host, _, _ := net.SplitHostPort(seen); who != "p2" || host != tc.client.String() {
			t.Errorf("%s across nodes over an IPv6 underlay: answered by %q seeing %q, want p2 seeing %s", tc.network, who, seen, tc.client)
		}
	}
	// Both families' tunnel flows set the IPv6 tunnel destination.
	for _, cidr := range []string{"nw_dst=10.10.2.0/24", "ipv6_dst=fd00:10:244:2::/64"} {
		var flow string
		for _, f := range nodes[0].br.DumpFlows(t) {
			if strings.Contains(f, cidr) && strings.Contains(f, "tun") {
				flow = f
			}
		}
		if !strings.Contains(flow, "set_field:"+nodes[1].br.NodeIP.String()+"->tun_ipv6_dst") {
			t.Errorf("node 1's flow to %s should tunnel to %s with tun_ipv6_dst: %q", cidr, nodes[1].br.NodeIP, flow)
		}
	}
}
