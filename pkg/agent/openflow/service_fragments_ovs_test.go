package openflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// TestLargeUDPDatagramsThroughAnIPv6ServiceOnRealOVS is the IPv6 half of
// upstream's "Services should be able to handle large requests: udp": a
// 4000-byte datagram to an IPv6 ClusterIP leaves the pod as three IPv6
// fragments, and only the first carries the UDP header; Open vSwitch gives
// the later ones nw_proto=44 (the fragment header) where an IPv4 fragment
// keeps its protocol. Every fragment must reach the endpoint chosen for the
// datagram and be DNATed with it, and the answer, as large, must come back
// from the ClusterIP. IPv4 beside it on the same node keeps working (its
// fragments keep the symmetric L4 hash).
func TestLargeUDPDatagramsThroughAnIPv6ServiceOnRealOVS(t *testing.T) {
	br, c, a, b := dualStackNode(t)
	e2 := br.AddPod(t, "e2", "10.10.1.4/24")
	e2.AddIPv6(t, br, "fd00:10:244:1::4/64")
	if err := c.InstallPodFlows(e2.HostIF, []net.IP{e2.IP, e2.IPv6}, e2.MAC, e2.OFPort); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*bridgetest.Pod{b, e2} {
		p.ServeWho(t, 8081)
		p.ServeWho6(t, 8081)
	}
	v6 := ServicePort{IP: netip.MustParseAddr("fd00:10:96::5c"), Protocol: binding.IPProtoUDP, Port: 90}
	v4 := ServicePort{IP: netip.MustParseAddr("10.96.0.92"), Protocol: binding.IPProtoUDP, Port: 90}
	if err := c.InstallService(context.Background(), "default/big", ServiceState{
		v6: {Endpoints: []Endpoint{{IP: addr(b.IPv6), Port: 8081, Local: true}, {IP: addr(e2.IPv6), Port: 8081, Local: true}}},
		v4: {Endpoints: []Endpoint{{IP: addr(b.IP), Port: 8081, Local: true}, {IP: addr(e2.IP), Port: 8081, Local: true}}},
	}); err != nil {
		t.Fatal(err)
	}
	payload := []byte(strings.Repeat("42", 2000)) // 4000 bytes: three fragments at MTU 1500
	ask := func(network string, vip ServicePort) (string, error) {
		return a.AskWhoEchoes(t, network, net.JoinHostPort(vip.IP.String(), fmt.Sprint(vip.Port)), payload)
	}
	for _, tc := range []struct {
		network string
		vip     ServicePort
	}{{"udp6", v6}, {"udp4", v4}} {
		// The first may go while the neighbours resolve.
		if _, err := ask(tc.network, tc.vip); err != nil {
			t.Logf("%s: first datagram: %v", tc.network, err)
		}
		seen := map[string]int{}
		for i := 0; i < 12; i++ {
			who, err := ask(tc.network, tc.vip)
			if err != nil {
				t.Errorf("%s: large datagram %d through %s: %v", tc.network, i, tc.vip.IP, err)
				continue
			}
			seen[who]++
		}
		// The fragment group picks by the client's address alone (its
		// fragments carry no ports): one endpoint answers them all.
		t.Logf("%s: answered by %v", tc.network, seen)
	}
	{
		var flows []string
		for _, f := range br.DumpFlowsWithStats(t) {
			if strings.Contains(f, "fd00:10:96::5c") || strings.Contains(f, "frag") || strings.Contains(f, "nw_proto=44") || strings.Contains(f, "udp6") {
				flows = append(flows, f)
			}
		}
		t.Logf("the Services' UDP flows and fragment flows:\n%s\ngroups:\n%s", strings.Join(flows, "\n"), strings.Join(br.DumpGroups(t), "\n"))
	}
}
