package stats

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// fakeSwitch stands in for the OpenFlow client and the policy controller:
// the rules' counters (sessions, and the packets and bytes of every packet
// of their connections) and the rules realized.
type fakeSwitch struct {
	counters map[uint32]agentof.RuleCounters
	rules    map[uint32]Rule
}

func (f *fakeSwitch) PolicyRuleStats(context.Context) (map[uint32]agentof.RuleCounters, error) {
	out := map[uint32]agentof.RuleCounters{}
	for k, v := range f.counters {
		out[k] = v
	}
	return out, nil
}

func (f *fakeSwitch) RealizedRules() map[uint32]Rule { return f.rules }

var (
	acnp = cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.AntreaClusterNetworkPolicy, Name: "acnp", UID: types.UID("u-acnp")}
	knp  = cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.K8sNetworkPolicy, Namespace: "ns", Name: "np", UID: types.UID("u-np")}
)

func ruleStats(t *testing.T, s *cpv1beta2.NodeStatsSummary, name string) statsv1alpha1.TrafficStats {
	t.Helper()
	for _, ps := range s.AntreaClusterNetworkPolicies {
		for _, r := range ps.RuleTrafficStats {
			if r.Name == name {
				return r.TrafficStats
			}
		}
	}
	t.Fatalf("rule %s not in the summary %+v", name, s)
	return statsv1alpha1.TrafficStats{}
}

func TestCollectorReportsWhatEachRuleCountedSinceTheLastCollection(t *testing.T) {
	sw := &fakeSwitch{
		counters: map[uint32]agentof.RuleCounters{1: {Sessions: 2, Packets: 10, Bytes: 1000}, 2: {Sessions: 3, Packets: 3, Bytes: 300},
			3: {Sessions: 1, Packets: 7, Bytes: 700}},
		rules: map[uint32]Rule{
			1: {Policy: acnp, Name: "allow", Key: "p 0/in"},
			2: {Policy: acnp, Name: "drop", Key: "p 1/in"},
			3: {Policy: knp, Key: "q 0/in"},
		},
	}
	c := NewCollector("n1", 0, sw, sw, nil)
	ctx := context.Background()
	if s, err := c.Collect(ctx); err != nil || s != nil {
		t.Fatalf("the first collection is the baseline: got %+v, %v; want nothing", s, err)
	}
	// Rule 1 counts one more connection of 5 packets; rule 2 nothing;
	// rule 3's flows were reinstalled (its counters went down): one
	// connection of 2 packets since.
	sw.counters[1] = agentof.RuleCounters{Sessions: 3, Packets: 15, Bytes: 1500}
	sw.counters[3] = agentof.RuleCounters{Sessions: 1, Packets: 2, Bytes: 200}
	s, err := c.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "n1" {
		t.Errorf("summary named %q, want its Node n1", s.Name)
	}
	if got, want := ruleStats(t, s, "allow"), (statsv1alpha1.TrafficStats{Packets: 5, Bytes: 500, Sessions: 1}); got != want {
		t.Errorf("allow rule: got %+v, want %+v", got, want)
	}
	if got, want := ruleStats(t, s, "drop"), (statsv1alpha1.TrafficStats{}); got != want {
		t.Errorf("drop rule saw nothing new: got %+v, want zeros", got)
	}
	if len(s.AntreaClusterNetworkPolicies) != 1 || s.AntreaClusterNetworkPolicies[0].TrafficStats.Packets != 5 {
		t.Errorf("ACNP total: got %+v, want one policy with the 5 packets of its rules", s.AntreaClusterNetworkPolicies)
	}
	if len(s.NetworkPolicies) != 1 || s.NetworkPolicies[0].TrafficStats != (statsv1alpha1.TrafficStats{Packets: 2, Bytes: 200, Sessions: 1}) {
		t.Errorf("K8s NetworkPolicy after its flow was reinstalled: got %+v, want the 2 packets counted since", s.NetworkPolicies)
	}
	if len(s.NetworkPolicies) == 1 && len(s.NetworkPolicies[0].RuleTrafficStats) != 0 {
		t.Errorf("K8s NetworkPolicy rules have no names, so no rule stats: got %+v", s.NetworkPolicies[0].RuleTrafficStats)
	}
}

