package grouping

import (
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"sort"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func newPod(ns, name string, lbls map[string]string, ip, node string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec:       v1.PodSpec{NodeName: node},
	}
	if ip != "" {
		p.Status.PodIP = ip
		p.Status.PodIPs = []v1.PodIP{{IP: ip}}
	}
	return p
}

func newNamespace(name string, lbls map[string]string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

func mustSelector(t testing.TB, ns string, pod, nsSel *metav1.LabelSelector) *Selector {
	t.Helper()
	s, err := NewSelector(ns, pod, nsSel)
	if err != nil {
		t.Fatalf("NewSelector: %v", err)
	}
	return s
}

func podNames(pods []*v1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}

func members(t testing.TB, idx *Index, key string) []string {
	t.Helper()
	pods, ok := idx.GroupPods(key)
	if !ok {
		t.Fatalf("group %q not registered", key)
	}
	return podNames(pods)
}

func sel(matchLabels map[string]string, exprs ...metav1.LabelSelectorRequirement) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: matchLabels, MatchExpressions: exprs}
}

func TestSelectorKeysAreEqualExactlyWhenSelectionsAreWrittenAlike(t *testing.T) {
	in := func(k string, vals ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: vals}
	}
	notIn := func(k string, vals ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: vals}
	}
	tests := []struct {
		name      string
		a, b      *Selector
		wantEqual bool
	}{
		{"a nil and an empty pod selector both select every pod",
			mustSelector(t, "ns1", nil, nil), mustSelector(t, "ns1", sel(nil), nil), true},
		{"match labels in a different order give one key",
			mustSelector(t, "ns1", sel(map[string]string{"a": "1", "b": "2"}), nil),
			mustSelector(t, "ns1", sel(map[string]string{"b": "2", "a": "1"}), nil), true},
		{"two expressions on one key in either order give one key",
			mustSelector(t, "ns1", sel(nil, in("a", "x", "y"), notIn("a", "z")), nil),
			mustSelector(t, "ns1", sel(nil, notIn("a", "z"), in("a", "y", "x")), nil), true},
		{"the same pod selector in two namespaces gives two keys",
			mustSelector(t, "ns1", sel(map[string]string{"a": "1"}), nil),
			mustSelector(t, "ns2", sel(map[string]string{"a": "1"}), nil), false},
		{"a namespace selector makes the policy namespace irrelevant",
			mustSelector(t, "ns1", nil, sel(map[string]string{"env": "prod"})),
			mustSelector(t, "ns2", nil, sel(map[string]string{"env": "prod"})), true},
		{"an empty namespace selector differs from the policy namespace alone",
			mustSelector(t, "ns1", nil, sel(nil)), mustSelector(t, "ns1", nil, nil), false},
		{"pod and namespace selectors with the same text are not confused",
			mustSelector(t, "", sel(map[string]string{"a": "1"}), sel(nil)),
			mustSelector(t, "", sel(nil), sel(map[string]string{"a": "1"})), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Key() == tt.b.Key(); got != tt.wantEqual {
				t.Errorf("keys %q and %q: equal=%v, want %v", tt.a.Key(), tt.b.Key(), got, tt.wantEqual)
			}
		})
	}
}

func TestNewSelectorRejectsAnInvalidSelector(t *testing.T) {
	bad := sel(nil, metav1.LabelSelectorRequirement{Key: "a", Operator: "Near"})
	if _, err := NewSelector("ns", bad, nil); err == nil {
		t.Error("pod selector with unknown operator accepted")
	}
	if _, err := NewSelector("ns", nil, bad); err == nil {
		t.Error("namespace selector with unknown operator accepted")
	}
}

