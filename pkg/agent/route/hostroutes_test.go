package route

import (
	"net"
	"os"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func cidr(s string) *net.IPNet {
	_, n, _ := net.ParseCIDR(s)
	return n
}

// inNewNetNS runs f in a network namespace of its own (root only), removed
// afterwards; an error of f fails the test.
func inNewNetNS(t *testing.T, f func() error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = netns.Close()
		_ = testutils.UnmountNS(netns)
	})
	if err := netns.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

func TestGatewayRoutesReconcileRemovesStaleAndKeepsLocal(t *testing.T) {
	inNewNetNS(t, func() error {
		// No dummy driver in this kernel: a veth stands in for the gateway.
		gw := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "antrea-gw0"}, PeerName: "gw-peer"}
		if err := netlink.LinkAdd(gw); err != nil {
			return err
		}
		l, _ := netlink.LinkByName("antrea-gw0")
		addr, _ := netlink.ParseAddr("10.10.1.1/24")
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		g := &GatewayRoutes{GatewayName: "antrea-gw0", LocalPodCIDR: cidr("10.10.1.0/24")}
		stale := &PeerRoute{NodeName: "gone", PodCIDR: cidr("10.10.9.0/24"), GatewayIP: net.ParseIP("10.10.9.1")}
		if err := g.Add(stale); err != nil {
			return err
		}
		peer := &PeerRoute{NodeName: "n2", PodCIDR: cidr("10.10.2.0/24"), GatewayIP: net.ParseIP("10.10.2.1")}
		if err := g.Reconcile(map[string]*PeerRoute{"n2": peer}); err != nil {
			return err
		}
		routes, err := netlink.RouteList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		got := map[string]bool{}
		for _, r := range routes {
			got[r.Dst.String()] = true
		}
		if got["10.10.9.0/24"] {
			t.Errorf("stale route 10.10.9.0/24 should be gone, routes: %v", got)
		}
		if !got["10.10.2.0/24"] || !got["10.10.1.0/24"] {
			t.Errorf("peer and local routes should stay, routes: %v", got)
		}
		if err := g.Delete(peer); err != nil {
			return err
		}
		return g.Delete(peer) // twice: not an error
	})
}

// TestGatewayRoutesOfADualStackPeerRouteItsIPv6PodCIDRViaAPinnedGateway:
// a dual-stack peer gets, beside its IPv4 route, a route to its IPv6 pod
// CIDR via its IPv6 gateway (onlink) and a permanent neighbour entry of
// that gateway at the global virtual MAC (no ARP answers for IPv6);
// Reconcile removes a stale IPv6 route, Delete both entries.
func TestGatewayRoutesOfADualStackPeerRouteItsIPv6PodCIDRViaAPinnedGateway(t *testing.T) {
	inNewNetNS(t, func() error {
		gw := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "antrea-gw0"}, PeerName: "gw-peer"}
		if err := netlink.LinkAdd(gw); err != nil {
			return err
		}
		l, _ := netlink.LinkByName("antrea-gw0")
		for _, a := range []string{"10.10.1.1/24", "fd00:10:244:1::1/64"} {
			addr, _ := netlink.ParseAddr(a)
			addr.Flags = unix.IFA_F_NODAD
			if err := netlink.AddrAdd(l, addr); err != nil {
				return err
			}
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		g := &GatewayRoutes{GatewayName: "antrea-gw0", LocalPodCIDR: cidr("10.10.1.0/24")}
		dual := func(name, v4, gw4, v6, gw6 string) *PeerRoute {
			return &PeerRoute{NodeName: name, PodCIDR: cidr(v4), GatewayIP: net.ParseIP(gw4), PodCIDRv6: cidr(v6), GatewayIPv6: net.ParseIP(gw6)}
		}
		stale := dual("gone", "10.10.9.0/24", "10.10.9.1", "fd00:10:244:9::/64", "fd00:10:244:9::1")
		peer := dual("n2", "10.10.2.0/24", "10.10.2.1", "fd00:10:244:2::/64", "fd00:10:244:2::1")
		if err := g.Add(stale); err != nil {
			return err
		}
		if err := g.Reconcile(map[string]*PeerRoute{"n2": peer}); err != nil {
			return err
		}
		v6 := func() map[string]string {
			routes, err := netlink.RouteList(l, netlink.FAMILY_V6)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, r := range routes {
				if r.Dst != nil && r.Gw != nil {
					out[r.Dst.String()] = r.Gw.String()
				}
			}
			return out
		}
		if got := v6(); len(got) != 1 || got["fd00:10:244:2::/64"] != "fd00:10:244:2::1" {
			t.Errorf("IPv6 routes via a gateway = %v, want only fd00:10:244:2::/64 via fd00:10:244:2::1", got)
		}
		neighs, err := netlink.NeighList(l.Attrs().Index, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		pinned := false
		for _, n := range neighs {
			if n.IP.Equal(net.ParseIP("fd00:10:244:2::1")) {
				pinned = n.State == netlink.NUD_PERMANENT && n.HardwareAddr.String() == "aa:bb:cc:dd:ee:ff"
			}
		}
		if !pinned {
			t.Errorf("the peer's IPv6 gateway is not pinned to the global virtual MAC: %v", neighs)
		}
		if err := g.Delete(peer); err != nil {
			return err
		}
		if got := v6(); len(got) != 0 {
			t.Errorf("after Delete, IPv6 routes via a gateway remain: %v", got)
		}
		return g.Delete(peer) // twice: not an error
	})
}

