package route

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"sort"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestEncapOutsideDecidesEachFamilyByItsOwnTransportPrefix: hybrid's
// decision on a dual-stack or IPv6-only node: a peer address is routed
// when the transport prefix of its own family holds it; an address of a
// family this node has no prefix for is tunnelled.
func TestEncapOutsideDecidesEachFamilyByItsOwnTransportPrefix(t *testing.T) {
	v4 := &net.IPNet{IP: net.ParseIP("172.30.0.11"), Mask: net.CIDRMask(24, 32)}
	v6 := &net.IPNet{IP: net.ParseIP("fd00:172:30::11"), Mask: net.CIDRMask(64, 128)}
	for _, tc := range []struct {
		name  string
		encap Encap
		peer  string
		want  bool
	}{
		{"dual-stack node, IPv4 peer in the subnet", EncapOutside(v4, v6), "172.30.0.12", false},
		{"dual-stack node, IPv6 peer in the subnet", EncapOutside(v4, v6), "fd00:172:30::12", false},
		{"dual-stack node, IPv4 peer behind the router", EncapOutside(v4, v6), "172.30.1.13", true},
		{"dual-stack node, IPv6 peer behind the router", EncapOutside(v4, v6), "fd00:172:30:1::13", true},
		{"IPv6-only node, IPv6 peer in the subnet", EncapOutside(v6), "fd00:172:30::12", false},
		{"IPv6-only node, IPv6 peer behind the router", EncapOutside(v6), "fd00:172:30:1::13", true},
		{"IPv6-only node, an IPv4 peer address has no prefix to be in", EncapOutside(v6), "172.30.0.12", true},
		{"IPv4 node, an IPv6 peer address has no prefix to be in", EncapOutside(v4, nil), "fd00:172:30::12", true},
		{"no prefix at all", EncapOutside(nil, nil), "fd00:172:30::12", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.encap(net.ParseIP(tc.peer)); got != tc.want {
				t.Errorf("encap(%s) = %t, want %t", tc.peer, got, tc.want)
			}
		})
	}
}

// dualNode is a dual-stack Node: an IPv4 and an IPv6 pod CIDR, and its
// InternalIPs (none of a family when "").
func dualNode(name, v4CIDR, v6CIDR, ip4, ip6 string) *corev1.Node {
	n := node(name, v4CIDR, ip4)
	n.Spec.PodCIDRs = []string{v4CIDR, v6CIDR}
	n.Status.Addresses = nil
	for _, ip := range []string{ip4, ip6} {
		if ip != "" {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
	}
	return n
}

// pathRecorder is a HostRoutes recording each peer's route as "podCIDR
// via nodeIP" and, for a dual-stack one, its IPv6 pod CIDR's next hop.
type pathRecorder struct {
	mu     sync.Mutex
	routes map[string]string // node -> route
}

func (p *pathRecorder) line(r *PeerRoute) string {
	s := r.PodCIDR.String() + " via " + r.NodeIP.String()
	if r.PodCIDRv6 != nil {
		s += ", " + r.PodCIDRv6.String() + " via " + r.NodeIPv6.String()
	}
	return s
}

func (p *pathRecorder) Reconcile(desired map[string]*PeerRoute) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes = map[string]string{}
	for n, r := range desired {
		p.routes[n] = p.line(r)
	}
	return nil
}

func (p *pathRecorder) Add(r *PeerRoute) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes[r.NodeName] = p.line(r)
	return nil
}

func (p *pathRecorder) Delete(r *PeerRoute) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.routes, r.NodeName)
	return nil
}

func (p *pathRecorder) snapshot() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for k, v := range p.routes {
		out[k] = v
	}
	return out
}

