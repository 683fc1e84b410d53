package networkpolicy

import (
	"context"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// Span is the receiving half of the Controller alone: the same three
// watchers (list, watch with nodeName=<node>, re-list after an error) and the
// same rule cache, with no reconciler, no OVS and no status reports. The
// agent simulator (pkg/agent/simulator) runs one per simulated node, so what
// it measures is what a real agent's watchers receive and keep.
type Span struct {
	c *Controller
}

// NewSpan makes the watchers and cache of nodeName's span; observe (may be
// nil) sees every list and event as the agent's watchers do.
func NewSpan(nodeName string, client versioned.Interface, observe func(Observation)) *Span {
	return &Span{c: &Controller{
		nodeName: nodeName,
		client:   client,
		opts:     Options{Observe: observe},
		cache:    newRuleCache(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "span-" + nodeName}),
		synced:   make(chan struct{}),
		realized: make(chan struct{}),
		listed:   sets.New[string](),
		watching: sets.New[string](),
	}}
}

// Run watches until ctx ends. The queue of affected policies is drained
// without realizing anything (there is no datapath).
func (s *Span) Run(ctx context.Context) {
	c := s.c
	for _, w := range c.watchers() {
		go w.run(ctx)
	}
	go func() {
		for {
			key, quit := c.queue.Get()
			if quit {
				return
			}
			c.queue.Forget(key)
			c.queue.Done(key)
		}
	}()
	<-ctx.Done()
	c.queue.ShutDown()
}

// HasSynced reports whether every watcher has listed once.
func (s *Span) HasSynced() bool { return s.c.HasSynced() }

// Connected is nil when every watch is open (Controller.ControllerConnected).
func (s *Span) Connected() error { return s.c.ControllerConnected() }

// SpanPolicy is one cached policy as the node sees it.
type SpanPolicy struct {
	Name       string
	Generation int64
	SourceRef  cpv1beta2.NetworkPolicyReference
	// AppliedTo are the member keys (pod:ns/name, node:n, ...) of every
	// AppliedToGroup the policy or its rules name: on this node only.
	AppliedTo []string
	// Peers are the member keys of every AddressGroup its rules name.
	Peers []string
	// MissingGroups names groups the policy references that the cache
	// does not hold (a span not yet complete).
	MissingGroups []string
}

// SpanState is the whole state a node ends up with, policy by policy.
type SpanState struct {
	Policies        map[string]SpanPolicy
	AddressGroups   int
	AppliedToGroups int
}

// State returns the cache's content resolved per policy.
func (s *Span) State() SpanState {
	rc := s.c.cache
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	out := SpanState{Policies: make(map[string]SpanPolicy, len(rc.policies)),
		AddressGroups: len(rc.addressGroups), AppliedToGroups: len(rc.appliedToGroups)}
	for name, p := range rc.policies {
		sp := SpanPolicy{Name: name, Generation: p.Generation}
		if p.SourceRef != nil {
			sp.SourceRef = *p.SourceRef
		}
		address, appliedTo := policyGroups(p)
		applied, peers, missing := sets.New[string](), sets.New[string](), sets.New[string]()
		for g := range appliedTo {
			ms, ok := rc.appliedToGroups[g]
			if !ok {
				missing.Insert("appliedtogroup/" + g)
			}
			for k := range ms {
				applied.Insert(k)
			}
		}
		for g := range address {
			ms, ok := rc.addressGroups[g]
			if !ok {
				missing.Insert("addressgroup/" + g)
			}
			for k := range ms {
				peers.Insert(k)
			}
		}
		sp.AppliedTo, sp.Peers, sp.MissingGroups = sets.List(applied), sets.List(peers), sets.List(missing)
		out.Policies[name] = sp
	}
	return out
}

// Key names a policy by its source (type/namespace/name), the name a
// recomputation from the user's objects knows.
func (p SpanPolicy) Key() string {
	return strings.Join([]string{string(p.SourceRef.Type), p.SourceRef.Namespace, p.SourceRef.Name}, "/")
}

// SortedKeys lists a state's policies by Key.
func (s SpanState) SortedKeys() []string {
	keys := make([]string, 0, len(s.Policies))
	for _, p := range s.Policies {
		keys = append(keys, p.Key())
	}
	sort.Strings(keys)
	return keys
}
