// Package grouping indexes Pods and Namespaces by their labels so that the
// NetworkPolicy computation can register groups by selector, ask which Pods
// a group selects, and learn — on every Pod or Namespace event — exactly which
// groups the event affects, without scanning every group.
//
// A group is identified by the normalized string form of its selector
// (namespace + podSelector + namespaceSelector, or an ipBlock), so two policy
// rules that select the same peers share one group.
package grouping

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// NamespaceNameLabel is the label the API server puts on every Namespace
// (since Kubernetes 1.22). The index adds it itself so that selectors using
// it behave the same whether or not the Namespace object carries it yet.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// Selector selects Pods either in one Namespace (NamespaceSelector nil) or in
// every Namespace whose labels match NamespaceSelector (Namespace empty), or,
// built by NewIPBlockSelector, by address rather than by label.
type Selector struct {
	// Namespace is the only Namespace searched when NamespaceSelector is nil.
	Namespace string
	// PodSelector selects Pods by label; nil exactly when IPBlock is set.
	PodSelector labels.Selector
	// NamespaceSelector selects Namespaces by label; nil means "only Namespace".
	NamespaceSelector labels.Selector
	// IPBlock, when set, selects the Pods with an address in the block, in
	// every Namespace; the label fields are then unset.
	IPBlock *IPBlock

	key string
}

// NewSelector builds a Selector with Kubernetes NetworkPolicy peer semantics:
// a nil podSelector selects every Pod, a nil namespaceSelector restricts the
// selection to namespace, and a non-nil namespaceSelector makes the selection
// cluster-wide (namespace is then ignored).
func NewSelector(namespace string, podSelector, namespaceSelector *metav1.LabelSelector) (*Selector, error) {
	s := &Selector{PodSelector: labels.Everything()}
	if podSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(podSelector)
		if err != nil {
			return nil, fmt.Errorf("invalid podSelector %v: %w", podSelector, err)
		}
		s.PodSelector = sel
	}
	if namespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(namespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("invalid namespaceSelector %v: %w", namespaceSelector, err)
		}
		s.NamespaceSelector = sel
	} else {
		s.Namespace = namespace
	}
	s.key = normalize(s)
	return s, nil
}

// Key is the normalized string form of the selector: equal for selectors that
// are written the same way up to the order of their requirements.
func (s *Selector) Key() string {
	if s.key == "" {
		s.key = normalize(s)
	}
	return s.key
}

// String returns Key, so a Selector prints usefully in logs.
func (s *Selector) String() string { return s.Key() }

// ClusterScoped tells whether the label selector spans Namespaces; it is
// false for an ipBlock selector, which is filed apart from label selectors.
func (s *Selector) ClusterScoped() bool { return s.NamespaceSelector != nil }

func normalize(s *Selector) string {
	if s.IPBlock != nil {
		return "ipBlock=" + s.IPBlock.String()
	}
	var b strings.Builder
	if s.NamespaceSelector == nil {
		b.WriteString("namespace=")
		b.WriteString(s.Namespace)
	} else {
		b.WriteString("namespaceSelector=")
		b.WriteString(selectorString(s.NamespaceSelector))
	}
	b.WriteString(" podSelector=")
	b.WriteString(selectorString(s.PodSelector))
	return b.String()
}

// selectorString sorts the requirements' string forms: labels.Selector sorts
// by key only, so two requirements on one key could otherwise print in either
// order and split one group into two.
func selectorString(sel labels.Selector) string {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return "<nothing>"
	}
	if len(reqs) == 0 {
		return "<all>"
	}
	parts := make([]string, len(reqs))
	for i := range reqs {
		parts[i] = reqs[i].String()
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
