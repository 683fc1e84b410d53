package route

import (
	"context"
	"net"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestEncapOutsideTunnelsOnlyPeersOutsideTheSubnet: hybrid's decision, by
// the peer's node IP against this node's address and prefix.
func TestEncapOutsideTunnelsOnlyPeersOutsideTheSubnet(t *testing.T) {
	// An address with its prefix, as NodeConfig.NodeIP holds it.
	encap := EncapOutside(&net.IPNet{IP: net.ParseIP("172.30.0.11"), Mask: net.CIDRMask(24, 32)})
	for _, tc := range []struct {
		peer string
		want bool
	}{
		{"172.30.0.12", false},   // same subnet: routed
		{"172.30.0.254", false},  // last address of the subnet
		{"172.30.1.13", true},    // the next subnet, behind the router
		{"172.31.0.12", true},    // elsewhere
		{"10.10.0.1", true},      // nothing like an underlay address
		{"fd00:30::12", true},    // another family is never inside
		{"172.30.0.11", false},   // itself (never a peer, but inside)
		{"172.29.255.255", true}, // just below
	} {
		if got := encap(net.ParseIP(tc.peer)); got != tc.want {
			t.Errorf("peer %s: encap %t, want %t", tc.peer, got, tc.want)
		}
	}
	if !encap(nil) {
		t.Error("a peer without a node IP is not encapsulated")
	}
	if !EncapOutside(nil)(net.ParseIP("172.30.0.12")) {
		t.Error("without a known subnet a peer is not encapsulated")
	}
	if !EncapAll(net.ParseIP("172.30.0.12")) || EncapNone(net.ParseIP("172.30.1.13")) {
		t.Error("encap and noEncap decisions wrong")
	}
}

// TestControllerHybridPicksFlowsAndRoutesPerPeer: with the hybrid decision
// a peer in this node's subnet gets no tunnel flow and the routed path's
// host route, a peer in another subnet the tunnel flow, the gateway route
// and its tunnel neighbour pinned; and a peer that moves across the
// boundary switches path (its old route and flows go).
func TestControllerHybridPicksFlowsAndRoutesPerPeer(t *testing.T) {
	client := fake.NewClientset(
		node("n1", "10.10.1.0/24", "172.30.0.11"),
		node("n2", "10.10.2.0/24", "172.30.0.12"),
		node("n3", "10.10.3.0/24", "172.30.1.13"),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	flows := &fakeFlows{nodes: map[string]string{}}
	tunnel, underlay := &fakeRoutes{routes: map[string]bool{}}, &fakeRoutes{routes: map[string]bool{}}
	var mu sync.Mutex
	pinned := map[string]bool{}
	c, err := NewController("n1", factory.Core().V1().Nodes(), flows, PathRoutes{Tunnel: tunnel, Underlay: underlay}, func(ip net.IP) {
		mu.Lock()
		pinned[ip.String()] = true
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetEncap(EncapOutside(&net.IPNet{IP: net.ParseIP("172.30.0.11"), Mask: net.CIDRMask(24, 32)}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go func() { _ = c.Run(ctx) }()
	has := func(r *fakeRoutes, cidr string) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.routes[cidr]
	}
	eventually(t, "n2 routed and n3 tunnelled", func() bool {
		f := flows.snapshot()
		return f["n2"] == "10.10.2.0/24 via 10.10.2.1 tun <nil>" && f["n3"] == "10.10.3.0/24 via 10.10.3.1 tun 172.30.1.13" &&
			has(underlay, "10.10.2.0/24") && has(tunnel, "10.10.3.0/24")
	})
	if has(tunnel, "10.10.2.0/24") || has(underlay, "10.10.3.0/24") {
		t.Errorf("a peer has a route on the other path: tunnel %v, underlay %v", tunnel.routes, underlay.routes)
	}
	mu.Lock()
	if !pinned["172.30.1.13"] || pinned["172.30.0.12"] {
		t.Errorf("pinned tunnel neighbours %v, want only 172.30.1.13", pinned)
	}
	mu.Unlock()
	inst := c.Installed()
	if inst["n2"].Encap || !inst["n3"].Encap {
		t.Errorf("installed: %+v", inst)
	}

	// n3 moves into this node's subnet: it is routed from then on.
	n3 := node("n3", "10.10.3.0/24", "172.30.0.13")
	n3.ResourceVersion = "2"
	if _, err := client.CoreV1().Nodes().Update(ctx, n3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n3 routed after its move", func() bool {
		return flows.snapshot()["n3"] == "10.10.3.0/24 via 10.10.3.1 tun <nil>" && has(underlay, "10.10.3.0/24") && !has(tunnel, "10.10.3.0/24")
	})
}
