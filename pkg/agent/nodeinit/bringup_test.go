package nodeinit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// testNode is a node netns running OVS, with an uplink eth0 (192.168.77.1/24,
// a route to 10.99.0.0/16 through the peer) wired to a peer netns
// (192.168.77.2/24) standing for the rest of the underlay.
type testNode struct {
	in     *ovsinstance.Instance
	nodeNS ns.NetNS
	peerNS string
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	in := ovsinstance.StartForTest(t, "ovsdb")
	peer := ovsinstance.NewNetNS(t, "ovsdb")
	node := in.NetNS()
	run(t, "ip", "-n", node, "link", "add", "eth0", "type", "veth", "peer", "name", "peer0", "netns", peer)
	run(t, "ip", "-n", node, "addr", "add", "192.168.77.1/24", "dev", "eth0")
	run(t, "ip", "-n", node, "link", "set", "eth0", "up")
	run(t, "ip", "-n", peer, "addr", "add", "192.168.77.2/24", "dev", "peer0")
	run(t, "ip", "-n", peer, "link", "set", "peer0", "up")
	run(t, "ip", "-n", node, "route", "add", "10.99.0.0/16", "via", "192.168.77.2", "metric", "50")
	run(t, "ip", "-n", node, "route", "add", "default", "via", "192.168.77.2")
	nodeNS, err := ns.GetNS("/var/run/netns/" + node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nodeNS.Close() })
	return &testNode{in: in, nodeNS: nodeNS, peerNS: peer}
}

func (n *testNode) config(encap ovsconfig.TunnelType) Config {
	_, podCIDR, _ := net.ParseCIDR("10.10.1.0/24")
	return Config{
		NodeName:      "node-a",
		OVSDBEndpoint: n.in.DBEndpoint(),
		OVSRunDir:     n.in.Dir(),
		DatapathType:  ovsconfig.OVSDatapathNetdev,
		TunnelType:    encap,
		PodCIDRs:      []*net.IPNet{podCIDR},
		UplinkName:    "eth0",
	}
}

// bringup runs Bringup inside the node netns, as the agent would.
func (n *testNode) bringup(t *testing.T, cfg Config) *NodeConfig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var nc *NodeConfig
	err := n.nodeNS.Do(func(ns.NetNS) error {
		var err error
		nc, err = Bringup(ctx, cfg)
		return err
	})
	if err != nil {
		t.Fatalf("Bringup: %v", err)
	}
	return nc
}

// linkState is what must not change on a second run: a link re-created or
// taken down would show here.
type linkState struct {
	Index int
	Flags net.Flags
	MAC   string
	MTU   int
	Addrs []string
}