// TestGatewayRoutesOfAnIPv6OnlyPeerPinItsGateway: an IPv6-only node's peer
// (an IPv6 PodCIDR, no IPv4 one) is routed via its IPv6 gateway address,
// which is pinned to the global virtual MAC (no ARP answers for it), on a
// gateway with no IPv4 address; Delete removes the route and the entry.
func TestGatewayRoutesOfAnIPv6OnlyPeerPinItsGateway(t *testing.T) {
	inNewNetNS(t, func() error {
		gw := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "antrea-gw0"}, PeerName: "gw-peer"}
		if err := netlink.LinkAdd(gw); err != nil {
			return err
		}
		l, _ := netlink.LinkByName("antrea-gw0")
		addr, _ := netlink.ParseAddr("fd00:10:244:1::1/64")
		addr.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		g := &GatewayRoutes{GatewayName: "antrea-gw0", LocalPodCIDR: cidr("fd00:10:244:1::/64")}
		peer := &PeerRoute{NodeName: "n2", PodCIDR: cidr("fd00:10:244:2::/64"), GatewayIP: net.ParseIP("fd00:10:244:2::1"),
			NodeIP: net.ParseIP("fd00:172:30::12"), Encap: true}
		if err := g.Reconcile(map[string]*PeerRoute{"n2": peer}); err != nil {
			return err
		}
		state := func() (routes map[string]string, pinned bool) {
			rs, err := netlink.RouteList(l, netlink.FAMILY_V6)
			if err != nil {
				t.Fatal(err)
			}
			routes = map[string]string{}
			for _, r := range rs {
				if r.Dst != nil && r.Gw != nil {
					routes[r.Dst.String()] = r.Gw.String()
				}
			}
			neighs, err := netlink.NeighList(l.Attrs().Index, netlink.FAMILY_V6)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range neighs {
				if n.IP.Equal(peer.GatewayIP) && n.State == netlink.NUD_PERMANENT && n.HardwareAddr.String() == "aa:bb:cc:dd:ee:ff" {
					pinned = true
				}
			}
			return routes, pinned
		}
		if routes, pinned := state(); len(routes) != 1 || routes["fd00:10:244:2::/64"] != "fd00:10:244:2::1" || !pinned {
			t.Errorf("routes via a gateway = %v, gateway pinned %t; want fd00:10:244:2::/64 via fd00:10:244:2::1, pinned", routes, pinned)
		}
		if err := g.Delete(peer); err != nil {
			return err
		}
		if routes, pinned := state(); len(routes) != 0 || pinned {
			t.Errorf("after Delete: routes %v, gateway pinned %t; want neither", routes, pinned)
		}
		return g.Delete(peer) // twice: not an error
	})
}

