package route

import (
	"net"
	"os"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
)

func cidr(s string) *net.IPNet {
	_, n, _ := net.ParseCIDR(s)
	return n
}

func TestGatewayRoutesReconcileRemovesStaleAndKeepsLocal(t *testing.T) {
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
	err = netns.Do(func(ns.NetNS) error {
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
	if err != nil {
		t.Fatal(err)
	}
}
