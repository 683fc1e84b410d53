package networkpolicy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

// PolicyFlows is the part of the agent's OpenFlow client the reconciler
// drives.
type PolicyFlows interface {
	// ApplyPolicyChange writes one step as one bundle of only the flows
	// that differ.
	ApplyPolicyChange(ctx context.Context, ch agentof.PolicyChange) (agentof.PolicyWrite, error)
	// FinishPolicyRecovery removes the flows of an earlier run that no
	// change of this run claimed.
	FinishPolicyRecovery(ctx context.Context) (int, error)
}

// reconciler owns what this node realized of each policy: its rules as
// installed with their conjunction ids, and the ports each policy isolates
// (a port stays isolated while one policy isolates it). A sync compares a
// policy's desired rules with the realized ones and sends OVS only the
// difference, as one PolicyChange; a sync that finds nothing changed sends
// nothing. Its lock is held across the OVS write, but only the reconciler's
// own worker and readers of its record take it: never the watchers or the
// CNI server.
type reconciler struct {
	flows PolicyFlows

	mu  sync.Mutex
	ids *idAllocator
	// realized rules per policy: rule key -> rule as installed (with ID).
	realized map[string]map[string]*agentof.PolicyRule
	// isolation realized for each policy, per direction; isolated counts
	// the policies isolating each port.
	isolation map[string][2]sets.Set[uint32]
	isolated  [2]map[uint32]int
	// recovered are the ids an earlier agent run gave to rules (by
	// agentof.PolicyRule.Key), until FinishRecovery: the same rule gets
	// the same id, so its flows are found in place.
	recovered map[string]uint32
}

func newReconciler(flows PolicyFlows, recovered map[string]uint32) *reconciler {
	r := &reconciler{
		flows:     flows,
		ids:       newIDAllocator(),
		realized:  map[string]map[string]*agentof.PolicyRule{},
		isolation: map[string][2]sets.Set[uint32]{},
		isolated:  [2]map[uint32]int{{}, {}},
		recovered: maps.Clone(recovered),
	}
	r.ids.reserve(slices.Collect(maps.Values(recovered)))
	return r
}

// ruleKey names a rule on the node: policy and rule key.
func ruleKey(policy, rule string) string { return policy + " " + rule }

// sync takes one policy from what is realized to desired. It reports
// what was written.
func (r *reconciler) sync(ctx context.Context, name string, want *desiredPolicy) (agentof.PolicyWrite, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	have := r.realized[name]
	var ch agentof.PolicyChange
	var allocated []uint32
	newRealized := make(map[string]*agentof.PolicyRule, len(want.rules))
	for _, k := range slices.Sorted(maps.Keys(want.rules)) {
		rule := *want.rules[k]
		rule.Key = ruleKey(name, k)
		old := have[k]
		switch {
		case old != nil:
			rule.ID = old.ID
		default:
			if id, ok := r.recovered[rule.Key]; ok {
				rule.ID = id
			} else {
				rule.ID = r.ids.allocate()
				allocated = append(allocated, rule.ID)
			}
		}
		newRealized[k] = &rule
		if !old.Equal(&rule) {
			ch.Rules = append(ch.Rules, agentof.RuleChange{Old: old, New: &rule})
		}
	}
	var released []uint32
	for _, k := range slices.Sorted(maps.Keys(have)) {
		if _, ok := want.rules[k]; !ok {
			ch.Rules = append(ch.Rules, agentof.RuleChange{Old: have[k]})
			released = append(released, have[k].ID)
		}
	}
	oldIso := r.isolation[name]
	for d := range ch.Isolate {
		for p := range want.isolated[d] {
			if !oldIso[d].Has(p) && r.isolated[d][p] == 0 {
				ch.Isolate[d] = append(ch.Isolate[d], p)
			}
		}
		for p := range oldIso[d] {
			if !want.isolated[d].Has(p) && r.isolated[d][p] == 1 {
				ch.Release[d] = append(ch.Release[d], p)
			}
		}
		slices.Sort(ch.Isolate[d])
		slices.Sort(ch.Release[d])
	}
	var w agentof.PolicyWrite
	var err error
	if len(ch.Rules)+len(ch.Isolate[0])+len(ch.Isolate[1])+len(ch.Release[0])+len(ch.Release[1]) > 0 {
		w, err = r.flows.ApplyPolicyChange(ctx, ch)
	}
	if err != nil {
		for _, id := range allocated {
			r.ids.release(id)
		}
		return w, fmt.Errorf("policy %s: %w", name, err)
	}
	for _, k := range slices.Sorted(maps.Keys(newRealized)) {
		delete(r.recovered, newRealized[k].Key)
	}
	for _, id := range released {
		r.ids.release(id)
	}
	for d := range r.isolated {
		for p := range oldIso[d] {
			if r.isolated[d][p]--; r.isolated[d][p] <= 0 {
				delete(r.isolated[d], p)
			}
		}
		for p := range want.isolated[d] {
			r.isolated[d][p]++
		}
	}
	if len(newRealized) == 0 {
		delete(r.realized, name)
	} else {
		r.realized[name] = newRealized
	}
	if want.isolated[0].Len()+want.isolated[1].Len() == 0 {
		delete(r.isolation, name)
	} else {
		r.isolation[name] = want.isolated
	}
	return w, nil
}

// finishRecovery removes what an earlier run installed and this run did
// not claim, and frees the ids of its rules that are gone.
func (r *reconciler) finishRecovery(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.flows.FinishPolicyRecovery(ctx)
	if err != nil {
		return err
	}
	for _, id := range r.recovered {
		r.ids.release(id)
	}
	if len(r.recovered) > 0 || n > 0 {
		klog.InfoS("Removed the policy flows of rules gone while the agent was down", "rules", len(r.recovered), "flowMods", n)
	}
	r.recovered = nil
	return nil
}

// idAllocator hands out conjunction ids, reusing released ones.
type idAllocator struct {
	next uint32
	free []uint32
}

func newIDAllocator() *idAllocator { return &idAllocator{next: 1} }

// reserve takes ids an earlier run used out of circulation; the ids below
// the largest that are not reserved become free.
func (a *idAllocator) reserve(ids []uint32) {
	if len(ids) == 0 {
		return
	}
	used, top := sets.New(ids...), slices.Max(ids)
	for id := a.next; id <= top; id++ {
		if !used.Has(id) {
			a.free = append(a.free, id)
		}
	}
	a.next = max(a.next, top+1)
}

func (a *idAllocator) allocate() uint32 {
	if n := len(a.free); n > 0 {
		id := a.free[n-1]
		a.free = a.free[:n-1]
		return id
	}
	id := a.next
	a.next++
	return id
}

func (a *idAllocator) release(id uint32) { a.free = append(a.free, id) }
