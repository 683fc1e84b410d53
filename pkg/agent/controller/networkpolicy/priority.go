package networkpolicy

import (
	"cmp"
	"fmt"
	"slices"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

// RuleOrder is where an Antrea-native rule sits in evaluation order
// (docs/design/controlplane-api.md): tier priority, then policy priority,
// then the rule's index among its policy's rules of its direction. Lower
// comes first.
type RuleOrder struct {
	Tier   int32
	Policy float64
	Rule   int32
}

// Compare orders two rules: negative when a is evaluated before b.
func (a RuleOrder) Compare(b RuleOrder) int {
	if c := cmp.Compare(a.Tier, b.Tier); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Policy, b.Policy); c != 0 {
		return c
	}
	return cmp.Compare(a.Rule, b.Rule)
}

func (a RuleOrder) String() string {
	return fmt.Sprintf("tier %d, priority %g, rule %d", a.Tier, a.Policy, a.Rule)
}

// priorityAssigner maps the RuleOrders in use in one table to OpenFlow
// priorities so that an earlier rule always has a higher priority: the one
// mapping from evaluation order to the data path. A new order takes a free
// priority between its neighbours' (next to its neighbour, leaving room
// for more at the ends of the range); when there is none, every order in
// use is spread again evenly over the range and the moved ones are
// reported, so the caller rewrites their rules in the same bundle.
// Upstream's assigner (pkg/agent/controller/networkpolicy/priority.go)
// works the same way.
type priorityAssigner struct {
	top, bottom uint16
	// spacing is the distance a new order at either end keeps from its
	// neighbour.
	spacing uint16
	// orders in use, sorted, with their priorities (descending).
	orders []RuleOrder
	prios  []uint16
}

func newPriorityAssigner(top, bottom uint16) *priorityAssigner {
	return &priorityAssigner{top: top, bottom: bottom, spacing: 64}
}

// priorityPlan is the outcome of placing new orders: the priority of every
// order in use afterwards and the orders in use before whose priority moved.
type priorityPlan struct {
	orders []RuleOrder
	prios  []uint16
	moved  map[RuleOrder]uint16
}

// lookup returns the priority of an order in the plan.
func (p *priorityPlan) lookup(o RuleOrder) (uint16, bool) {
	i, ok := slices.BinarySearchFunc(p.orders, o, RuleOrder.Compare)
	if !ok {
		return 0, false
	}
	return p.prios[i], true
}

// plan places the orders not in use yet, without changing the assigner
// (commit does, once the flows are written).
func (a *priorityAssigner) plan(add []RuleOrder) (*priorityPlan, error) {
	orders, prios := slices.Clone(a.orders), slices.Clone(a.prios)
	var fresh []RuleOrder
	for _, o := range add {
		if _, ok := slices.BinarySearchFunc(orders, o, RuleOrder.Compare); ok || slices.Contains(fresh, o) {
			continue
		}
		fresh = append(fresh, o)
	}
	slices.SortFunc(fresh, RuleOrder.Compare)
	full := false
	for _, o := range fresh {
		i, _ := slices.BinarySearchFunc(orders, o, RuleOrder.Compare)
		// Free priorities are strictly between hi (the earlier neighbour's,
		// or above top) and lo (the later one's, or below bottom).
		hi, lo := int(a.top)+1, int(a.bottom)-1
		if i > 0 {
			hi = int(prios[i-1])
		}
		if i < len(orders) {
			lo = int(prios[i])
		}
		if hi-lo < 2 {
			full = true
			break
		}
		var p int
		switch {
		case i == 0 && i == len(orders):
			p = lo + (hi-lo)/2
		case i == len(orders): // last: just below the earlier neighbour
			p = hi - min(int(a.spacing), (hi-lo)/2)
		case i == 0: // first: just above the later neighbour
			p = lo + min(int(a.spacing), (hi-lo)/2)
		default:
			p = lo + (hi-lo)/2
		}
		orders = slices.Insert(orders, i, o)
		prios = slices.Insert(prios, i, uint16(p))
	}
	plan := &priorityPlan{moved: map[RuleOrder]uint16{}}
	if !full {
		plan.orders, plan.prios = orders, prios
		return plan, nil
	}
	// No room: spread every order evenly.
	all := slices.Clone(a.orders)
	for _, o := range fresh {
		i, _ := slices.BinarySearchFunc(all, o, RuleOrder.Compare)
		all = slices.Insert(all, i, o)
	}
	avail := int(a.top) - int(a.bottom) + 1
	if len(all) > avail {
		return nil, fmt.Errorf("%d rule orders do not fit in priorities %d-%d", len(all), a.bottom, a.top)
	}
	step := avail / len(all)
	plan.orders = all
	plan.prios = make([]uint16, len(all))
	for i := range all {
		plan.prios[i] = uint16(int(a.top) - step/2 - step*i)
	}
	for i, o := range a.orders {
		if p, _ := plan.lookup(o); p != a.prios[i] {
			plan.moved[o] = p
		}
	}
	return plan, nil
}

// commit makes a plan the assigner's state, keeping only the orders still
// in use.
func (a *priorityAssigner) commit(p *priorityPlan, inUse func(RuleOrder) bool) {
	a.orders, a.prios = a.orders[:0], a.prios[:0]
	for i, o := range p.orders {
		if inUse(o) {
			a.orders = append(a.orders, o)
			a.prios = append(a.prios, p.prios[i])
		}
	}
}

// tableOf is the assigner index of a rule's table.
func tableOf(d agentof.Direction, t agentof.PolicyTier) int {
	return int(d)*2 + int(t-agentof.TierAntrea)
}
