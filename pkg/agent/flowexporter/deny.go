package flowexporter

import (
	"container/list"
	"net/netip"
	"sync"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

// DeniedPacket is a packet a NetworkPolicy rule (Drop or Reject) or the
// isolation of K8s NetworkPolicies dropped, as the agent's policy controller
// reads it from the packet-in the dropping flow sends (pkg/agent/openflow's
// PolicyPacketInDeny, metered). A denied connection never reaches conntrack's
// committed entries, so the exporter learns of it only this way.
type DeniedPacket struct {
	// Tuple is the packet's 5-tuple; its destination is the endpoint when
	// a Service's DNAT came first.
	Tuple Tuple
	// ServiceIP and ServicePort are the address and port the client
	// dialled when DNAT changed them (ServiceIP invalid otherwise).
	ServiceIP   netip.Addr
	ServicePort uint16
	// Bytes is the packet's IP length.
	Bytes uint64
	// Ingress says an ingress rule (or ingress isolation) denied it, else
	// an egress one.
	Ingress bool
	// Rule is what denied it: its policy, rule name and action (drop or
	// reject); for the isolation of K8s NetworkPolicies, type K8s, the
	// isolating policies' names and action drop.
	Rule PolicyRule
	// Allowed is the other direction's rule that had allowed the packet
	// before (the egress rule of a packet an ingress rule denied), zero
	// when none did.
	Allowed PolicyRule
	// Time is when the agent read it.
	Time time.Time
}

// DenyStats are the denied connections' counters.
type DenyStats struct {
	// Connections is how many the store holds; Packets how many denied
	// packets it was given; Evicted how many connections it dropped,
	// unexported, to stay within its bound.
	Connections      int
	Packets, Evicted uint64
}

type deniedEntry struct {
	// p is the connection's latest packet.
	p                DeniedPacket
	first, last      time.Time
	counts, exported Counts
	lastExport       time.Time
	sentOnce         bool
	elem             *list.Element
}

// DenyStore keeps the denied connections, keyed by the 5-tuple of their
// packets, at most max: a new one beyond drops the oldest (by first packet),
// unexported, and counts it. Add is called by the packet-in handler, Due by
// the poll loop; both hold its lock briefly, so neither waits on the other's
// work.
type DenyStore struct {
	mu    sync.Mutex
	max   int
	conns map[Tuple]*deniedEntry
	order *list.List
	stats DenyStats
}

// NewDenyStore returns a store of at most max denied connections (max > 0).
func NewDenyStore(max int) *DenyStore {
	return &DenyStore{max: max, conns: map[Tuple]*deniedEntry{}, order: list.New()}
}

// Add counts one denied packet in its connection.
func (s *DenyStore) Add(p DeniedPacket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Packets++
	e, ok := s.conns[p.Tuple]
	if !ok {
		if len(s.conns) >= s.max {
			front := s.order.Front()
			old := front.Value.(Tuple)
			s.order.Remove(front)
			delete(s.conns, old)
			s.stats.Evicted++
		}
		e = &deniedEntry{p: p, first: p.Time}
		e.elem = s.order.PushBack(p.Tuple)
		s.conns[p.Tuple] = e
	}
	e.last = p.Time
	e.counts.Packets++
	e.counts.Bytes += p.Bytes
	// The latest packet says which rule denies the connection now (a
	// policy may have changed since its first packet).
	e.p = p
}

// Stats returns the store's counters.
func (s *DenyStore) Stats() DenyStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Connections = len(s.conns)
	return st
}

// Due returns the denied connections' records to send at now:
//   - a connection's first record at the first poll after its first packet;
//   - then, while packets keep coming (a client retrying), a record once
//     active has passed since its last one;
//   - once no packet came for idle, it is forgotten, after a last record if
//     packets came since the previous one (idle timeout).
//
// Records carry the packets and bytes denied (forward direction; nothing
// comes back), totals and deltas, and the rule that denied them in the
// direction it denied them (action drop or reject).
func (s *DenyStore) Due(now time.Time, active, idle time.Duration) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for k, e := range s.conns {
		changed := e.counts != e.exported
		switch {
		case now.Sub(e.last) >= idle:
			if changed || !e.sentOnce {
				out = append(out, e.record(e.last, ipfix.EndReasonIdleTimeout))
			}
			s.order.Remove(e.elem)
			delete(s.conns, k)
		case !e.sentOnce || changed && now.Sub(e.lastExport) >= active:
			out = append(out, e.record(now, ipfix.EndReasonActiveTimeout))
		}
	}
	return out
}

// record is the entry's record at end; it marks the counts exported.
func (e *deniedEntry) record(end time.Time, reason uint8) Record {
	p := e.p
	orig := p.Tuple
	if p.ServiceIP.IsValid() {
		orig.Dst, orig.DstPort = p.ServiceIP, p.ServicePort
	}
	reply := Tuple{Proto: p.Tuple.Proto, Src: p.Tuple.Dst, Dst: p.Tuple.Src, SrcPort: p.Tuple.DstPort, DstPort: p.Tuple.SrcPort}
	r := Record{
		Connection: Connection{Key: Key{Orig: orig}, Reply: reply, HasCounts: true, OrigCounts: e.counts},
		Start:      e.first, End: end, EndReason: reason,
		OrigDelta: sub(e.counts, e.exported),
		Denied:    true,
	}
	if p.Ingress {
		r.Ingress, r.Egress = p.Rule, p.Allowed
	} else {
		r.Egress, r.Ingress = p.Rule, p.Allowed
	}
	e.exported, e.lastExport, e.sentOnce = e.counts, end, true
	return r
}
