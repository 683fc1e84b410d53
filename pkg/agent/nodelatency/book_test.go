package nodelatency

import (
	"net/netip"
	"testing"
	"time"
)

func TestBookMatchesAReplyToTheOutstandingProbeOnly(t *testing.T) {
	b := newBook()
	ip := netip.MustParseAddr("10.0.1.1")
	b.setTargets([]Target{{Node: "n1", IP: ip}})
	t0 := time.Unix(1000, 0)
	seq, ok := b.next(ip, t0)
	if !ok {
		t.Fatal("a target should get a sequence number")
	}
	if b.received(ip, seq+1, t0.Add(time.Millisecond)) {
		t.Error("a reply with another sequence number should not match")
	}
	if b.received(netip.MustParseAddr("10.0.2.1"), seq, t0.Add(time.Millisecond)) {
		t.Error("a reply from another address should not match")
	}
	if !b.received(ip, seq, t0.Add(3*time.Millisecond)) {
		t.Fatal("the reply to the outstanding probe should match")
	}
	if b.received(ip, seq, t0.Add(4*time.Millisecond)) {
		t.Error("a duplicate reply should not match")
	}
	s := b.stats()
	if len(s) != 1 || s[0].NodeName != "n1" || len(s[0].TargetIPLatencyStats) != 1 {
		t.Fatalf("stats = %+v, want one peer n1 with one target", s)
	}
	got := s[0].TargetIPLatencyStats[0]
	if got.LastMeasuredRTTNanoseconds != int64(3*time.Millisecond) || !got.LastRecvTime.Time.Equal(t0.Add(3*time.Millisecond)) {
		t.Errorf("target stats = %+v, want RTT 3ms received at t0+3ms", got)
	}
}

func TestBookCountsAReplyAfterTheNextRoundAsLost(t *testing.T) {
	b := newBook()
	ip := netip.MustParseAddr("fd00::1")
	b.setTargets([]Target{{Node: "n1", IP: ip}})
	t0 := time.Unix(1000, 0)
	first, _ := b.next(ip, t0)
	b.next(ip, t0.Add(time.Second)) // the next interval's probe
	if b.received(ip, first, t0.Add(1500*time.Millisecond)) {
		t.Error("a reply to the previous interval's probe should count as lost")
	}
	if s := b.stats()[0].TargetIPLatencyStats[0]; !s.LastRecvTime.IsZero() || !s.LastSendTime.Time.Equal(t0.Add(time.Second)) {
		t.Errorf("stats = %+v, want no reception and the last send at t0+1s", s)
	}
}

func TestBookKeepsTheLastWindowOfRTTsAndForgetsRemovedTargets(t *testing.T) {
	b := newBook()
	a, c := netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.1")
	b.setTargets([]Target{{Node: "n1", IP: a}, {Node: "n2", IP: c}})
	t0 := time.Unix(1000, 0)
	for i := 1; i <= Window+5; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		seq, _ := b.next(a, at)
		b.received(a, seq, at.Add(time.Duration(i)*time.Microsecond))
	}
	b.setTargets([]Target{{Node: "n1", IP: a}})
	s := b.stats()
	if len(s) != 1 {
		t.Fatalf("stats = %+v, want only n1 after n2 was removed", s)
	}
	r := s[0].TargetIPLatencyStats[0].RecentRTTNanoseconds
	if len(r) != Window || r[0] != int64(6*time.Microsecond) || r[Window-1] != int64((Window+5)*time.Microsecond) {
		t.Errorf("recent RTTs = %v, want the last %d (6µs..%dµs)", r, Window, Window+5)
	}
	if _, ok := b.next(c, t0); ok {
		t.Error("a removed target should not be probed")
	}
}
