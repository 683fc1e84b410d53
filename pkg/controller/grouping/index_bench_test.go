package grouping

import (
	"fmt"
	"net/netip"
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

// BenchmarkPodAddAmong100kPodsAndIPBlockGroups measures what the index does
// for one Pod add (and, to keep the index at 100,000 Pods, its delete: one op
// is both) with and without ipBlock groups: 100,000 Pods over 400 /24 node
// ranges, and then one ipBlock group per range, one per range with a /32
// except, one per /16 and 10.0.0.0/8 with an except. A Pod finds its blocks
// by one lookup per prefix length in use, so the cost must not grow with the
// number of Pods or blocks.
func BenchmarkPodAddAmong100kPodsAndIPBlockGroups(b *testing.B) {
	const pods, ranges = 100000, 400
	ip := func(n int) string { return fmt.Sprintf("10.%d.%d.%d", n/250/256, n/250%256, 1+n%250) }
	for _, withBlocks := range []bool{false, true} {
		name := "without ipBlock groups"
		if withBlocks {
			name = "with 1,002 ipBlock groups"
		}
		b.Run(name, func(b *testing.B) {
			idx := NewIndex()
			for n := 0; n < 100; n++ {
				idx.AddGroup(mustSelector(b, fmt.Sprintf("ns-%d", n), sel(map[string]string{"app": "web"}), nil))
			}
			if withBlocks {
				for r := 0; r < ranges; r++ {
					cidr := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", r/256, r%256))
					idx.AddGroup(NewIPBlockSelector(cidr, nil))
					idx.AddGroup(NewIPBlockSelector(cidr, []netip.Prefix{netip.PrefixFrom(cidr.Addr().Next(), 32)}))
				}
				idx.AddGroup(NewIPBlockSelector(netip.MustParsePrefix("10.0.0.0/16"), nil))
				idx.AddGroup(NewIPBlockSelector(netip.MustParsePrefix("10.0.0.0/8"), []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}))
			}
			for n := 0; n < pods; n++ {
				idx.AddPod(newPod(fmt.Sprintf("ns-%d", n%100), fmt.Sprintf("pod-%d", n), map[string]string{"app": "web"}, ip(n), "n1"))
			}
			p := newPod("ns-0", "new", map[string]string{"app": "web"}, "10.0.7.251", "n1")
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				idx.AddPod(p)
				idx.DeletePod(p.Namespace, p.Name)
			}
		})
	}
}

// BenchmarkIPBlockGroupAddAmong100kPods measures registering an ipBlock
// group (and deleting it: one op is both) among 100,000 Pods over 400 /24
// node ranges, another block being registered already: the index visits the
// Pods of the /24 buckets the block overlaps, not every Pod.
func BenchmarkIPBlockGroupAddAmong100kPods(b *testing.B) {
	idx := NewIndex()
	idx.AddGroup(NewIPBlockSelector(netip.MustParsePrefix("192.168.0.0/16"), nil))
	for n := 0; n < 100000; n++ {
		ip := fmt.Sprintf("10.%d.%d.%d", n/250/256, n/250%256, 1+n%250)
		idx.AddPod(newPod(fmt.Sprintf("ns-%d", n%100), fmt.Sprintf("pod-%d", n), nil, ip, "n1"))
	}
	for _, cidr := range []string{"10.0.7.9/32", "10.0.7.0/24", "10.0.0.0/20", "10.0.0.0/16"} {
		b.Run(cidr, func(b *testing.B) {
			s := NewIPBlockSelector(netip.MustParsePrefix(cidr), nil)
			b.ReportAllocs()
			for b.Loop() {
				idx.DeleteGroup(idx.AddGroup(s))
			}
		})
	}
}
