package grouping

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkIndexLoadsNamespacesOfPodsAndGroups loads workload shape (a) of
// issue 5 scaled to 1,000 namespaces: per namespace a select-all group, two
// app groups and four pods. One op is the whole load.
func BenchmarkIndexLoadsNamespacesOfPodsAndGroups(b *testing.B) {
	const namespaces = 1000
	var pods []*v1.Pod
	var sels []*Selector
	for n := 0; n < namespaces; n++ {
		ns := fmt.Sprintf("ns-%d", n)
		sels = append(sels, mustSelector(b, ns, sel(nil), nil))
		for a := 1; a <= 2; a++ {
			app := map[string]string{"app": fmt.Sprintf("app-%d", a)}
			sels = append(sels, mustSelector(b, ns, sel(app), nil))
			for r := 0; r < 2; r++ {
				pods = append(pods, newPod(ns, fmt.Sprintf("pod-%d-%d", a, r), app, fmt.Sprintf("10.%d.%d.%d", n/256, n%256, a*2+r), "n1"))
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		idx := NewIndex()
		for _, s := range sels {
			idx.AddGroup(s)
		}
		for _, p := range pods {
			idx.AddPod(p)
		}
	}
}

// BenchmarkPodLabelChangeAmongManyGroups measures one pod relabel in a
// namespace holding 10,000 single-pod groups (shape (d)); the label index
// keeps it independent of the number of groups.
func BenchmarkPodLabelChangeAmongManyGroups(b *testing.B) {
	const n = 10000
	idx := NewIndex()
	for i := 0; i < n; i++ {
		idx.AddGroup(mustSelector(b, "ns", &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", i)}}, nil))
		idx.AddPod(newPod("ns", fmt.Sprintf("pod-%d", i), map[string]string{"app": fmt.Sprintf("app-%d", i)}, "10.0.0.1", "n1"))
	}
	a := newPod("ns", "pod-0", map[string]string{"app": "app-1"}, "10.0.0.1", "n1")
	c := newPod("ns", "pod-0", map[string]string{"app": "app-0"}, "10.0.0.1", "n1")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			idx.AddPod(a)
		} else {
			idx.AddPod(c)
		}
	}
}