// TestUnderlayRoutesRouteToTheNodeIPAndReconcileOnlyTheirOwn: noEncap's
// routes go via the peer's node IP on the transport link, and Reconcile
// removes a stale one of them but leaves the link's other routes (the
// default route, a user's static route) alone.
func TestUnderlayRoutesRouteToTheNodeIPAndReconcileOnlyTheirOwn(t *testing.T) {
	inNewNetNS(t, func() error {
		up := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "br-phy"}, PeerName: "phy-peer"}
		if err := netlink.LinkAdd(up); err != nil {
			return err
		}
		l, _ := netlink.LinkByName("br-phy")
		addr, _ := netlink.ParseAddr("192.168.77.11/24")
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		idx := l.Attrs().Index
		// The node's own routes on the link: a default and a static one.
		for _, r := range []*netlink.Route{
			{LinkIndex: idx, Gw: net.ParseIP("192.168.77.1")},
			{LinkIndex: idx, Dst: cidr("10.99.0.0/16"), Gw: net.ParseIP("192.168.77.1"), Protocol: 4 /* static */},
		} {
			if err := netlink.RouteAdd(r); err != nil {
				return err
			}
		}
		u := &UnderlayRoutes{LinkName: "br-phy"}
		stale := &PeerRoute{NodeName: "gone", PodCIDR: cidr("10.10.9.0/24"), NodeIP: net.ParseIP("192.168.77.19")}
		if err := u.Add(stale); err != nil {
			return err
		}
		peer := &PeerRoute{NodeName: "n2", PodCIDR: cidr("10.10.2.0/24"), NodeIP: net.ParseIP("192.168.77.12")}
		if err := u.Reconcile(map[string]*PeerRoute{"n2": peer}); err != nil {
			return err
		}
		routes, err := netlink.RouteList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, r := range routes {
			dst := "0.0.0.0/0" // the library's default route may have no Dst
			if r.Dst != nil {
				dst = r.Dst.String()
			}
			got[dst] = r.Gw.String()
		}
		if _, ok := got["10.10.9.0/24"]; ok {
			t.Errorf("the stale route 10.10.9.0/24 should be gone: %v", got)
		}
		if got["10.10.2.0/24"] != "192.168.77.12" {
			t.Errorf("the peer's pod CIDR should go via its node IP: %v", got)
		}
		if got["0.0.0.0/0"] != "192.168.77.1" || got["10.99.0.0/16"] != "192.168.77.1" {
			t.Errorf("the link's other routes should stay: %v", got)
		}
		if err := u.Delete(peer); err != nil {
			return err
		}
		return u.Delete(peer) // twice: not an error
	})
}

// TestPathRoutesSendEachPeerToItsPath: a peer's route goes to the routes of
// its path, and Reconcile gives each path only its own peers.
func TestPathRoutesSendEachPeerToItsPath(t *testing.T) {
	tunnel, underlay := &fakeRoutes{routes: map[string]bool{"10.10.8.0/24": true}}, &fakeRoutes{routes: map[string]bool{"10.10.9.0/24": true}}
	p := PathRoutes{Tunnel: tunnel, Underlay: underlay}
	enc := &PeerRoute{NodeName: "n2", PodCIDR: cidr("10.10.2.0/24"), Encap: true}
	routed := &PeerRoute{NodeName: "n3", PodCIDR: cidr("10.10.3.0/24")}
	if err := p.Reconcile(map[string]*PeerRoute{"n2": enc, "n3": routed}); err != nil {
		t.Fatal(err)
	}
	if len(tunnel.routes) != 1 || !tunnel.routes["10.10.2.0/24"] || len(underlay.routes) != 1 || !underlay.routes["10.10.3.0/24"] {
		t.Errorf("tunnel %v, underlay %v: want n2's CIDR through the tunnel and n3's routed, the stale ones gone", tunnel.routes, underlay.routes)
	}
	if err := p.Delete(routed); err != nil || underlay.routes["10.10.3.0/24"] {
		t.Errorf("delete of a routed peer: %v, underlay %v", err, underlay.routes)
	}
	if err := (PathRoutes{Tunnel: tunnel}).Add(routed); err == nil {
		t.Error("a routed peer was accepted without routes for it")
	}
}
