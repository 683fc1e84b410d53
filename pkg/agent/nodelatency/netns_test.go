package nodelatency

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/net/icmp"

	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// listenIn opens ICMP sockets inside the named netns: the socket stays in
// the netns it was created in.
func listenIn(ns string) ListenFunc {
	return func(network, address string) (*icmp.PacketConn, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, err := netns.Get()
		if err != nil {
			return nil, err
		}
		defer orig.Close()
		h, err := netns.GetFromName(ns)
		if err != nil {
			return nil, err
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			return nil, err
		}
		defer func() {
			if err := netns.Set(orig); err != nil {
				panic(fmt.Sprintf("cannot return to the original netns: %v", err))
			}
		}()
		return icmp.ListenPacket(network, address)
	}
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
	return string(out)
}

// twoNodes makes two netns joined by a veth with an IPv4 and an IPv6
// address on each end; it returns the prober's netns and the peer's.
func twoNodes(t *testing.T) (string, string) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for netns and raw ICMP sockets")
	}
	a, b := ovsinstance.NewNetNS(t, "nlm"), ovsinstance.NewNetNS(t, "nlm")
	run(t, "ip", "-n", a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", b)
	for _, c := range [][]string{
		{"ip", "-n", a, "addr", "add", "10.77.0.1/24", "dev", "va"},
		{"ip", "-n", a, "addr", "add", "fd77::1/64", "dev", "va", "nodad"},
		{"ip", "-n", b, "addr", "add", "10.77.0.2/24", "dev", "vb"},
		{"ip", "-n", b, "addr", "add", "fd77::2/64", "dev", "vb", "nodad"},
		{"ip", "-n", a, "link", "set", "va", "up"},
		{"ip", "-n", b, "link", "set", "vb", "up"},
	} {
		run(t, c...)
	}
	return a, b
}

var peerIPs = []netip.Addr{netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("fd77::2")}

func newTestProber(t *testing.T, ns string) *Prober {
	t.Helper()
	p, err := NewProber(listenIn(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	p.SetTargets([]Target{{Node: "b", IP: peerIPs[0]}, {Node: "b", IP: peerIPs[1]}})
	return p
}

// rounds runs n rounds interval apart and returns each target's RTTs.
func rounds(p *Prober, n int, interval time.Duration) map[string][]time.Duration {
	rtts := map[string][]time.Duration{}
	last := map[string]time.Time{}
	for i := 0; i < n; i++ {
		p.Round(context.Background())
		time.Sleep(interval)
		for _, ts := range p.book.stats()[0].TargetIPLatencyStats {
			if !ts.LastRecvTime.IsZero() && ts.LastRecvTime.Time.After(last[ts.TargetIP]) {
				last[ts.TargetIP] = ts.LastRecvTime.Time
				rtts[ts.TargetIP] = append(rtts[ts.TargetIP], time.Duration(ts.LastMeasuredRTTNanoseconds))
			}
		}
	}
	return rtts
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

var pingRTT = regexp.MustCompile(`time=([0-9.]+) ms`)

// pingMedian runs ping -c n in ns and returns the median of its RTTs.
func pingMedian(t *testing.T, ns, ip string, n int) time.Duration {
	out := run(t, "ip", "netns", "exec", ns, "ping", "-n", "-c", strconv.Itoa(n), "-i", "0.2", ip)
	var d []time.Duration
	for _, m := range pingRTT.FindAllStringSubmatch(out, -1) {
		ms, _ := strconv.ParseFloat(m[1], 64)
		d = append(d, time.Duration(ms*float64(time.Millisecond)))
	}
	if len(d) < n/2 {
		t.Fatalf("ping %s got %d replies of %d: %s", ip, len(d), n, out)
	}
	return median(d)
}

// tolerance is how far the prober's median RTT may be from ping's: both are
// tens of microseconds on a veth; the prober's receive loop is woken by the
// Go scheduler on a machine shared with other builds (up to a millisecond or
// two under load) where ping takes the kernel's receive timestamp. A real
// inter-node RTT is in the hundreds of microseconds to milliseconds, so this
// still tells a measured RTT from a wrong one (an interval, a lost reply).
const tolerance = 2 * time.Millisecond

func TestProberRTTAgreesWithPingFromTheSameNetNS(t *testing.T) {
	a, _ := twoNodes(t)
	p := newTestProber(t, a)
	const n = 20
	got := rounds(p, n, 200*time.Millisecond)
	for _, ip := range peerIPs {
		r := got[ip.String()]
		if len(r) < n/2 {
			t.Fatalf("prober got %d replies from %s of %d rounds", len(r), ip, n)
		}
		want := pingMedian(t, a, ip.String(), n)
		m := median(r)
		t.Logf("%s: prober median %v (%d replies), ping median %v", ip, m, len(r), want)
		if diff := (m - want).Abs(); diff > tolerance {
			t.Errorf("%s: prober median %v, ping median %v: %v apart, more than %v", ip, m, want, diff, tolerance)
		}
	}
}

func TestPeerWithItsLinkDownIsUnreachableAndRecovers(t *testing.T) {
	a, b := twoNodes(t)
	p := newTestProber(t, a)
	const interval = 200 * time.Millisecond
	if !answeredSince(p, map[string]time.Time{}, interval) {
		t.Fatalf("no replies from both addresses before the link went down (IPv6 neighbour discovery): %+v", p.book.stats())
	}
	run(t, "ip", "-n", b, "link", "set", "vb", "down")
	before := map[string]time.Time{}
	for _, ts := range p.book.stats()[0].TargetIPLatencyStats {
		before[ts.TargetIP] = ts.LastRecvTime.Time
	}
	rounds(p, 2, interval)
	for _, ts := range p.book.stats()[0].TargetIPLatencyStats {
		if ts.LastRecvTime.Time.After(before[ts.TargetIP]) {
			t.Errorf("%s: a reply was recorded with the peer's link down", ts.TargetIP)
		}
		if !ts.LastSendTime.Time.After(ts.LastRecvTime.Time) {
			t.Errorf("%s: last send %v not after last receive %v: should show unreachable", ts.TargetIP, ts.LastSendTime, ts.LastRecvTime)
		}
	}
	run(t, "ip", "-n", b, "link", "set", "vb", "up")
	// The kernel drops a link's IPv6 addresses when it goes down
	// (keep_addr_on_down is 0): the peer's node agent would add it back.
	run(t, "ip", "-n", b, "addr", "replace", "fd77::2/64", "dev", "vb", "nodad")
	if !answeredSince(p, before, interval) {
		t.Errorf("the peer did not answer again within 20 rounds after its link came up: %+v", p.book.stats())
	}
}

// answeredSince runs rounds (at most 20) until every target answered after
// its time in since.
func answeredSince(p *Prober, since map[string]time.Time, interval time.Duration) bool {
	for i := 0; i < 20; i++ {
		rounds(p, 1, interval)
		n := 0
		for _, ts := range p.book.stats()[0].TargetIPLatencyStats {
			if !ts.LastRecvTime.IsZero() && ts.LastRecvTime.Time.After(since[ts.TargetIP]) {
				n++
			}
		}
		if n == len(peerIPs) {
			return true
		}
	}
	return false
}