func (n *testNode) links(t *testing.T, names ...string) map[string]linkState {
	t.Helper()
	out := map[string]linkState{}
	err := n.nodeNS.Do(func(ns.NetNS) error {
		for _, name := range names {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			s := linkState{Index: l.Attrs().Index, Flags: l.Attrs().Flags, MAC: l.Attrs().HardwareAddr.String(), MTU: l.Attrs().MTU}
			for _, a := range addrs {
				s.Addrs = append(s.Addrs, a.IPNet.String())
			}
			out[name] = s
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ovsRows lists the identity and configuration of every Bridge, Port and
// Interface row, which a second run must leave as they are.
func (n *testNode) ovsRows(t *testing.T) []string {
	t.Helper()
	var rows []string
	for _, table := range []string{"Bridge", "Port", "Interface"} {
		cols := "_uuid,name,external_ids,other_config"
		if table == "Interface" {
			cols += ",type,options,mac,ofport,mtu_request"
		}
		if table == "Bridge" {
			cols += ",datapath_type,fail_mode,protocols,ports"
		}
		out, err := n.in.Vsctl("--format=csv", "--no-headings", "--columns="+cols, "list", table)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			rows = append(rows, table+": "+line)
		}
	}
	sort.Strings(rows)
	return rows
}

// ping sends ICMP echo requests from inside netns from to ip (ping(8) is not
// installed on these machines) and returns nil once one is answered. The
// first request may go unanswered while ARP resolves, so ping sends up to 5.
func (n *testNode) ping(t *testing.T, from, ip string) error { return n.pingN(t, from, ip, 5) }

func (n *testNode) pingN(t *testing.T, from, ip string, attempts int) error {
	t.Helper()
	fromNS, err := ns.GetNS("/var/run/netns/" + from)
	if err != nil {
		return err
	}
	defer fromNS.Close()
	var conn *icmp.PacketConn
	// A raw socket belongs to the netns it is opened in.
	if err := fromNS.Do(func(ns.NetNS) error {
		var err error
		conn, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		return err
	}
	defer conn.Close()
	dst := &net.IPAddr{IP: net.ParseIP(ip)}
	id := os.Getpid() & 0xffff
	for seq := 1; seq <= attempts; seq++ {
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("ovsdb-bringup")}}
		b, err := msg.Marshal(nil)
		if err != nil {
			return err
		}
		if _, err := conn.WriteTo(b, dst); err != nil {
			return fmt.Errorf("send echo to %s: %w", ip, err)
		}
		deadline := time.Now().Add(time.Second)
		_ = conn.SetReadDeadline(deadline)
		buf := make([]byte, 1500)
		for {
			nr, peer, err := conn.ReadFrom(buf)
			if err != nil {
				break // timeout: next request
			}
			reply, err := icmp.ParseMessage(1, buf[:nr])
			if err != nil || reply.Type != ipv4.ICMPTypeEchoReply || peer.String() != ip {
				continue
			}
			if echo, ok := reply.Body.(*icmp.Echo); ok && echo.ID == id && echo.Seq == seq {
				return nil
			}
		}
	}
	return fmt.Errorf("no echo reply from %s in netns %s", ip, from)
}

func TestBringupOnNetdevMovesTheNodeIPAndSecondRunChangesNothing(t *testing.T) {
	n := newTestNode(t)
	node := n.in.NetNS()

	nc := n.bringup(t, n.config(""))

	// What the agent is told.
	if nc.NodeIP.String() != "192.168.77.1/24" {
		t.Errorf("node IP = %s, want 192.168.77.1/24", nc.NodeIP)
	}
	if nc.Gateway.OFPort != GatewayOFPort || nc.TunnelOFPort != TunnelOFPort {
		t.Errorf("gateway ofport %d, tunnel ofport %d; want %d and %d", nc.Gateway.OFPort, nc.TunnelOFPort, GatewayOFPort, TunnelOFPort)
	}
	if nc.TunnelType != ovsconfig.GeneveTunnel || nc.PodMTU != 1450 || nc.Uplink.OFPort <= 0 || nc.Uplink.MTU != 1500 {
		t.Errorf("node config = %+v", nc)
	}
	if len(nc.Gateway.IPs) != 1 || nc.Gateway.IPs[0].String() != "10.10.1.1" {
		t.Errorf("gateway IPs = %v, want [10.10.1.1]", nc.Gateway.IPs)
	}

	// What the node netns holds.
	links := n.links(t, "eth0", "br-phy", "antrea-gw0")
	if got := links["br-phy"].Addrs; !reflect.DeepEqual(got, []string{"192.168.77.1/24"}) {
		t.Errorf("br-phy addresses = %v, want the node IP", got)
	}
	if got := links["eth0"].Addrs; len(got) != 0 {
		t.Errorf("eth0 still has addresses %v", got)
	}
	if got := links["antrea-gw0"]; !reflect.DeepEqual(got.Addrs, []string{"10.10.1.1/24"}) || got.MAC != nc.Gateway.MAC.String() ||
		got.MTU != 1450 || got.Flags&net.FlagUp == 0 {
		t.Errorf("antrea-gw0 = %+v, want 10.10.1.1/24, MAC %s, MTU 1450, up", got, nc.Gateway.MAC)
	}
	n.checkRoutes(t)
	if flags := run(t, "ip", "-n", node, "link", "show", "eth0"); !strings.Contains(flags, "NOARP") {
		t.Errorf("eth0 should have ARP off: %s", flags)
	}
	if v := run(t, "ip", "netns", "exec", node, "sysctl", "-n", "net.ipv6.conf.eth0.disable_ipv6"); v != "1" {
		t.Errorf("IPv6 on eth0: disable_ipv6 = %s, want 1", v)
	}
	// The OVS side.
	if got, _ := n.in.Vsctl("get", "interface", "antrea-tun0", "type", "options"); got != "geneve\n{key=flow, remote_ip=flow}" {
		t.Errorf("antrea-tun0 = %q", got)
	}
	if got, _ := n.in.Vsctl("get", "bridge", "br-int", "datapath_type", "fail_mode"); got != "netdev\nsecure" {
		t.Errorf("br-int = %q", got)
	}
	if got, _ := n.in.Vsctl("list-ports", "br-phy"); got != "eth0" {
		t.Errorf("br-phy ports = %q, want eth0", got)
	}
	if flows, err := n.in.Ofctl("dump-flows", "br-phy"); err != nil || !strings.Contains(flows, "actions=NORMAL") {
		t.Errorf("br-phy should forward with NORMAL: %v %s", err, flows)
	}
	if got, _ := n.in.Appctl("tnl/neigh/aging"); got != maxNeighAgingSeconds {
		t.Errorf("tunnel neighbour aging = %q, want %s", got, maxNeighAgingSeconds)
	}
	// The underlay still works, now through br-phy.
	if err := n.ping(t, node, "192.168.77.2"); err != nil {
		t.Errorf("peer unreachable from the node after bring-up: %v", err)
	}
	if err := n.ping(t, n.peerNS, "192.168.77.1"); err != nil {
		t.Errorf("node unreachable from the peer after bring-up: %v", err)
	}
	if err := n.pingN(t, node, "192.168.77.9", 1); err == nil {
		t.Errorf("an address nobody holds answered: the ping check is broken")
	}

	// The second run: same answer, nothing touched.
	rowsBefore := n.ovsRows(t)
	linksBefore := n.links(t, "eth0", "br-phy", "antrea-gw0")
	nc2 := n.bringup(t, n.config(""))
	if !reflect.DeepEqual(nc, nc2) {
		t.Errorf("second run answered differently:\n first %+v\nsecond %+v", nc, nc2)
	}
	if rows := n.ovsRows(t); !reflect.DeepEqual(rows, rowsBefore) {
		t.Errorf("second run changed OVSDB:\nbefore %s\n after %s", strings.Join(rowsBefore, "\n"), strings.Join(rows, "\n"))
	}
	if links := n.links(t, "eth0", "br-phy", "antrea-gw0"); !reflect.DeepEqual(links, linksBefore) {
		t.Errorf("second run changed links:\nbefore %+v\n after %+v", linksBefore, links)
	}
	if err := n.ping(t, node, "192.168.77.2"); err != nil {
		t.Errorf("peer unreachable after the second run: %v", err)
	}
}

// checkRoutes checks the uplink's routes are on br-phy.
func (n *testNode) checkRoutes(t *testing.T) {
	t.Helper()
	node := n.in.NetNS()
	if route := run(t, "ip", "-n", node, "route", "show", "10.99.0.0/16"); route != "10.99.0.0/16 via 192.168.77.2 dev br-phy metric 50" {
		t.Errorf("route to 10.99.0.0/16 = %q, want it on br-phy with its metric", route)
	}
	if route := run(t, "ip", "-n", node, "route", "show", "default"); route != "default via 192.168.77.2 dev br-phy" {
		t.Errorf("default route = %q, want it on br-phy", route)
	}
}

func TestBringupAfterTheUnderlayBridgeWasDeletedPutsTheNodeIPBack(t *testing.T) {
	n := newTestNode(t)
	first := n.bringup(t, n.config(""))
	// Deleting br-phy destroys its tap device and with it the node's addresses
	// and routes; the uplink has none left either.
	if _, err := n.in.Vsctl("del-br", "br-phy"); err != nil {
		t.Fatal(err)
	}
	if out := run(t, "ip", "-n", n.in.NetNS(), "-4", "addr", "show"); strings.Contains(out, "192.168.77.1") {
		t.Fatalf("precondition: the node IP should be gone with br-phy:\n%s", out)
	}
	second := n.bringup(t, n.config(""))
	if second.NodeIP.String() != "192.168.77.1/24" {
		t.Errorf("node IP after the re-creation = %v", second.NodeIP)
	}
	if first.Gateway.MAC.String() != second.Gateway.MAC.String() || second.Gateway.OFPort != GatewayOFPort {
		t.Errorf("gateway changed: %+v -> %+v", first.Gateway, second.Gateway)
	}
	if got := n.links(t, "br-phy")["br-phy"].Addrs; !reflect.DeepEqual(got, []string{"192.168.77.1/24"}) {
		t.Errorf("br-phy addresses after the re-creation = %v", got)
	}
	n.checkRoutes(t)
	if err := n.ping(t, n.in.NetNS(), "192.168.77.2"); err != nil {
		t.Errorf("peer unreachable after br-phy was re-created: %v", err)
	}
}

func TestSavedRoutesAndAddressesReadBackAsWritten(t *testing.T) {
	_, dst, _ := net.ParseCIDR("10.99.0.0/16")
	routes := []savedRoute{
		{Dst: dst, Gw: net.ParseIP("192.168.77.2"), Priority: 50},
		{Gw: net.ParseIP("192.168.77.2")},
		{Dst: dst},
	}
	enc := encodeRoutes(routes)
	if enc != "10.99.0.0/16 via 192.168.77.2 metric 50;default via 192.168.77.2 metric 0;10.99.0.0/16 metric 0" {
		t.Errorf("encoded routes = %q", enc)
	}
	got, err := decodeRoutes(enc)
	if err != nil || encodeRoutes(got) != enc {
		t.Errorf("decoded routes = %v, %v", got, err)
	}
	if _, err := decodeRoutes("10.99.0.0/16 via nonsense"); err == nil {
		t.Error("a bad gateway was accepted")
	}
	addrs, err := decodeAddrs("192.168.77.1/24,fd00::1/64")
	if err != nil || encodeAddrs(addrs) != "192.168.77.1/24,fd00::1/64" {
		t.Errorf("addresses = %v, %v", addrs, err)
	}
}

func TestChangingTheEncapsulationReplacesOnlyTheTunnelPort(t *testing.T) {
	n := newTestNode(t)
	n.bringup(t, n.config(ovsconfig.GeneveTunnel))
	gwUUID, _ := n.in.Vsctl("get", "port", "antrea-gw0", "_uuid")

	cfg := n.config(ovsconfig.VXLANTunnel)
	cfg.TunnelCSum = true
	nc := n.bringup(t, cfg)
	if nc.TunnelType != ovsconfig.VXLANTunnel || nc.TunnelOFPort != TunnelOFPort {
		t.Errorf("tunnel = %s on ofport %d, want vxlan on %d", nc.TunnelType, nc.TunnelOFPort, TunnelOFPort)
	}
	if got, _ := n.in.Vsctl("get", "interface", "antrea-tun0", "type", "options:csum"); got != "vxlan\n\"true\"" {
		t.Errorf("antrea-tun0 = %q, want vxlan with csum", got)
	}
	if got, _ := n.in.Vsctl("get", "port", "antrea-gw0", "_uuid"); got != gwUUID {
		t.Errorf("gateway port replaced: %s -> %s", gwUUID, got)
	}

	// GRE: no key (nothing sets one), so 12 bytes less overhead than
	// Geneve/VXLAN's outer UDP and 8-byte header (upstream: 38 against 50).
	ncGRE := n.bringup(t, n.config(ovsconfig.GRETunnel))
	if ncGRE.TunnelType != ovsconfig.GRETunnel || ncGRE.TunnelOFPort != TunnelOFPort {
		t.Errorf("tunnel = %s on ofport %d, want gre on %d", ncGRE.TunnelType, ncGRE.TunnelOFPort, TunnelOFPort)
	}
	if got, _ := n.in.Vsctl("get", "interface", "antrea-tun0", "type", "options"); got != "gre\n{remote_ip=flow}" {
		t.Errorf("antrea-tun0 = %q, want a flow-based gre without a key", got)
	}
	if got, _ := n.in.Vsctl("get", "interface", "antrea-tun0", "error"); got != "[]" {
		t.Errorf("ovs-vswitchd refused antrea-tun0: %s", got)
	}
	if ncGRE.PodMTU-nc.PodMTU != 12 {
		t.Errorf("pod MTU with gre %d, with vxlan %d: want gre 12 bytes more", ncGRE.PodMTU, nc.PodMTU)
	}
	if got, _ := n.in.Vsctl("get", "port", "antrea-gw0", "_uuid"); got != gwUUID {
		t.Errorf("gateway port replaced: %s -> %s", gwUUID, got)
	}
}

// TestNoEncapRemovesTheTunnelAndGivesPodsTheUplinkMTU: a node switched to
// noEncap loses the tunnel port an encap run made, reports no tunnel, and
// its pods get the uplink's MTU; switched back, the tunnel returns.
func TestNoEncapRemovesTheTunnelAndGivesPodsTheUplinkMTU(t *testing.T) {
	n := newTestNode(t)
	enc := n.bringup(t, n.config(ovsconfig.GeneveTunnel))
	cfg := n.config(ovsconfig.GeneveTunnel)
	cfg.NoTunnel = true
	nc := n.bringup(t, cfg)
	if nc.TunnelOFPort != 0 || nc.TunnelType != "" {
		t.Errorf("noEncap reports tunnel %q on ofport %d", nc.TunnelType, nc.TunnelOFPort)
	}
	if out, err := n.in.Vsctl("--if-exists", "get", "interface", "antrea-tun0", "type"); err != nil || out != "" {
		t.Errorf("antrea-tun0 still there in noEncap: %q %v", out, err)
	}
	if nc.PodMTU != enc.PodMTU+50 || nc.PodMTU != nc.Uplink.MTU {
		t.Errorf("pod MTU %d in noEncap, %d with Geneve, uplink %d: want the uplink's", nc.PodMTU, enc.PodMTU, nc.Uplink.MTU)
	}
	again := n.bringup(t, n.config(ovsconfig.GeneveTunnel))
	if again.TunnelOFPort != TunnelOFPort || again.PodMTU != enc.PodMTU {
		t.Errorf("back to encap: tunnel on ofport %d, pod MTU %d; want %d and %d", again.TunnelOFPort, again.PodMTU, TunnelOFPort, enc.PodMTU)
	}
}

func TestPinnedTunnelNeighborIsInOVSTable(t *testing.T) {
	n := newTestNode(t)
	nc := n.bringup(t, n.config(""))
	mac, _ := net.ParseMAC("0a:00:00:77:00:02")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nc.PinTunnelNeighbor(ctx, net.ParseIP("192.168.77.2"), mac); err != nil {
		t.Fatal(err)
	}
	out, err := n.in.Appctl("tnl/neigh/show")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "192.168.77.2") && strings.Contains(line, "0a:00:00:77:00:02") && strings.Contains(line, "br-phy") {
			found = true
		}
	}
	if !found {
		t.Errorf("tnl/neigh/show lacks the pinned entry:\n%s", out)
	}
	// An EUI-64 address is not an Ethernet MAC: ovs-vswitchd refuses it.
	long := net.HardwareAddr{0x0a, 0, 0, 0x77, 0, 0, 0, 3}
	if err := PinTunnelNeighbor(ctx, n.in.Dir(), "", net.ParseIP("192.168.77.3"), long); err == nil ||
		!strings.Contains(err.Error(), "192.168.77.3") {
		t.Errorf("pinning a bad MAC: err = %v, want an error naming the neighbour", err)
	}
}

