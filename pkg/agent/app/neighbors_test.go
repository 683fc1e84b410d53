package app

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// The tunnel neighbours are pinned again periodically (OVS ages them out)
// and at once when ovs-vswitchd reconnected (it forgot them), for the peers
// known at that moment, until the context ends.
func TestTunnelNeighboursArePinnedAgain(t *testing.T) {
	var mu sync.Mutex
	pinned := map[string]int{}
	peers := []net.IP{net.ParseIP("172.30.0.12")}
	pin := func(ip net.IP) {
		mu.Lock()
		defer mu.Unlock()
		pinned[ip.String()]++
	}
	count := func(ip string) int {
		mu.Lock()
		defer mu.Unlock()
		return pinned[ip]
	}
	getPeers := func() []net.IP {
		mu.Lock()
		defer mu.Unlock()
		return append([]net.IP(nil), peers...)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (pinned %v)", what, pinned)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	now := make(chan struct{}, 1)
	done := make(chan struct{})
	// An interval no test run reaches first: only now pins.
	go func() { keepNeighborsPinned(ctx, time.Hour, now, getPeers, pin); close(done) }()
	now <- struct{}{}
	waitFor("a pin after the reconnect", func() bool { return count("172.30.0.12") == 1 })
	mu.Lock()
	peers = append(peers, net.ParseIP("172.30.0.13"))
	mu.Unlock()
	now <- struct{}{}
	waitFor("both peers pinned after the second reconnect", func() bool {
		return count("172.30.0.12") == 2 && count("172.30.0.13") == 1
	})
	cancel()
	<-done

	// Periodically, without a reconnect.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go keepNeighborsPinned(ctx, 20*time.Millisecond, make(chan struct{}), getPeers, pin)
	waitFor("three periodic pins of each peer", func() bool {
		return count("172.30.0.12") >= 5 && count("172.30.0.13") >= 4
	})
}
