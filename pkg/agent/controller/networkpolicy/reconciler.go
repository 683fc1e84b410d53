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
	// isolation realized for each policy, per direction; ports counts,
	// per direction, the policies isolating each port and those of them
	// that log (its drop flow logs while one does).
	isolation map[string][2]isolationSide
	ports     [2]portCounts
	// recovered are the ids an earlier agent run gave to rules (by
	// agentof.PolicyRule.Key), until FinishRecovery: the same rule gets
	// the same id, so its flows are found in place.
	recovered map[string]uint32

	// tables map evaluation order to priority in each Antrea-native table
	// (tableOf) and count the realized rules per order; orders are the
	// realized Antrea-native rules' orders per policy and rule key.
	tables [4]orderTable
	orders map[string]map[string]RuleOrder

	// infos describe the rules by id, for the audit log and the
	// FlowExporter's denied connections: a rule's info is there before its
	// flows are written (a packet-in can come as soon as they are) and,
	// marked released, after they are removed, until its id is reused (a
	// packet-in sent just before the removal is read after it). infoMu is
	// never held across an OVS write, so packet-ins never wait on one.
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
	// released: the rule's flows are gone (or were never written); its id
	// is free.
	released bool
}

// isolationSide is one direction of a policy's isolation: the local ports
// it isolates, and whether it logs the packets their drop flows drop (a K8s
// NetworkPolicy whose rules of that direction log).
type isolationSide struct {
	ports  sets.Set[uint32]
	logged bool
}

// portCounts is, for one direction, how many policies isolate each local
// port and how many of them log its drops.
type portCounts struct {
	isolated, logged map[uint32]int
}

// add counts a policy's side in (n 1) or out (n -1).
func (c portCounts) add(side isolationSide, n int) {
	for p := range side.ports {
		if c.isolated[p] += n; c.isolated[p] <= 0 {
			delete(c.isolated, p)
		}
		if side.logged {
			if c.logged[p] += n; c.logged[p] <= 0 {
				delete(c.logged, p)
			}
		}
	}
}

// orderTable is one Antrea-native rule table's priorities: the assigner
// mapping evaluation order to priority and the realized rules per order.
type orderTable struct {
	assigner *priorityAssigner
	uses     map[RuleOrder]int
}

