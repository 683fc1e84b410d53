package egress

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// holdInSubnets makes n hold the IPs want (each in its subnet in subnets,
// if any) for the pods members (pod → its Egress IP), as the
// controller's sync writes them: the IPs, the subnets' routing, the SNAT
// and the marks.
func (n *ovsNode) holdInSubnets(t *testing.T, subnets map[netip.Addr]Subnet, want []netip.Addr, members map[*bridgetest.Pod]netip.Addr) {
	t.Helper()
	st := &State{SNAT: map[netip.Addr]netip.Addr{}, Subnets: subnets}
	for p, eip := range members {
		st.SNAT[netip.MustParseAddr(p.IP.String())] = eip
	}
	routes, marks := st.routes("br-phy")
	n.do(t, func() error {
		n.ips.SetSubnets(subnets)
		if _, err := n.ips.Sync(want); err != nil {
			return err
		}
		if err := (SubnetRouter{}).Sync(routes); err != nil {
			return err
		}
		return n.nft.SetEgressSNAT(context.Background(), nodenet.EgressSNAT{Gateway: "antrea-gw0", SNAT: st.SNAT, Marks: marks})
	})
	if err := n.flows.SetEgressFlows(context.Background(), agentof.EgressFlows{Holding: len(want) > 0}); err != nil {
		t.Fatal(err)
	}
}

