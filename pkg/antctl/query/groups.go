package query

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// GroupKind is one of the two computed group resources.
type GroupKind string

// The group resources, named as antctl get names them.
const (
	AppliedToGroups GroupKind = "appliedtogroup"
	AddressGroups   GroupKind = "addressgroup"
)

// Group is a computed group with what the queries add to it.
type Group struct {
	Name    string                  `json:"name"`
	Members []cpv1beta2.GroupMember `json:"members"`
	// UsedBy are the sources of the policies using the group (of the
	// Selector's Namespace, when it has one).
	UsedBy []string `json:"usedBy"`
	// Object is the group as the controlplane API serves it (with its
	// TypeMeta): a *cpv1beta2.AppliedToGroup or *cpv1beta2.AddressGroup.
	Object any `json:"-"`
}

// Groups returns the groups of kind s selects. A Name that matches
// nothing, or matches but not the filters, is an error.
func Groups(ctx context.Context, c *Clients, kind GroupKind, s Selector) ([]Group, error) {
	var groups []Group
	if s.Name != "" {
		g, err := kind.get(ctx, c, s.Name)
		if err != nil {
			return nil, err
		}
		groups = []Group{*g}
	} else {
		var err error
		if groups, err = kind.list(ctx, c, s.Node); err != nil {
			return nil, err
		}
	}
	policies, err := listPolicies(ctx, c, "")
	if err != nil {
		return nil, err
	}
	usedBy := map[string][]string{}
	for i := range policies {
		p := &policies[i]
		if s.Namespace != "" && sourceNamespace(p) != s.Namespace {
			continue
		}
		names := AppliedToGroupsOf(p)
		if kind == AddressGroups {
			names = AddressGroupsOf(p)
		}
		for _, n := range names {
			usedBy[n] = append(usedBy[n], SourceString(p))
		}
	}
	var out []Group
	for _, g := range groups {
		g.UsedBy = usedBy[g.Name]
		if s.Namespace != "" && len(g.UsedBy) == 0 {
			continue
		}
		if s.Pod != "" && !hasPod(g.Members, s.PodNamespace, s.Pod) {
			continue
		}
		out = append(out, g)
	}
	if s.Name != "" && s.Node != "" && len(out) == 1 {
		in, err := kind.inSpan(ctx, c, s.Node, s.Name)
		if err != nil {
			return nil, err
		}
		if !in {
			out = nil
		}
	}
	if s.Name != "" && len(out) == 0 {
		return nil, fmt.Errorf("%s %s does not match the filters%s", kind, s.Name, s.Describe())
	}
	if err := SortBy(out, s.SortBy, func(g *Group) (string, any) { return g.Name, g.Object }); err != nil {
		return nil, err
	}
	return out, nil
}

// GroupSpans returns the Nodes each group of kind is sent to.
func GroupSpans(ctx context.Context, c *Clients, kind GroupKind) (map[string][]string, error) {
	return Spans(ctx, c, func(ctx context.Context, node string) ([]string, error) {
		gs, err := kind.list(ctx, c, node)
		names := make([]string, 0, len(gs))
		for _, g := range gs {
			names = append(names, g.Name)
		}
		return names, err
	})
}

// list lists the groups node's agent receives (all for ""), by name.
func (k GroupKind) list(ctx context.Context, c *Clients, node string) ([]Group, error) {
	cp := c.Antrea.ControlplaneV1beta2()
	if k == AddressGroups {
		l, err := cp.AddressGroups().List(ctx, ListOptions(node))
		if err != nil {
			return nil, fmt.Errorf("listing %ss: %w", k, err)
		}
		return toGroups(l.Items, addressGroupParts), nil
	}
	l, err := cp.AppliedToGroups().List(ctx, ListOptions(node))
	if err != nil {
		return nil, fmt.Errorf("listing %ss: %w", k, err)
	}
	return toGroups(l.Items, appliedToGroupParts), nil
}

// get gets one group; one not found is the error naming the closest group.
func (k GroupKind) get(ctx context.Context, c *Clients, name string) (*Group, error) {
	cp := c.Antrea.ControlplaneV1beta2()
	var groups []Group
	var err error
	if k == AddressGroups {
		var g *cpv1beta2.AddressGroup
		if g, err = cp.AddressGroups().Get(ctx, name, metav1.GetOptions{}); err == nil {
			groups = toGroups([]cpv1beta2.AddressGroup{*g}, addressGroupParts)
		}
	} else {
		var g *cpv1beta2.AppliedToGroup
		if g, err = cp.AppliedToGroups().Get(ctx, name, metav1.GetOptions{}); err == nil {
			groups = toGroups([]cpv1beta2.AppliedToGroup{*g}, appliedToGroupParts)
		}
	}
	if err == nil {
		return &groups[0], nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %s: %w", k, name, err)
	}
	all, _ := k.list(ctx, c, "")
	var names []string
	for _, g := range all {
		names = append(names, g.Name)
	}
	return nil, notFound(string(k), name, names)
}

// The parts of a served group toGroups needs: its TypeMeta (to set), its
// kind, name and members.
func addressGroupParts(g *cpv1beta2.AddressGroup) (*metav1.TypeMeta, string, string, []cpv1beta2.GroupMember) {
	return &g.TypeMeta, "AddressGroup", g.Name, g.GroupMembers
}

func appliedToGroupParts(g *cpv1beta2.AppliedToGroup) (*metav1.TypeMeta, string, string, []cpv1beta2.GroupMember) {
	return &g.TypeMeta, "AppliedToGroup", g.Name, g.GroupMembers
}

// inSpan says whether the group is sent to node.
func (k GroupKind) inSpan(ctx context.Context, c *Clients, node, name string) (bool, error) {
	gs, err := k.list(ctx, c, node)
	for _, g := range gs {
		if g.Name == name {
			return true, nil
		}
	}
	return false, err
}

// toGroups makes Groups of the served objects, sorted by name, with their
// TypeMeta set.
func toGroups[T any](items []T, parts func(*T) (*metav1.TypeMeta, string, string, []cpv1beta2.GroupMember)) []Group {
	out := make([]Group, 0, len(items))
	for i := range items {
		tm, kind, name, members := parts(&items[i])
		*tm = typeMeta(kind)
		out = append(out, Group{Name: name, Members: members, Object: &items[i]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
