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
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

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
	// ServiceAccount, with Namespace, selects the Pods of Namespace that run
	// as this ServiceAccount (PodSelector is then Everything).
	ServiceAccount string
	// NodeSelector, when set, selects Nodes rather than Pods; the index
	// holds no such group (the computation watches Nodes itself), and the
	// other fields are unset.
	NodeSelector labels.Selector
	// Service, with Namespace, selects that Service itself (a policy
	// applied to a NodePort Service); like a Node group, the index holds
	// no such group and the other fields are unset.
	Service string

	key string
}

// NewServiceSelector selects the Service namespace/name itself.
func NewServiceSelector(namespace, name string) *Selector {
	s := &Selector{Namespace: namespace, Service: name}
	s.key = normalize(s)
	return s
}

// External tells whether the selector's members are computed by the caller
// rather than held by the index: Node and Service selectors.
func (s *Selector) External() bool { return s.NodeSelector != nil || s.Service != "" }

// NewServiceAccountSelector selects the Pods of namespace whose
// spec.serviceAccountName is name.
func NewServiceAccountSelector(namespace, name string) *Selector {
	s := &Selector{Namespace: namespace, PodSelector: labels.Everything(), ServiceAccount: name}
	s.key = normalize(s)
	return s
}

// NewNodeSelector selects Nodes by label.
func NewNodeSelector(nodeSelector *metav1.LabelSelector) (*Selector, error) {
	sel, err := metav1.LabelSelectorAsSelector(nodeSelector)
	if err != nil {
		return nil, fmt.Errorf("invalid nodeSelector %v: %w", nodeSelector, err)
	}
	s := &Selector{NodeSelector: sel}
	s.key = normalize(s)
	return s, nil
}

// NewLabelSelector builds a Selector from parsed label selectors, with the
// semantics of NewSelector (podSelector must not be nil).
func NewLabelSelector(namespace string, podSelector, namespaceSelector labels.Selector) *Selector {
	s := &Selector{PodSelector: podSelector, NamespaceSelector: namespaceSelector}
	if namespaceSelector == nil {
		s.Namespace = namespace
	}
	s.key = normalize(s)
	return s
}

// InNamespace returns the part of a Pod selector inside one Namespace whose
// labels are nsLabels, or nil when the selector selects nothing there (or
// does not select Pods by label: ipBlock and Node selectors).
func (s *Selector) InNamespace(namespace string, nsLabels labels.Set) *Selector {
	switch {
	case s.IPBlock != nil || s.External():
		return nil
	case s.NamespaceSelector == nil:
		if s.Namespace != namespace {
			return nil
		}
		return s
	case !s.NamespaceSelector.Matches(nsLabels):
		return nil
	}
	return NewLabelSelector(namespace, s.PodSelector, nil)
}

// NewSelector builds a Selector with Kubernetes NetworkPolicy peer semantics:
// a nil podSelector selects every Pod, a nil namespaceSelector restricts the
// selection to namespace, and a non-nil namespaceSelector makes the selection
// cluster-wide (namespace is then ignored).
func NewSelector(namespace string, podSelector, namespaceSelector *metav1.LabelSelector) (*Selector, error) {
	s := &Selector{PodSelector: labels.Everything()}
	if podSelector != nil {
		sel, err := parseLabelSelector(podSelector)
		if err != nil {
			return nil, fmt.Errorf("invalid podSelector %v: %w", podSelector, err)
		}
		s.PodSelector = sel
	}
	if namespaceSelector != nil {
		sel, err := parseLabelSelector(namespaceSelector)
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
// false for an ipBlock or Node selector, which are filed apart from label
// selectors.
func (s *Selector) ClusterScoped() bool { return s.NamespaceSelector != nil }

func normalize(s *Selector) string {
	if s.IPBlock != nil {
		return "ipBlock=" + s.IPBlock.String()
	}
	if s.NodeSelector != nil {
		return "nodeSelector=" + selectorString(s.NodeSelector)
	}
	if s.Service != "" {
		return "service=" + s.Namespace + "/" + s.Service
	}
	if s.ServiceAccount != "" {
		return "namespace=" + s.Namespace + " serviceAccount=" + s.ServiceAccount
	}
	// The parts first, so that the string is allocated once, at its size.
	nsKey, nsValue := "namespace=", s.Namespace
	if s.NamespaceSelector != nil {
		nsKey, nsValue = "namespaceSelector=", selectorString(s.NamespaceSelector)
	}
	const podPrefix = " podSelector="
	podValue := selectorString(s.PodSelector)
	var b strings.Builder
	b.Grow(len(nsKey) + len(nsValue) + len(podPrefix) + len(podValue))
	b.WriteString(nsKey)
	b.WriteString(nsValue)
	b.WriteString(podPrefix)
	b.WriteString(podValue)
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

// parsedSelectors memoizes metav1.LabelSelectorAsSelector, whose validation
// dominated the cost of computing a policy: policies of different
// Namespaces, and peers of different policies, mostly repeat the same few
// selectors. Parsed selectors are immutable, so they are shared. The cache
// is emptied when it reaches parsedSelectorsMax entries.
var parsedSelectors = struct {
	sync.Mutex
	m map[string]labels.Selector
}{m: map[string]labels.Selector{}}

const parsedSelectorsMax = 8192

func parseLabelSelector(ls *metav1.LabelSelector) (labels.Selector, error) {
	// The key is built on the stack and looked up without a string
	// allocation; only a new entry copies it.
	var buf [128]byte
	key := appendLabelSelectorKey(buf[:0], ls)
	parsedSelectors.Lock()
	sel, ok := parsedSelectors.m[string(key)]
	parsedSelectors.Unlock()
	if ok {
		return sel, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		// Invalid selectors are not cached: each use reports its error.
		return nil, err
	}
	parsedSelectors.Lock()
	if len(parsedSelectors.m) >= parsedSelectorsMax {
		clear(parsedSelectors.m)
	}
	parsedSelectors.m[string(key)] = sel
	parsedSelectors.Unlock()
	return sel, nil
}

// labelSelectorKey encodes a LabelSelector unambiguously (every string
// length-prefixed; matchLabels sorted by key): equal keys mean equal
// selectors.
func labelSelectorKey(ls *metav1.LabelSelector) string {
	return string(appendLabelSelectorKey(nil, ls))
}

// appendLabelSelectorKey appends labelSelectorKey(ls) to b.
func appendLabelSelectorKey(b []byte, ls *metav1.LabelSelector) []byte {
	str := func(b []byte, v string) []byte {
		b = strconv.AppendInt(b, int64(len(v)), 10)
		b = append(b, ':')
		return append(b, v...)
	}
	var kbuf [8]string
	keys := kbuf[:0]
	for k := range ls.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, 'L')
	b = strconv.AppendInt(b, int64(len(keys)), 10)
	for _, k := range keys {
		b = str(b, k)
		b = str(b, ls.MatchLabels[k])
	}
	b = append(b, 'E')
	b = strconv.AppendInt(b, int64(len(ls.MatchExpressions)), 10)
	for _, e := range ls.MatchExpressions {
		b = str(b, e.Key)
		b = str(b, string(e.Operator))
		b = strconv.AppendInt(b, int64(len(e.Values)), 10)
		for _, v := range e.Values {
			b = str(b, v)
		}
	}
	return b
}