// TestEgressIPsOfASubnetLeaveThroughItsGatewayAndVLAN: an ExternalIPPool
// with subnetInfo on a real OVS node (userspace datapath). The node has no
// route to 203.0.113.0/24; the subnet 10.40.0.0/24's gateway (a host on
// the underlay) does. Held with its subnet, the Egress IP makes a pod's
// connection to 203.0.113.10 leave through that gateway and arrive from the
// Egress IP; the node's own routes are untouched. On VLAN 10, the IP lives
// on br-phy's access port antrea-ext.10, and tcpdump (not ours) sees the
// node ask for the VLAN's gateway in frames tagged 10, from the Egress IP.
// Released, the rules, tables, ports and addresses are gone.
func TestEgressIPsOfASubnetLeaveThroughItsGatewayAndVLAN(t *testing.T) {
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Skip("tcpdump not installed (make install)")
	}
	ctx := context.Background()
	u := bridgetest.NewUnderlay(t)
	n := newOVSNode(t, u, "10.10.1.0/24", "10.10.1.1", "192.168.77.11/24")
	a1 := n.addPod(t, "a1", "10.10.1.2/24")
	gw := u.AddHost(t, "gw", "10.40.0.1/24")
	bridgetest.Run(t, "ip", "-n", gw.NS, "addr", "add", "203.0.113.1/24", "dev", "eth0")
	bridgetest.Run(t, "ip", "netns", "exec", gw.NS, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	far := u.AddHost(t, "far", "203.0.113.10/24")
	bridgetest.Run(t, "ip", "-n", far.NS, "route", "add", "default", "via", "203.0.113.1")
	far.ServeWho(t, 8080)
	conn, err := ovsconfig.Connect(ctx, n.br.DBEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n.ips = NewIPAssigner("br-phy", NewOVSVLANLinks(conn, "br-phy"))
	farAddr := net.JoinHostPort(far.IP.String(), "8080")

	eip := netip.MustParseAddr("10.40.0.10")
	n.holdInSubnets(t, nil, []netip.Addr{eip}, map[*bridgetest.Pod]netip.Addr{a1: eip})
	if _, err := a1.AskWho(t, "tcp4", farAddr, 2*time.Second); err == nil {
		t.Fatalf("a1 reached %s without the subnet's gateway: the test proves nothing", farAddr)
	}

	sub := Subnet{Prefix: netip.MustParsePrefix("10.40.0.0/24"), Gateway: netip.MustParseAddr("10.40.0.1")}
	n.holdInSubnets(t, map[netip.Addr]Subnet{eip: sub}, []netip.Addr{eip}, map[*bridgetest.Pod]netip.Addr{a1: eip})
	_, client := bridgetest.Answerer(a1.AskWhoEventually(t, "tcp4", farAddr))
	if host, _, _ := net.SplitHostPort(client); host != eip.String() {
		t.Errorf("a1's connection to %s arrived from %s, want the Egress IP %s (through the gateway %s)", farAddr, host, eip, sub.Gateway)
	}
	n.do(t, func() error {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: SubnetTableBase}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		if len(routes) != 1 || routes[0].Gw.String() != "10.40.0.1" {
			t.Errorf("table %d holds %v, want one default route via 10.40.0.1", SubnetTableBase, routes)
		}
		// The dump of every table that Sync (and the check below) reads sees it.
		all, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(all, func(r netlink.Route) bool { return r.Table == SubnetTableBase }) {
			t.Errorf("the dump of every table lacks table %d: %v", SubnetTableBase, all)
		}
		link, err := netlink.LinkByName("br-phy")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IPNet.String() == "10.40.0.10/24" }) {
			t.Errorf("br-phy's addresses %v lack 10.40.0.10/24 (the subnet's prefix)", addrs)
		}
		return nil
	})
	// The node's own traffic keeps its routes: it still has none to
	// 203.0.113.0/24 (only the pods' marked packets take the gateway).
	if out, err := exec.Command("ip", "netns", "exec", n.br.NetNS(), "ip", "route", "get", "203.0.113.10").CombinedOutput(); err == nil {
		t.Errorf("the node itself now routes to 203.0.113.10: %s", out)
	}

	// VLAN 10: another subnet, tagged on the underlay.
	eip2 := netip.MustParseAddr("10.50.0.10")
	sub2 := Subnet{Prefix: netip.MustParsePrefix("10.50.0.0/24"), Gateway: netip.MustParseAddr("10.50.0.1"), VLAN: 10}
	dumpCtx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	dump := exec.CommandContext(dumpCtx, "ip", "netns", "exec", gw.NS, "tcpdump", "-e", "-n", "-l", "-i", "eth0", "vlan 10 and arp")
	out, err := dump.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); _ = dump.Wait() }()
	time.Sleep(time.Second) // tcpdump attaches
	n.holdInSubnets(t, map[netip.Addr]Subnet{eip: sub, eip2: sub2}, []netip.Addr{eip, eip2}, map[*bridgetest.Pod]netip.Addr{a1: eip2})
	if tag, err := n.br.Vsctl("get", "port", "antrea-ext.10", "tag"); err != nil || strings.TrimSpace(tag) != "10" {
		t.Errorf("br-phy's port antrea-ext.10 has tag %q (%v), want 10", tag, err)
	}
	go func() { _, _ = a1.AskWho(t, "tcp4", farAddr, 3*time.Second) }()
	want := "who-has 10.50.0.1 tell 10.50.0.10"
	sc := bufio.NewScanner(out)
	var seen []string
	found := false
	for !found && sc.Scan() {
		line := sc.Text()
		seen = append(seen, line)
		found = strings.Contains(line, "vlan 10") && strings.Contains(line, want)
	}
	if !found {
		t.Errorf("tcpdump on the underlay never saw an ARP %q tagged with VLAN 10; it saw:\n%s", want, strings.Join(seen, "\n"))
	}
	n.do(t, func() error {
		held, err := n.ips.Held()
		if err == nil && !slices.Equal(held, []netip.Addr{eip, eip2}) {
			t.Errorf("the node holds %v, want [%s %s]", held, eip, eip2)
		}
		return err
	})

	// Released: nothing of it stays.
	n.holdInSubnets(t, nil, nil, nil)
	n.do(t, func() error {
		held, err := n.ips.Held()
		if err == nil && len(held) != 0 {
			t.Errorf("the node still holds %v", held)
		}
		rules, err := netlink.RuleList(netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if r.Priority == SubnetRulePriority || r.Priority == SubnetRulePriority+1 {
				t.Errorf("ip rule left: %s", r.String())
			}
		}
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Table >= SubnetTableBase && r.Table < SubnetTableBase+maxSubnets {
				t.Errorf("route left in table %d: %s", r.Table, r.String())
			}
		}
		return nil
	})
	if _, err := n.br.Vsctl("get", "port", "antrea-ext.10", "tag"); err == nil {
		t.Errorf("br-phy's port antrea-ext.10 is still there")
	}
}
