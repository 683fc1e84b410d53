package route

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeFlows records the flows of each peer as the OpenFlow client does:
// one entry per peer and family ("n2" for IPv4, "n2/IPv6"), both removed
// by UninstallNodeFlows.
type fakeFlows struct {
	mu    sync.Mutex
	nodes map[string]string // node -> "cidr tunnelIP"
}

func (f *fakeFlows) InstallNodeFlows(node string, cidr *net.IPNet, gw, tun net.IP) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := node
	if cidr.IP.To4() == nil {
		key += "/IPv6"
	}
	f.nodes[key] = fmt.Sprintf("%s via %s tun %s", cidr, gw, tun)
	return nil
}

func (f *fakeFlows) UninstallNodeFlows(node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, node)
	delete(f.nodes, node+"/IPv6")
	return nil
}

func (f *fakeFlows) snapshot() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for k, v := range f.nodes {
		out[k] = v
	}
	return out
}

type fakeRoutes struct {
	mu     sync.Mutex
	routes map[string]bool // cidr
}

func (f *fakeRoutes) Reconcile(desired map[string]*PeerRoute) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes = map[string]bool{}
	for _, r := range desired {
		f.routes[r.PodCIDR.String()] = true
	}
	return nil
}
func (f *fakeRoutes) Add(r *PeerRoute) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[r.PodCIDR.String()] = true
	return nil
}
func (f *fakeRoutes) Delete(r *PeerRoute) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.routes, r.PodCIDR.String())
	return nil
}