func TestBadConfigurationIsRefusedByName(t *testing.T) {
	_, podCIDR, _ := net.ParseCIDR("10.10.1.0/24")
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"a missing node name", Config{PodCIDRs: []*net.IPNet{podCIDR}, OVSDBEndpoint: "unix:/x"}, "NodeName is required"},
		{"an unknown datapath", Config{NodeName: "n1", DatapathType: "dpdk", PodCIDRs: []*net.IPNet{podCIDR}, OVSDBEndpoint: "unix:/x"}, `node n1: bad datapath type "dpdk"`},
		{"an unknown encapsulation", Config{NodeName: "n1", TunnelType: "stt", PodCIDRs: []*net.IPNet{podCIDR}, OVSDBEndpoint: "unix:/x"}, `node n1: bad tunnel type "stt" (want geneve, vxlan or gre)`},
		{"netdev without an uplink", Config{NodeName: "n1", DatapathType: ovsconfig.OVSDatapathNetdev, PodCIDRs: []*net.IPNet{podCIDR}, OVSDBEndpoint: "unix:/x"}, "needs the uplink name"},
		{"no pod CIDR", Config{NodeName: "n1", OVSDBEndpoint: "unix:/x"}, "node n1: no pod CIDR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Bringup(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestStableMACIsLocallyAdministeredUnicastAndDependsOnTheSeed(t *testing.T) {
	a, b := StableMAC("node-a/gateway/10.10.1.0/24"), StableMAC("node-b/gateway/10.10.2.0/24")
	if a.String() != StableMAC("node-a/gateway/10.10.1.0/24").String() {
		t.Error("same seed gave different MACs")
	}
	if a.String() == b.String() {
		t.Error("different seeds gave the same MAC")
	}
	if a[0]&0x01 != 0 || a[0]&0x02 == 0 {
		t.Errorf("MAC %s is not locally administered unicast", a)
	}
}