func TestCollectorCountsAnIDGivenToAnotherRuleFromZero(t *testing.T) {
	sw := &fakeSwitch{
		counters: map[uint32]agentof.RuleCounters{1: {Sessions: 10, Packets: 10, Bytes: 1000}},
		rules:    map[uint32]Rule{1: {Policy: acnp, Name: "allow", Key: "p 0/in"}},
	}
	c := NewCollector("n1", 0, sw, sw, nil)
	ctx := context.Background()
	if _, err := c.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	// Rule 1 went away and its id went to a new rule whose flow has
	// already counted 12 packets (more than the old one's 10).
	sw.rules = map[uint32]Rule{1: {Policy: acnp, Name: "other", Key: "p 2/out"}}
	sw.counters[1] = agentof.RuleCounters{Sessions: 12, Packets: 12, Bytes: 1200}
	s, err := c.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ruleStats(t, s, "other"), (statsv1alpha1.TrafficStats{Packets: 12, Bytes: 1200, Sessions: 12}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestCollectorSumsTheIDsOfOneRule(t *testing.T) {
	// One named rule can become several conjunctions on a Node; its stats
	// are their sum.
	sw := &fakeSwitch{
		counters: map[uint32]agentof.RuleCounters{},
		rules: map[uint32]Rule{
			4: {Policy: acnp, Name: "allow", Key: "p 0/in"},
			5: {Policy: acnp, Name: "allow", Key: "p 0/in-b"},
		},
	}
	c := NewCollector("n1", 0, sw, sw, nil)
	ctx := context.Background()
	if _, err := c.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	sw.counters[4] = agentof.RuleCounters{Sessions: 1, Packets: 1, Bytes: 60}
	sw.counters[5] = agentof.RuleCounters{Sessions: 2, Packets: 2, Bytes: 120}
	s, err := c.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ruleStats(t, s, "allow"), (statsv1alpha1.TrafficStats{Packets: 3, Bytes: 180, Sessions: 3}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestCollectorCountsReinstalledFlowsFromZeroWhenOnlyTheSessionsWentDown(t *testing.T) {
	// An Allow rule's flows were reinstalled, then one long connection
	// moved more packets than the old flows had counted: only the sessions
	// counter shows the reset.
	sw := &fakeSwitch{
		counters: map[uint32]agentof.RuleCounters{1: {Sessions: 5, Packets: 10, Bytes: 1000}},
		rules:    map[uint32]Rule{1: {Policy: acnp, Name: "allow", Key: "p 0/in"}},
	}
	c := NewCollector("n1", 0, sw, sw, nil)
	ctx := context.Background()
	if _, err := c.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	sw.counters[1] = agentof.RuleCounters{Sessions: 1, Packets: 40, Bytes: 4000}
	s, err := c.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ruleStats(t, s, "allow"), (statsv1alpha1.TrafficStats{Packets: 40, Bytes: 4000, Sessions: 1}); got != want {
		t.Errorf("got %+v, want %+v (counted from zero)", got, want)
	}
}

type groupsFunc func() []cpv1beta2.MulticastGroupInfo

func (f groupsFunc) Groups() []cpv1beta2.MulticastGroupInfo { return f() }

func TestCollectorReportsTheMulticastGroupsOfTheMomentWithEachSummary(t *testing.T) {
	sw := &fakeSwitch{counters: map[uint32]agentof.RuleCounters{}, rules: map[uint32]Rule{}}
	c := NewCollector("n1", 0, sw, sw, nil)
	groups := []cpv1beta2.MulticastGroupInfo{{Group: "225.1.2.3", Pods: []cpv1beta2.PodReference{{Namespace: "a", Name: "x"}}}}
	c.SetMulticastGroups(groupsFunc(func() []cpv1beta2.MulticastGroupInfo { return groups }))
	ctx := context.Background()
	if _, err := c.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.Collect(ctx)
	if err != nil || s == nil {
		t.Fatalf("Collect = %+v, %v", s, err)
	}
	if s.Name != "n1" || len(s.Multicast) != 1 || s.Multicast[0].Group != "225.1.2.3" || len(s.Multicast[0].Pods) != 1 {
		t.Errorf("the summary carries %+v, want the group 225.1.2.3 with a/x", s.Multicast)
	}
	groups = nil // every member left: the next summary says so
	if s, err = c.Collect(ctx); err != nil || s == nil || len(s.Multicast) != 0 {
		t.Errorf("after every member left, Collect = %+v, %v; want a summary without groups", s, err)
	}
}