// TestADualStackNodePicksOnePathPerPeerForBothFamilies: on a dual-stack
// node a routed peer's IPv6 pod CIDR is routed via its IPv6 InternalIP
// (no flow into the tunnel for either family), a peer whose IPv6 address
// is behind the router, or who has none, is tunnelled to its IPv4 node IP
// for both families (hybrid), and in noEncap a peer without an IPv6
// InternalIP keeps its IPv4 route and no IPv6 one. The masquerade
// exception is told both families' pod CIDRs.
func TestADualStackNodePicksOnePathPerPeerForBothFamilies(t *testing.T) {
	v4 := &net.IPNet{IP: net.ParseIP("172.30.0.11"), Mask: net.CIDRMask(24, 32)}
	v6 := &net.IPNet{IP: net.ParseIP("fd00:172:30::11"), Mask: net.CIDRMask(64, 128)}
	nodes := []*corev1.Node{
		dualNode("n1", "10.10.1.0/24", "fd00:10:244:1::/64", "172.30.0.11", "fd00:172:30::11"),
		// Both addresses in this node's subnets.
		dualNode("n2", "10.10.2.0/24", "fd00:10:244:2::/64", "172.30.0.12", "fd00:172:30::12"),
		// IPv4 in the subnet, IPv6 behind the router.
		dualNode("n3", "10.10.3.0/24", "fd00:10:244:3::/64", "172.30.0.13", "fd00:172:30:1::13"),
		// No IPv6 InternalIP.
		dualNode("n4", "10.10.4.0/24", "fd00:10:244:4::/64", "172.30.0.14", ""),
		// Both behind the router.
		dualNode("n5", "10.10.5.0/24", "fd00:10:244:5::/64", "172.30.1.15", "fd00:172:30:1::15"),
	}
	for _, tc := range []struct {
		mode      string
		encap     Encap
		wantFlows map[string]string
		tunnel    map[string]string
		underlay  map[string]string
		told      []string
	}{
		{
			mode:  "hybrid",
			encap: EncapOutside(v4, v6),
			wantFlows: map[string]string{
				"n2": "10.10.2.0/24 via 10.10.2.1 tun <nil>", "n2/IPv6": "fd00:10:244:2::/64 via fd00:10:244:2::1 tun <nil>",
				"n3": "10.10.3.0/24 via 10.10.3.1 tun 172.30.0.13", "n3/IPv6": "fd00:10:244:3::/64 via fd00:10:244:3::1 tun 172.30.0.13",
				"n4": "10.10.4.0/24 via 10.10.4.1 tun 172.30.0.14", "n4/IPv6": "fd00:10:244:4::/64 via fd00:10:244:4::1 tun 172.30.0.14",
				"n5": "10.10.5.0/24 via 10.10.5.1 tun 172.30.1.15", "n5/IPv6": "fd00:10:244:5::/64 via fd00:10:244:5::1 tun 172.30.1.15",
			},
			underlay: map[string]string{"n2": "10.10.2.0/24 via 172.30.0.12, fd00:10:244:2::/64 via fd00:172:30::12"},
			tunnel: map[string]string{
				"n3": "10.10.3.0/24 via 172.30.0.13, fd00:10:244:3::/64 via <nil>",
				"n4": "10.10.4.0/24 via 172.30.0.14, fd00:10:244:4::/64 via <nil>",
				"n5": "10.10.5.0/24 via 172.30.1.15, fd00:10:244:5::/64 via <nil>",
			},
			told: []string{"10.10.2.0/24", "10.10.3.0/24", "10.10.4.0/24", "10.10.5.0/24",
				"fd00:10:244:2::/64", "fd00:10:244:3::/64", "fd00:10:244:4::/64", "fd00:10:244:5::/64"},
		},
		{
			mode:  "noEncap",
			encap: EncapNone,
			wantFlows: map[string]string{
				"n2": "10.10.2.0/24 via 10.10.2.1 tun <nil>", "n2/IPv6": "fd00:10:244:2::/64 via fd00:10:244:2::1 tun <nil>",
				"n3": "10.10.3.0/24 via 10.10.3.1 tun <nil>", "n3/IPv6": "fd00:10:244:3::/64 via fd00:10:244:3::1 tun <nil>",
				"n4": "10.10.4.0/24 via 10.10.4.1 tun <nil>",
				"n5": "10.10.5.0/24 via 10.10.5.1 tun <nil>", "n5/IPv6": "fd00:10:244:5::/64 via fd00:10:244:5::1 tun <nil>",
			},
			underlay: map[string]string{
				"n2": "10.10.2.0/24 via 172.30.0.12, fd00:10:244:2::/64 via fd00:172:30::12",
				"n3": "10.10.3.0/24 via 172.30.0.13, fd00:10:244:3::/64 via fd00:172:30:1::13",
				"n4": "10.10.4.0/24 via 172.30.0.14",
				"n5": "10.10.5.0/24 via 172.30.1.15, fd00:10:244:5::/64 via fd00:172:30:1::15",
			},
			tunnel: map[string]string{},
			told: []string{"10.10.2.0/24", "10.10.3.0/24", "10.10.4.0/24", "10.10.5.0/24",
				"fd00:10:244:2::/64", "fd00:10:244:3::/64", "fd00:10:244:5::/64"},
		},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			objs := make([]*corev1.Node, len(nodes))
			for i, n := range nodes {
				objs[i] = n.DeepCopy()
			}
			client := fake.NewClientset(objs[0], objs[1], objs[2], objs[3], objs[4])
			factory := informers.NewSharedInformerFactory(client, 0)
			flows := &fakeFlows{nodes: map[string]string{}}
			tunnel, underlay := &pathRecorder{routes: map[string]string{}}, &pathRecorder{routes: map[string]string{}}
			c, err := NewController("n1", factory.Core().V1().Nodes(), flows, PathRoutes{Tunnel: tunnel, Underlay: underlay}, nil)
			if err != nil {
				t.Fatal(err)
			}
			c.SetIPv6(true)
			c.SetEncap(tc.encap)
			var mu sync.Mutex
			var told []string
			c.OnChange(func(cidrs []*net.IPNet) {
				mu.Lock()
				defer mu.Unlock()
				told = told[:0]
				for _, c := range cidrs {
					told = append(told, c.String())
				}
				sort.Strings(told)
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			factory.Start(ctx.Done())
			go func() { _ = c.Run(ctx) }()
			eventually(t, "every peer installed", func() bool { return len(c.Installed()) == 4 })
			// "tun <nil>": the peer's flows of that family with no
			// tunnel destination, which the OpenFlow client makes none.
			if got := flows.snapshot(); !reflect.DeepEqual(got, tc.wantFlows) {
				t.Errorf("flows = %v, want %v", got, tc.wantFlows)
			}
			if got := underlay.snapshot(); !reflect.DeepEqual(got, tc.underlay) {
				t.Errorf("routed over the underlay = %v, want %v", got, tc.underlay)
			}
			if got := tunnel.snapshot(); !reflect.DeepEqual(got, tc.tunnel) {
				t.Errorf("routed into the tunnel = %v, want %v", got, tc.tunnel)
			}
			// The last peer's news may still be on its way.
			eventually(t, "the masquerade exception told every peer's pod CIDRs "+fmt.Sprint(tc.told), func() bool {
				mu.Lock()
				defer mu.Unlock()
				return reflect.DeepEqual(told, tc.told)
			})
		})
	}
}