func newReconciler(flows PolicyFlows, recovered map[string]uint32) *reconciler {
	r := &reconciler{
		flows:     flows,
		ids:       newIDAllocator(),
		realized:  map[string]map[string]*agentof.PolicyRule{},
		isolation: map[string][2]isolationSide{},
		ports:     [2]portCounts{{isolated: map[uint32]int{}, logged: map[uint32]int{}}, {isolated: map[uint32]int{}, logged: map[uint32]int{}}},
		recovered: maps.Clone(recovered),
		orders:    map[string]map[string]RuleOrder{},
		infos:     map[uint32]realizedRuleInfo{},
	}
	for i := range r.tables {
		r.tables[i] = orderTable{assigner: newPriorityAssigner(agentof.PolicyTopPriority, agentof.PolicyBottomPriority), uses: map[RuleOrder]int{}}
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
	plans, err := r.planPriorities(want)
	if err != nil {
		return agentof.PolicyWrite{}, fmt.Errorf("policy %s: %w", name, err)
	}
	var ch agentof.PolicyChange
	rc := r.ruleChanges(name, have, want, plans)
	ch.Rules = rc.changes
	moved, movedChanges := r.movedRules(name, plans)
	ch.Rules = append(ch.Rules, movedChanges...)
	for d := range ch.Isolate {
		ch.Isolate[d], ch.Release[d], ch.Logged[d] = r.isolationChange(d, r.isolation[name][d], want.isolation[d])
	}
	var w agentof.PolicyWrite
	announced := r.announceInfos(rc.realized, want.infos)
	if len(ch.Rules)+len(ch.Isolate[0])+len(ch.Isolate[1])+len(ch.Release[0])+len(ch.Release[1]) > 0 {
		w, err = r.flows.ApplyPolicyChange(ctx, ch)
	}
	if err != nil {
		r.withdrawInfos(announced)
		for _, id := range rc.allocated {
			r.ids.release(id)
		}
		return w, fmt.Errorf("policy %s: %w", name, err)
	}
	for _, k := range slices.Sorted(maps.Keys(rc.realized)) {
		delete(r.recovered, rc.realized[k].Key)
	}
	for _, id := range rc.released {
		r.ids.release(id)
	}
	if len(rc.realized) == 0 {
		delete(r.realized, name)
	} else {
		r.realized[name] = rc.realized
	}
	for other, rules := range moved {
		maps.Copy(r.realized[other], rules)
	}
	r.commitOrders(name, have, rc.realized, want.orders, plans)
	r.recordInfos(have, rc.realized, moved, want.infos)
	r.commitIsolation(name, want.isolation)
	return w, nil
}

// planPriorities places the orders of a policy's Antrea-native rules in
// their tables. r.mu is held.
func (r *reconciler) planPriorities(want *desiredPolicy) ([4]*priorityPlan, error) {
	var plans [4]*priorityPlan
	for t := range plans {
		var add []RuleOrder
		for k, o := range want.orders {
			if rule := want.rules[k]; tableOf(rule.Direction, rule.Tier) == t {
				add = append(add, o)
			}
		}
		p, err := r.tables[t].assigner.plan(add)
		if err != nil {
			return plans, err
		}
		plans[t] = p
	}
	return plans, nil
}

// policyRuleChanges are the changes of one policy's own rules.
type policyRuleChanges struct {
	changes []agentof.RuleChange
	// realized are the rules as they will be (with ids and priorities).
	realized map[string]*agentof.PolicyRule
	// allocated are the ids given to new rules (freed if the write
	// fails), released those of removed rules (freed once it succeeds).
	allocated, released []uint32
}

// ruleChanges compares a policy's wanted rules with the realized ones: a
// rule keeps its id, takes the one an earlier run gave it, or gets a new
// one. r.mu is held.
func (r *reconciler) ruleChanges(name string, have map[string]*agentof.PolicyRule, want *desiredPolicy, plans [4]*priorityPlan) policyRuleChanges {
	out := policyRuleChanges{realized: make(map[string]*agentof.PolicyRule, len(want.rules))}
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
				out.allocated = append(out.allocated, rule.ID)
			}
		}
		out.realized[k] = &rule
		if !old.Equal(&rule) {
			out.changes = append(out.changes, agentof.RuleChange{Old: old, New: &rule})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(have)) {
		if _, ok := want.rules[k]; !ok {
			out.changes = append(out.changes, agentof.RuleChange{Old: have[k]})
			out.released = append(out.released, have[k].ID)
		}
	}
	return out
}

// movedRules are the other policies' rules whose priority the plans move.
// r.mu is held.
func (r *reconciler) movedRules(name string, plans [4]*priorityPlan) (map[string]map[string]*agentof.PolicyRule, []agentof.RuleChange) {
	moved := map[string]map[string]*agentof.PolicyRule{}
	var changes []agentof.RuleChange
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
			changes = append(changes, agentof.RuleChange{Old: old, New: &nr})
		}
	}
	return moved, changes
}

// isolationChange is one direction of a policy's isolation change, given
// the other policies': the ports whose drop flow is (re)written (they
// become isolated, or stay isolated and start or stop logging), those
// released, and those of the first whose drop logs. r.mu is held.
func (r *reconciler) isolationChange(d int, was, will isolationSide) (isolate, release, logged []uint32) {
	counts := r.ports[d]
	write := sets.New[uint32]()
	for p := range was.ports.Union(will.ports) {
		had, has := was.ports.Has(p), will.ports.Has(p)
		isolatedAfter := counts.isolated[p] - b2i(had) + b2i(has)
		loggedBefore := counts.logged[p]
		loggedAfter := loggedBefore - b2i(had && was.logged) + b2i(has && will.logged)
		switch {
		case isolatedAfter == 0 && counts.isolated[p] > 0:
			release = append(release, p)
		case isolatedAfter > 0 && (counts.isolated[p] == 0 || (loggedBefore > 0) != (loggedAfter > 0)):
			write.Insert(p)
		}
		if isolatedAfter > 0 && loggedAfter > 0 && write.Has(p) {
			logged = append(logged, p)
		}
	}
	slices.Sort(logged)
	slices.Sort(release)
	return sets.List(write), release, logged
}

