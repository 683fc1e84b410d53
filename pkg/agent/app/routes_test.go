package app

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// TestEachModeDecidesEncapPerPeer: the decision each trafficEncapMode gives
// the route controller, for a node at 172.30.0.11/24 and, on a dual-stack
// node, fd00:172:30::11/64, and which modes spare the cluster's pod CIDRs
// from the masquerade. An IPv6 peer address is decided by the IPv6
// prefix; without one (an IPv4 node) it is tunnelled in hybrid.
func TestEachModeDecidesEncapPerPeer(t *testing.T) {
	nodeIP := &net.IPNet{IP: net.ParseIP("172.30.0.11"), Mask: net.CIDRMask(24, 32)}
	nodeIPv6 := &net.IPNet{IP: net.ParseIP("fd00:172:30::11"), Mask: net.CIDRMask(64, 128)}
	same, other := net.ParseIP("172.30.0.12"), net.ParseIP("172.30.1.13")
	same6, other6 := net.ParseIP("fd00:172:30::12"), net.ParseIP("fd00:172:30:1::13")
	for _, tc := range []struct {
		mode                string
		v6                  *net.IPNet
		sameEnc, otherEnc   bool
		same6Enc, other6Enc bool
		routed              bool
	}{
		{agentconfig.EncapModeEncap, nodeIPv6, true, true, true, true, false},
		{agentconfig.EncapModeNoEncap, nodeIPv6, false, false, false, false, true},
		{agentconfig.EncapModeHybrid, nodeIPv6, false, true, false, true, true},
		{agentconfig.EncapModeHybrid, nil, false, true, true, true, true},
	} {
		d := encapDecision(tc.mode, nodeIP, tc.v6)
		if d(same) != tc.sameEnc || d(other) != tc.otherEnc {
			t.Errorf("%s: same subnet encap %t, other subnet encap %t; want %t, %t", tc.mode, d(same), d(other), tc.sameEnc, tc.otherEnc)
		}
		if d(same6) != tc.same6Enc || d(other6) != tc.other6Enc {
			t.Errorf("%s (IPv6 prefix %v): same IPv6 subnet encap %t, other encap %t; want %t, %t", tc.mode, tc.v6, d(same6), d(other6), tc.same6Enc, tc.other6Enc)
		}
		if routedPeers(tc.mode) != tc.routed {
			t.Errorf("%s: routedPeers %t, want %t", tc.mode, routedPeers(tc.mode), tc.routed)
		}
	}
}

// TestTheRoutedPathTurnsOnIPv6ForwardingInTheNodesNetNSOnly: in a netns
// of its own (a lab node's), ensureIPv6Forwarding makes that netns
// forward IPv6 and leaves the host's setting as it was; the IPv6 prefix of
// the transport interface is read from its address.
func TestTheRoutedPathTurnsOnIPv6ForwardingInTheNodesNetNSOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	read := func() string {
		b, err := os.ReadFile(ipv6ForwardingPath)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	host := read()
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Close(); _ = testutils.UnmountNS(netns) })
	var before, after string
	var prefix *net.IPNet
	err = netns.Do(func(ns.NetNS) error {
		before = read()
		if err := ensureIPv6Forwarding(); err != nil {
			return err
		}
		after = read()
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "br-phy"}, PeerName: "phy-peer"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("br-phy")
		if err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr("fd00:172:30::11/64")
		addr.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		prefix = transportPrefix("br-phy", netip.MustParseAddr("fd00:172:30::11"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if before != "0" || after != "1" {
		t.Errorf("the node's IPv6 forwarding %s before, %s after; want 0, then 1", before, after)
	}
	if got := read(); got != host {
		t.Errorf("the host's IPv6 forwarding changed from %s to %s", host, got)
	}
	if prefix == nil || prefix.String() != "fd00:172:30::11/64" {
		t.Errorf("the transport prefix = %v, want fd00:172:30::11/64", prefix)
	}
}

// TestATunnelledIPv6PeerBehindTheRouterIsPinnedByTheRoutersAddress: in a
// netns of the test's own with an IPv6-only node's underlay (its address
// on br-phy, the other subnets via the router), the next hop whose tunnel
// neighbour is pinned is the peer itself on the node's subnet and the
// router's IPv6 address for a peer behind it; IPv4 the same.
func TestATunnelledIPv6PeerBehindTheRouterIsPinnedByTheRoutersAddress(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Close(); _ = testutils.UnmountNS(netns) })
	got := map[string]string{}
	err = netns.Do(func(ns.NetNS) error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "br-phy"}, PeerName: "phy-peer"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("br-phy")
		if err != nil {
			return err
		}
		for _, a := range []string{"172.30.0.11/24", "fd00:172:30::11/64"} {
			addr, _ := netlink.ParseAddr(a)
			addr.Flags = unix.IFA_F_NODAD
			if err := netlink.AddrAdd(l, addr); err != nil {
				return err
			}
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		for _, r := range []struct{ dst, via string }{{"172.30.0.0/16", "172.30.0.4"}, {"fd00:172:30::/48", "fd00:172:30::4"}} {
			if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: mustCIDR(r.dst), Gw: net.ParseIP(r.via)}); err != nil {
				return err
			}
		}
		for _, peer := range []string{"fd00:172:30::12", "fd00:172:30:1::13", "172.30.0.12", "172.30.1.13"} {
			got[peer] = tunnelNextHop(net.ParseIP(peer)).String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"fd00:172:30::12": "fd00:172:30::12", "fd00:172:30:1::13": "fd00:172:30::4",
		"172.30.0.12": "172.30.0.12", "172.30.1.13": "172.30.0.4",
	}
	for peer, hop := range want {
		if got[peer] != hop {
			t.Errorf("the tunnel next hop of %s = %s, want %s", peer, got[peer], hop)
		}
	}
}
