package bgp

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func policy(name string, age time.Duration, sel map[string]string) *crdv1alpha1.BGPPolicy {
	return &crdv1alpha1.BGPPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))},
		Spec:       crdv1alpha1.BGPPolicySpec{NodeSelector: metav1.LabelSelector{MatchLabels: sel}, LocalASN: 64512},
	}
}

func TestEffective(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"bgp": "enabled", "rack": "a"}}}
	bad := policy("bad-selector", 9*time.Hour, nil)
	bad.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "bgp", Operator: "Bogus"}}
	for _, tc := range []struct {
		name        string
		policies    []*crdv1alpha1.BGPPolicy
		want        string
		wantIgnored []string
	}{
		{name: "no policy selects the node: none in effect",
			policies: []*crdv1alpha1.BGPPolicy{policy("other", time.Hour, map[string]string{"bgp": "disabled"})}},
		{name: "the only one selecting it is in effect",
			policies: []*crdv1alpha1.BGPPolicy{policy("other", 2*time.Hour, map[string]string{"rack": "b"}), policy("mine", time.Hour, map[string]string{"bgp": "enabled"})},
			want:     "mine"},
		{name: "of several selecting it the oldest is in effect, the others ignored oldest first",
			policies: []*crdv1alpha1.BGPPolicy{policy("young", time.Minute, map[string]string{"bgp": "enabled"}),
				policy("old", 3*time.Hour, map[string]string{"rack": "a"}), policy("middle", time.Hour, nil)},
			want: "old", wantIgnored: []string{"middle", "young"}},
		{name: "the same age is broken by name so that every agent agrees",
			policies: []*crdv1alpha1.BGPPolicy{policy("b", time.Hour, nil), policy("a", time.Hour, nil)},
			want:     "a", wantIgnored: []string{"b"}},
		{name: "a selector that does not parse selects nothing",
			policies: []*crdv1alpha1.BGPPolicy{bad, policy("good", time.Hour, nil)},
			want:     "good"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eff, ignored := Effective(tc.policies, node)
			got := ""
			if eff != nil {
				got = eff.Name
			}
			if got != tc.want {
				t.Errorf("in effect: got %q, want %q", got, tc.want)
			}
			var gotIgnored []string
			for _, p := range ignored {
				gotIgnored = append(gotIgnored, p.Name)
			}
			if !slices.Equal(gotIgnored, tc.wantIgnored) {
				t.Errorf("ignored: got %v, want %v", gotIgnored, tc.wantIgnored)
			}
		})
	}
	if eff, _ := Effective([]*crdv1alpha1.BGPPolicy{policy("p", time.Hour, nil)}, nil); eff != nil {
		t.Errorf("a Node not (yet) in the cache has a policy in effect: %s", eff.Name)
	}
}
