package flowexporter

import (
	"net/netip"
	"testing"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

func conn(sport uint16, o, r Counts) Connection {
	t := Tuple{6, netip.MustParseAddr("10.10.1.2"), netip.MustParseAddr("10.10.1.3"), sport, 80}
	return Connection{Key: Key{Orig: t, Zone: 65520},
		Reply:     Tuple{6, t.Dst, t.Src, t.DstPort, t.SrcPort},
		HasCounts: true, OrigCounts: o, ReplyCounts: r}
}

func TestStoreExportsAtActiveTimeoutWithDeltas(t *testing.T) {
	s := NewStore(10)
	t0 := time.Unix(1000, 0)
	active, idle := 5*time.Second, 15*time.Second
	s.Update([]Connection{conn(1, Counts{1, 60}, Counts{1, 60})}, t0)
	if recs := s.Due(t0.Add(time.Second), active, idle); len(recs) != 0 {
		t.Fatalf("records before the active timeout: %+v", recs)
	}
	s.Update([]Connection{conn(1, Counts{10, 1000}, Counts{5, 300})}, t0.Add(5*time.Second))
	recs := s.Due(t0.Add(5*time.Second), active, idle)
	if len(recs) != 1 || recs[0].EndReason != ipfix.EndReasonActiveTimeout ||
		recs[0].OrigDelta != (Counts{10, 1000}) || recs[0].ReplyDelta != (Counts{5, 300}) {
		t.Fatalf("first record %+v", recs)
	}
	s.Update([]Connection{conn(1, Counts{12, 1100}, Counts{6, 360})}, t0.Add(10*time.Second))
	recs = s.Due(t0.Add(10*time.Second), active, idle)
	if len(recs) != 1 || recs[0].OrigDelta != (Counts{2, 100}) || recs[0].ReplyDelta != (Counts{1, 60}) ||
		recs[0].OrigCounts != (Counts{12, 1100}) {
		t.Fatalf("second record %+v, want the deltas since the first", recs)
	}
}

func TestStoreExportsAnIdleConnectionOnce(t *testing.T) {
	s := NewStore(10)
	t0 := time.Unix(1000, 0)
	c := conn(1, Counts{2, 120}, Counts{2, 120})
	s.Update([]Connection{c}, t0)
	var idles int
	for i := 1; i <= 40; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		s.Update([]Connection{c}, now)
		for _, r := range s.Due(now, 5*time.Second, 15*time.Second) {
			if r.EndReason == ipfix.EndReasonIdleTimeout {
				idles++
				if now.Sub(t0) < 15*time.Second {
					t.Errorf("idle record %v after the last change, before the idle timeout", now.Sub(t0))
				}
			}
		}
	}
	if idles != 1 {
		t.Fatalf("%d idle records, want 1", idles)
	}
}

func TestStoreSendsTheLastRecordWhenAConnectionEnds(t *testing.T) {
	s := NewStore(10)
	t0 := time.Unix(1000, 0)
	s.Update([]Connection{conn(1, Counts{3, 180}, Counts{2, 120})}, t0)
	s.Update(nil, t0.Add(time.Second))
	recs := s.Due(t0.Add(time.Second), time.Minute, time.Minute)
	if len(recs) != 1 || recs[0].EndReason != ipfix.EndReasonEndOfFlow || recs[0].OrigDelta != (Counts{3, 180}) ||
		!recs[0].End.Equal(t0) {
		t.Fatalf("records %+v, want one end of flow ending when last seen", recs)
	}
	if s.Len() != 0 {
		t.Fatalf("%d connections kept after their last record", s.Len())
	}
}

func TestStoreDropsTheOldestBeyondMax(t *testing.T) {
	s := NewStore(3)
	t0 := time.Unix(1000, 0)
	var conns []Connection
	for i := range 5 {
		conns = append(conns, conn(uint16(i+1), Counts{1, 60}, Counts{}))
		s.Update(conns, t0.Add(time.Duration(i)*time.Second))
	}
	if s.Len() != 3 || s.Evicted < 2 {
		t.Fatalf("len %d evicted %d, want 3 and at least 2", s.Len(), s.Evicted)
	}
	for _, k := range []uint16{4, 5} {
		if _, ok := s.conns[conn(k, Counts{}, Counts{}).Key]; !ok {
			t.Errorf("newest connection %d was evicted", k)
		}
	}
}
