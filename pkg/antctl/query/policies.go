package query

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// Selector says which computed objects a query asks for: antctl get's
// filters. The zero Selector asks for every object.
type Selector struct {
	// Name is one object: a group's name, or a policy's internal name or
	// its source's name (in Namespace, when given).
	Name string
	// Namespace keeps the policies whose source is in it, and the groups
	// those policies use.
	Namespace string
	// PodNamespace and Pod keep the policies applied to the pod, and the
	// groups holding it.
	PodNamespace, Pod string
	// Node keeps what the agent of the Node receives (the objects whose span
	// holds it; AppliedToGroups with its members only).
	Node string
	// SortBy orders the answer: "" by name, a JSONPath of the objects, and
	// for policies SortByEffectivePriority.
	SortBy string
}

// PolicySelector is a Selector with the filters only policies have.
type PolicySelector struct {
	Selector
	// Source keeps the policies derived from a source policy of this name.
	Source string
	// Type keeps the policies of one source type ("" any; ParsePolicyType).
	Type cpv1beta2.NetworkPolicyType
}

// Check says whether the namespace, pod and Node the selector names exist,
// with the closest name for a typo.
func (s *Selector) Check(ctx context.Context, c *Clients) error {
	if s.Namespace != "" {
		if err := CheckNamespace(ctx, c.Kube, s.Namespace); err != nil {
			return err
		}
	}
	if s.Pod != "" {
		if err := CheckPod(ctx, c.Kube, s.PodNamespace, s.Pod); err != nil {
			return err
		}
	}
	if s.Node != "" {
		if err := CheckNode(ctx, c.Kube, s.Node); err != nil {
			return err
		}
	}
	return nil
}

// Describe says which filters apply, for "nothing found" lines (" from
// namespace demo on node node-1"; "" for none).
func (s *Selector) Describe() string { return describe(s.parts()) }

// Describe says which filters apply, the policy filters included.
func (s *PolicySelector) Describe() string {
	parts := s.parts()
	if s.Source != "" {
		parts = append(parts, "derived from "+s.Source)
	}
	if s.Type != "" {
		parts = append(parts, "of type "+string(s.Type))
	}
	return describe(parts)
}

func (s *Selector) parts() []string {
	var parts []string
	if s.Namespace != "" {
		parts = append(parts, "from namespace "+s.Namespace)
	}
	if s.Pod != "" {
		parts = append(parts, "for pod "+s.PodNamespace+"/"+s.Pod)
	}
	if s.Node != "" {
		parts = append(parts, "on node "+s.Node)
	}
	return parts
}

func describe(parts []string) string {
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}

// NetworkPolicies returns the policies s selects, as the controlplane API
// serves them (with their TypeMeta). A Name that matches nothing, or
// matches but not the filters, is an error.
func NetworkPolicies(ctx context.Context, c *Clients, s PolicySelector) ([]cpv1beta2.NetworkPolicy, error) {
	var policies []cpv1beta2.NetworkPolicy
	if s.Name != "" {
		p, err := policyByName(ctx, c, s.Name, s.Namespace)
		if err != nil {
			return nil, err
		}
		p.TypeMeta = typeMeta("NetworkPolicy")
		policies = []cpv1beta2.NetworkPolicy{*p}
	} else {
		var err error
		if policies, err = listPolicies(ctx, c, s.Node); err != nil {
			return nil, err
		}
	}
	var groups []cpv1beta2.AppliedToGroup
	if s.Pod != "" {
		list, err := c.Antrea.ControlplaneV1beta2().AppliedToGroups().List(ctx, ListOptions(""))
		if err != nil {
			return nil, fmt.Errorf("listing appliedtogroups: %w", err)
		}
		groups = list.Items
	}
	var out []cpv1beta2.NetworkPolicy
	for _, p := range policies {
		if !s.keeps(&p, groups) {
			continue
		}
		if s.Node != "" && s.Name != "" {
			in, err := inSpan(ctx, c, s.Node, p.Name)
			if err != nil {
				return nil, err
			}
			if !in {
				continue
			}
		}
		out = append(out, p)
	}
	if s.Name != "" && len(out) == 0 {
		return nil, fmt.Errorf("networkpolicy %s does not match the filters%s", s.Name, s.Describe())
	}
	if err := SortPolicies(out, s.SortBy); err != nil {
		return nil, err
	}
	return out, nil
}

