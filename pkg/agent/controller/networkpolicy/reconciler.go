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
	"antrea.io/antrea/pkg/agent/stats"
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
	// isoLogged says which policies log their isolation drops, per
	// direction; logged counts the logging policies isolating each port
	// (its drop flow logs while one does).
	isoLogged map[string][2]bool
	logged    [2]map[uint32]int
	// recovered are the ids an earlier agent run gave to rules (by
	// agentof.PolicyRule.Key), until FinishRecovery: the same rule gets
	// the same id, so its flows are found in place.
	recovered map[string]uint32

	// assigners map evaluation order to priority in each Antrea-native
	// table (tableOf); orders are the realized Antrea-native rules' orders
	// per policy and rule key, uses count the realized rules per table
	// and order.
	assigners [4]*priorityAssigner
	orders    map[string]map[string]RuleOrder
	uses      [4]map[RuleOrder]int

	// infos describe the realized rules by id, for the audit log; infoMu
	// is never held across an OVS write, so packet-ins never wait on one.
	infoMu sync.RWMutex
	infos  map[uint32]realizedRuleInfo
}

// realizedRuleInfo is what an audit log line says about a realized rule.
type realizedRuleInfo struct {
	ruleInfo
	key       string // agentof.PolicyRule.Key
	direction agentof.Direction
	action    agentof.RuleAction
	priority  uint16
	table     agentof.PolicyTier
}

