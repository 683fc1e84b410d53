// Package nodelatency is the agent's part of NodeLatencyMonitor
// (docs/node-latency-monitor.md): while the cluster's NodeLatencyMonitor
// exists, the Prober sends one ICMP echo per interval to each other Node's
// gateway IP (per IP family) and the Monitor reports what it measured as the
// Node's NodeLatencyStats (stats.antrea.io/v1alpha1).
//
// Three parts: book (the per-target bookkeeping: one outstanding probe per
// target, matched by sequence number, lost when the next round starts), the
// Prober (one ICMP socket per family, a receive loop, rounds), and the Monitor
// (informers, interval, report). Only book is under a mutex; the Prober's
// sockets are written by the round and read by the receive loop.
package nodelatency

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// Window is how many recent RTTs a target keeps for the median and maximum
// (statsv1alpha1.TargetIPLatencyStats.RecentRTTNanoseconds).
const Window = 10

// Target is one IP of a peer Node to probe.
type Target struct {
	Node string
	IP   netip.Addr
}

// targetState is what the book knows of one target.
type targetState struct {
	node        string
	outstanding bool
	seq         uint16
	sentAt      time.Time // with its monotonic reading: the RTT's start
	lastSend    time.Time
	lastRecv    time.Time
	lastRTT     time.Duration
	recent      []time.Duration // at most Window, oldest first
}

// book holds every target's probes: at most one outstanding per target, so
// its memory is bounded by the number of targets.
type book struct {
	mu      sync.Mutex
	seq     uint16
	targets map[netip.Addr]*targetState
}

func newBook() *book { return &book{targets: map[netip.Addr]*targetState{}} }

// setTargets makes the book's targets exactly ts, keeping what it knew of
// the ones that stay.
func (b *book) setTargets(ts []Target) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := make(map[netip.Addr]*targetState, len(ts))
	for _, t := range ts {
		s := b.targets[t.IP]
		if s == nil {
			s = &targetState{}
		}
		s.node = t.Node
		keep[t.IP] = s
	}
	b.targets = keep
}

// next starts a probe of ip at now: a probe still outstanding is lost. It
// returns the sequence number to send, false if ip is not a target.
func (b *book) next(ip netip.Addr, now time.Time) (uint16, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.targets[ip]
	if s == nil {
		return 0, false
	}
	b.seq++
	s.outstanding, s.seq, s.sentAt, s.lastSend = true, b.seq, now, now
	return b.seq, true
}

// received records a reply from ip with seq at now; false when it answers no
// outstanding probe (a late reply, a duplicate, someone else's).
func (b *book) received(ip netip.Addr, seq uint16, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.targets[ip]
	if s == nil || !s.outstanding || s.seq != seq {
		return false
	}
	rtt := now.Sub(s.sentAt)
	s.outstanding, s.lastRecv, s.lastRTT = false, now, rtt
	s.recent = append(s.recent, rtt)
	if len(s.recent) > Window {
		s.recent = s.recent[len(s.recent)-Window:]
	}
	return true
}

// stats is the book as upstream's report: peers sorted by name, their IPs
// in order.
func (b *book) stats() []statsv1alpha1.PeerNodeLatencyStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	byNode := map[string][]netip.Addr{}
	for ip, s := range b.targets {
		byNode[s.node] = append(byNode[s.node], ip)
	}
	out := make([]statsv1alpha1.PeerNodeLatencyStats, 0, len(byNode))
	for node, ips := range byNode {
		slices.SortFunc(ips, netip.Addr.Compare)
		p := statsv1alpha1.PeerNodeLatencyStats{NodeName: node}
		for _, ip := range ips {
			s := b.targets[ip]
			t := statsv1alpha1.TargetIPLatencyStats{TargetIP: ip.String(), LastMeasuredRTTNanoseconds: int64(s.lastRTT)}
			if !s.lastSend.IsZero() {
				t.LastSendTime = metav1.NewTime(s.lastSend)
			}
			if !s.lastRecv.IsZero() {
				t.LastRecvTime = metav1.NewTime(s.lastRecv)
			}
			for _, r := range s.recent {
				t.RecentRTTNanoseconds = append(t.RecentRTTNanoseconds, int64(r))
			}
			p.TargetIPLatencyStats = append(p.TargetIPLatencyStats, t)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b statsv1alpha1.PeerNodeLatencyStats) int { return cmp.Compare(a.NodeName, b.NodeName) })
	return out
}