// keeps says whether the filters other than Name and Node keep p.
func (s *PolicySelector) keeps(p *cpv1beta2.NetworkPolicy, groups []cpv1beta2.AppliedToGroup) bool {
	switch {
	case s.Namespace != "" && sourceNamespace(p) != s.Namespace:
		return false
	case s.Source != "" && (p.SourceRef == nil || p.SourceRef.Name != s.Source):
		return false
	case s.Type != "" && (p.SourceRef == nil || p.SourceRef.Type != s.Type):
		return false
	case s.Pod != "" && !appliesTo(p, groups, s.PodNamespace, s.Pod):
		return false
	}
	return true
}

// PolicySummary is what a table of policies shows of one.
type PolicySummary struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Rules  int    `json:"rules"`
	// AppliedTo are the policy's AppliedToGroups (its own and its rules').
	AppliedTo []string `json:"appliedTo"`
	// Nodes is the span: the Nodes whose agents receive the policy.
	Nodes []string `json:"nodes"`
	// Realized is the controller's "realized/span" count of Nodes.
	Realized     string `json:"realized"`
	TierPriority string `json:"tierPriority"`
	Priority     string `json:"priority"`
}

// SummarizePolicies adds to each policy its span (asked of the server Node
// by Node) and the controller's realization count.
func SummarizePolicies(ctx context.Context, c *Clients, policies []cpv1beta2.NetworkPolicy) ([]PolicySummary, error) {
	spans, err := Spans(ctx, c, func(ctx context.Context, node string) ([]string, error) {
		ps, err := listPolicies(ctx, c, node)
		names := make([]string, 0, len(ps))
		for _, p := range ps {
			names = append(names, p.Name)
		}
		return names, err
	})
	if err != nil {
		return nil, err
	}
	realized, err := c.Realization(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]PolicySummary, 0, len(policies))
	for i := range policies {
		p := &policies[i]
		tier, prio := Priorities(p)
		out = append(out, PolicySummary{Name: p.Name, Source: SourceString(p), Rules: len(p.Rules), AppliedTo: AppliedToGroupsOf(p),
			Nodes: spans[p.Name], Realized: realized[p.Name], TierPriority: tier, Priority: prio})
	}
	return out, nil
}

// policyByName gets a policy by its internal name or, failing that, by its
// source's name (in namespace ns when given): users know the latter.
func policyByName(ctx context.Context, c *Clients, name, ns string) (*cpv1beta2.NetworkPolicy, error) {
	p, err := c.Antrea.ControlplaneV1beta2().NetworkPolicies().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return p, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("networkpolicy %s: %w", name, err)
	}
	all, err := listPolicies(ctx, c, "")
	if err != nil {
		return nil, err
	}
	var names []string
	var found []*cpv1beta2.NetworkPolicy
	for i := range all {
		p := &all[i]
		names = append(names, p.Name)
		if p.SourceRef == nil || (ns != "" && p.SourceRef.Namespace != ns) {
			continue
		}
		names = append(names, p.SourceRef.Name)
		if p.SourceRef.Name == name {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, notFound("networkpolicy", name, names)
	}
	var srcs []string
	for _, p := range found {
		srcs = append(srcs, SourceString(p))
	}
	return nil, fmt.Errorf("networkpolicy %q names %d policies (%s): give -n or the internal name", name, len(found), strings.Join(srcs, ", "))
}

// inSpan says whether the policy is sent to node.
func inSpan(ctx context.Context, c *Clients, node, name string) (bool, error) {
	ps, err := listPolicies(ctx, c, node)
	for _, p := range ps {
		if p.Name == name {
			return true, nil
		}
	}
	return false, err
}

// appliesTo says whether a policy (or one of its rules) applies to pod ns/name.
func appliesTo(p *cpv1beta2.NetworkPolicy, groups []cpv1beta2.AppliedToGroup, ns, name string) bool {
	want := sets.New(AppliedToGroupsOf(p)...)
	for _, g := range groups {
		if want.Has(g.Name) && hasPod(g.GroupMembers, ns, name) {
			return true
		}
	}
	return false
}