func newReconciler(flows PolicyFlows, recovered map[string]uint32) *reconciler {
	r := &reconciler{
		flows:     flows,
		ids:       newIDAllocator(),
		realized:  map[string]map[string]*agentof.PolicyRule{},
		isolation: map[string][2]sets.Set[uint32]{},
		isolated:  [2]map[uint32]int{{}, {}},
		isoLogged: map[string][2]bool{},
		logged:    [2]map[uint32]int{{}, {}},
		recovered: maps.Clone(recovered),
		orders:    map[string]map[string]RuleOrder{},
		infos:     map[uint32]realizedRuleInfo{},
	}
	for i := range r.assigners {
		r.assigners[i] = newPriorityAssigner(agentof.PolicyTopPriority, agentof.PolicyBottomPriority)
		r.uses[i] = map[RuleOrder]int{}
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
	// Priorities of the Antrea-native rules: place the new orders, maybe
	// moving others (rewritten below, in the same bundle).
	var plans [4]*priorityPlan
	for t := range plans {
		var add []RuleOrder
		for k, o := range want.orders {
			if rule := want.rules[k]; tableOf(rule.Direction, rule.Tier) == t {
				add = append(add, o)
			}
		}
		p, err := r.assigners[t].plan(add)
		if err != nil {
			return agentof.PolicyWrite{}, fmt.Errorf("policy %s: %w", name, err)
		}
		plans[t] = p
	}
	var ch agentof.PolicyChange
	var allocated []uint32
	newRealized := make(map[string]*agentof.PolicyRule, len(want.rules))
	for _, k := range slices.Sorted(maps.Keys(want.rules)) {
		rule := *want.rules[k]
		rule.Key = ruleKey(name, k)
		if o, ok := want.orders[k]; ok {
			rule.Priority, _ = plans[tableOf(rule.Direction, rule.Tier)].lookup(o)
		}
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
	// Other policies' rules whose priority moved.
	moved := map[string]map[string]*agentof.PolicyRule{}
	for _, other := range slices.Sorted(maps.Keys(r.orders)) {
		if other == name {
			continue
		}
		for k, o := range r.orders[other] {
			old := r.realized[other][k]
			p, ok := plans[tableOf(old.Direction, old.Tier)].moved[o]
			if !ok {
				continue
			}
			nr := *old
			nr.Priority = p
			if moved[other] == nil {
				moved[other] = map[string]*agentof.PolicyRule{}
			}
			moved[other][k] = &nr
			ch.Rules = append(ch.Rules, agentof.RuleChange{Old: old, New: &nr})
		}
	}
	oldIso, oldLogged := r.isolation[name], r.isoLogged[name]
	for d := range ch.Isolate {
		// A port's drop flow is (re)written when it becomes isolated, or
		// stays isolated and starts or stops logging.
		write := sets.New[uint32]()
		for p := range oldIso[d].Union(want.isolated[d]) {
			was, had := oldIso[d].Has(p), want.isolated[d].Has(p)
			isolatedAfter := r.isolated[d][p] - b2i(was) + b2i(had)
			loggedBefore := r.logged[d][p]
			loggedAfter := loggedBefore - b2i(was && oldLogged[d]) + b2i(had && want.logged[d])
			switch {
			case isolatedAfter == 0 && r.isolated[d][p] > 0:
				ch.Release[d] = append(ch.Release[d], p)
			case isolatedAfter > 0 && (r.isolated[d][p] == 0 || (loggedBefore > 0) != (loggedAfter > 0)):
				write.Insert(p)
			}
			if isolatedAfter > 0 && loggedAfter > 0 {
				ch.Logged[d] = append(ch.Logged[d], p)
			}
		}
		ch.Isolate[d] = sets.List(write)
		ch.Logged[d] = slices.DeleteFunc(ch.Logged[d], func(p uint32) bool { return !write.Has(p) })
		slices.Sort(ch.Logged[d])
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
		if oldLogged[d] {
			for p := range oldIso[d] {
				if r.logged[d][p]--; r.logged[d][p] <= 0 {
					delete(r.logged[d], p)
				}
			}
		}
		if want.logged[d] {
			for p := range want.isolated[d] {
				r.logged[d][p]++
			}
		}
	}
	if len(newRealized) == 0 {
		delete(r.realized, name)
	} else {
		r.realized[name] = newRealized
	}
	for other, rules := range moved {
		maps.Copy(r.realized[other], rules)
	}
	r.commitOrders(name, have, newRealized, want.orders, plans)
	r.recordInfos(have, newRealized, moved, want.infos)
	if want.isolated[0].Len()+want.isolated[1].Len() == 0 {
		delete(r.isolation, name)
	} else {
		r.isolation[name] = want.isolated
	}
	if want.logged == [2]bool{} {
		delete(r.isoLogged, name)
	} else {
		r.isoLogged[name] = want.logged
	}
	return w, nil
}

// commitOrders records the orders of a policy's realized rules and keeps
// in each assigner only the orders some rule uses. r.mu is held.
func (r *reconciler) commitOrders(name string, have, realized map[string]*agentof.PolicyRule, orders map[string]RuleOrder, plans [4]*priorityPlan) {
	for k, o := range r.orders[name] {
		t := tableOf(have[k].Direction, have[k].Tier)
		if r.uses[t][o]--; r.uses[t][o] <= 0 {
			delete(r.uses[t], o)
		}
	}
	for k, o := range orders {
		r.uses[tableOf(realized[k].Direction, realized[k].Tier)][o]++
	}
	if len(orders) == 0 {
		delete(r.orders, name)
	} else {
		r.orders[name] = maps.Clone(orders)
	}
	for t, p := range plans {
		r.assigners[t].commit(p, func(o RuleOrder) bool { return r.uses[t][o] > 0 })
	}
}

// recordInfos keeps the audit log's view of the realized rules by id.
// r.mu is held.
func (r *reconciler) recordInfos(have, realized map[string]*agentof.PolicyRule, moved map[string]map[string]*agentof.PolicyRule, infos map[string]ruleInfo) {
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	for k, rule := range have {
		if _, ok := realized[k]; !ok {
			delete(r.infos, rule.ID)
		}
	}
	for k, rule := range realized {
		r.infos[rule.ID] = realizedRuleInfo{ruleInfo: infos[k], key: rule.Key, direction: rule.Direction, action: rule.Action,
			priority: rule.Priority, table: rule.Tier}
	}
	for _, rules := range moved {
		for _, rule := range rules {
			if info, ok := r.infos[rule.ID]; ok {
				info.priority = rule.Priority
				r.infos[rule.ID] = info
			}
		}
	}
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

// idAllocator hands out conjunction ids, reusing released ones, the one
// released longest ago first: a connection keeps the ids of the rules that
// allowed it in its ct_label, and the metric flows count its packets for
// whichever rule holds such an id, so a released id goes back into use as
// late as the free ones allow.
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
	if len(a.free) > 0 {
		id := a.free[0]
		a.free = a.free[1:]
		return id
	}
	id := a.next
	a.next++
	return id
}

func (a *idAllocator) release(id uint32) { a.free = append(a.free, id) }

// ruleInfo returns what the audit log says about a realized rule.
func (r *reconciler) ruleInfo(id uint32) (realizedRuleInfo, bool) {
	r.infoMu.RLock()
	defer r.infoMu.RUnlock()
	info, ok := r.infos[id]
	return info, ok
}

// realizedRules returns every realized rule's identity by conjunction id,
// for the stats collector.
func (r *reconciler) realizedRules() map[uint32]stats.Rule {
	r.infoMu.RLock()
	defer r.infoMu.RUnlock()
	out := make(map[uint32]stats.Rule, len(r.infos))
	for id, info := range r.infos {
		out[id] = stats.Rule{Policy: info.ref, Name: info.name, Key: info.key}
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
