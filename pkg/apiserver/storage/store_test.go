package storage

import (
	"context"
	"fmt"
	"math/rand"
	"net"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/types"
)

func pod(name, ip string) *controlplane.GroupMember {
	return &controlplane.GroupMember{
		Pod: &controlplane.PodReference{Namespace: "ns", Name: name},
		IPs: []controlplane.IPAddress{controlplane.IPAddress(net.ParseIP(ip).To4())},
	}
}

func addressGroup(name string, nodes []string, members ...*controlplane.GroupMember) *types.AddressGroup {
	return &types.AddressGroup{
		SpanMeta:     types.SpanMeta{NodeNames: sets.New(nodes...)},
		UID:          k8stypes.UID("uid-" + name),
		Name:         name,
		GroupMembers: controlplane.NewGroupMemberSet(members...),
	}
}

// appliedToGroup builds a group from node -> members; its span is those nodes.
func appliedToGroup(name string, byNode map[string][]*controlplane.GroupMember) *types.AppliedToGroup {
	g := &types.AppliedToGroup{SpanMeta: types.SpanMeta{NodeNames: sets.New[string]()}, Name: name, UID: k8stypes.UID("uid-" + name),
		Members: types.NewNodeMembers(byNode)}
	for node := range byNode {
		g.NodeNames.Insert(node)
	}
	return g
}

func policy(name string, generation int64, nodes []string, groups ...string) *types.NetworkPolicy {
	return &types.NetworkPolicy{
		SpanMeta:        types.SpanMeta{NodeNames: sets.New(nodes...)},
		UID:             k8stypes.UID("uid-" + name),
		Name:            name,
		Generation:      generation,
		AppliedToGroups: groups,
		SourceRef:       &controlplane.NetworkPolicyReference{Type: controlplane.K8sNetworkPolicy, Namespace: "ns", Name: name},
		Rules: []controlplane.NetworkPolicyRule{{Direction: controlplane.DirectionIn,
			From: controlplane.NetworkPolicyPeer{AddressGroups: []string{"peers-of-" + name}}}},
	}
}

func onNode(node string) *Selectors {
	return &Selectors{Field: fields.OneTermEqualSelector(NodeNameField, node)}
}

func mustWatch(t *testing.T, s Interface, opts WatchOptions) watch.Interface {
	t.Helper()
	w, err := s.Watch(context.Background(), opts)
	if err != nil {
		t.Fatalf("Watch(%+v): %v", opts, err)
	}
	t.Cleanup(w.Stop)
	return w
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("watch closed, want an event")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatalf("no event, want one")
	}
	return watch.Event{}
}

// marker is a change every watcher sees: when it arrives next, nothing was
// sent for the changes made before it. This proves absence without waiting.
func expectNothingBefore(t *testing.T, s Interface, w watch.Interface, marker any) {
	t.Helper()
	if err := s.Create(marker); err != nil {
		t.Fatalf("Create(marker): %v", err)
	}
	ev := next(t, w)
	name := ev.Object.(metaObject).GetName()
	if ev.Type != watch.Added || name != "marker" {
		t.Fatalf("got %s %s (%#v), want nothing before the marker", ev.Type, name, ev.Object)
	}
}

type metaObject interface{ GetName() string }

func memberNames(members []controlplane.GroupMember) []string {
	var r []string
	for _, m := range members {
		r = append(r, m.Pod.Name)
	}
	return r
}

