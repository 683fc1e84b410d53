package app

import (
	"context"
	"net"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"antrea.io/antrea/pkg/ovs/ovsinstance"
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

// A peer's kernel neighbour entry taking a new MAC (here set with ip neigh in
// a netns of the test, on a real kernel) pins that MAC; a state change with
// the same MAC, an entry of an address that is no peer's and an entry on
// another link pin nothing.
func TestANeighbourThatChangesMACIsPinnedAgain(t *testing.T) {
	ovsinstance.RequireRoot(t)
	name := ovsinstance.NewNetNS(t, "neigh")
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	for _, l := range []string{"phy", "other"} { // no dummy links in this kernel
		ip("link", "add", l+"0", "type", "veth", "peer", "name", l+"1")
		ip("link", "set", l+"0", "up")
		ip("link", "set", l+"1", "up")
	}
	ip("addr", "add", "192.168.9.1/24", "dev", "phy0")
	ip("addr", "add", "192.168.8.1/24", "dev", "other0")
	nsh, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName("phy0")
	if err != nil {
		t.Fatal(err)
	}

	updates := make(chan netlink.NeighUpdate, 16)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.NeighSubscribeAt(nsh, updates, done); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var pins []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	peer := net.ParseIP("192.168.9.2")
	go followNeighborChanges(ctx, link.Attrs().Index, updates, peer.Equal, func(ip net.IP, mac net.HardwareAddr) {
		mu.Lock()
		defer mu.Unlock()
		pins = append(pins, ip.String()+" "+mac.String())
	})

	ip("neigh", "replace", "192.168.9.2", "lladdr", "02:00:00:00:00:01", "dev", "phy0", "nud", "reachable")
	ip("neigh", "replace", "192.168.9.2", "lladdr", "02:00:00:00:00:01", "dev", "phy0", "nud", "stale")
	ip("neigh", "replace", "192.168.9.3", "lladdr", "02:00:00:00:00:03", "dev", "phy0", "nud", "reachable")
	ip("neigh", "replace", "192.168.9.2", "lladdr", "02:00:00:00:00:04", "dev", "other0", "nud", "reachable")
	// What a gratuitous ARP from the peer does to an existing entry.
	ip("neigh", "replace", "192.168.9.2", "lladdr", "02:00:00:00:00:02", "dev", "phy0", "nud", "stale")

	want := []string{"192.168.9.2 02:00:00:00:00:01", "192.168.9.2 02:00:00:00:00:02"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := append([]string(nil), pins...)
		mu.Unlock()
		if len(got) >= len(want) {
			// The updates arrive in order on one socket: once the last is
			// pinned, every earlier one was seen.
			if !slices.Equal(got, want) {
				t.Fatalf("pins %q, want %q", got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pins %q after 10 s, want %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
