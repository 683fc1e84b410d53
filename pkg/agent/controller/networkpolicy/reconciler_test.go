package networkpolicy

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// changeLog records the changes a reconciler sends.
type changeLog struct{ changes []agentof.PolicyChange }

func (l *changeLog) ApplyPolicyChange(_ context.Context, ch agentof.PolicyChange) (agentof.PolicyWrite, error) {
	l.changes = append(l.changes, ch)
	return agentof.PolicyWrite{Messages: len(ch.Rules) + len(ch.Isolate[0]) + len(ch.Release[0])}, nil
}

func (l *changeLog) FinishPolicyRecovery(context.Context) (int, error) { return 0, nil }

func (l *changeLog) last() string {
	ch := l.changes[len(l.changes)-1]
	var rules []string
	for _, rc := range ch.Rules {
		rules = append(rules, fmt.Sprintf("%v->%v", ruleID(rc.Old), ruleID(rc.New)))
	}
	return fmt.Sprintf("rules %v isolate %v release %v", rules, ch.Isolate[0], ch.Release[0])
}

func ruleID(r *agentof.PolicyRule) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprint(r.ID)
}

func want(ports []uint32, peers ...string) *desiredPolicy {
	d := &desiredPolicy{rules: map[string]*agentof.PolicyRule{}, complete: true, generation: 1,
		isolation: [2]isolationSide{{ports: sets.New(ports...)}, {ports: sets.New[uint32]()}}}
	for i, p := range peers {
		d.rules[fmt.Sprint(i)] = &agentof.PolicyRule{Direction: agentof.DirectionIngress, AppliedTo: ports,
			Peers: []netip.Prefix{netip.MustParsePrefix(p)}, Priority: agentof.PolicyRulePriority}
	}
	return d
}

func TestTheReconcilerSendsOnlyWhatChangedAndCountsIsolationPerPolicy(t *testing.T) {
	log := &changeLog{}
	r := newReconciler(log, nil)
	ctx := context.Background()
	steps := []struct {
		name   string
		policy string
		want   *desiredPolicy
		sent   string
	}{
		{"a new policy adds its rule and isolates its port", "np1", want([]uint32{10}, "10.0.0.1/32"), "rules [-->1] isolate [10] release []"},
		{"the same policy again sends nothing", "np1", want([]uint32{10}, "10.0.0.1/32"), ""},
		{"a second policy on the same port does not isolate it again", "np2", want([]uint32{10}, "10.0.0.2/32"), "rules [-->2] isolate [] release []"},
		{"a changed peer keeps the rule's id", "np1", want([]uint32{10}, "10.0.0.3/32"), "rules [1->1] isolate [] release []"},
		{"removing one policy keeps the port isolated by the other", "np1", want(nil), "rules [1->-] isolate [] release []"},
		{"removing the last policy releases the port", "np2", want(nil), "rules [2->-] isolate [] release [10]"},
		// Released 1, then 2: the one released first goes back into use
		// first (idAllocator).
		{"a released id is reused, the one released first", "np3", want([]uint32{11}, "10.0.0.4/32"), "rules [-->1] isolate [11] release []"},
	}
	for _, s := range steps {
		before := len(log.changes)
		if _, err := r.sync(ctx, s.policy, s.want); err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(log.changes) > before {
			if ch := log.changes[len(log.changes)-1]; len(ch.Rules)+len(ch.Isolate[0])+len(ch.Release[0]) > 0 {
				got = log.last()
			}
		}
		if got != s.sent {
			t.Fatalf("%s: sent %q, want %q", s.name, got, s.sent)
		}
	}
}

func TestARecoveredRuleKeepsItsIDAndOthersDoNotTakeIt(t *testing.T) {
	log := &changeLog{}
	r := newReconciler(log, map[string]uint32{ruleKey("np1", "0"): 3})
	ctx := context.Background()
	if _, err := r.sync(ctx, "np2", want([]uint32{10}, "10.0.0.2/32")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.sync(ctx, "np1", want([]uint32{10}, "10.0.0.1/32")); err != nil {
		t.Fatal(err)
	}
	if got := log.changes[0].Rules[0].New.ID; got == 3 {
		t.Fatalf("a new rule took the id an earlier run gave another rule")
	}
	if got := log.changes[1].Rules[0].New.ID; got != 3 {
		t.Fatalf("the recovered rule should keep id 3, got %d", got)
	}
}

// blockingFlows holds every change until released.
type blockingFlows struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingFlows) ApplyPolicyChange(context.Context, agentof.PolicyChange) (agentof.PolicyWrite, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return agentof.PolicyWrite{Messages: 1}, nil
}

