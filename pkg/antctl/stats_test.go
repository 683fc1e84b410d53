package antctl

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	antreafake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

func statsClients(t *testing.T) *Clients {
	t.Helper()
	antrea := antreafake.NewSimpleClientset()
	created := metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	tr := antrea.Tracker()
	gv := statsv1alpha1.SchemeGroupVersion
	for _, o := range []struct {
		resource, ns string
		obj          any
	}{
		{"networkpolicystats", "demo", &statsv1alpha1.NetworkPolicyStats{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", CreationTimestamp: created},
			TrafficStats: statsv1alpha1.TrafficStats{Packets: 7, Bytes: 518, Sessions: 7}}},
		{"networkpolicystats", "other", &statsv1alpha1.NetworkPolicyStats{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "db", CreationTimestamp: created}}},
		{"antreaclusternetworkpolicystats", "", &statsv1alpha1.AntreaClusterNetworkPolicyStats{ObjectMeta: metav1.ObjectMeta{Name: "acnp", CreationTimestamp: created},
			TrafficStats: statsv1alpha1.TrafficStats{Packets: 9, Bytes: 666, Sessions: 9},
			RuleTrafficStats: []statsv1alpha1.RuleTrafficStats{
				{Name: "allow-web", TrafficStats: statsv1alpha1.TrafficStats{Packets: 9, Bytes: 666, Sessions: 9}}, {Name: "drop-rest"}}}},
	} {
		var err error
		switch obj := o.obj.(type) {
		case *statsv1alpha1.NetworkPolicyStats:
			err = tr.Create(gv.WithResource(o.resource), obj, o.ns)
		case *statsv1alpha1.AntreaClusterNetworkPolicyStats:
			err = tr.Create(gv.WithResource(o.resource), obj, o.ns)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &Clients{Kube: kubefake.NewClientset(), Antrea: antrea}
}

func TestGetNetworkPolicyStatsPrintsTheServedCounts(t *testing.T) {
	c := statsClients(t)
	r := runAntctlWith(t, c, "get", "networkpolicystats")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	want := [][]string{
		{"NAMESPACE", "NAME", "SESSIONS", "PACKETS", "BYTES", "CREATED AT"},
		{"demo", "web", "7", "7", "518", "2026-12-02T10:00:00Z"},
		{"other", "db", "0", "0", "0", "2026-12-02T10:00:00Z"},
	}
	if got := rows(r.out); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("without -n (every namespace): printed\n%s\nwant %q", r.out, want)
	}

	r = runAntctlWith(t, c, "get", "networkpolicystats", "-n", "demo", "-o", "json")
	var items []statsv1alpha1.NetworkPolicyStats
	if err := json.Unmarshal([]byte(r.out), &items); r.runErr != nil || err != nil {
		t.Fatalf("-o json: %v %v: %s", r.runErr, err, r.out)
	}
	if len(items) != 1 || items[0].Name != "web" || items[0].TrafficStats.Sessions != 7 || items[0].Kind != "NetworkPolicyStats" {
		t.Errorf("-n demo -o json: %+v, want web with 7 sessions and its kind", items)
	}

	r = runAntctlWith(t, c, "get", "acnps", "acnp")
	if r.runErr != nil || !strings.Contains(r.out, "allow-web=9,drop-rest=0") {
		t.Errorf("get acnps acnp printed %q (%v), want the rules' sessions", r.out, r.runErr)
	}
	r = runAntctlWith(t, c, "get", "networkpolicystats", "-n", "demo", "nope")
	if r.runErr == nil || !strings.Contains(r.runErr.Error(), `"nope" not found in namespace demo`) {
		t.Errorf("an unknown policy: %v, want one line naming it and its namespace", r.runErr)
	}
}
