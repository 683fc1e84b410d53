package query_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"antrea.io/antrea/pkg/antctl/query"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	antreafake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

func TestStatsReadsEachKind(t *testing.T) {
	// The tracker is told the resources: it would guess "...statses" from the kinds.
	antrea := antreafake.NewSimpleClientset()
	gv := statsv1alpha1.SchemeGroupVersion
	for _, o := range []struct {
		resource, ns string
		obj          runtime.Object
	}{
		{"antreanetworkpolicystats", "demo", &statsv1alpha1.AntreaNetworkPolicyStats{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "annp"},
			TrafficStats:     statsv1alpha1.TrafficStats{Sessions: 3},
			RuleTrafficStats: []statsv1alpha1.RuleTrafficStats{{Name: "r1", TrafficStats: statsv1alpha1.TrafficStats{Sessions: 3}}}}},
		{"antreanetworkpolicystats", "other", &statsv1alpha1.AntreaNetworkPolicyStats{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "annp2"}}},
		{"antreaclusternetworkpolicystats", "", &statsv1alpha1.AntreaClusterNetworkPolicyStats{ObjectMeta: metav1.ObjectMeta{Name: "acnp"}}},
	} {
		if err := antrea.Tracker().Create(gv.WithResource(o.resource), o.obj, o.ns); err != nil {
			t.Fatal(err)
		}
	}
	c := &query.Clients{Antrea: antrea}
	ctx := context.Background()
	got, err := query.Stats(ctx, c, query.AntreaNetworkPolicyStats, "demo", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("the Antrea NetworkPolicies of demo: %+v, want annp", got)
	}
	if got[0].Name != "annp" || got[0].Total.Sessions != 3 || len(got[0].Rules) != 1 || got[0].Rules[0].Name != "r1" {
		t.Errorf("the Antrea NetworkPolicies of demo: %+v", got)
	}
	if o, ok := got[0].Object.(*statsv1alpha1.AntreaNetworkPolicyStats); !ok || o.Kind != string(query.AntreaNetworkPolicyStats) {
		t.Errorf("object %#v, want the served object with its kind", got[0].Object)
	}
	if all, err := query.Stats(ctx, c, query.AntreaNetworkPolicyStats, "", ""); err != nil || len(all) != 2 {
		t.Errorf("every namespace: %d (%v), want 2", len(all), err)
	}
	// A cluster-scoped kind has no namespace to look in.
	if cl, err := query.Stats(ctx, c, query.AntreaClusterNetworkPolicyStats, "demo", "acnp"); err != nil || len(cl) != 1 {
		t.Errorf("acnp in any namespace: %+v (%v)", cl, err)
	}
	_, err = query.Stats(ctx, c, query.AntreaNetworkPolicyStats, "demo", "nope")
	if err == nil || !strings.HasPrefix(err.Error(), `antreanetworkpolicystats "nope" not found in namespace demo`) {
		t.Errorf("an unknown policy: %v", err)
	}
}