func TestTheGatewayTakesTheFirstAddressOfEachPodCIDR(t *testing.T) {
	for _, tc := range []struct{ cidr, want string }{
		{"10.10.1.0/24", "10.10.1.1"},
		{"10.10.1.77/24", "10.10.1.1"}, // a host address in the CIDR still names its network
		{"10.11.0.0/16", "10.11.0.1"},
		{"fd00:10:244:1::/64", "fd00:10:244:1::1"},
	} {
		t.Run(tc.cidr, func(t *testing.T) {
			ip, n, err := net.ParseCIDR(tc.cidr)
			if err != nil {
				t.Fatal(err)
			}
			n.IP = ip
			if got := firstIP(n).String(); got != tc.want {
				t.Errorf("firstIP(%s) = %s, want %s", tc.cidr, got, tc.want)
			}
		})
	}
}

// TestBringupTellsThePeersTheNodeAddressMovedToBrPhy: a peer that learned
// the node's address with the uplink's MAC (before bring-up) holds br-phy's
// MAC right after it, without having to wait for its entry to age: the
// bring-up announces the address with a gratuitous ARP.
func TestBringupTellsThePeersTheNodeAddressMovedToBrPhy(t *testing.T) {
	n := newTestNode(t)
	node := n.in.NetNS()
	uplinkMAC := n.links(t, "eth0")["eth0"].MAC
	// The peer knows the node from before: a confirmed entry with the
	// uplink's MAC. (Older than the kernel's 1-s lock time, which would
	// keep an entry from being overridden.)
	run(t, "ip", "-n", n.peerNS, "neigh", "replace", "192.168.77.1", "lladdr", uplinkMAC, "dev", "peer0", "nud", "reachable")
	time.Sleep(1100 * time.Millisecond)

	nc := n.bringup(t, n.config(""))
	if nc.Uplink.BridgeMAC.String() == uplinkMAC {
		t.Fatalf("br-phy has the uplink's MAC %s: nothing to announce", uplinkMAC)
	}
	var last string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		last = run(t, "ip", "-n", n.peerNS, "neigh", "show", "192.168.77.1", "dev", "peer0")
		if strings.Contains(last, "lladdr "+nc.Uplink.BridgeMAC.String()) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("the peer's entry for the node is %q, want br-phy's MAC %s (node %s)", last, nc.Uplink.BridgeMAC, node)
}

