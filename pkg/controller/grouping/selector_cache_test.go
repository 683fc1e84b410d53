package grouping

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The parsed-selector cache must answer as LabelSelectorAsSelector does:
// equal selectors share one parse, different ones (also ones whose parts
// would concatenate alike) never do, and invalid ones keep their error.
func TestParseLabelSelectorAnswersAsLabelSelectorAsSelector(t *testing.T) {
	cases := []*metav1.LabelSelector{
		{},
		{MatchLabels: map[string]string{"a": "b"}},
		{MatchLabels: map[string]string{"a": "b", "c": "d"}},
		{MatchLabels: map[string]string{"ab": "", "c": "d"}},
		{MatchLabels: map[string]string{"a": "bc", "d": ""}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"b", "c"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b", "c"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}},
		{MatchLabels: map[string]string{"a": "b"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpDoesNotExist}}},
	}
	for round := 0; round < 2; round++ { // the second round answers from the cache
		for _, ls := range cases {
			want, _ := metav1.LabelSelectorAsSelector(ls)
			got, err := parseLabelSelector(ls)
			if err != nil || got.String() != want.String() {
				t.Errorf("round %d, %v: got %v, %v; want %v", round, ls, got, err, want)
			}
		}
	}
	seen := map[string]*metav1.LabelSelector{}
	for _, ls := range cases {
		k := labelSelectorKey(ls)
		if other, ok := seen[k]; ok {
			t.Errorf("%v and %v share the key %q", ls, other, k)
		}
		seen[k] = ls
	}
	bad := &metav1.LabelSelector{MatchLabels: map[string]string{"a": "not a value!"}}
	for round := 0; round < 2; round++ {
		if _, err := parseLabelSelector(bad); err == nil {
			t.Errorf("round %d: an invalid selector parsed", round)
		}
	}
	if sel, _ := parseLabelSelector(&metav1.LabelSelector{}); !sel.Matches(labels.Set{"x": "y"}) {
		t.Error("the empty selector must select everything")
	}
}
