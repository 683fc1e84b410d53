package stats

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/apis/controlplane"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// mreport is a Node's report of its groups: group -> "ns/name" members.
func mreport(node string, groups map[string][]string) *controlplane.NodeStatsSummary {
	s := &controlplane.NodeStatsSummary{}
	s.Name = node
	for g, pods := range groups {
		info := controlplane.MulticastGroupInfo{Group: g}
		for _, p := range pods {
			ns, name, _ := strings.Cut(p, "/")
			info.Pods = append(info.Pods, controlplane.PodReference{Namespace: ns, Name: name})
		}
		s.Multicast = append(s.Multicast, info)
	}
	return s
}

// served flattens the served groups to group -> "ns/name" in order.
func served(gs []statsv1alpha1.MulticastGroup) map[string][]string {
	out := map[string][]string{}
	for _, g := range gs {
		if g.Name != g.Group {
			out["name "+g.Name+" != group "+g.Group] = nil
		}
		for _, p := range g.Pods {
			out[g.Group] = append(out[g.Group], p.Namespace+"/"+p.Name)
		}
	}
	return out
}

func TestMulticastGroupsMergeTheNodesLatestReports(t *testing.T) {
	type step struct {
		at      time.Duration // since the start
		report  *controlplane.NodeStatsSummary
		delNode string
	}
	for _, tc := range []struct {
		name  string
		steps []step
		at    time.Duration // when the list is read
		want  map[string][]string
	}{{
		name: "a group's pods come from every node, sorted",
		steps: []step{
			{report: mreport("n1", map[string][]string{"225.1.2.3": {"b/y", "a/x"}})},
			{report: mreport("n2", map[string][]string{"225.1.2.3": {"a/w"}, "239.0.0.1": {"c/z"}})},
		},
		want: map[string][]string{"225.1.2.3": {"a/w", "a/x", "b/y"}, "239.0.0.1": {"c/z"}},
	}, {
		name: "a node's report replaces its previous one",
		steps: []step{
			{report: mreport("n1", map[string][]string{"225.1.2.3": {"a/x"}, "239.0.0.1": {"a/x"}})},
			{report: mreport("n2", map[string][]string{"225.1.2.3": {"a/w"}})},
			{at: time.Second, report: mreport("n1", map[string][]string{"225.1.2.3": {"a/y"}})},
		},
		want: map[string][]string{"225.1.2.3": {"a/w", "a/y"}},
	}, {
		name: "a report without groups removes the node's members",
		steps: []step{
			{report: mreport("n1", map[string][]string{"225.1.2.3": {"a/x"}})},
			{report: mreport("n1", nil)},
		},
		want: map[string][]string{},
	}, {
		name: "a deleted node drops out",
		steps: []step{
			{report: mreport("n1", map[string][]string{"225.1.2.3": {"a/x"}})},
			{report: mreport("n2", map[string][]string{"225.1.2.3": {"a/w"}})},
			{delNode: "n2"},
		},
		want: map[string][]string{"225.1.2.3": {"a/x"}},
	}, {
		name: "a node silent for longer than staleAfter drops out, one that reported since stays",
		steps: []step{
			{report: mreport("n1", map[string][]string{"225.1.2.3": {"a/x"}})},
			{report: mreport("n2", map[string][]string{"225.1.2.3": {"a/w"}})},
			{at: 50 * time.Second, report: mreport("n2", map[string][]string{"225.1.2.3": {"a/w"}})},
		},
		at:   61 * time.Second,
		want: map[string][]string{"225.1.2.3": {"a/w"}},
	}, {
		name: "entries that are no multicast address are dropped, the others kept",
		steps: []step{
			{report: mreport("n1", map[string][]string{"10.0.0.1": {"a/x"}, "not-an-ip": {"a/x"}, "225.1.2.3": {"a/x"}})},
		},
		want: map[string][]string{"225.1.2.3": {"a/x"}},
	}, {
		name: "a pod reported twice for a group is listed once",
		steps: []step{
			{report: mreport("n1", map[string][]string{"225.1.2.3": {"a/x", "a/x"}})},
		},
		want: map[string][]string{"225.1.2.3": {"a/x"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			now := start
			m := NewMulticast(time.Minute)
			m.now = func() time.Time { return now }
			for _, s := range tc.steps {
				now = start.Add(s.at)
				if s.report != nil {
					m.Collect(s.report)
				}
				if s.delNode != "" {
					m.DeleteNode(s.delNode)
				}
			}
			now = start.Add(tc.at)
			if got := served(m.ListMulticastGroups()); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("groups = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMulticastGroupGetFindsAGroupByItsAddress(t *testing.T) {
	a := NewAggregator()
	a.Collect(mreport("n1", map[string][]string{"225.1.2.3": {"a/x"}}))
	g, ok := a.GetMulticastGroup("225.1.2.3")
	if !ok || g.Group != "225.1.2.3" || len(g.Pods) != 1 || g.Pods[0] != (statsv1alpha1.PodReference{Namespace: "a", Name: "x"}) {
		t.Errorf("GetMulticastGroup(225.1.2.3) = %+v, %v; want a/x", g, ok)
	}
	if g, ok := a.GetMulticastGroup("225.9.9.9"); ok {
		t.Errorf("GetMulticastGroup(225.9.9.9) = %+v, want not found", g)
	}
}
