package networkpolicy

import (
	"math/rand"
	"slices"
	"testing"
)

// checkOrder fails unless every order in use has a priority in range and an
// earlier order a higher priority than a later one.
func checkOrder(t *testing.T, a *priorityAssigner) {
	t.Helper()
	for i := range a.orders {
		if a.prios[i] > a.top || a.prios[i] < a.bottom {
			t.Fatalf("%v got priority %d outside %d-%d", a.orders[i], a.prios[i], a.bottom, a.top)
		}
		if i > 0 && (a.orders[i-1].Compare(a.orders[i]) >= 0 || a.prios[i-1] <= a.prios[i]) {
			t.Fatalf("%v (priority %d) is evaluated before %v (priority %d): it needs the higher priority",
				a.orders[i-1], a.prios[i-1], a.orders[i], a.prios[i])
		}
	}
}

func TestEvaluationOrderIsTierThenPolicyPriorityThenRuleOrder(t *testing.T) {
	a := newPriorityAssigner(64000, 100)
	// Out of order on purpose: securityops (100) before application (250),
	// then policy priority, then rule index.
	orders := []RuleOrder{{250, 1, 0}, {100, 5, 1}, {100, 5, 0}, {100, 1.5, 3}, {250, 0.5, 2}, {50, 10000, 0}}
	p, err := a.plan(orders)
	if err != nil {
		t.Fatal(err)
	}
	a.commit(p, func(RuleOrder) bool { return true })
	checkOrder(t, a)
	want := []RuleOrder{{50, 10000, 0}, {100, 1.5, 3}, {100, 5, 0}, {100, 5, 1}, {250, 0.5, 2}, {250, 1, 0}}
	if !slices.Equal(a.orders, want) {
		t.Fatalf("evaluation order should be %v, got %v", want, a.orders)
	}
}

func TestAFullBandIsSpreadAgainAndTheMovedOrdersReported(t *testing.T) {
	a := newPriorityAssigner(110, 100) // room for 11 priorities
	p, _ := a.plan([]RuleOrder{{Rule: 0}, {Rule: 10}})
	a.commit(p, func(RuleOrder) bool { return true })
	before := map[RuleOrder]uint16{}
	for i, o := range a.orders {
		before[o] = a.prios[i]
	}
	// Insert between the two until no integer is left between neighbours.
	var moved map[RuleOrder]uint16
	for r := int32(1); r < 10 && len(moved) == 0; r++ {
		p, err := a.plan([]RuleOrder{{Rule: r}})
		if err != nil {
			t.Fatal(err)
		}
		moved = p.moved
		a.commit(p, func(RuleOrder) bool { return true })
		checkOrder(t, a)
	}
	if len(moved) == 0 {
		t.Fatalf("11 priorities cannot keep room between neighbours for 9 insertions without spreading again; orders %v prios %v", a.orders, a.prios)
	}
	for o, prio := range moved {
		if i, _ := slices.BinarySearchFunc(a.orders, o, RuleOrder.Compare); a.prios[i] != prio {
			t.Fatalf("moved %v to %d but the assigner holds %d", o, prio, a.prios[i])
		}
	}
}

func TestOrderIsKeptWhatever(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	a := newPriorityAssigner(2000, 100)
	inUse := map[RuleOrder]bool{}
	for step := 0; step < 3000; step++ {
		var add []RuleOrder
		for range rng.Intn(3) + 1 {
			add = append(add, RuleOrder{Tier: int32(rng.Intn(4) * 50), Policy: float64(rng.Intn(20)) / 2, Rule: int32(rng.Intn(5))})
		}
		p, err := a.plan(add)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range add {
			inUse[o] = true
		}
		// Forget some.
		for o := range inUse {
			if rng.Intn(4) == 0 {
				delete(inUse, o)
			}
		}
		a.commit(p, func(o RuleOrder) bool { return inUse[o] })
		checkOrder(t, a)
		if len(a.orders) != len(inUse) {
			t.Fatalf("step %d: the assigner holds %d orders, %d are in use", step, len(a.orders), len(inUse))
		}
	}
}