func TestAddressGroupWatchersSeeOnlyTheirSpanAndPatches(t *testing.T) {
	s := NewAddressGroupStore()
	if err := s.Create(addressGroup("g", []string{"n1"}, pod("a", "10.0.0.1"))); err != nil {
		t.Fatal(err)
	}
	w1 := mustWatch(t, s, WatchOptions{Selectors: onNode("n1")})
	w2 := mustWatch(t, s, WatchOptions{Selectors: onNode("n2")})
	wAll := mustWatch(t, s, WatchOptions{})

	for _, w := range []watch.Interface{w1, wAll} {
		ev := next(t, w)
		if ev.Type != watch.Added || len(ev.Object.(*controlplane.AddressGroup).GroupMembers) != 1 {
			t.Fatalf("initial event = %s %#v, want ADDED with one member", ev.Type, ev.Object)
		}
	}

	// n2 joins the span; members change at the same time.
	if err := s.Update(addressGroup("g", []string{"n1", "n2"}, pod("b", "10.0.0.2"))); err != nil {
		t.Fatal(err)
	}
	ev := next(t, w1)
	patch, ok := ev.Object.(*controlplane.AddressGroupPatch)
	if ev.Type != watch.Modified || !ok {
		t.Fatalf("node already in span got %s %T, want MODIFIED AddressGroupPatch", ev.Type, ev.Object)
	}
	if got := memberNames(patch.AddedGroupMembers); len(got) != 1 || got[0] != "b" {
		t.Errorf("patch added %v, want [b]", got)
	}
	if got := memberNames(patch.RemovedGroupMembers); len(got) != 1 || got[0] != "a" {
		t.Errorf("patch removed %v, want [a]", got)
	}
	ev = next(t, w2)
	if g, ok := ev.Object.(*controlplane.AddressGroup); ev.Type != watch.Added || !ok || len(g.GroupMembers) != 1 || g.GroupMembers[0].Pod.Name != "b" {
		t.Fatalf("node entering span got %s %#v, want ADDED with member b", ev.Type, ev.Object)
	}
	if ev := next(t, wAll); ev.Type != watch.Modified {
		t.Fatalf("cluster-wide watcher got %s, want MODIFIED", ev.Type)
	}

	// A span-only change: nothing for n1, DELETED for n2 which leaves.
	if err := s.Update(addressGroup("g", []string{"n1"}, pod("b", "10.0.0.2"))); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w2); ev.Type != watch.Deleted {
		t.Fatalf("node leaving span got %s, want DELETED", ev.Type)
	}
	expectNothingBefore(t, s, w1, addressGroup("marker", []string{"n1"}))

	if err := s.Delete("g"); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w1); ev.Type != watch.Deleted || ev.Object.(*controlplane.AddressGroup).Name != "g" {
		t.Fatalf("got %s %#v, want DELETED g", ev.Type, ev.Object)
	}
}

func TestAppliedToGroupWatcherSeesOnlyMembersOnItsNode(t *testing.T) {
	s := NewAppliedToGroupStore()
	a, b, c := pod("a", "10.0.1.1"), pod("b", "10.0.2.1"), pod("c", "10.0.1.2")
	if err := s.Create(appliedToGroup("g", map[string][]*controlplane.GroupMember{"n1": {a}, "n2": {b}})); err != nil {
		t.Fatal(err)
	}
	w1 := mustWatch(t, s, WatchOptions{Selectors: onNode("n1")})
	wAll := mustWatch(t, s, WatchOptions{})

	if ev := next(t, w1); memberNames(ev.Object.(*controlplane.AppliedToGroup).GroupMembers)[0] != "a" ||
		len(ev.Object.(*controlplane.AppliedToGroup).GroupMembers) != 1 {
		t.Fatalf("n1's initial group = %#v, want only member a", ev.Object)
	}
	if ev := next(t, wAll); len(ev.Object.(*controlplane.AppliedToGroup).GroupMembers) != 2 {
		t.Fatalf("cluster-wide initial group = %#v, want both members", ev.Object)
	}

	// Members on n2 change: nothing for n1.
	if err := s.Update(appliedToGroup("g", map[string][]*controlplane.GroupMember{"n1": {a}, "n2": {b, pod("d", "10.0.2.2")}})); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, wAll); ev.Type != watch.Modified || memberNames(ev.Object.(*controlplane.AppliedToGroupPatch).AddedGroupMembers)[0] != "d" {
		t.Fatalf("cluster-wide watcher got %s %#v, want patch adding d", ev.Type, ev.Object)
	}
	expectNothingBefore(t, s, w1, appliedToGroup("marker", map[string][]*controlplane.GroupMember{"n1": {a}}))

	// Members on n1 change: a patch with only n1's change.
	if err := s.Update(appliedToGroup("g", map[string][]*controlplane.GroupMember{"n1": {c}, "n2": {b}})); err != nil {
		t.Fatal(err)
	}
	ev := next(t, w1)
	patch, ok := ev.Object.(*controlplane.AppliedToGroupPatch)
	if ev.Type != watch.Modified || !ok {
		t.Fatalf("got %s %T, want MODIFIED AppliedToGroupPatch", ev.Type, ev.Object)
	}
	if got := memberNames(patch.AddedGroupMembers); len(got) != 1 || got[0] != "c" {
		t.Errorf("n1 patch added %v, want [c]", got)
	}
	if got := memberNames(patch.RemovedGroupMembers); len(got) != 1 || got[0] != "a" {
		t.Errorf("n1 patch removed %v, want [a] (d on n2 must not appear)", got)
	}
}