// commitIsolation records a policy's isolation once OVS holds it. r.mu
// is held.
func (r *reconciler) commitIsolation(name string, want [2]isolationSide) {
	old := r.isolation[name]
	for d := range r.ports {
		r.ports[d].add(old[d], -1)
		r.ports[d].add(want[d], 1)
	}
	if want[0].ports.Len()+want[1].ports.Len() == 0 && !want[0].logged && !want[1].logged {
		delete(r.isolation, name)
	} else {
		r.isolation[name] = want
	}
}

// commitOrders records the orders of a policy's realized rules and keeps
// in each assigner only the orders some rule uses. r.mu is held.
func (r *reconciler) commitOrders(name string, have, realized map[string]*agentof.PolicyRule, orders map[string]RuleOrder, plans [4]*priorityPlan) {
	for k, o := range r.orders[name] {
		t := tableOf(have[k].Direction, have[k].Tier)
		if r.tables[t].uses[o]--; r.tables[t].uses[o] <= 0 {
			delete(r.tables[t].uses, o)
		}
	}
	for k, o := range orders {
		r.tables[tableOf(realized[k].Direction, realized[k].Tier)].uses[o]++
	}
	if len(orders) == 0 {
		delete(r.orders, name)
	} else {
		r.orders[name] = maps.Clone(orders)
	}
	for t, p := range plans {
		r.tables[t].assigner.commit(p, func(o RuleOrder) bool { return r.tables[t].uses[o] > 0 })
	}
}

// realizedInfo is what infos keep of a rule.
func realizedInfo(rule *agentof.PolicyRule, info ruleInfo) realizedRuleInfo {
	return realizedRuleInfo{ruleInfo: info, key: rule.Key, direction: rule.Direction, action: rule.Action,
		priority: rule.Priority, table: rule.Tier}
}

// announceInfos records the rules about to be written whose ids have no
// live info (new rules, and those an earlier run left), so that a packet-in
// their flows send at once is named. It returns their ids. r.mu is held.
func (r *reconciler) announceInfos(realized map[string]*agentof.PolicyRule, infos map[string]ruleInfo) []uint32 {
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	var ids []uint32
	for k, rule := range realized {
		if info, ok := r.infos[rule.ID]; ok && !info.released {
			continue
		}
		r.infos[rule.ID] = realizedInfo(rule, infos[k])
		ids = append(ids, rule.ID)
	}
	return ids
}

// withdrawInfos marks the rules announceInfos recorded released: their
// write failed. r.mu is held.
func (r *reconciler) withdrawInfos(ids []uint32) {
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	for _, id := range ids {
		info := r.infos[id]
		info.released = true
		r.infos[id] = info
	}
}

// recordInfos keeps the view of the realized rules by id; removed rules
// stay, released, until their ids are reused. r.mu is held.
func (r *reconciler) recordInfos(have, realized map[string]*agentof.PolicyRule, moved map[string]map[string]*agentof.PolicyRule, infos map[string]ruleInfo) {
	r.infoMu.Lock()
	defer r.infoMu.Unlock()
	for k, rule := range have {
		if _, ok := realized[k]; !ok {
			if info, ok := r.infos[rule.ID]; ok && info.key == rule.Key {
				info.released = true
				r.infos[rule.ID] = info
			}
		}
	}
	for k, rule := range realized {
		r.infos[rule.ID] = realizedInfo(rule, infos[k])
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

// ruleInfo returns what the audit log says about a rule that is or was
// realized (released then).
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
		if info.released {
			continue
		}
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