// TestAnIPv6OnlyNodeRoutesPeersInItsSubnetAndTunnelsTheOthers: hybrid on
// an IPv6-only node decides by the peer's IPv6 InternalIP against the
// node's IPv6 transport prefix: a peer in the subnet is routed via that
// address (no flow into the tunnel, no tunnel neighbour), a peer behind
// the router is tunnelled to it and its tunnel neighbour pinned.
func TestAnIPv6OnlyNodeRoutesPeersInItsSubnetAndTunnelsTheOthers(t *testing.T) {
	v6only := func(name, cidr, ip string) *corev1.Node {
		n := node(name, cidr, ip)
		n.Spec.PodCIDRs = []string{cidr}
		return n
	}
	client := fake.NewClientset(
		v6only("n1", "fd00:10:244:1::/64", "fd00:172:30::11"),
		v6only("n2", "fd00:10:244:2::/64", "fd00:172:30::12"),
		v6only("n3", "fd00:10:244:3::/64", "fd00:172:30:1::13"))
	factory := informers.NewSharedInformerFactory(client, 0)
	flows := &fakeFlows{nodes: map[string]string{}}
	tunnel, underlay := &pathRecorder{routes: map[string]string{}}, &pathRecorder{routes: map[string]string{}}
	var mu sync.Mutex
	var pinned []string
	c, err := NewController("n1", factory.Core().V1().Nodes(), flows, PathRoutes{Tunnel: tunnel, Underlay: underlay}, func(ip net.IP) {
		mu.Lock()
		defer mu.Unlock()
		pinned = append(pinned, ip.String())
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetIPv6Only(true)
	c.SetEncap(EncapOutside(&net.IPNet{IP: net.ParseIP("fd00:172:30::11"), Mask: net.CIDRMask(64, 128)}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	go func() { _ = c.Run(ctx) }()
	eventually(t, "both peers installed", func() bool { return len(c.Installed()) == 2 })
	want := map[string]string{
		"n2/IPv6": "fd00:10:244:2::/64 via fd00:10:244:2::1 tun <nil>",
		"n3/IPv6": "fd00:10:244:3::/64 via fd00:10:244:3::1 tun fd00:172:30:1::13",
	}
	if got := flows.snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("flows = %v, want %v", got, want)
	}
	if got := underlay.snapshot(); !reflect.DeepEqual(got, map[string]string{"n2": "fd00:10:244:2::/64 via fd00:172:30::12"}) {
		t.Errorf("routed over the underlay = %v, want n2 via its IPv6 InternalIP", got)
	}
	if got := tunnel.snapshot(); !reflect.DeepEqual(got, map[string]string{"n3": "fd00:10:244:3::/64 via fd00:172:30:1::13"}) {
		t.Errorf("routed into the tunnel = %v, want n3", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(pinned, []string{"fd00:172:30:1::13"}) {
		t.Errorf("tunnel neighbours pinned %v, want only n3's", pinned)
	}
}

// TestUnderlayRoutesRouteIPv6PodCIDRsViaTheIPv6NodeIPs: in a real netns,
// a routed dual-stack peer gets both families' routes on the transport
// link (its IPv6 pod CIDR via its IPv6 InternalIP), an IPv6-only peer its
// one IPv6 route; Reconcile removes a stale IPv6 route of theirs and
// leaves the link's own IPv6 route alone; Delete removes both families.
func TestUnderlayRoutesRouteIPv6PodCIDRsViaTheIPv6NodeIPs(t *testing.T) {
	inNewNetNS(t, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "br-phy"}, PeerName: "phy-peer"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("br-phy")
		if err != nil {
			return err
		}
		for _, a := range []string{"192.168.77.11/24", "fd00:77::11/64"} {
			addr, _ := netlink.ParseAddr(a)
			addr.Flags = unix.IFA_F_NODAD
			if err := netlink.AddrAdd(l, addr); err != nil {
				return err
			}
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		// The node's own IPv6 route on the link, not the agent's.
		own := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: cidr("fd00:99::/48"), Gw: net.ParseIP("fd00:77::1"), Protocol: unix.RTPROT_STATIC}
		if err := netlink.RouteAdd(own); err != nil {
			return err
		}
		u := &UnderlayRoutes{LinkName: "br-phy"}
		stale := &PeerRoute{NodeName: "gone", PodCIDR: cidr("fd00:10:244:9::/64"), NodeIP: net.ParseIP("fd00:77::19")}
		if err := u.Add(stale); err != nil {
			return err
		}
		dual := &PeerRoute{NodeName: "n2", PodCIDR: cidr("10.10.2.0/24"), NodeIP: net.ParseIP("192.168.77.12"),
			PodCIDRv6: cidr("fd00:10:244:2::/64"), GatewayIPv6: net.ParseIP("fd00:10:244:2::1"), NodeIPv6: net.ParseIP("fd00:77::12")}
		v6only := &PeerRoute{NodeName: "n3", PodCIDR: cidr("fd00:10:244:3::/64"), GatewayIP: net.ParseIP("fd00:10:244:3::1"),
			NodeIP: net.ParseIP("fd00:77::13")}
		if err := u.Reconcile(map[string]*PeerRoute{"n2": dual, "n3": v6only}); err != nil {
			return err
		}
		routes := func() map[string]string {
			rs, err := netlink.RouteList(l, netlink.FAMILY_ALL)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range rs {
				if r.Dst != nil && r.Gw != nil {
					got[r.Dst.String()] = r.Gw.String()
				}
			}
			return got
		}
		want := map[string]string{
			"10.10.2.0/24":       "192.168.77.12",
			"fd00:10:244:2::/64": "fd00:77::12",
			"fd00:10:244:3::/64": "fd00:77::13",
			"fd00:99::/48":       "fd00:77::1",
		}
		if got := routes(); !reflect.DeepEqual(got, want) {
			t.Errorf("routes via a gateway = %v, want %v (the stale IPv6 one gone, the link's own kept)", got, want)
		}
		if err := u.Delete(dual); err != nil {
			return err
		}
		if err := u.Delete(v6only); err != nil {
			return err
		}
		if got := routes(); !reflect.DeepEqual(got, map[string]string{"fd00:99::/48": "fd00:77::1"}) {
			t.Errorf("after Delete: routes via a gateway = %v, want the link's own alone", got)
		}
		return u.Delete(dual) // twice: not an error
	})
}
