package stats

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"antrea.io/antrea/pkg/apis/controlplane"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

func policyMeta(ns, name, uid string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}
}

func report(node string, kind Kind, uid string, total statsv1alpha1.TrafficStats, rules ...statsv1alpha1.RuleTrafficStats) *controlplane.NodeStatsSummary {
	s := &controlplane.NodeStatsSummary{}
	s.Name = node
	ps := controlplane.NetworkPolicyStats{NetworkPolicy: controlplane.NetworkPolicyReference{Type: kind, UID: types.UID(uid)},
		TrafficStats: total, RuleTrafficStats: rules}
	switch kind {
	case KindK8s:
		s.NetworkPolicies = append(s.NetworkPolicies, ps)
	case KindANNP:
		s.AntreaNetworkPolicies = append(s.AntreaNetworkPolicies, ps)
	case KindACNP:
		s.AntreaClusterNetworkPolicies = append(s.AntreaClusterNetworkPolicies, ps)
	}
	return s
}

func ts(p, b, s int64) statsv1alpha1.TrafficStats {
	return statsv1alpha1.TrafficStats{Packets: p, Bytes: b, Sessions: s}
}

func TestAggregatorSumsReportsOverNodesPerPolicyAndRule(t *testing.T) {
	a := NewAggregator()
	a.AddPolicy(KindACNP, policyMeta("", "acnp", "u1"))
	a.AddPolicy(KindANNP, policyMeta("ns", "annp", "u2"))
	a.AddPolicy(KindK8s, policyMeta("ns", "np", "u3"))
	if got := a.ListAntreaClusterNetworkPolicyStats(); len(got) != 1 || got[0].TrafficStats != (statsv1alpha1.TrafficStats{}) {
		t.Fatalf("a known policy not yet reported: got %+v, want it at zero", got)
	}
	a.Collect(report("n1", KindACNP, "u1", ts(3, 300, 3),
		statsv1alpha1.RuleTrafficStats{Name: "allow", TrafficStats: ts(3, 300, 3)}, statsv1alpha1.RuleTrafficStats{Name: "drop"}))
	a.Collect(report("n2", KindACNP, "u1", ts(5, 500, 4),
		statsv1alpha1.RuleTrafficStats{Name: "allow", TrafficStats: ts(1, 100, 1)}, statsv1alpha1.RuleTrafficStats{Name: "drop", TrafficStats: ts(4, 400, 3)}))
	a.Collect(report("n1", KindACNP, "u1", ts(2, 200, 2), statsv1alpha1.RuleTrafficStats{Name: "allow", TrafficStats: ts(2, 200, 2)}))
	a.Collect(report("n2", KindK8s, "u3", ts(7, 700, 7)))

	got, ok := a.GetAntreaClusterNetworkPolicyStats("acnp")
	if !ok {
		t.Fatal("acnp has no stats")
	}
	if want := ts(10, 1000, 9); got.TrafficStats != want {
		t.Errorf("acnp total: got %+v, want %+v (3+5+2 packets)", got.TrafficStats, want)
	}
	wantRules := []statsv1alpha1.RuleTrafficStats{{Name: "allow", TrafficStats: ts(6, 600, 6)}, {Name: "drop", TrafficStats: ts(4, 400, 3)}}
	if len(got.RuleTrafficStats) != 2 || got.RuleTrafficStats[0] != wantRules[0] || got.RuleTrafficStats[1] != wantRules[1] {
		t.Errorf("acnp rules: got %+v, want %+v", got.RuleTrafficStats, wantRules)
	}
	if got.UID != "u1" || got.Name != "acnp" {
		t.Errorf("acnp stats named %s/%s, want the policy's name and UID", got.Name, got.UID)
	}
	np, ok := a.GetNetworkPolicyStats("ns", "np")
	if !ok || np.TrafficStats != ts(7, 700, 7) {
		t.Errorf("np: got %+v, %v; want 7 packets", np, ok)
	}
	if _, ok := a.GetNetworkPolicyStats("other", "np"); ok {
		t.Error("np found in another namespace")
	}
	if annp := a.ListAntreaNetworkPolicyStats("ns"); len(annp) != 1 || annp[0].TrafficStats != (statsv1alpha1.TrafficStats{}) {
		t.Errorf("annp with no report: got %+v, want it at zero", annp)
	}
	if annp := a.ListAntreaNetworkPolicyStats("other"); len(annp) != 0 {
		t.Errorf("namespace other has no ANNP: got %+v", annp)
	}
}

func TestAggregatorForgetsADeletedPolicyAndDropsReportsOnUnknownOnes(t *testing.T) {
	a := NewAggregator()
	a.AddPolicy(KindACNP, policyMeta("", "acnp", "u1"))
	a.Collect(report("n1", KindACNP, "u1", ts(3, 300, 3)))
	a.DeletePolicy(KindACNP, "u1")
	if _, ok := a.GetAntreaClusterNetworkPolicyStats("acnp"); ok {
		t.Fatal("a deleted policy still has stats")
	}
	// A late report of the deleted policy, then the policy made again
	// under the same name (a new UID): it starts from zero.
	a.Collect(report("n2", KindACNP, "u1", ts(4, 400, 4)))
	a.AddPolicy(KindACNP, policyMeta("", "acnp", "u9"))
	got, ok := a.GetAntreaClusterNetworkPolicyStats("acnp")
	if !ok || got.TrafficStats != (statsv1alpha1.TrafficStats{}) || got.UID != "u9" {
		t.Errorf("re-created policy: got %+v, %v; want the new UID at zero", got, ok)
	}
	// Adding a known policy again (an informer resync) keeps its sums.
	a.Collect(report("n1", KindACNP, "u9", ts(1, 100, 1)))
	a.AddPolicy(KindACNP, policyMeta("", "acnp", "u9"))
	if got, _ := a.GetAntreaClusterNetworkPolicyStats("acnp"); got.TrafficStats != ts(1, 100, 1) {
		t.Errorf("after a second add: got %+v, want the 1 packet kept", got.TrafficStats)
	}
}