func node(name, cidr, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{PodCIDR: cidr},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestControllerFollowsRemoteNodes(t *testing.T) {
	client := fake.NewClientset(
		node("n1", "10.10.1.0/24", "172.30.0.11"),
		node("n2", "10.10.2.0/24", "172.30.0.12"),
		node("n3", "", "172.30.0.13"), // no podCIDR yet
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	flows := &fakeFlows{nodes: map[string]string{}}
	routes := &fakeRoutes{routes: map[string]bool{"10.10.9.0/24": true}}
	var peersMu sync.Mutex
	peers := map[string]bool{}
	c, err := NewController("n1", factory.Core().V1().Nodes(), flows, routes, func(ip net.IP) {
		peersMu.Lock()
		peers[ip.String()] = true
		peersMu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go func() { _ = c.Run(ctx) }()

	eventually(t, "flows to n2 only", func() bool {
		f := flows.snapshot()
		return len(f) == 1 && f["n2"] == "10.10.2.0/24 via 10.10.2.1 tun 172.30.0.12"
	})
	routes.mu.Lock()
	if routes.routes["10.10.9.0/24"] {
		t.Errorf("a stale route for a node that is gone should be removed at start")
	}
	routes.mu.Unlock()

	// n3 gets its pod CIDR: a route appears.
	n3 := node("n3", "10.10.3.0/24", "172.30.0.13")
	if _, err := client.CoreV1().Nodes().Update(ctx, n3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "flows to n3", func() bool { return flows.snapshot()["n3"] != "" })

	// n2 moves to another underlay IP: flows follow.
	n2 := node("n2", "10.10.2.0/24", "172.30.0.22")
	if _, err := client.CoreV1().Nodes().Update(ctx, n2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "flows to n2's new IP", func() bool {
		return flows.snapshot()["n2"] == "10.10.2.0/24 via 10.10.2.1 tun 172.30.0.22"
	})

	// n3 is deleted: its flows and route go.
	if err := client.CoreV1().Nodes().Delete(ctx, "n3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n3 removed", func() bool {
		_, ok := flows.snapshot()["n3"]
		routes.mu.Lock()
		defer routes.mu.Unlock()
		return !ok && !routes.routes["10.10.3.0/24"]
	})
	peersMu.Lock()
	defer peersMu.Unlock()
	if !peers["172.30.0.22"] || !peers["172.30.0.13"] {
		t.Errorf("every peer's node IP should be reported, got %v", peers)
	}
}

func TestNewControllerFailsWhenTheNodeInformerRefusesItsHandler(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	nodes := factory.Core().V1().Nodes()
	nodes.Informer() // registered before the start, so the factory runs it
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	cancel()
	factory.Shutdown() // the informer has stopped: it refuses new handlers
	if _, err := NewController("n1", nodes, &fakeFlows{nodes: map[string]string{}}, &fakeRoutes{routes: map[string]bool{}}, nil); err == nil {
		t.Fatal("a controller on a stopped informer should be refused, naming why")
	} else {
		t.Log(err)
	}
}

// TestControllerRoutesPeersUnencapsulatedInNoEncap: with SetEncap false
// for every peer (noEncap), a peer gets no flow into the tunnel (tunnel IP
// nil), its route is the routed path's, its tunnel neighbour is not pinned,
// and OnChange hears the installed peers' pod CIDRs.
func TestControllerRoutesPeersUnencapsulatedInNoEncap(t *testing.T) {
	client := fake.NewClientset(node("n1", "10.10.1.0/24", "172.30.0.11"), node("n2", "10.10.2.0/24", "172.30.0.12"))
	factory := informers.NewSharedInformerFactory(client, 0)
	flows := &fakeFlows{nodes: map[string]string{}}
	tunnel, underlay := &fakeRoutes{routes: map[string]bool{}}, &fakeRoutes{routes: map[string]bool{}}
	var mu sync.Mutex
	var pinned []string
	var told []string
	c, err := NewController("n1", factory.Core().V1().Nodes(), flows, PathRoutes{Tunnel: tunnel, Underlay: underlay}, func(ip net.IP) {
		mu.Lock()
		pinned = append(pinned, ip.String())
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetEncap(func(net.IP) bool { return false })
	c.OnChange(func(cidrs []*net.IPNet) {
		mu.Lock()
		defer mu.Unlock()
		told = told[:0]
		for _, c := range cidrs {
			told = append(told, c.String())
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go func() { _ = c.Run(ctx) }()
	eventually(t, "n2 routed", func() bool {
		underlay.mu.Lock()
		defer underlay.mu.Unlock()
		return flows.snapshot()["n2"] == "10.10.2.0/24 via 10.10.2.1 tun <nil>" && underlay.routes["10.10.2.0/24"]
	})
	eventually(t, "n2's pod CIDR told", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(told) == 1 && told[0] == "10.10.2.0/24"
	})
	if len(tunnel.routes) != 0 {
		t.Errorf("routes through the gateway in noEncap: %v", tunnel.routes)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n2 gone from what is told", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(told) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(pinned) != 0 {
		t.Errorf("tunnel neighbours pinned in noEncap: %v", pinned)
	}
}

// TestADualStackNodeTunnelsEachPeersIPv6PodCIDRBesideItsIPv4One: with
// SetIPv6 (this node is dual-stack) each peer's IPv6 pod CIDR gets tunnel
// flows to the peer's IPv4 node IP, with the CIDR's first address as the
// peer's gateway; a peer's deletion removes both; without SetIPv6 only
// the IPv4 CIDR is installed, as before.
func TestADualStackNodeTunnelsEachPeersIPv6PodCIDRBesideItsIPv4One(t *testing.T) {
	dual := func(name, v4, v6, ip string) *corev1.Node {
		n := node(name, v4, ip)
		n.Spec.PodCIDRs = []string{v4, v6}
		return n
	}
	for _, ipv6 := range []bool{true, false} {
		t.Run(fmt.Sprintf("SetIPv6(%v)", ipv6), func(t *testing.T) {
			client := fake.NewClientset(
				dual("n1", "10.10.1.0/24", "fd00:10:244:1::/64", "172.30.0.11"),
				dual("n2", "10.10.2.0/24", "fd00:10:244:2::/64", "172.30.0.12"))
			factory := informers.NewSharedInformerFactory(client, 0)
			flows := &fakeFlows{nodes: map[string]string{}}
			c, err := NewController("n1", factory.Core().V1().Nodes(), flows, &fakeRoutes{routes: map[string]bool{}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			c.SetIPv6(ipv6)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			factory.Start(ctx.Done())
			go func() { _ = c.Run(ctx) }()
			// Installed lists n2 once its sync installed everything.
			eventually(t, "n2 installed", func() bool { _, ok := c.Installed()["n2"]; return ok })
			want := map[string]string{"n2": "10.10.2.0/24 via 10.10.2.1 tun 172.30.0.12"}
			if ipv6 {
				want["n2/IPv6"] = "fd00:10:244:2::/64 via fd00:10:244:2::1 tun 172.30.0.12"
			}
			if got := flows.snapshot(); !reflect.DeepEqual(got, want) {
				t.Errorf("flows = %v, want %v", got, want)
			}
			if err := client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "n2's flows of both families removed", func() bool { return len(flows.snapshot()) == 0 })
		})
	}
}

// TestAnIPv6OnlyNodeTunnelsEachPeersIPv6PodCIDRToItsIPv6NodeIP: with
// SetIPv6Only each peer is routed by its IPv6 pod CIDR (its only one),
// through the tunnel to its IPv6 InternalIP, whatever else the Node lists
// first; the pinned tunnel neighbour is that IPv6 address; a peer without
// an IPv6 InternalIP is not routed until it has one.
func TestAnIPv6OnlyNodeTunnelsEachPeersIPv6PodCIDRToItsIPv6NodeIP(t *testing.T) {
	v6only := func(name, cidr string, ips ...string) *corev1.Node {
		n := node(name, "", "")
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
		for _, ip := range ips {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
		return n
	}
	client := fake.NewClientset(
		v6only("n1", "fd00:10:244:1::/64", "fd00:172:30::11"),
		// An IPv4 address listed first is not the tunnel's.
		v6only("n2", "fd00:10:244:2::/64", "172.30.0.12", "fd00:172:30::12"),
		v6only("n3", "fd00:10:244:3::/64", "172.30.0.13"))
	factory := informers.NewSharedInformerFactory(client, 0)
	flows := &fakeFlows{nodes: map[string]string{}}
	routes := &fakeRoutes{routes: map[string]bool{}}
	var mu sync.Mutex
	var pinned []string
	c, err := NewController("n1", factory.Core().V1().Nodes(), flows, routes, func(ip net.IP) {
		mu.Lock()
		defer mu.Unlock()
		pinned = append(pinned, ip.String())
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetIPv6Only(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go func() { _ = c.Run(ctx) }()
	eventually(t, "n2 installed", func() bool { _, ok := c.Installed()["n2"]; return ok })
	want := map[string]string{"n2/IPv6": "fd00:10:244:2::/64 via fd00:10:244:2::1 tun fd00:172:30::12"}
	if got := flows.snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("flows = %v, want %v (n3 has no IPv6 InternalIP)", got, want)
	}
	r := c.Installed()["n2"]
	if r.PodCIDRv6 != nil || r.GatewayIP.String() != "fd00:10:244:2::1" || r.NodeIP.String() != "fd00:172:30::12" {
		t.Errorf("n2's route = %+v, want its IPv6 pod CIDR as the PodCIDR, via fd00:10:244:2::1, to fd00:172:30::12", r)
	}
	mu.Lock()
	if !reflect.DeepEqual(pinned, []string{"fd00:172:30::12"}) {
		t.Errorf("tunnel neighbours pinned: %v, want n2's IPv6 node IP", pinned)
	}
	mu.Unlock()
	n3 := v6only("n3", "fd00:10:244:3::/64", "172.30.0.13", "fd00:172:30::13")
	if _, err := client.CoreV1().Nodes().Update(ctx, n3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n3 installed once it has an IPv6 InternalIP", func() bool { _, ok := c.Installed()["n3"]; return ok })
	if got := flows.snapshot()["n3/IPv6"]; got != "fd00:10:244:3::/64 via fd00:10:244:3::1 tun fd00:172:30::13" {
		t.Errorf("n3's flows = %q", got)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "n2's flows removed", func() bool { _, ok := flows.snapshot()["n2/IPv6"]; return !ok })
}

// keyRoutes records the calls a key change makes: its routes must be
// updated in place (Add), never deleted first (a moment without a route
// would let the peer's traffic out by the default route).
type keyRoutes struct {
	mu    sync.Mutex
	calls []string
}

func (k *keyRoutes) Reconcile(map[string]*PeerRoute) error { return nil }
func (k *keyRoutes) Add(r *PeerRoute) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, "add "+r.NodeName+" "+r.PublicKey)
	return nil
}
func (k *keyRoutes) Delete(r *PeerRoute) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = append(k.calls, "delete "+r.NodeName+" "+r.PublicKey)
	return nil
}
func (k *keyRoutes) snapshot() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.calls...)
}

func TestAPeersNewWireGuardKeyIsSwappedInPlace(t *testing.T) {
	n2 := node("n2", "10.10.2.0/24", "172.30.0.12")
	n2.Annotations = map[string]string{"node.antrea.io/wireguard-public-key": "old-key"}
	client := fake.NewClientset(node("n1", "10.10.1.0/24", "172.30.0.11"), n2)
	factory := informers.NewSharedInformerFactory(client, 0)
	flows := &fakeFlows{nodes: map[string]string{}}
	routes := &keyRoutes{}
	c, err := NewController("n1", factory.Core().V1().Nodes(), flows, routes, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetEncap(EncapNone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go func() { _ = c.Run(ctx) }()
	eventually(t, "n2 added with its key", func() bool {
		calls := routes.snapshot()
		return len(calls) == 1 && calls[0] == "add n2 old-key"
	})
	n2 = n2.DeepCopy()
	n2.Annotations["node.antrea.io/wireguard-public-key"] = "new-key"
	if _, err := client.CoreV1().Nodes().Update(ctx, n2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new key", func() bool { return c.Installed()["n2"].PublicKey == "new-key" })
	if calls := routes.snapshot(); len(calls) != 2 || calls[1] != "add n2 new-key" {
		t.Errorf("calls %q, want the route updated in place (add n2 new-key), no delete", calls)
	}
	if f := flows.snapshot(); f["n2"] != "10.10.2.0/24 via 10.10.2.1 tun <nil>" {
		t.Errorf("flows %v, want n2's (to the gateway) kept", f)
	}
}