func TestNetworkPolicyWatchersGetFullObjectsOnlyWhenContentChanges(t *testing.T) {
	s := NewNetworkPolicyStore()
	if err := s.Create(policy("p", 1, []string{"n1"}, "atg")); err != nil {
		t.Fatal(err)
	}
	w1 := mustWatch(t, s, WatchOptions{Selectors: onNode("n1")})
	w2 := mustWatch(t, s, WatchOptions{Selectors: onNode("n2")})
	if ev := next(t, w1); ev.Type != watch.Added || ev.Object.(*controlplane.NetworkPolicy).Generation != 1 {
		t.Fatalf("got %s %#v, want ADDED generation 1", ev.Type, ev.Object)
	}

	tests := []struct {
		name   string
		update *types.NetworkPolicy
		want1  watch.EventType // "" = nothing
		want2  watch.EventType
	}{
		{"a node entering the span gets the policy and others get nothing", policy("p", 1, []string{"n1", "n2"}, "atg"), "", watch.Added},
		{"a new generation reaches every node in the span", policy("p", 2, []string{"n1", "n2"}, "atg", "atg2"), watch.Modified, watch.Modified},
		{"a node leaving the span gets DELETED", policy("p", 2, []string{"n1"}, "atg", "atg2"), "", watch.Deleted},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Update(tt.update); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				w    watch.Interface
				want watch.EventType
			}{{w1, tt.want1}, {w2, tt.want2}} {
				if c.want == "" {
					node := c.w.(*watcher).node
					expectNothingBeforeNamed(t, s, c.w, policy("marker"+strconv.Itoa(i)+node, 1, []string{node}))
					continue
				}
				if ev := next(t, c.w); ev.Type != c.want {
					t.Fatalf("watcher %s got %s, want %s", c.w.(*watcher).node, ev.Type, c.want)
				}
			}
		})
	}
	if got, err := s.GetByIndex(AppliedToGroupIndex, "atg2"); err != nil || len(got) != 1 {
		t.Errorf("GetByIndex(appliedToGroup, atg2) = %v, %v; want the policy", got, err)
	}
	if got, err := s.GetByIndex(AddressGroupIndex, "peers-of-p"); err != nil || len(got) != 1 {
		t.Errorf("GetByIndex(addressGroup, peers-of-p) = %v, %v; want the policy", got, err)
	}
}

// expectNothingBeforeNamed is expectNothingBefore for a marker spanning only
// the watcher's node, removed again so that the next case starts clean.
func expectNothingBeforeNamed(t *testing.T, s Interface, w watch.Interface, marker *types.NetworkPolicy) {
	t.Helper()
	if err := s.Create(marker); err != nil {
		t.Fatalf("Create(marker): %v", err)
	}
	ev := next(t, w)
	if name := ev.Object.(metaObject).GetName(); ev.Type != watch.Added || name != marker.Name {
		t.Fatalf("got %s %s, want nothing before the marker", ev.Type, name)
	}
	// The marker must not disturb the other cases: remove it, and consume the
	// DELETED it causes on this watcher.
	if err := s.Delete(marker.Name); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Type != watch.Deleted {
		t.Fatalf("got %s, want the marker's DELETED", ev.Type)
	}
}

func rvOf(t *testing.T, obj runtime.Object) uint64 {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", m.GetResourceVersion(), err)
	}
	return rv
}