func TestGroupsSelectThePodsKubernetesSemanticsSay(t *testing.T) {
	idx := NewIndex()
	idx.AddNamespace(newNamespace("prod", map[string]string{"env": "prod"}))
	idx.AddNamespace(newNamespace("dev", map[string]string{"env": "dev"}))
	idx.AddNamespace(newNamespace("other", nil))
	for _, p := range []*v1.Pod{
		newPod("prod", "web", map[string]string{"app": "web", "tier": "fe"}, "10.0.0.1", "n1"),
		newPod("prod", "db", map[string]string{"app": "db"}, "10.0.0.2", "n1"),
		newPod("dev", "web", map[string]string{"app": "web"}, "10.0.1.1", "n2"),
		newPod("dev", "plain", nil, "10.0.1.2", "n2"),
		newPod("other", "web", map[string]string{"app": "web"}, "10.0.2.1", "n3"),
	} {
		idx.AddPod(p)
	}
	tests := []struct {
		name string
		sel  *Selector
		want []string
	}{
		{"an empty pod selector selects every pod of its namespace",
			mustSelector(t, "prod", sel(nil), nil), []string{"prod/db", "prod/web"}},
		{"a pod selector alone stays in the policy namespace",
			mustSelector(t, "dev", sel(map[string]string{"app": "web"}), nil), []string{"dev/web"}},
		{"a namespace selector alone selects every pod of matching namespaces",
			mustSelector(t, "", nil, sel(map[string]string{"env": "dev"})), []string{"dev/plain", "dev/web"}},
		{"an empty namespace selector with a pod selector selects across all namespaces",
			mustSelector(t, "", sel(map[string]string{"app": "web"}), sel(nil)), []string{"dev/web", "other/web", "prod/web"}},
		{"both selectors must match",
			mustSelector(t, "", sel(map[string]string{"app": "web"}), sel(map[string]string{"env": "prod"})), []string{"prod/web"}},
		{"an exists expression selects pods carrying the key",
			mustSelector(t, "prod", sel(nil, metav1.LabelSelectorRequirement{Key: "tier", Operator: metav1.LabelSelectorOpExists}), nil), []string{"prod/web"}},
		{"a does-not-exist expression selects pods without the key",
			mustSelector(t, "dev", sel(nil, metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}), nil), []string{"dev/plain"}},
		{"a not-in namespace expression excludes namespaces",
			mustSelector(t, "", sel(map[string]string{"app": "web"}), sel(nil, metav1.LabelSelectorRequirement{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}})), []string{"dev/web", "other/web"}},
		{"the automatic name label selects a namespace without labels",
			mustSelector(t, "", nil, sel(map[string]string{NamespaceNameLabel: "other"})), []string{"other/web"}},
		{"a selector matching nothing selects nothing",
			mustSelector(t, "prod", sel(map[string]string{"app": "cache"}), nil), []string{}},
		{"a namespace nobody created has no pods",
			mustSelector(t, "ghost", sel(nil), nil), []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := idx.AddGroup(tt.sel)
			if got := members(t, idx, key); !slices.Equal(got, tt.want) {
				t.Errorf("members = %v, want %v", got, tt.want)
			}
		})
	}
}

// recorder collects the group keys the index notifies.
type recorder struct{ keys []string }

func (r *recorder) handle(key string) { r.keys = append(r.keys, key) }

func (r *recorder) take() []string {
	out := r.keys
	r.keys = nil
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out
}