// TestAnIPv6OnlyNodeMovesItsIPv6AddressAndCountsTheLargerOuterHeader: a
// node whose transport address is IPv6 (an IPv6-only node: an IPv6 pod
// CIDR alone) gets that address moved to br-phy, the gateway the first
// address of its IPv6 pod CIDR and no IPv4 address, and a pod MTU 20 bytes
// smaller than over IPv4 (the outer IPv6 header is 40 bytes, IPv4's 20).
func TestAnIPv6OnlyNodeMovesItsIPv6AddressAndCountsTheLargerOuterHeader(t *testing.T) {
	n := newTestNode(t)
	node := n.in.NetNS()
	run(t, "ip", "-n", node, "-6", "addr", "add", "fd00:77::1/64", "dev", "eth0", "nodad")
	cfg := n.config(ovsconfig.GeneveTunnel)
	_, podCIDR, _ := net.ParseCIDR("fd00:10:244:1::/64")
	cfg.PodCIDRs, cfg.NodeIP = []*net.IPNet{podCIDR}, net.ParseIP("fd00:77::1")
	nc := n.bringup(t, cfg)
	if nc.NodeIP.String() != "fd00:77::1/64" {
		t.Errorf("node IP = %s, want fd00:77::1/64", nc.NodeIP)
	}
	if nc.PodMTU != 1500-70 {
		t.Errorf("pod MTU over an IPv6 underlay = %d, want %d (Geneve 50 + 20 for the IPv6 header)", nc.PodMTU, 1500-70)
	}
	if len(nc.Gateway.IPs) != 1 || nc.Gateway.IPs[0].String() != "fd00:10:244:1::1" {
		t.Errorf("gateway IPs = %v, want [fd00:10:244:1::1]", nc.Gateway.IPs)
	}
	if out := run(t, "ip", "-n", node, "-6", "addr", "show", "dev", "br-phy"); !strings.Contains(out, "fd00:77::1/64") {
		t.Errorf("br-phy lacks the node's IPv6 address:\n%s", out)
	}
	if out := run(t, "ip", "-n", node, "-4", "addr", "show", "dev", "antrea-gw0"); strings.Contains(out, "inet ") {
		t.Errorf("an IPv6-only node's gateway has an IPv4 address:\n%s", out)
	}
	if got, want := tunnelOverhead(ovsconfig.VXLANTunnel, true)-tunnelOverhead(ovsconfig.VXLANTunnel, false), 20; got != want {
		t.Errorf("VXLAN over IPv6 adds %d bytes more than over IPv4, want %d", got, want)
	}
}
