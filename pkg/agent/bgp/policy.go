package bgp

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

// Effective chooses, of policies, the one in effect on node: of those whose
// nodeSelector selects it, the oldest (upstream's rule; the name breaks a
// tie so every agent agrees). ignored are the other ones that select it,
// oldest first. A policy whose selector does not parse selects nothing.
func Effective(policies []*crdv1alpha1.BGPPolicy, node *corev1.Node) (effective *crdv1alpha1.BGPPolicy, ignored []*crdv1alpha1.BGPPolicy) {
	if node == nil {
		return nil, nil
	}
	var selecting []*crdv1alpha1.BGPPolicy
	for _, p := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector)
		if err != nil || !sel.Matches(labels.Set(node.Labels)) {
			continue
		}
		selecting = append(selecting, p)
	}
	if len(selecting) == 0 {
		return nil, nil
	}
	slices.SortFunc(selecting, func(a, b *crdv1alpha1.BGPPolicy) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return selecting[0], selecting[1:]
}

// names lists the policies' names for logs and Events.
func names(ps []*crdv1alpha1.BGPPolicy) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return fmt.Sprint(out)
}