func TestEventsNotifyExactlyTheGroupsWhoseMembersChange(t *testing.T) {
	type step struct {
		do           func(idx *Index)
		wantAffected []string // group names from the table below
	}
	// Groups every case starts with, by short name.
	groupSels := map[string]*Selector{
		"web":      mustSelector(t, "ns1", sel(map[string]string{"app": "web"}), nil),
		"db":       mustSelector(t, "ns1", sel(map[string]string{"app": "db"}), nil),
		"ns2-web":  mustSelector(t, "ns2", sel(map[string]string{"app": "web"}), nil),
		"prod-all": mustSelector(t, "", nil, sel(map[string]string{"env": "prod"})),
		"prod-web": mustSelector(t, "", sel(map[string]string{"app": "web"}), sel(map[string]string{"env": "prod"})),
	}
	web := map[string]string{"app": "web"}
	db := map[string]string{"app": "db"}
	tests := []struct {
		name        string
		steps       []step
		wantMembers map[string][]string
	}{
		{
			name: "a new pod notifies the groups that select it",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("ns1", "a", web, "10.0.0.1", "n1")) }, []string{"web"}},
			},
			wantMembers: map[string][]string{"web": {"ns1/a"}, "db": {}},
		},
		{
			name: "a label change moves a pod from one group to another and notifies both",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("ns1", "a", web, "10.0.0.1", "n1")) }, []string{"web"}},
				{func(i *Index) { i.AddPod(newPod("ns1", "a", db, "10.0.0.1", "n1")) }, []string{"db", "web"}},
			},
			wantMembers: map[string][]string{"web": {}, "db": {"ns1/a"}},
		},
		{
			name: "a label change that keeps the selection notifies nobody",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("ns1", "a", web, "10.0.0.1", "n1")) }, []string{"web"}},
				{func(i *Index) {
					i.AddPod(newPod("ns1", "a", map[string]string{"app": "web", "v": "2"}, "10.0.0.1", "n1"))
				}, []string{}},
			},
			wantMembers: map[string][]string{"web": {"ns1/a"}},
		},
		{
			name: "an IP change notifies the groups holding the pod",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("ns1", "a", web, "", "")) }, []string{"web"}},
				{func(i *Index) { i.AddPod(newPod("ns1", "a", web, "10.0.0.9", "n1")) }, []string{"web"}},
			},
			wantMembers: map[string][]string{"web": {"ns1/a"}},
		},
		{
			name: "a pod in another namespace does not touch groups of this one",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("ns2", "a", web, "10.0.2.1", "n1")) }, []string{"ns2-web"}},
			},
			wantMembers: map[string][]string{"web": {}, "ns2-web": {"ns2/a"}},
		},
		{
			name: "deleting a pod notifies the groups it left",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("ns1", "a", web, "10.0.0.1", "n1")) }, []string{"web"}},
				{func(i *Index) { i.DeletePod("ns1", "a") }, []string{"web"}},
				{func(i *Index) { i.DeletePod("ns1", "a") }, []string{}},
			},
			wantMembers: map[string][]string{"web": {}},
		},
		{
			name: "a namespace relabel moves its pods into cluster-scoped groups",
			steps: []step{
				{func(i *Index) { i.AddNamespace(newNamespace("ns2", nil)) }, []string{}},
				{func(i *Index) { i.AddPod(newPod("ns2", "a", web, "10.0.2.1", "n1")) }, []string{"ns2-web"}},
				{func(i *Index) { i.AddNamespace(newNamespace("ns2", map[string]string{"env": "prod"})) }, []string{"prod-all", "prod-web"}},
			},
			wantMembers: map[string][]string{"prod-all": {"ns2/a"}, "prod-web": {"ns2/a"}},
		},
		{
			name: "a namespace relabel out of a selection removes its pods",
			steps: []step{
				{func(i *Index) { i.AddNamespace(newNamespace("ns2", map[string]string{"env": "prod"})) }, []string{}},
				{func(i *Index) { i.AddPod(newPod("ns2", "a", db, "10.0.2.1", "n1")) }, []string{"prod-all"}},
				{func(i *Index) { i.AddNamespace(newNamespace("ns2", map[string]string{"env": "dev"})) }, []string{"prod-all"}},
			},
			wantMembers: map[string][]string{"prod-all": {}, "prod-web": {}},
		},
		{
			name: "a pod seen before its namespace joins cluster groups once the namespace labels arrive",
			steps: []step{
				{func(i *Index) { i.AddPod(newPod("ns3", "a", web, "10.0.3.1", "n1")) }, []string{}},
				{func(i *Index) { i.AddNamespace(newNamespace("ns3", map[string]string{"env": "prod"})) }, []string{"prod-all", "prod-web"}},
				{func(i *Index) { i.DeleteNamespace("ns3") }, []string{"prod-all", "prod-web"}},
			},
			wantMembers: map[string][]string{"prod-all": {}, "prod-web": {}},
		},
		{
			name: "a namespace relabel without pods notifies nobody",
			steps: []step{
				{func(i *Index) { i.AddNamespace(newNamespace("ns4", map[string]string{"env": "prod"})) }, []string{}},
			},
			wantMembers: map[string][]string{"prod-all": {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idx := NewIndex()
			rec := &recorder{}
			idx.AddEventHandler(rec.handle)
			names := map[string]string{}
			keys := map[string]string{}
			for name, s := range groupSels {
				key := idx.AddGroup(s)
				names[key] = name
				keys[name] = key
			}
			for n, st := range tt.steps {
				st.do(idx)
				var got []string
				for _, k := range rec.take() {
					got = append(got, names[k])
				}
				sort.Strings(got)
				if got == nil {
					got = []string{}
				}
				if !slices.Equal(got, st.wantAffected) {
					t.Errorf("step %d: affected groups %v, want %v", n, got, st.wantAffected)
				}
			}
			for name, want := range tt.wantMembers {
				if got := members(t, idx, keys[name]); !slices.Equal(got, want) {
					t.Errorf("group %s members = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestDeletingGroupsAndEverythingElseLeavesAnEmptyIndex(t *testing.T) {
	idx := NewIndex()
	k1 := idx.AddGroup(mustSelector(t, "ns1", sel(map[string]string{"app": "web"}), nil))
	k2 := idx.AddGroup(mustSelector(t, "", nil, sel(nil)))
	if again := idx.AddGroup(mustSelector(t, "ns1", sel(map[string]string{"app": "web"}), nil)); again != k1 {
		t.Fatalf("re-adding a selector gave key %q, want %q", again, k1)
	}
	idx.AddNamespace(newNamespace("ns1", nil))
	idx.AddPod(newPod("ns1", "a", map[string]string{"app": "web"}, "10.0.0.1", "n1"))
	if got := members(t, idx, k2); !slices.Equal(got, []string{"ns1/a"}) {
		t.Fatalf("cluster group members = %v", got)
	}
	idx.DeleteGroup(k1)
	idx.DeleteGroup(k2)
	idx.DeleteGroup("never-added")
	idx.DeletePod("ns1", "a")
	idx.DeleteNamespace("ns1")
	if idx.HasGroup(k1) || idx.HasGroup(k2) {
		t.Error("deleted group still registered")
	}
	if pods, nss, groups := idx.Counts(); pods+nss+groups != 0 {
		t.Errorf("index holds %d pods, %d namespaces, %d groups after deleting everything", pods, nss, groups)
	}
}

func TestSelectorIndexVisitsOnlySelectorsThatCouldMatch(t *testing.T) {
	x := newSelectorIndex[string]()
	add := func(name string, s string) {
		ls, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		x.add(name, ls)
	}
	add("app=web", "app=web")
	add("app in (web,api)", "app in (web,api)")
	add("app=db", "app=db")
	add("tier exists", "tier")
	add("all", "")
	add("app notin (db)", "app notin (db)")
	add("team=x,app=web", "team=x,app=web")
	tests := []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{"labels app=web visit the web selectors and the wildcards",
			map[string]string{"app": "web"}, []string{"all", "app in (web,api)", "app notin (db)", "app=web", "team=x,app=web"}},
		{"labels app=api visit only the in-selector and the wildcards",
			map[string]string{"app": "api"}, []string{"all", "app in (web,api)", "app notin (db)"}},
		{"no labels visit only the wildcards",
			nil, []string{"all", "app notin (db)"}},
		{"a tier label visits the exists selector",
			map[string]string{"tier": "fe"}, []string{"all", "app notin (db)", "tier exists"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			x.candidates(tt.labels, func(g string) { got = append(got, g) })
			sort.Strings(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("visited %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRandomEventsKeepMembersEqualToABruteForceEvaluation drives the index with
// random pod, namespace and group operations (label and ipBlock groups) and,
// after each, compares every group's members with a scan of all pods, and
// checks that each group whose members changed was notified.
func TestRandomEventsKeepMembersEqualToABruteForceEvaluation(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	values := []string{"a", "b", "c"}
	randLabels := func() map[string]string {
		m := map[string]string{}
		for _, k := range []string{"app", "tier", "env"} {
			if rng.Intn(3) > 0 {
				m[k] = values[rng.Intn(len(values))]
			}
		}
		return m
	}
	randSelector := func() *metav1.LabelSelector {
		s := &metav1.LabelSelector{}
		k := []string{"app", "tier", "env"}[rng.Intn(3)]
		switch rng.Intn(5) {
		case 0:
			s.MatchLabels = map[string]string{k: values[rng.Intn(3)]}
		case 1:
			s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}
		case 2:
			s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpExists}}
		case 3:
			s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}}}
		}
		return s
	}
	nsNames := []string{"n0", "n1", "n2", "n3"}
	idx := NewIndex()
	notified := map[string]bool{}
	idx.AddEventHandler(func(k string) { notified[k] = true })
	pods := map[string]*v1.Pod{}
	nsLbls := map[string]labels.Set{}
	sels := map[string]*Selector{}

	blocks := []*Selector{
		NewIPBlockSelector(netip.MustParsePrefix("10.0.0.0/8"), nil),
		NewIPBlockSelector(netip.MustParsePrefix("10.0.0.0/8"), []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}),
		NewIPBlockSelector(netip.MustParsePrefix("10.1.0.0/16"), []netip.Prefix{netip.MustParsePrefix("10.1.0.1/32")}),
		NewIPBlockSelector(netip.MustParsePrefix("10.2.0.2/32"), nil),
	}
	brute := func(s *Selector) []string {
		var out []string
		for _, p := range pods {
			if s.IPBlock != nil {
				if s.IPBlock.containsAny(podAddrs(p)) {
					out = append(out, p.Namespace+"/"+p.Name)
				}
				continue
			}
			nl, ok := nsLbls[p.Namespace]
			if !ok {
				nl = namespaceLabels(p.Namespace, nil)
			}
			if s.NamespaceSelector == nil && p.Namespace != s.Namespace ||
				s.NamespaceSelector != nil && !s.NamespaceSelector.Matches(nl) {
				continue
			}
			if s.PodSelector.Matches(labels.Set(p.Labels)) {
				out = append(out, p.Namespace+"/"+p.Name)
			}
		}
		sort.Strings(out)
		if out == nil {
			out = []string{}
		}
		return out
	}
	before := map[string][]string{}
	for step := 0; step < 3000; step++ {
		clear(notified)
		for k, s := range sels {
			before[k] = brute(s)
		}
		ns := nsNames[rng.Intn(len(nsNames))]
		switch op := rng.Intn(10); {
		case op < 4:
			name := fmt.Sprintf("p%d", rng.Intn(8))
			ip := fmt.Sprintf("10.%d.0.%d", rng.Intn(3), rng.Intn(3))
			if rng.Intn(8) == 0 {
				ip = ""
			}
			p := newPod(ns, name, randLabels(), ip, "n1")
			pods[ns+"/"+name] = p
			idx.AddPod(p)
		case op < 5:
			name := fmt.Sprintf("p%d", rng.Intn(8))
			delete(pods, ns+"/"+name)
			idx.DeletePod(ns, name)
		case op < 7:
			l := randLabels()
			nsLbls[ns] = namespaceLabels(ns, l)
			idx.AddNamespace(newNamespace(ns, l))
		case op < 8:
			delete(nsLbls, ns)
			idx.DeleteNamespace(ns)
		case op < 9:
			var s *Selector
			switch rng.Intn(3) {
			case 0:
				s = mustSelector(t, ns, randSelector(), nil)
			case 1:
				s = mustSelector(t, "", randSelector(), randSelector())
			default:
				s = blocks[rng.Intn(len(blocks))]
			}
			sels[idx.AddGroup(s)] = s
		default:
			for k := range sels {
				idx.DeleteGroup(k)
				delete(sels, k)
				break
			}
		}
		for k, s := range sels {
			want := brute(s)
			got := members(t, idx, k)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: group %s members %v, want %v", step, k, got, want)
			}
			if b, existed := before[k]; existed && !slices.Equal(b, want) && !notified[k] {
				t.Fatalf("step %d: group %s changed from %v to %v without a notification", step, k, b, want)
			}
		}
		clear(before)
	}
}

func TestMemberDataChangesOnlyWithWhatAGroupMemberIsBuiltFrom(t *testing.T) {
	base := func() *v1.Pod {
		p := newPod("ns", "p", map[string]string{"app": "a"}, "10.0.0.1", "n1")
		p.Status.Phase = v1.PodRunning
		p.Spec.Containers = []v1.Container{{Name: "c", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: v1.ProtocolTCP}}}}
		return p
	}
	tests := []struct {
		name   string
		change func(p *v1.Pod)
		want   bool
	}{
		{"labels, annotations and conditions do not count", func(p *v1.Pod) {
			p.Labels = map[string]string{"app": "b"}
			p.Annotations = map[string]string{"x": "y"}
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		}, false},
		{"a new IP counts", func(p *v1.Pod) { p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.2"}}; p.Status.PodIP = "10.0.0.2" }, true},
		{"a second IP counts", func(p *v1.Pod) { p.Status.PodIPs = append(p.Status.PodIPs, v1.PodIP{IP: "fd00::1"}) }, true},
		{"scheduling on a node counts", func(p *v1.Pod) { p.Spec.NodeName = "n2" }, true},
		{"termination counts", func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }, true},
		{"a renamed port counts", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].Name = "web" }, true},
		{"a port number counts", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 81 }, true},
		{"a port protocol counts", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = v1.ProtocolUDP }, true},
		{"an added container counts", func(p *v1.Pod) { p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d"}) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, cur := base(), base()
			tt.change(cur)
			if got := MemberDataChanged(old, cur); got != tt.want {
				t.Errorf("MemberDataChanged = %v, want %v", got, tt.want)
			}
		})
	}
}