func TestBookmarksCarryTheVersionAWatcherHasReached(t *testing.T) {
	s := NewAddressGroupStore(Options{BookmarkInterval: 5 * time.Millisecond})
	if err := s.Create(addressGroup("g", []string{"n1"}, pod("a", "10.0.0.1"))); err != nil {
		t.Fatal(err)
	}
	w := mustWatch(t, s, WatchOptions{Selectors: onNode("n1"), AllowBookmarks: true})
	if ev := next(t, w); ev.Type != watch.Added {
		t.Fatalf("got %s, want ADDED", ev.Type)
	}
	if ev := next(t, w); ev.Type != watch.Bookmark || rvOf(t, ev.Object) != s.ResourceVersion() {
		t.Fatalf("got %s, want a BOOKMARK at version %d right after the initial state", ev.Type, s.ResourceVersion())
	}
	// A change n1 does not see still moves its bookmarks forward.
	if err := s.Create(addressGroup("other", []string{"n2"})); err != nil {
		t.Fatal(err)
	}
	want := s.ResourceVersion()
	for i := 0; i < 1000; i++ {
		ev := next(t, w)
		if ev.Type != watch.Bookmark {
			t.Fatalf("got %s, want only bookmarks", ev.Type)
		}
		if rvOf(t, ev.Object) == want {
			return
		}
	}
	t.Fatalf("no bookmark reached version %d", want)
}

