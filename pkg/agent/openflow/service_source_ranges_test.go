package openflow

import (
	"context"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"testing"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// rangeFlows are the flows of the LoadBalancerSourceRanges table the
// bridge holds, as dump-flows prints them (priority 0 left out), sorted.
func rangeFlows(c *Client, br *recordingBridge) []string {
	br.mu.Lock()
	defer br.mu.Unlock()
	id := c.Pipeline().Table(LoadBalancerSourceRangesTable).ID
	var out []string
	for _, f := range br.flows {
		if f.Table == id && f.Priority > priorityMiss {
			out = append(out, f.String())
		}
	}
	sort.Strings(out)
	return out
}

func TestSourceRangesTableSitsBeforeTheServiceTables(t *testing.T) {
	c, _ := newUnitClient(t)
	p := c.Pipeline()
	if got, want := p.Table(ConntrackStateTable).Next(), p.Table(LoadBalancerSourceRangesTable); got != want {
		t.Fatalf("ConntrackState should be followed by LoadBalancerSourceRanges, is followed by %s", got.Name)
	}
	if got := p.Table(LoadBalancerSourceRangesTable).Next(); got != p.Table(SessionAffinityTable) {
		t.Fatalf("LoadBalancerSourceRanges should be followed by SessionAffinity, is followed by %s", got.Name)
	}
}

func TestSourceRangesAllowTheirRangesAndDropTheRestOfNewConnections(t *testing.T) {
	c, br := newUnitClient(t)
	ctx := context.Background()
	lb := ServicePort{IP: netip.MustParseAddr("172.30.0.240"), Protocol: binding.IPProtoTCP, Port: 80}
	id := c.Pipeline().Table(LoadBalancerSourceRangesTable).ID
	next := c.Pipeline().Table(SessionAffinityTable).ID
	ranges := SourceRanges{lb: {netip.MustParsePrefix("10.10.1.2/32"), netip.MustParsePrefix("192.168.77.0/24"),
		netip.MustParsePrefix("fd00::/64"), netip.MustParsePrefix("192.168.77.9/24")}}
	if err := c.SetLoadBalancerSourceRanges(ctx, "ns/lb", ranges); err != nil {
		t.Fatal(err)
	}
	got := rangeFlows(c, br)
	want := []string{
		"cookie=0x5ec3000000000000, table=" + itoa(id) + ", priority=190,ct_state=+new+trk,tcp,nw_dst=172.30.0.240,tp_dst=80 actions=drop",
		"cookie=0x5ec3000000000000, table=" + itoa(id) + ", priority=200,ct_state=+new+trk,tcp,nw_src=10.10.1.2,nw_dst=172.30.0.240,tp_dst=80 actions=goto_table:" + itoa(next),
		"cookie=0x5ec3000000000000, table=" + itoa(id) + ", priority=200,ct_state=+new+trk,tcp,nw_src=192.168.77.0/24,nw_dst=172.30.0.240,tp_dst=80 actions=goto_table:" + itoa(next),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the IPv4 ranges (once each, the IPv6 one left out) should allow and the rest drop; flows:\n%s\nwant:\n%s",
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	bundles := br.bundles
	if err := c.SetLoadBalancerSourceRanges(ctx, "ns/lb", ranges); err != nil {
		t.Fatal(err)
	}
	if br.bundles != bundles {
		t.Fatal("setting the same ranges again should write nothing")
	}
	// Traceflow copies the drop (reported as dropped in this table).
	tf := c.traceflowFlows(TraceflowFlows{Tag: 3, DroppedOnly: true})
	copied := false
	for _, f := range tf {
		if f.Table == id && strings.Contains(f.String(), "nw_dst=172.30.0.240") {
			copied = true
		}
	}
	if !copied {
		t.Fatal("a Traceflow should report the packets the source ranges drop")
	}
	if err := c.SetLoadBalancerSourceRanges(ctx, "ns/lb", nil); err != nil {
		t.Fatal(err)
	}
	if got := rangeFlows(c, br); len(got) != 0 {
		t.Fatalf("cleared ranges should leave no flow, left:\n%s", strings.Join(got, "\n"))
	}
}

func TestSourceRangesOfEveryoneOrOfAnotherFamilyRestrictNothing(t *testing.T) {
	c, br := newUnitClient(t)
	lb := ServicePort{IP: netip.MustParseAddr("172.30.0.240"), Protocol: binding.IPProtoTCP, Port: 80}
	for _, ranges := range [][]netip.Prefix{
		{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("0.0.0.0/0")},
		{netip.MustParsePrefix("fd00::/64")},
	} {
		if err := c.SetLoadBalancerSourceRanges(context.Background(), "ns/lb", SourceRanges{lb: ranges}); err != nil {
			t.Fatal(err)
		}
		if got := rangeFlows(c, br); len(got) != 0 {
			t.Fatalf("ranges %v should restrict nothing, flows:\n%s", ranges, strings.Join(got, "\n"))
		}
	}
}

func TestSourceRangesHoldingTheNodeIPLetTheNodesOwnTrafficInAndGuardUDPFragments(t *testing.T) {
	c, err := NewClient(newRecordingBridge(), 1)
	if err != nil {
		t.Fatal(err)
	}
	br := c.bridge.(*recordingBridge)
	mac, _ := net.ParseMAC("0a:00:00:00:00:01")
	if err := c.Initialize(context.Background(), &NodeConfig{GatewayOFPort: 2, GatewayIP: net.ParseIP("10.10.1.1"), GatewayMAC: mac,
		NodeIP: net.ParseIP("172.30.0.11")}); err != nil {
		t.Fatal(err)
	}
	dns := ServicePort{IP: netip.MustParseAddr("172.30.0.241"), Protocol: binding.IPProtoUDP, Port: 53}
	if err := c.SetLoadBalancerSourceRanges(context.Background(), "ns/dns", SourceRanges{dns: {netip.MustParsePrefix("172.30.0.0/24")}}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rangeFlows(c, br), "\n")
	for _, want := range []string{
		"priority=200,ct_state=+new+trk,udp,reg0=0x2/0xf,nw_src=10.10.1.1,nw_dst=172.30.0.241,tp_dst=53 actions=goto_table:",
		"priority=200,ct_state=+new+trk,udp,nw_src=172.30.0.0/24,nw_dst=172.30.0.241,tp_dst=53 actions=goto_table:",
		"priority=190,ct_state=+new+trk,udp,nw_dst=172.30.0.241,tp_dst=53 actions=drop",
		"priority=200,ct_state=+new+trk,udp,nw_src=172.30.0.0/24,nw_dst=172.30.0.241,nw_frag=yes actions=goto_table:",
		"priority=190,ct_state=+new+trk,udp,nw_dst=172.30.0.241,nw_frag=yes actions=drop",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("the flows should hold %q; they are:\n%s", want, got)
		}
	}
}

func itoa(n uint8) string { return strconv.Itoa(int(n)) }

func TestARestartedAgentKeepsTheRangesUntilItsOwnAreSetAndThenDropsTheLeftovers(t *testing.T) {
	ctx := context.Background()
	br := newRecordingBridge()
	mac, _ := net.ParseMAC("0a:00:00:00:00:01")
	node := &NodeConfig{GatewayOFPort: 2, GatewayIP: net.ParseIP("10.10.1.1"), GatewayMAC: mac}
	kept := ServicePort{IP: netip.MustParseAddr("172.30.0.240"), Protocol: binding.IPProtoTCP, Port: 80}
	gone := ServicePort{IP: netip.MustParseAddr("172.30.0.241"), Protocol: binding.IPProtoTCP, Port: 80}
	ranges := []netip.Prefix{netip.MustParsePrefix("192.168.77.0/24")}
	run := func(round uint32, services map[string]SourceRanges) *Client {
		c, err := NewClient(br, round)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Initialize(ctx, node); err != nil {
			t.Fatal(err)
		}
		for name, r := range services {
			if err := c.SetLoadBalancerSourceRanges(ctx, name, r); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	run(1, map[string]SourceRanges{"ns/kept": {kept: ranges}, "ns/gone": {gone: ranges}})
	c := run(2, map[string]SourceRanges{"ns/kept": {kept: ranges}})
	if err := c.DeleteRound(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rangeFlows(c, br), "\n"); !strings.Contains(got, "172.30.0.241") {
		t.Fatalf("the earlier run's ranges should outlive its round until the recovery ends; flows:\n%s", got)
	}
	if err := c.FinishSourceRangesRecovery(ctx); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rangeFlows(c, br), "\n")
	if strings.Contains(got, "172.30.0.241") || strings.Count(got, "nw_dst=172.30.0.240") != 2 {
		t.Fatalf("after the recovery only this run's ranges (two flows of 172.30.0.240) should be left; flows:\n%s", got)
	}
}
