package storage

import (
	"testing"

	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/types"
)

// egressGroup builds an EgressGroup from node -> members; its span is those nodes.
func egressGroup(name string, byNode map[string][]*controlplane.GroupMember) *types.EgressGroup {
	g := &types.EgressGroup{SpanMeta: types.SpanMeta{NodeNames: sets.New[string]()}, Name: name, UID: k8stypes.UID("uid-" + name),
		Members: types.NewNodeMembers(byNode)}
	for node := range byNode {
		g.NodeNames.Insert(node)
	}
	return g
}

// TestEgressGroupWatchersSeeTheirNodesMembersAndEveryoneSeesAll: a Node's
// watcher gets the group when a member comes to its Node, only its Node's
// members and their patches, and DELETED when the last one leaves; a
// watcher without a Node sees every member and the whole group's patches.
func TestEgressGroupWatchersSeeTheirNodesMembersAndEveryoneSeesAll(t *testing.T) {
	s := NewEgressGroupStore()
	a, b, c := pod("a", "10.0.1.1"), pod("b", "10.0.2.1"), pod("c", "10.0.3.1")
	if err := s.Create(egressGroup("egress-prod-web", map[string][]*controlplane.GroupMember{"n1": {a}, "n2": {b}})); err != nil {
		t.Fatal(err)
	}
	w3 := mustWatch(t, s, WatchOptions{Selectors: onNode("n3")})
	w1 := mustWatch(t, s, WatchOptions{Selectors: onNode("n1")})
	wAll := mustWatch(t, s, WatchOptions{})
	if ev := next(t, w1); ev.Type != watch.Added || len(ev.Object.(*controlplane.EgressGroup).GroupMembers) != 1 ||
		memberNames(ev.Object.(*controlplane.EgressGroup).GroupMembers)[0] != "a" {
		t.Fatalf("n1's initial group = %s %#v, want only member a", ev.Type, ev.Object)
	}
	if ev := next(t, wAll); len(ev.Object.(*controlplane.EgressGroup).GroupMembers) != 2 {
		t.Fatalf("the cluster-wide initial group = %#v, want both members", ev.Object)
	}

	// c comes to n3: n3 gets the group with c alone, n1 nothing, everyone a patch.
	if err := s.Update(egressGroup("egress-prod-web", map[string][]*controlplane.GroupMember{"n1": {a}, "n2": {b}, "n3": {c}})); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w3); ev.Type != watch.Added || len(ev.Object.(*controlplane.EgressGroup).GroupMembers) != 1 ||
		memberNames(ev.Object.(*controlplane.EgressGroup).GroupMembers)[0] != "c" {
		t.Fatalf("n3 got %s %#v, want ADDED with c alone", ev.Type, ev.Object)
	}
	if ev := next(t, wAll); ev.Type != watch.Modified || memberNames(ev.Object.(*controlplane.EgressGroupPatch).AddedGroupMembers)[0] != "c" {
		t.Fatalf("the cluster-wide watcher got %s %#v, want a patch adding c", ev.Type, ev.Object)
	}
	expectNothingBefore(t, s, w1, egressGroup("marker", map[string][]*controlplane.GroupMember{"n1": {a}}))

	// a leaves n1: n1's group is gone from its view.
	if err := s.Update(egressGroup("egress-prod-web", map[string][]*controlplane.GroupMember{"n2": {b}, "n3": {c}})); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w1); ev.Type != watch.Deleted {
		t.Fatalf("n1 got %s %#v, want DELETED", ev.Type, ev.Object)
	}
	next(t, wAll) // the marker
	ev := next(t, wAll)
	if p, ok := ev.Object.(*controlplane.EgressGroupPatch); !ok || len(p.RemovedGroupMembers) != 1 || p.RemovedGroupMembers[0].Pod.Name != "a" {
		t.Fatalf("the cluster-wide watcher got %s %#v, want a patch removing a", ev.Type, ev.Object)
	}
	objs, _ := s.ListObjects(onNode("n2"))
	if len(objs) != 1 || len(objs[0].(*controlplane.EgressGroup).GroupMembers) != 1 {
		t.Errorf("n2 lists %#v, want the group with b", objs)
	}
}
