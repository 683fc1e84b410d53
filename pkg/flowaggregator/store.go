package flowaggregator

import (
	"strings"
	"sync"
)

// Filter selects records: each set field must match (empty: any).
type Filter struct {
	// Pod matches the source or destination Pod's name, or
	// "namespace/name".
	Pod string
	// Namespace matches the source or destination Pod's namespace.
	Namespace string
	// Policy matches the ingress or egress NetworkPolicy's name (or
	// "namespace/name"), one of the isolating policies of a connection K8s
	// NetworkPolicy isolation denied.
	Policy string
	// Denied keeps only records of denied connections.
	Denied bool
}

// Match says whether f passes the filter.
func (q Filter) Match(f *Flow) bool {
	if q.Pod != "" {
		ns, name, hasNS := strings.Cut(q.Pod, "/")
		if !hasNS {
			name, ns = q.Pod, ""
		}
		side := func(podNS, pod string) bool { return pod == name && (ns == "" || podNS == ns) }
		if !side(f.SrcNamespace, f.SrcPod) && !side(f.DstNamespace, f.DstPod) {
			return false
		}
	}
	if q.Namespace != "" && f.SrcNamespace != q.Namespace && f.DstNamespace != q.Namespace {
		return false
	}
	if q.Policy != "" {
		match := func(p string) bool {
			if p == "" {
				return false
			}
			if p == q.Policy {
				return true
			}
			// The isolation of K8s NetworkPolicies names every isolating
			// policy: "namespace/a,b".
			ns, names, namespaced := strings.Cut(p, "/")
			if !namespaced {
				ns, names = "", p
			}
			for _, name := range strings.Split(names, ",") {
				if name == q.Policy || ns != "" && ns+"/"+name == q.Policy {
					return true
				}
			}
			return false
		}
		if !match(f.IngressPolicy) && !match(f.EgressPolicy) {
			return false
		}
	}
	if q.Denied && !f.Denied {
		return false
	}
	return true
}

// Store keeps the latest records in a ring of fixed size and passes every
// new record to its subscribers (the HTTP stream). Safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	ring  []Flow
	next  int
	full  bool
	subs  map[*subscriber]struct{}
	total uint64
}

type subscriber struct {
	ch      chan Flow
	filter  Filter
	dropped uint64
}

// NewStore returns a store of the latest n records.
func NewStore(n int) *Store {
	if n <= 0 {
		n = 8192
	}
	return &Store{ring: make([]Flow, n), subs: map[*subscriber]struct{}{}}
}

// Add keeps fs and hands them to the subscribers; a subscriber whose
// buffer is full misses them (counted), it never blocks Add.
func (s *Store) Add(fs ...Flow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range fs {
		s.ring[s.next] = f
		s.next = (s.next + 1) % len(s.ring)
		if s.next == 0 {
			s.full = true
		}
		s.total++
		for sub := range s.subs {
			if !sub.filter.Match(&f) {
				continue
			}
			select {
			case sub.ch <- f:
			default:
				sub.dropped++
			}
		}
	}
}

// List returns the records that pass q, oldest first, at most limit of the
// newest (0: all the store holds).
func (s *Store) List(q Filter, limit int) []Flow {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.next
	if s.full {
		n = len(s.ring)
	}
	var out []Flow
	// Newest first, then reversed.
	for i := 0; i < n; i++ {
		idx := (s.next - 1 - i + len(s.ring)) % len(s.ring)
		if q.Match(&s.ring[idx]) {
			out = append(out, s.ring[idx])
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Len is how many records the store holds.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.full {
		return len(s.ring)
	}
	return s.next
}

// Subscribe returns a channel of the new records that pass q (buffer
// records; records beyond are missed) and the function that ends the
// subscription.
func (s *Store) Subscribe(q Filter, buffer int) (<-chan Flow, func()) {
	sub := &subscriber{ch: make(chan Flow, buffer), filter: q}
	s.mu.Lock()
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	return sub.ch, func() {
		s.mu.Lock()
		delete(s.subs, sub)
		s.mu.Unlock()
	}
}
