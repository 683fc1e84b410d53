package bgp

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

// freePort is a TCP port free on addr now.
func freePort(t *testing.T, addr string) int32 {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// waitFor polls cond every 100 ms until it holds or the bound passes.
func waitFor(t *testing.T, what string, bound time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The speaker is checked against a second, independent gobgp speaker in
// this process standing for the router (the process boundary of BGP is
// its TCP session): it is what a router would learn from it.
func TestGoBGPSpeakerAgainstARouter(t *testing.T) {
	if _, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("no 127.0.0.2 on loopback: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node, router := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	nodePort, routerPort := freePort(t, node.String()), freePort(t, router.String())

	r := NewGoBGP()
	if err := r.Start(ctx, Global{ASN: 65000, RouterID: "192.0.2.254", ListenAddress: router.String(), ListenPort: routerPort}); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	if err := r.AddPeer(ctx, Peer{Address: node, ASN: 64512, Port: nodePort, Passive: true, LocalAddress: router}); err != nil {
		t.Fatal(err)
	}

	s := NewGoBGP()
	if err := s.Start(ctx, Global{ASN: 64512, RouterID: "192.0.2.1", ListenAddress: node.String(), ListenPort: nodePort}); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if err := s.AddPeer(ctx, Peer{Address: router, ASN: 65000, Port: routerPort, LocalAddress: node, MultihopTTL: 1, GracefulRestartTimeSeconds: 120}); err != nil {
		t.Fatal(err)
	}
	podCIDR, lbIP := netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("172.30.0.200/32")
	for _, p := range []netip.Prefix{podCIDR, lbIP} {
		if err := s.Advertise(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	learnt := func(want map[netip.Prefix]string) func() (bool, error) {
		return func() (bool, error) {
			got, err := r.Received(ctx, router)
			if err != nil {
				return false, err
			}
			if len(got) != len(want) {
				return false, nil
			}
			for p, nh := range want {
				if got[p] != nh {
					return false, nil
				}
			}
			return true, nil
		}
	}
	waitFor(t, "the router learns both prefixes with the node as next hop", 30*time.Second,
		learnt(map[netip.Prefix]string{podCIDR: node.String(), lbIP: node.String()}))

	peers, err := s.Peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 1 || peers[0].Address != router || peers[0].ASN != 65000 || peers[0].State != "Established" || peers[0].Port != routerPort {
		t.Errorf("the speaker's peers: %+v", peers)
	}

	if err := s.Withdraw(ctx, lbIP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the router forgets the withdrawn prefix", 30*time.Second, learnt(map[netip.Prefix]string{podCIDR: node.String()}))

	// A restart with another ASN (a changed policy): the same gobgp server
	// starts again and the session comes back under the new AS.
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.DeletePeer(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := r.AddPeer(ctx, Peer{Address: node, ASN: 64513, Port: nodePort, Passive: true, LocalAddress: router}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, Global{ASN: 64513, RouterID: "192.0.2.1", ListenAddress: node.String(), ListenPort: nodePort}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPeer(ctx, Peer{Address: router, ASN: 65000, Port: routerPort, LocalAddress: node}); err != nil {
		t.Fatal(err)
	}
	if err := s.Advertise(ctx, lbIP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "after the restart the router learns only what was advertised since", 30*time.Second,
		learnt(map[netip.Prefix]string{lbIP: node.String()}))
}

// In a confederation the speaker opens its sessions to peers outside it
// with the confederation's identifier as its AS: a router that expects the
// identifier (and would refuse the member AS 64512) learns the routes.
func TestGoBGPSpeakerInAConfederationIsSeenAsItsIdentifier(t *testing.T) {
	if _, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("no 127.0.0.2 on loopback: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node, router := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	nodePort, routerPort := freePort(t, node.String()), freePort(t, router.String())

	r := NewGoBGP()
	if err := r.Start(ctx, Global{ASN: 65001, RouterID: "192.0.2.254", ListenAddress: router.String(), ListenPort: routerPort}); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	if err := r.AddPeer(ctx, Peer{Address: node, ASN: 65000, Port: nodePort, Passive: true, LocalAddress: router}); err != nil {
		t.Fatal(err)
	}
	s := NewGoBGP()
	if err := s.Start(ctx, Global{ASN: 64512, RouterID: "192.0.2.1", ListenAddress: node.String(), ListenPort: nodePort,
		Confederation: &Confederation{Identifier: 65000, Members: []uint32{64513}}}); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if err := s.AddPeer(ctx, Peer{Address: router, ASN: 65001, Port: routerPort, LocalAddress: node}); err != nil {
		t.Fatal(err)
	}
	podCIDR := netip.MustParsePrefix("10.10.1.0/24")
	if err := s.Advertise(ctx, podCIDR); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the router, expecting AS 65000, learns the Pod CIDR", 30*time.Second, func() (bool, error) {
		got, err := r.Received(ctx, router)
		return got[podCIDR] == node.String(), err
	})
}