func TestWatchResumesFromAResourceVersion(t *testing.T) {
	old := NewAddressGroupStore()
	if err := old.Create(addressGroup("g", nil)); err != nil {
		t.Fatal(err)
	}
	previous := old.ResourceVersion()
	s := NewAddressGroupStore(Options{HistorySize: 3})
	if err := s.Create(addressGroup("g", []string{"n1"}, pod("a", "10.0.0.1"))); err != nil {
		t.Fatal(err)
	}
	objs, listRV := s.ListObjects(onNode("n1"))
	if len(objs) != 1 {
		t.Fatalf("listed %d objects, want 1", len(objs))
	}
	if err := s.Update(addressGroup("g", []string{"n1"}, pod("a", "10.0.0.1"), pod("b", "10.0.0.2"))); err != nil {
		t.Fatal(err)
	}
	w := mustWatch(t, s, WatchOptions{Selectors: onNode("n1"), ResourceVersion: strconv.FormatUint(listRV, 10)})
	ev := next(t, w)
	if p, ok := ev.Object.(*controlplane.AddressGroupPatch); ev.Type != watch.Modified || !ok || memberNames(p.AddedGroupMembers)[0] != "b" {
		t.Fatalf("resumed watch got %s %#v, want the patch adding b", ev.Type, ev.Object)
	}

	for i := 0; i < 3; i++ {
		if err := s.Create(addressGroup("filler"+strconv.Itoa(i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		rv   uint64
	}{
		{"a version older than the held history is gone", listRV},
		{"a version newer than the store is gone", s.ResourceVersion() + 10},
		{"a version of a previous store (controller process) is gone", previous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Watch(context.Background(), WatchOptions{ResourceVersion: strconv.FormatUint(tc.rv, 10)})
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				t.Fatalf("Watch from %d: err = %v, want 410 Gone", tc.rv, err)
			}
		})
	}
}

func TestAWatcherThatFallsBehindIsClosed(t *testing.T) {
	s := NewAddressGroupStore(Options{WatcherBuffer: 1})
	w := mustWatch(t, s, WatchOptions{})
	for i := 0; i < 5; i++ {
		if err := s.Create(addressGroup("g"+strconv.Itoa(i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.GetWatchersNum(); n != 0 {
		t.Errorf("GetWatchersNum() = %d, want 0 after overflow", n)
	}
	for i := 0; i < 10; i++ {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatal("result channel still open")
		}
	}
	t.Fatal("result channel delivered more events than were buffered")
}

func TestStoreRejectsWrongWrites(t *testing.T) {
	s := NewAddressGroupStore()
	if err := s.Create(addressGroup("g", nil)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		write func() error
		check func(error) bool
	}{
		{"creating an existing name fails", func() error { return s.Create(addressGroup("g", nil)) }, apierrors.IsAlreadyExists},
		{"updating a missing name fails", func() error { return s.Update(addressGroup("x", nil)) }, apierrors.IsNotFound},
		{"deleting a missing name fails", func() error { return s.Delete("x") }, apierrors.IsNotFound},
		{"an object of another resource is refused", func() error { return s.Create(policy("p", 1, nil)) }, func(err error) bool { return err != nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.write(); !tt.check(err) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestAppliedToGroupViewsAndPatchesAreThoseOfPerNodeSets: the store serves
// a group as if each Node held the set of its members (by MemberKey). The
// expectations are computed here by brute force from that definition, not
// from the store's list merge: a Node's view is its set sorted by key, the
// cluster-wide view the union of every Node's set; an update patches each
// Node whose set changed with the set's differences, and cluster-wide
// watchers with the union's (a member that only moved between Nodes is no
// change there); no Node changed, no patch. Every pair of a few groups picked
// by hand, then random updates.
func TestAppliedToGroupViewsAndPatchesAreThoseOfPerNodeSets(t *testing.T) {
	type member = *controlplane.GroupMember
	type byNode = map[string][]member
	type set = map[string]member
	nodes := []string{"n1", "n2", "n3", "n4"}

	setsOf := func(g byNode) map[string]set {
		out := map[string]set{}
		for node, ms := range g {
			for _, m := range ms {
				if out[node] == nil {
					out[node] = set{}
				}
				out[node][controlplane.MemberKey(m)] = m
			}
		}
		return out
	}
	union := func(sets map[string]set) set {
		out := set{}
		for _, s := range sets {
			for k, m := range s {
				out[k] = m
			}
		}
		return out
	}
	minus := func(x, y set) set {
		out := set{}
		for k, m := range x {
			if _, ok := y[k]; !ok {
				out[k] = m
			}
		}
		return out
	}
	sorted := func(s set) []controlplane.GroupMember {
		keys := make([]string, 0, len(s))
		for k := range s {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := []controlplane.GroupMember{}
		for _, k := range keys {
			out = append(out, *s[k])
		}
		return out
	}
	objMeta := func(rv string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "g", UID: "uid-g", ResourceVersion: rv}
	}
	wantView := func(g byNode, node string) runtime.Object {
		on := setsOf(g)[node]
		if node == "" {
			on = union(setsOf(g))
		}
		return &controlplane.AppliedToGroup{ObjectMeta: objMeta("1"), GroupMembers: sorted(on)}
	}
	wantPatches := func(prev, cur byNode) any {
		was, is := setsOf(prev), setsOf(cur)
		out := appliedToGroupChange{}
		diff := func(node string, was, is set) {
			added, removed := minus(is, was), minus(was, is)
			if len(added) > 0 || len(removed) > 0 {
				out[node] = &controlplane.AppliedToGroupPatch{ObjectMeta: objMeta("2"),
					AddedGroupMembers: sorted(added), RemovedGroupMembers: sorted(removed)}
			}
		}
		for _, node := range nodes {
			diff(node, was[node], is[node])
		}
		diff("", union(was), union(is))
		if len(out) == 0 {
			return nil
		}
		return out
	}

	keys := func(ms []controlplane.GroupMember) []string {
		out := []string{}
		for i := range ms {
			out = append(out, controlplane.MemberKey(&ms[i]))
		}
		return out
	}
	show := func(x any) string {
		switch x := x.(type) {
		case byNode:
			out := map[string][]string{}
			for node, ms := range x {
				for _, m := range ms {
					out[node] = append(out[node], controlplane.MemberKey(m))
				}
			}
			return fmt.Sprint(out)
		case appliedToGroupChange:
			out := map[string]string{}
			for node, pt := range x {
				out[node] = fmt.Sprintf("+%v -%v", keys(pt.AddedGroupMembers), keys(pt.RemovedGroupMembers))
			}
			return fmt.Sprint(out)
		}
		return fmt.Sprint(x)
	}
	r := appliedToGroupResource{}
	check := func(name string, prev, cur byNode) {
		t.Helper()
		for _, node := range append([]string{""}, nodes...) {
			if got, want := r.view(appliedToGroup("g", prev), node, 1), wantView(prev, node); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: view of %s on %q: %v, want %v", name, show(prev), node, got, want)
			}
		}
		if got, want := r.prepare(appliedToGroup("g", prev), appliedToGroup("g", cur), 2), wantPatches(prev, cur); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s -> %s: patches %s, want %s", name, show(prev), show(cur), show(got), show(want))
		}
	}

	a, a2, b, c, d := pod("a", "10.0.1.1"), pod("a", "10.0.1.9"), pod("b", "10.0.2.1"), pod("c", "10.0.1.2"), pod("d", "10.0.3.1")
	svc := &controlplane.GroupMember{Service: &controlplane.ServiceReference{Namespace: "ns", Name: "s"}}
	node1 := &controlplane.GroupMember{Node: &controlplane.NodeReference{Name: "n1"}, IPs: []controlplane.IPAddress{controlplane.IPAddress(net.ParseIP("192.168.0.1").To4())}}
	groups := []byNode{
		{},
		{"n1": {a}},
		{"n1": {a, c}, "n2": {b}},
		{"n1": {c}, "n2": {b, a}},            // a moved to n2
		{"n1": {a2, c}, "n2": {b}},           // a's IP changed
		{"n3": {d}, "n2": {b}},               // n1 emptied, n3 new
		{"n1": {a, c}, "n2": {b, d}},         // several Nodes change
		{"n1": {a}, "n2": {a}, "n3": {a}},    // one member on every Node
		{"n1": {svc, node1}, "n2": {svc, b}}, // a Service's and a Node's members
		{"n1": {c, a, c}, "n2": {b, b}},      // a member given twice
	}
	for i, prev := range groups {
		for j, cur := range groups {
			check(fmt.Sprintf("groups %d -> %d", i, j), prev, cur)
		}
	}

	// Random updates over a pool where some members share a Pod: each
	// (Node, member) pair flips with probability 1/6 (few changes), or the
	// new group is drawn anew (many).
	pool := []member{a, a2, b, c, d, svc, node1}
	for i := 0; i < 6; i++ {
		pool = append(pool, pod(fmt.Sprintf("e%d", i), fmt.Sprintf("10.0.4.%d", i)))
	}
	rng := rand.New(rand.NewSource(1))
	random := func() byNode {
		g := byNode{}
		for _, node := range nodes {
			for _, m := range pool {
				if rng.Intn(3) == 0 {
					g[node] = append(g[node], m)
				}
			}
		}
		return g
	}
	for i := 0; i < 400; i++ {
		prev, cur := random(), byNode{}
		if i%4 == 3 {
			cur = random()
		} else {
			for _, node := range nodes {
				in := setsOf(prev)[node]
				for _, m := range pool {
					if _, ok := in[controlplane.MemberKey(m)]; ok != (rng.Intn(6) == 0) {
						cur[node] = append(cur[node], m)
					}
				}
				rng.Shuffle(len(cur[node]), func(x, y int) { cur[node][x], cur[node][y] = cur[node][y], cur[node][x] })
			}
		}
		check(fmt.Sprintf("random update %d", i), prev, cur)
	}

	g := appliedToGroup("g", groups[2])
	if got := r.prepare(g, g, 2); got != nil {
		t.Errorf("a group against itself: %v, want no change", got)
	}
}

func TestListAndGetFilterByNode(t *testing.T) {
	s := NewAppliedToGroupStore()
	for _, g := range []*types.AppliedToGroup{
		appliedToGroup("g1", map[string][]*controlplane.GroupMember{"n1": {pod("a", "10.0.1.1")}, "n2": {pod("b", "10.0.2.1")}}),
		appliedToGroup("g2", map[string][]*controlplane.GroupMember{"n2": {pod("c", "10.0.2.2")}}),
	} {
		if err := s.Create(g); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		sel       *Selectors
		wantNames []string
		wantSizes []int
	}{
		{"n1 lists only g1 with its own member", onNode("n1"), []string{"g1"}, []int{1}},
		{"n3 lists nothing", onNode("n3"), nil, nil},
		{"without nodeName every group with every member is listed", &Selectors{}, []string{"g1", "g2"}, []int{2, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, _ := s.ListObjects(tt.sel)
			got := map[string]int{}
			for _, o := range objs {
				g := o.(*controlplane.AppliedToGroup)
				got[g.Name] = len(g.GroupMembers)
			}
			if len(got) != len(tt.wantNames) {
				t.Fatalf("listed %v, want %v", got, tt.wantNames)
			}
			for i, n := range tt.wantNames {
				if got[n] != tt.wantSizes[i] {
					t.Errorf("%s has %d members, want %d", n, got[n], tt.wantSizes[i])
				}
			}
		})
	}
	if _, ok := s.GetObject("g2", onNode("n1")); ok {
		t.Error("GetObject(g2) for n1 found it, want not found: g2 has no member on n1")
	}
}

func TestWatchListEndsTheInitialEventsWithAnAnnotatedBookmark(t *testing.T) {
	s := NewNetworkPolicyStore()
	if err := s.Create(policy("p", 1, []string{"n1"})); err != nil {
		t.Fatal(err)
	}
	// A resourceVersion is ignored by the watch-list: it always starts from the current state.
	w := mustWatch(t, s, WatchOptions{Selectors: onNode("n1"), AllowBookmarks: true, SendInitialEvents: true, ResourceVersion: "12345"})
	if ev := next(t, w); ev.Type != watch.Added {
		t.Fatalf("got %s, want ADDED", ev.Type)
	}
	ev := next(t, w)
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != watch.Bookmark || m.GetAnnotations()["k8s.io/initial-events-end"] != "true" {
		t.Fatalf("got %s with annotations %v, want a BOOKMARK annotated k8s.io/initial-events-end=true", ev.Type, m.GetAnnotations())
	}
	if rvOf(t, ev.Object) != s.ResourceVersion() {
		t.Errorf("bookmark at version %d, want %d", rvOf(t, ev.Object), s.ResourceVersion())
	}
}

// The initial events of a watch are queued for the HTTP handler without
// waiting for it to take each one: the handler flushes the response only
// when nothing is queued, so with one event at a time every event was a
// write of its own.
func TestAWatchQueuesItsInitialStateForTheHandler(t *testing.T) {
	s := NewNetworkPolicyStore()
	for i := 0; i < 40; i++ {
		if err := s.Create(policy(fmt.Sprintf("p%d", i), 1, []string{"n1"})); err != nil {
			t.Fatal(err)
		}
	}
	w := mustWatch(t, s, WatchOptions{Selectors: onNode("n1"), AllowBookmarks: true, SendInitialEvents: true})
	// 40 ADDED and the bookmark ending them, all queued before any is read.
	deadline := time.Now().Add(10 * time.Second)
	for len(w.ResultChan()) < 41 {
		if time.Now().After(deadline) {
			t.Fatalf("%d events queued, want the 40 ADDED and the bookmark before any is read", len(w.ResultChan()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 40; i++ {
		if ev := next(t, w); ev.Type != watch.Added {
			t.Fatalf("event %d is %s, want ADDED", i, ev.Type)
		}
	}
	if ev := next(t, w); ev.Type != watch.Bookmark {
		t.Fatalf("event 41 is %s, want the BOOKMARK", ev.Type)
	}
}

func TestResumingReplaysDeletionsButListsAgainForNewObjects(t *testing.T) {
	s := NewAddressGroupStore()
	for _, name := range []string{"kept", "gone"} {
		if err := s.Create(addressGroup(name, []string{"n1"}, pod("a", "10.0.0.1"))); err != nil {
			t.Fatal(err)
		}
	}
	rv := strconv.FormatUint(s.ResourceVersion(), 10)
	if err := s.Delete("gone"); err != nil {
		t.Fatal(err)
	}
	w := mustWatch(t, s, WatchOptions{Selectors: onNode("n1"), ResourceVersion: rv})
	ev := next(t, w)
	if ev.Type != watch.Deleted || ev.Object.(metaObject).GetName() != "gone" {
		t.Fatalf("got %s %#v, want DELETED gone", ev.Type, ev.Object)
	}

	tests := []struct {
		name   string
		node   string
		change func() error
	}{
		{"a new object in the window", "n1", func() error { return s.Create(addressGroup("new", []string{"n1"})) }},
		{"an object entering the node's span in the window", "n2", func() error {
			return s.Update(addressGroup("kept", []string{"n1", "n2"}, pod("a", "10.0.0.1")))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" makes the watcher of that node list again", func(t *testing.T) {
			from := s.ResourceVersion()
			if err := tt.change(); err != nil {
				t.Fatal(err)
			}
			_, err := s.Watch(context.Background(), WatchOptions{Selectors: onNode(tt.node), ResourceVersion: strconv.FormatUint(from, 10)})
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				t.Fatalf("err = %v, want 410 Gone", err)
			}
			// A node the change does not bring anything to resumes fine.
			w, err := s.Watch(context.Background(), WatchOptions{Selectors: onNode("n3"), ResourceVersion: strconv.FormatUint(from, 10)})
			if err != nil {
				t.Fatalf("watcher of an unconcerned node: %v", err)
			}
			w.Stop()
		})
	}
}

// A Node's list and a watch from scratch read the span index: after random
// creates, span changes and deletes, each Node sees exactly the objects
// whose span holds it (recomputed here from the test's own record), and a
// by-name selector still sees one object only where it spans.
func TestANodesListFollowsEverySpanChange(t *testing.T) {
	s := NewAppliedToGroupStore()
	rng := rand.New(rand.NewSource(1))
	nodes := []string{"n0", "n1", "n2", "n3", "n4"}
	want := map[string]sets.Set[string]{} // group -> span
	for step := 0; step < 400; step++ {
		name := fmt.Sprintf("g%d", rng.Intn(30))
		span := sets.New[string]()
		for _, n := range nodes {
			if rng.Intn(3) == 0 {
				span.Insert(n)
			}
		}
		g := &types.AppliedToGroup{Name: name, SpanMeta: types.SpanMeta{NodeNames: span}}
		_, exists := want[name]
		switch {
		case !exists:
			if err := s.Create(g); err != nil {
				t.Fatal(err)
			}
			want[name] = span
		case rng.Intn(4) == 0:
			if err := s.Delete(name); err != nil {
				t.Fatal(err)
			}
			delete(want, name)
		default:
			if rng.Intn(3) == 0 {
				// Unchanged: the same set, as the controller hands it.
				g.NodeNames, span = want[name], want[name]
			}
			if err := s.Update(g); err != nil {
				t.Fatal(err)
			}
			want[name] = span
		}
	}
	for _, n := range append(nodes, "elsewhere") {
		expected := sets.New[string]()
		for g, span := range want {
			if span.Has(n) {
				expected.Insert(g)
			}
		}
		objs, _ := s.ListObjects(onNode(n))
		got := sets.New[string]()
		for _, o := range objs {
			got.Insert(o.(*controlplane.AppliedToGroup).Name)
		}
		if !got.Equal(expected) || len(objs) != expected.Len() {
			t.Errorf("%s lists %v, want %v", n, sets.List(got), sets.List(expected))
		}
		w := mustWatch(t, s, WatchOptions{Selectors: onNode(n)})
		initial := sets.New[string]()
		for range expected.Len() {
			ev := <-w.ResultChan()
			initial.Insert(ev.Object.(*controlplane.AppliedToGroup).Name)
		}
		w.Stop()
		if !initial.Equal(expected) {
			t.Errorf("%s's watch starts with %v, want %v", n, sets.List(initial), sets.List(expected))
		}
		for g := range want {
			sel := onNode(n)
			sel.Key = g
			objs, _ := s.ListObjects(sel)
			if (len(objs) == 1) != expected.Has(g) || len(objs) > 1 {
				t.Errorf("%s lists %d objects named %s, want it only if in its span (%v)", n, len(objs), g, expected.Has(g))
			}
		}
	}
}
