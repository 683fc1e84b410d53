package networkpolicy

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/agent/stats"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// ruleSessions returns the per-rule stats of the policy with uid in a
// summary (nil summary: none).
func ruleStatsOf(s *cpv1beta2.NodeStatsSummary, uid types.UID) map[string]statsv1alpha1.TrafficStats {
	out := map[string]statsv1alpha1.TrafficStats{}
	if s == nil {
		return out
	}
	for _, ps := range s.AntreaClusterNetworkPolicies {
		if ps.NetworkPolicy.UID == uid {
			for _, r := range ps.RuleTrafficStats {
				out[r.Name] = r.TrafficStats
			}
		}
	}
	return out
}

// connect makes n TCP connections from c to web:8080 and returns what each
// saw ("web" or "timeout").
func (n *policyNode) connect(t *testing.T, c *bridgetest.Pod, times int) []string {
	t.Helper()
	var got []string
	for range times {
		got = append(got, n.tcpOutcome(t, c))
	}
	return got
}

// The stats collector on a real node: an ACNP with an Allow rule (from a)
// and a Drop rule (from b) in front of web; real TCP connections go
// through the bridge, and each collection reports what each rule counted
// since the previous one, from the rules' conj_id flow counters. Removing
// and re-adding the policy reinstalls its flows (counters from zero): the
// next report counts only what came after, not a negative or wrapped
// number.
func TestStatsCollectorCountsEachRuleFromRealFlowCounters(t *testing.T) {
	n := newPolicyNode(t)
	a, b := n.a, n.b
	uid := types.UID("acnp-uid")
	acnp := func() *cpv1beta2.NetworkPolicy {
		allowA, dropB := ingressFrom(allow, "ag-a"), ingressFrom(drop, "ag-b")
		allowA.Name, dropB.Name = "allow-a", "drop-b"
		p := antreaPolicy("acnp", tierApplication, 1, "atg-web", allowA, dropB)
		p.SourceRef.UID = uid
		return p
	}
	n.set(t, acnp())
	n.expect(t, "the policy allows a and drops b", map[*bridgetest.Pod]string{a: "web", b: "timeout"})

	c := stats.NewCollector("node-1", time.Minute, n.ctl, n.flows, nil)
	ctx := context.Background()
	// OVS adds the packets of cached datapath flows to the OpenFlow
	// counters when its revalidators run (every 500 ms): wait for a
	// round before each collection, so it sees every packet sent.
	collect := func() *cpv1beta2.NodeStatsSummary {
		t.Helper()
		if _, err := n.br.Appctl("revalidator/wait"); err != nil {
			t.Fatal(err)
		}
		s, err := c.Collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := collect(); s != nil {
		t.Fatalf("baseline: %+v, want nothing", s)
	}

	const fromA, fromB = 5, 3
	for i, got := range n.connect(t, a, fromA) {
		if got != "web" {
			t.Fatalf("connection %d from a: %s, want web", i, got)
		}
	}
	rules := ruleStatsOf(collect(), uid)
	if got := rules["allow-a"]; got.Sessions < fromA || got.Packets != got.Sessions || got.Bytes <= 0 {
		t.Errorf("after %d connections from a, allow-a counted %+v; want at least %d sessions, as many packets, some bytes", fromA, got, fromA)
	}
	if got := rules["drop-b"]; got != (statsv1alpha1.TrafficStats{}) {
		t.Errorf("drop-b saw no traffic but counted %+v", got)
	}
	t.Logf("after %d connections from a: %+v", fromA, rules)

	for i, got := range n.connect(t, b, fromB) {
		if got != "timeout" {
			t.Fatalf("connection %d from b: %s, want timeout", i, got)
		}
	}
	rules = ruleStatsOf(collect(), uid)
	if got := rules["drop-b"]; got.Sessions < fromB {
		t.Errorf("after %d connections from b, drop-b counted %+v; want at least %d sessions", fromB, got, fromB)
	}
	if got := rules["allow-a"]; got != (statsv1alpha1.TrafficStats{}) {
		t.Errorf("allow-a saw no new traffic but counted %+v", got)
	}
	t.Logf("after %d connections from b: %+v", fromB, rules)

	// Reinstall: the policy goes and comes back (its flows start from zero).
	n.set(t)
	n.expect(t, "without the policy b reaches web", map[*bridgetest.Pod]string{b: "web"})
	n.set(t, acnp())
	n.expect(t, "the policy is back", map[*bridgetest.Pod]string{b: "timeout"})
	collect() // the expect probes above, counted from zero
	const again = 2
	n.connect(t, a, again)
	if got := ruleStatsOf(collect(), uid)["allow-a"]; got.Sessions < again || got.Sessions > again+2 {
		t.Errorf("after the flows were reinstalled and %d connections from a, allow-a counted %+v; want %d (a retransmitted SYN or two at most)",
			again, got, again)
	}
}

// TestStatsCollectionCost (ANTREA_MEASURE=1) measures one collection on a
// real bridge holding 1,000 rules: the flow-stats request of their
// conj_id flows and the summary.
func TestStatsCollectionCost(t *testing.T) {
	if os.Getenv("ANTREA_MEASURE") == "" {
		t.Skip("set ANTREA_MEASURE=1 to measure")
	}
	n := newPolicyNode(t)
	const rules = 1000
	var ps []*cpv1beta2.NetworkPolicy
	for i := range rules / 10 {
		var rs []cpv1beta2.NetworkPolicyRule
		for j := range 10 {
			r := ingressFrom(allow, []string{"ag-a", "ag-b"}[j%2])
			r.Name = fmt.Sprintf("r%d", j)
			rs = append(rs, r)
		}
		p := antreaPolicy(fmt.Sprintf("p%03d", i), tierApplication, float64(i+1), "atg-web", rs...)
		p.SourceRef.UID = types.UID(p.Name)
		ps = append(ps, p)
	}
	n.set(t, ps...)
	waitFor(t, "1000 rules realized", func() bool { return len(n.ctl.RealizedRules()) == rules })
	c := stats.NewCollector("node-1", time.Minute, n.ctl, n.flows, nil)
	ctx := context.Background()
	const rounds = 20
	var total time.Duration
	for i := range rounds + 1 {
		start := time.Now()
		s, err := c.Collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			total += time.Since(start)
			if len(s.AntreaClusterNetworkPolicies) != rules/10 {
				t.Fatalf("summary holds %d policies, want %d", len(s.AntreaClusterNetworkPolicies), rules/10)
			}
		}
	}
	t.Logf("one collection of %d rules (%d policies) on a real bridge holding %d flows: %v (mean of %d)",
		rules, rules/10, len(n.br.DumpFlows(t)), total/rounds, rounds)
}
