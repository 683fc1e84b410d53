package nodelatency

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// cpu is the process's user+system CPU time.
func cpu(t *testing.T) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestMeasureProberCPUFor1000Peers (NODELATENCY_MEASURE=1) probes 1,000
// addresses on the peer netns's veth (routed through it) at a 1 s interval for 10 intervals and
// prints the process's CPU time next to a reference measured in the same
// run: a plain loop that sends the same 1,000 echo requests per interval on
// one raw socket and drains the replies without matching them.
func TestMeasureProberCPUFor1000Peers(t *testing.T) {
	if os.Getenv("NODELATENCY_MEASURE") == "" {
		t.Skip("set NODELATENCY_MEASURE=1 to measure")
	}
	a, b := twoNodes(t)
	const peers, intervals = 1000, 10
	var targets []Target
	for i := 0; i < peers; i++ {
		ip := netip.AddrFrom4([4]byte{10, 78, byte(1 + i/250), byte(1 + i%250)})
		run(t, "ip", "-n", b, "addr", "add", ip.String()+"/32", "dev", "vb")
		targets = append(targets, Target{Node: fmt.Sprintf("n%d", i), IP: ip})
	}
	// Through the peer as a router: one neighbour entry, as nodes behind a
	// router (1,000 on-link neighbours would exceed the default gc_thresh).
	run(t, "ip", "-n", a, "route", "add", "10.78.0.0/16", "via", "10.77.0.2")
	p, err := NewProber(listenIn(a))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetTargets(targets)
	p.Round(context.Background()) // neighbour resolution, warm-up
	time.Sleep(time.Second)
	c0 := cpu(t)
	for i := 0; i < intervals; i++ {
		p.Round(context.Background())
		time.Sleep(time.Second)
	}
	proberCPU := cpu(t) - c0
	answered := 0
	for _, s := range p.book.stats() {
		if s.TargetIPLatencyStats[0].LastRecvTime.Time.After(time.Now().Add(-2 * time.Second)) {
			answered++
		}
	}
	p.Close()

	c, err := listenIn(a)("ip4:icmp", "0.0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	msg, _ := (&icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 1, Seq: 1}}).Marshal(nil)
	c1 := cpu(t)
	for i := 0; i < intervals; i++ {
		for _, tg := range targets {
			_, _ = c.WriteTo(msg, &net.IPAddr{IP: tg.IP.AsSlice()})
		}
		time.Sleep(time.Second)
	}
	refCPU := cpu(t) - c1
	_ = c.Close()
	<-done
	t.Logf("1,000 peers, 1 s interval, %d intervals: prober CPU %v (%v per interval, %d/%d peers answered the last round); plain send loop CPU %v; ratio %.2f",
		intervals, proberCPU, proberCPU/intervals, answered, peers, refCPU, float64(proberCPU)/float64(refCPU))
	if answered < peers*9/10 {
		t.Errorf("only %d of %d peers answered", answered, peers)
	}
}