func (b *blockingFlows) FinishPolicyRecovery(context.Context) (int, error) { return 0, nil }

// The watchers keep applying events while the reconciler waits for OVS.
func TestWatchersDoNotWaitForAPolicyWrite(t *testing.T) {
	store := interfacestore.NewInterfaceStore()
	iface := interfacestore.NewContainerInterface("veth-a", "c-a", "a", "x", "eth0", nil, nil, 0)
	iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: 10}
	store.AddInterface(iface)
	atg := &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg1"}, GroupMembers: []cpv1beta2.GroupMember{member("x", "a", "10.10.1.2")}}
	np := &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "np1", Generation: 1}, AppliedToGroups: []string{"atg1"},
		Rules: []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionIn, From: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag1"}}}}}
	client := newClient(atg, np)
	flows := &blockingFlows{entered: make(chan struct{}, 1), release: make(chan struct{})}
	c := NewController("n1", client, flows, store, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer close(flows.release)
	go c.Run(ctx)
	select {
	case <-flows.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the policy was never written")
	}
	// The write is held; a new AddressGroup arrives meanwhile.
	ag := &cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag1"}, GroupMembers: []cpv1beta2.GroupMember{member("y", "c", "10.10.2.5")}}
	if err := client.Tracker().Add(ag); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.cache.mu.RLock()
		_, ok := c.cache.addressGroups["ag1"]
		c.cache.mu.RUnlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the AddressGroup watcher waited for the policy write")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// antreaWant is an Antrea-native policy's desired state: one ingress rule
// per order, in the Antrea-native table.
func antreaWant(orders ...RuleOrder) *desiredPolicy {
	d := &desiredPolicy{rules: map[string]*agentof.PolicyRule{}, orders: map[string]RuleOrder{}, complete: true, generation: 1,
		isolation: noIsolation()}
	for i, o := range orders {
		k := fmt.Sprintf("%d/", i)
		d.rules[k] = &agentof.PolicyRule{Direction: agentof.DirectionIngress, Tier: agentof.TierAntrea, Action: agentof.ActionDrop,
			AppliedTo: []uint32{10}, Peers: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.20.0.%d/32", i+1))}}
		d.orders[k] = o
	}
	return d
}

// When a new policy's rule finds no free priority between its neighbours,
// the rules of the other policies move in the same change: the priorities
// stay in evaluation order at every step, and only the moved rules are sent.
func TestAPolicyWithoutRoomMovesTheOthersInTheSameChange(t *testing.T) {
	log := &changeLog{}
	r := newReconciler(log, nil)
	r.tables[tableOf(agentof.DirectionIngress, agentof.TierAntrea)].assigner = newPriorityAssigner(102, 100) // 3 priorities
	ctx := context.Background()
	if _, err := r.sync(ctx, "a", antreaWant(RuleOrder{Tier: 100, Policy: 1}, RuleOrder{Tier: 100, Policy: 3})); err != nil {
		t.Fatal(err)
	}
	if _, err := r.sync(ctx, "b", antreaWant(RuleOrder{Tier: 100, Policy: 2})); err != nil {
		t.Fatal(err)
	}
	prio := func(policy, key string) uint16 { return r.realized[policy][key].Priority }
	if !(prio("a", "0/") > prio("b", "0/") && prio("b", "0/") > prio("a", "1/")) {
		t.Fatalf("priority 1 before 2 before 3: want a/0 > b/0 > a/1, got %d, %d, %d", prio("a", "0/"), prio("b", "0/"), prio("a", "1/"))
	}
	// A fourth order does not fit in 3 priorities.
	if _, err := r.sync(ctx, "c", antreaWant(RuleOrder{Tier: 50, Policy: 9})); err == nil {
		t.Fatalf("4 orders in 3 priorities should fail")
	}
	// Between a/0 and b/0 there is no room in a band of 3 once both ends
	// are taken: make room by widening, then check a spread moves others.
	r.tables[tableOf(agentof.DirectionIngress, agentof.TierAntrea)].assigner.top = 103
	n := len(log.changes)
	if _, err := r.sync(ctx, "c", antreaWant(RuleOrder{Tier: 100, Policy: 1.5})); err != nil {
		t.Fatal(err)
	}
	if len(log.changes) != n+1 {
		t.Fatalf("one change for policy c, got %d", len(log.changes)-n)
	}
	if !(prio("a", "0/") > prio("c", "0/") && prio("c", "0/") > prio("b", "0/") && prio("b", "0/") > prio("a", "1/")) {
		t.Fatalf("want a/0 > c/0 > b/0 > a/1, got %d, %d, %d, %d", prio("a", "0/"), prio("c", "0/"), prio("b", "0/"), prio("a", "1/"))
	}
	moved := 0
	for _, rc := range log.changes[n].Rules {
		if rc.Old != nil && rc.New != nil && rc.Old.Priority != rc.New.Priority {
			moved++
		}
	}
	if moved == 0 {
		t.Fatalf("c's change should also move the other policies' rules, it holds %s", log.last())
	}
	// Nothing changed: nothing sent.
	n = len(log.changes)
	if _, err := r.sync(ctx, "a", antreaWant(RuleOrder{Tier: 100, Policy: 1}, RuleOrder{Tier: 100, Policy: 3})); err != nil || len(log.changes) != n {
		t.Fatalf("the same policy again should send nothing, sent %d changes (err %v)", len(log.changes)-n, err)
	}
	// Removing c frees its order.
	if _, err := r.sync(ctx, "c", antreaWant()); err != nil {
		t.Fatal(err)
	}
	if got := len(r.tables[tableOf(agentof.DirectionIngress, agentof.TierAntrea)].assigner.orders); got != 3 {
		t.Fatalf("3 orders stay in use after c is gone, the assigner holds %d", got)
	}
}

// lookingFlows reads, in the middle of each write, what a packet-in would
// find of every rule the change adds or removes (the flows of an added rule
// may send one as soon as they are written; a removed rule's flows, just
// before).
type lookingFlows struct {
	r    *reconciler
	fail bool
	seen map[uint32]string
}

func (l *lookingFlows) ApplyPolicyChange(_ context.Context, ch agentof.PolicyChange) (agentof.PolicyWrite, error) {
	for _, rc := range ch.Rules {
		for _, rule := range []*agentof.PolicyRule{rc.Old, rc.New} {
			if rule != nil {
				info, ok := l.r.ruleInfo(rule.ID)
				l.seen[rule.ID] = fmt.Sprintf("%v %s", ok, info.name)
			}
		}
	}
	if l.fail {
		return agentof.PolicyWrite{}, fmt.Errorf("the switch is gone")
	}
	return agentof.PolicyWrite{Messages: len(ch.Rules)}, nil
}

func (l *lookingFlows) FinishPolicyRecovery(context.Context) (int, error) { return 0, nil }

// A packet-in of a rule is named whenever it can come: while the rule's
// flows are being written, and after they are removed until the id serves
// another rule. The stats see only the rules in place; a failed write
// leaves no rule in place.
func TestPacketInsOfARuleAreNamedFromItsWriteUntilItsIDIsReused(t *testing.T) {
	l := &lookingFlows{seen: map[uint32]string{}}
	r := newReconciler(l, nil)
	l.r = r
	ctx := context.Background()
	named := func(name string, peers ...string) *desiredPolicy {
		d := want([]uint32{10}, peers...)
		d.infos = map[string]ruleInfo{}
		for k := range d.rules {
			d.infos[k] = ruleInfo{name: name}
		}
		return d
	}
	if _, err := r.sync(ctx, "np1", named("first", "10.0.0.1/32")); err != nil {
		t.Fatal(err)
	}
	if got := l.seen[1]; got != "true first" {
		t.Fatalf("during the write of rule 1, a packet-in finds %q, want its name", got)
	}
	if _, err := r.sync(ctx, "np1", want(nil)); err != nil {
		t.Fatal(err)
	}
	if info, ok := r.ruleInfo(1); !ok || info.name != "first" {
		t.Fatalf("a packet-in read after rule 1 is removed finds %v %+v, want its name", ok, info)
	}
	if _, ok := r.realizedRules()[1]; ok {
		t.Fatalf("the stats still count removed rule 1")
	}
	if _, err := r.sync(ctx, "np2", named("second", "10.0.0.2/32")); err != nil {
		t.Fatal(err)
	}
	if info, _ := r.ruleInfo(1); info.name != "second" || l.seen[1] != "true second" {
		t.Fatalf("reused id 1 names %q (during the write %q), want the rule that holds it now", info.name, l.seen[1])
	}
	l.fail = true
	if _, err := r.sync(ctx, "np3", named("failed", "10.0.0.3/32")); err == nil {
		t.Fatal("a failed write reported success")
	}
	if _, ok := r.realizedRules()[2]; ok {
		t.Fatalf("the stats count rule 2, whose write failed")
	}
}
