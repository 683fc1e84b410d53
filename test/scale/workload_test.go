package scale

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

func TestWorkloadRefusesBadSizesNamingTheField(t *testing.T) {
	ok := Workload{Nodes: 10, PodsPerNode: 10, NamespaceSize: 20, ACNPs: 3}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for field, w := range map[string]Workload{
		"nodes":         {Nodes: 0, PodsPerNode: 10, NamespaceSize: 20},
		"podsPerNode":   {Nodes: 1, PodsPerNode: 251, NamespaceSize: 20},
		"namespaceSize": {Nodes: 1, PodsPerNode: 10, NamespaceSize: 1},
		"acnps":         {Nodes: 1, PodsPerNode: 10, NamespaceSize: 20, ACNPs: -1},
	} {
		if err := w.Validate(); err == nil || !strings.HasPrefix(err.Error(), field) {
			t.Errorf("%+v: %v, want an error naming %s", w, err, field)
		}
	}
}

func TestPodsArePlacedOnlyOnTheWorkloadsNodesTheSameWayForASeed(t *testing.T) {
	w := Workload{Nodes: 7, PodsPerNode: 3, NamespaceSize: 4, Seed: 3}
	a, b := w.PodsToCreate(), w.PodsToCreate()
	if len(a) != w.Pods() || w.Namespaces() != 6 {
		t.Fatalf("%d pods in %d namespaces, want %d in 6", len(a), w.Namespaces(), w.Pods())
	}
	names := sets.New[string]()
	for i := range a {
		if a[i].Node != b[i].Node {
			t.Fatalf("pod %d placed on %s then %s", i, a[i].Node, b[i].Node)
		}
		if a[i].Node < "sim-node-00000" || a[i].Node > "sim-node-00006" {
			t.Errorf("pod %s/%s on %s, outside the 7 nodes", a[i].Namespace, a[i].Name, a[i].Node)
		}
		names.Insert(a[i].Namespace + "/" + a[i].Name)
	}
	if names.Len() != len(a) {
		t.Errorf("%d pods but %d distinct names", len(a), names.Len())
	}
}

func TestDiffNamesMissingExtraAndWrongPolicies(t *testing.T) {
	want := map[string]Expected{
		"K8sNetworkPolicy/ns/a": {AppliedTo: sets.New("pod:ns/x"), Peers: sets.New("pod:ns/y")},
		"K8sNetworkPolicy/ns/b": {AppliedTo: sets.New("pod:ns/x"), Peers: sets.New[string]()},
	}
	got := map[string]Expected{
		"K8sNetworkPolicy/ns/a": {AppliedTo: sets.New("pod:ns/x"), Peers: sets.New("pod:ns/z")},
		"K8sNetworkPolicy/ns/c": {AppliedTo: sets.New("pod:ns/x"), Peers: sets.New[string]()},
	}
	d := strings.Join(Diff("n1", want, got), "\n")
	for _, s := range []string{"n1: policy K8sNetworkPolicy/ns/a peers: 1 extra [pod:ns/z], 1 missing [pod:ns/y]",
		"n1: policy K8sNetworkPolicy/ns/b missing", "n1: policy K8sNetworkPolicy/ns/c held but not in the span"} {
		if !strings.Contains(d, s) {
			t.Errorf("diff lacks %q:\n%s", s, d)
		}
	}
	if len(Diff("n1", want, want)) != 0 {
		t.Errorf("a state equal to its expectation differs")
	}
}

func TestPercentilesAreNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	p := percentiles(d)
	if p.P50 != 50 || p.P99 != 99 || p.Max != 100 || p.N != 100 {
		t.Errorf("percentiles of 1..100 ms = %+v, want p50 50, p99 99, max 100", p)
	}
	if one := percentiles([]time.Duration{7 * time.Millisecond}); one.P50 != 7 || one.P99 != 7 {
		t.Errorf("one sample: %+v", one)
	}
}
