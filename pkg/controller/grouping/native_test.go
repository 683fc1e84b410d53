package grouping

import (
	"slices"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func groupPodNames(i *Index, key string) []string {
	pods, _ := i.GroupPods(key)
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}

func TestServiceAccountGroupsHoldThePodsRunningAsIt(t *testing.T) {
	i := NewIndex()
	robot := newPod("x", "bot", map[string]string{"app": "a"}, "10.0.0.1", "n1")
	robot.Spec.ServiceAccountName = "robot"
	other := newPod("y", "bot", nil, "10.0.0.2", "n1")
	other.Spec.ServiceAccountName = "robot"
	i.AddPod(robot)
	i.AddPod(other)
	i.AddPod(newPod("x", "plain", nil, "10.0.0.3", "n1"))
	key := i.AddGroup(NewServiceAccountSelector("x", "robot"))
	if got, want := groupPodNames(i, key), []string{"x/bot"}; !slices.Equal(got, want) {
		t.Fatalf("members = %v, want %v", got, want)
	}
	var notified []string
	i.AddEventHandler(func(k string) { notified = append(notified, k) })
	late := newPod("x", "late", nil, "10.0.0.4", "n2")
	late.Spec.ServiceAccountName = "robot"
	i.AddPod(late)
	i.AddPod(newPod("x", "late-plain", nil, "10.0.0.5", "n2"))
	if got, want := groupPodNames(i, key), []string{"x/bot", "x/late"}; !slices.Equal(got, want) {
		t.Fatalf("members = %v, want %v", got, want)
	}
	if !slices.Equal(notified, []string{key}) {
		t.Errorf("notified %v, want only the group once, for the Pod running as robot", notified)
	}
	if key == mustSelector(t, "x", &metav1.LabelSelector{}, nil).Key() {
		t.Error("a ServiceAccount group shares its key with the all-Pods group of its Namespace")
	}
}

func TestNodeSelectorsAreKeyedButHoldNoPods(t *testing.T) {
	i := NewIndex()
	i.AddPod(newPod("x", "a", map[string]string{"role": "worker"}, "10.0.0.1", "n1"))
	s, err := NewNodeSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}})
	if err != nil {
		t.Fatal(err)
	}
	key := i.AddGroup(s)
	if key != "nodeSelector=role=worker" || !i.HasGroup(key) || len(groupPodNames(i, key)) != 0 {
		t.Fatalf("key %q registered %v with pods %v, want nodeSelector=role=worker registered without pods", key, i.HasGroup(key), groupPodNames(i, key))
	}
	i.DeleteGroup(key)
	if i.HasGroup(key) {
		t.Error("a deleted Node group is still registered")
	}
}

func TestInNamespaceRestrictsASelectorToOneNamespace(t *testing.T) {
	prod := labels.Set{"env": "prod", NamespaceNameLabel: "z"}
	tests := []struct {
		name string
		sel  *Selector
		ns   string
		want string // key, or "" for nil
	}{
		{"a cluster-wide selector becomes the same Pod selector in the Namespace",
			mustSelector(t, "", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}, &metav1.LabelSelector{}), "z", "namespace=z podSelector=app=a"},
		{"a Namespace selector that does not match gives nothing",
			mustSelector(t, "", nil, &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}), "z", ""},
		{"a selector of that Namespace stays as it is",
			mustSelector(t, "z", nil, nil), "z", "namespace=z podSelector=<all>"},
		{"a selector of another Namespace gives nothing",
			mustSelector(t, "x", nil, nil), "z", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.sel.InNamespace(tt.ns, prod)
			switch {
			case got == nil && tt.want != "":
				t.Fatalf("nil, want %q", tt.want)
			case got != nil && got.Key() != tt.want:
				t.Fatalf("%q, want %q", got.Key(), tt.want)
			}
		})
	}
}
