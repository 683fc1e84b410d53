package flowexporter

import (
	"container/list"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

// Record is what the exporter sends for a connection at one export: its
// conntrack entry, its totals and the deltas since the previous record,
// why it is sent, and what enrichment adds.
type Record struct {
	Connection
	// Start is when the connection was first seen, End when this record
	// was made (or when the connection was last seen, for its last record).
	Start, End            time.Time
	OrigDelta, ReplyDelta Counts
	EndReason             uint8 // ipfix.EndReason*
	SrcPod, SrcNamespace  string
	DstPod, DstNamespace  string
	ServicePortName       string
	FlowType              uint8 // ipfix.FlowType*
	// Ingress and Egress are the NetworkPolicy rules that allowed the
	// connection (from its conntrack label), zero when none did; for a
	// denied connection, the rule that denied it (action drop or reject)
	// and the other direction's that allowed it, if any.
	Ingress, Egress PolicyRule
	// Denied marks a connection a rule denied (DenyStore): its rules are
	// set, its conntrack label is not read.
	Denied bool
	// SrcLabels and DstLabels are the local Pods' labels (upstream's
	// sourcePodLabels, destinationPodLabels), nil when the Pod is not local
	// or not known. They are the lister's: read only.
	SrcLabels, DstLabels map[string]string
}

type entry struct {
	Connection
	firstSeen, lastSeen time.Time
	// lastChange is when the counts last changed (or first seen).
	lastChange time.Time
	lastExport time.Time
	exportedO  Counts
	exportedR  Counts
	// idleSent: the idle record was sent and nothing changed since.
	idleSent bool
	ended    bool
	elem     *list.Element
}

// Store holds the connections seen, at most Max, and decides when each is
// exported (Due). It is used by one goroutine, the poll loop.
type Store struct {
	max   int
	conns map[Key]*entry
	// order holds the keys oldest first (by first seen), for eviction.
	order *list.List
	// Evicted counts connections dropped, unexported, to stay within max.
	Evicted uint64
}

// NewStore returns a store of at most max connections (max > 0).
func NewStore(max int) *Store {
	return &Store{max: max, conns: map[Key]*entry{}, order: list.New()}
}

// Len returns how many connections the store holds.
func (s *Store) Len() int { return len(s.conns) }

// Update records one poll: conns are every connection the datapath
// tracks now; a stored connection missing from them has ended.
func (s *Store) Update(conns []Connection, now time.Time) {
	seen := make(map[Key]struct{}, len(conns))
	for _, c := range conns {
		seen[c.Key] = struct{}{}
		e, ok := s.conns[c.Key]
		if !ok {
			if len(s.conns) >= s.max {
				s.evictOldest()
			}
			e = &entry{Connection: c, firstSeen: now, lastChange: now, lastExport: now}
			e.elem = s.order.PushBack(c.Key)
			s.conns[c.Key] = e
		} else if c.OrigCounts != e.OrigCounts || c.ReplyCounts != e.ReplyCounts {
			e.lastChange = now
			e.idleSent = false
		}
		// Counts never go back: a feed that lost an update (or an entry
		// reused by a new connection of the same tuple) keeps the larger.
		c.OrigCounts = maxCounts(c.OrigCounts, e.OrigCounts)
		c.ReplyCounts = maxCounts(c.ReplyCounts, e.ReplyCounts)
		e.Connection = c
		e.lastSeen = now
	}
	for k, e := range s.conns {
		if _, ok := seen[k]; !ok {
			e.ended = true
		}
	}
}

func maxCounts(a, b Counts) Counts {
	if b.Packets > a.Packets || (b.Packets == a.Packets && b.Bytes > a.Bytes) {
		return b
	}
	return a
}

func (s *Store) evictOldest() {
	front := s.order.Front()
	if front == nil {
		return
	}
	k := front.Value.(Key)
	s.order.Remove(front)
	delete(s.conns, k)
	s.Evicted++
}

// Due returns the records to send now and forgets the connections that
// ended:
//   - a connection that ended: its last record (end of flow), then it is
//     forgotten;
//   - a live one whose counts changed since its last record, once
//     active has passed since that record (active timeout);
//   - a live one whose counts did not change for idle: one record (idle
//     timeout), then none until they change again.
func (s *Store) Due(now time.Time, active, idle time.Duration) []Record {
	var out []Record
	for k, e := range s.conns {
		changed := e.OrigCounts != e.exportedO || e.ReplyCounts != e.exportedR
		switch {
		case e.ended:
			out = append(out, s.record(e, e.lastSeen, ipfix.EndReasonEndOfFlow))
			s.order.Remove(e.elem)
			delete(s.conns, k)
		case changed && now.Sub(e.lastExport) >= active:
			out = append(out, s.record(e, now, ipfix.EndReasonActiveTimeout))
		case !changed && !e.idleSent && now.Sub(e.lastChange) >= idle:
			out = append(out, s.record(e, now, ipfix.EndReasonIdleTimeout))
			e.idleSent = true
		}
	}
	return out
}

func (s *Store) record(e *entry, end time.Time, reason uint8) Record {
	r := Record{Connection: e.Connection, Start: e.firstSeen, End: end, EndReason: reason,
		OrigDelta:  sub(e.OrigCounts, e.exportedO),
		ReplyDelta: sub(e.ReplyCounts, e.exportedR)}
	e.exportedO, e.exportedR = e.OrigCounts, e.ReplyCounts
	e.lastExport = end
	return r
}

func sub(a, b Counts) Counts {
	return Counts{Packets: a.Packets - b.Packets, Bytes: a.Bytes - b.Bytes}
}
