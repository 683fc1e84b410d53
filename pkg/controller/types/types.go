// Package types holds the controller's internal policy objects: the computed
// AppliedToGroups, AddressGroups and NetworkPolicies together with their span
// (the Nodes that need them). The computation writes them into the API
// server's stores (pkg/apiserver/storage); the stores turn them into the
// controlplane objects and per-node patches each agent watches.
package types

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/apis/controlplane"
)

// SpanMeta is the set of Nodes an object must reach.
type SpanMeta struct {
	// NodeNames are the Nodes whose agents receive the object.
	NodeNames sets.Set[string]
}

// Has reports whether the span holds the Node.
func (s *SpanMeta) Has(nodeName string) bool {
	return s.NodeNames.Has(nodeName)
}

// Span is implemented by every object with a span, so the stores can filter
// by node without knowing the concrete type.
type Span interface {
	Has(nodeName string) bool
}

// GroupSelector is the normalized selector a group is built from. Groups are
// shared: two rules with selectors of the same NormalizedName use one group.
type GroupSelector struct {
	// Namespace restricts PodSelector to one Namespace; empty means cluster-wide.
	Namespace string
	// PodSelector selects Pods; nil means no Pod selection by label.
	PodSelector labels.Selector
	// NamespaceSelector selects Namespaces; nil when Namespace is set.
	NamespaceSelector labels.Selector
	// IPBlock, when set, selects the Pods whose addresses the block covers
	// (an AddressGroup that resolves the named ports of an egress rule with
	// an ipBlock peer); the other selectors are then unset.
	IPBlock *controlplane.IPBlock
	// NormalizedName identifies the selector; use NewGroupSelector or
	// NewIPBlockGroupSelector to fill it.
	NormalizedName string
}

// NewGroupSelector builds a GroupSelector and its NormalizedName. The name
// orders the parts the same way every time, so equal selectors get equal names.
func NewGroupSelector(namespace string, podSelector, namespaceSelector labels.Selector) *GroupSelector {
	gs := &GroupSelector{Namespace: namespace, PodSelector: podSelector, NamespaceSelector: namespaceSelector}
	var parts []string
	if namespace != "" {
		parts = append(parts, "namespace="+namespace)
	}
	if namespaceSelector != nil {
		parts = append(parts, "namespaceSelector="+namespaceSelector.String())
	}
	if podSelector != nil {
		parts = append(parts, "podSelector="+podSelector.String())
	}
	gs.NormalizedName = strings.Join(parts, " And ")
	return gs
}

// NewIPBlockGroupSelector builds the GroupSelector of the Pods in block;
// normalizedBlock is the block's canonical text, which names it.
func NewIPBlockGroupSelector(block *controlplane.IPBlock, normalizedBlock string) *GroupSelector {
	return &GroupSelector{IPBlock: block, NormalizedName: "ipBlock=" + normalizedBlock}
}

// String is the NormalizedName.
func (g *GroupSelector) String() string { return g.NormalizedName }

// AppliedToGroup is the controller's form of an AppliedToGroup: its members
// with their Nodes, so that each agent gets only its own members. Its span is
// the set of Nodes with at least one member.
type AppliedToGroup struct {
	SpanMeta
	// UID is a unique identifier of the group (usually derived from the selector).
	UID k8stypes.UID
	// Name is what policies reference and agents see; usually equal to UID.
	Name string
	// Selector is what the group's members are computed from.
	Selector *GroupSelector
	// Members are the members on each Node, sorted by Node and then Key (a
	// member on several Nodes, such as a Service's, has an entry on each);
	// never modified once built. One slice, where a set per Node cost most
	// groups spread over the cluster a one-member map per Node. Groups built
	// by hand (tests) get it from NewNodeMembers.
	Members []NodeMember
	// SyncError is set when the group could not be computed (not served).
	SyncError error
}

// NodeMember is a member of an AppliedToGroup on one Node.
type NodeMember struct {
	Node string
	// Key is controlplane.MemberKey(Member).
	Key    string
	Member *controlplane.GroupMember
}

// CompareNodeMembers orders members by Node and then Key.
func CompareNodeMembers(a, b NodeMember) int {
	if c := strings.Compare(a.Node, b.Node); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// NewNodeMembers returns the members of byNode (each Node's members) in the
// form of AppliedToGroup.Members: an entry per Node and member, sorted by
// Node and then Key, a member given twice for one Node kept once; nil when
// there is none. It is for groups built by hand: the controller builds its
// lists itself.
func NewNodeMembers(byNode map[string][]*controlplane.GroupMember) []NodeMember {
	var out []NodeMember
	for node, members := range byNode {
		for _, m := range members {
			out = append(out, NodeMember{Node: node, Key: controlplane.MemberKey(m), Member: m})
		}
	}
	slices.SortFunc(out, CompareNodeMembers)
	return slices.CompactFunc(out, func(a, b NodeMember) bool { return CompareNodeMembers(a, b) == 0 })
}

// MembersOn returns the part of members (sorted by Node, as
// AppliedToGroup.Members) on node.
func MembersOn(members []NodeMember, node string) []NodeMember {
	i, _ := slices.BinarySearchFunc(members, node, func(m NodeMember, node string) int { return strings.Compare(m.Node, node) })
	j := i
	for j < len(members) && members[j].Node == node {
		j++
	}
	return members[i:j]
}

// AddressGroup is the controller's form of an AddressGroup: every member,
// sent to every Node in its span (the span of the policies that use it).
type AddressGroup struct {
	SpanMeta
	// UID is a unique identifier of the group.
	UID k8stypes.UID
	// Name is what rules reference and agents see; usually equal to UID.
	Name string
	// Selector is what the group's members are computed from.
	Selector *GroupSelector
	// GroupMembers are all members of the group.
	GroupMembers controlplane.GroupMemberSet
}

// NetworkPolicy is the controller's form of an internal NetworkPolicy. Its
// span is the union of the spans of its AppliedToGroups.
type NetworkPolicy struct {
	SpanMeta
	// UID identifies the policy; by convention the user policy's UID.
	UID k8stypes.UID
	// Name is what agents see; by convention equal to UID.
	Name string
	// Generation increases whenever Rules, AppliedToGroups or priorities change;
	// agents report the generation they realized.
	Generation int64
	// SourceRef names the user policy.
	SourceRef *controlplane.NetworkPolicyReference
	// Rules of the policy.
	Rules []controlplane.NetworkPolicyRule
	// AppliedToGroups are the names of the groups the policy applies to.
	AppliedToGroups []string
	// Priority within the tier (Antrea-native policies).
	Priority *float64
	// TierPriority is the tier's priority (Antrea-native policies).
	TierPriority *int32
	// AppliedToPerRule is true when rules carry their own AppliedToGroups.
	AppliedToPerRule bool
	// SyncError is set when the policy could not be computed.
	SyncError error
}

// GetAddressGroups returns the names of every AddressGroup the policy's rules
// reference, sorted, so that stores can index policies by AddressGroup.
func (p *NetworkPolicy) GetAddressGroups() sets.Set[string] {
	s := sets.New[string]()
	for i := range p.Rules {
		s.Insert(p.Rules[i].From.AddressGroups...)
		s.Insert(p.Rules[i].To.AddressGroups...)
	}
	return s
}

// GetAppliedToGroups returns the names of every AppliedToGroup the policy or
// any of its rules references.
func (p *NetworkPolicy) GetAppliedToGroups() sets.Set[string] {
	s := sets.New(p.AppliedToGroups...)
	for i := range p.Rules {
		s.Insert(p.Rules[i].AppliedToGroups...)
	}
	return s
}

// String names the policy and its source for logs.
func (p *NetworkPolicy) String() string {
	if p.SourceRef == nil {
		return p.Name
	}
	if p.SourceRef.Namespace == "" {
		return fmt.Sprintf("%s:%s(%s)", p.SourceRef.Type, p.SourceRef.Name, p.Name)
	}
	return fmt.Sprintf("%s:%s/%s(%s)", p.SourceRef.Type, p.SourceRef.Namespace, p.SourceRef.Name, p.Name)
}

// SortedNodeNames returns the span as a sorted slice (for logs and tests).
func (s *SpanMeta) SortedNodeNames() []string {
	l := s.NodeNames.UnsortedList()
	sort.Strings(l)
	return l
}

// EgressGroup is the controller's form of an EgressGroup: the Pods an
// Egress applies to, with their Nodes, like an AppliedToGroup's. Its span is
// the Nodes with at least one member: the agent of a member's Node steers
// the member's traffic to the Node holding the Egress IP. A reader with a
// Node sees only the members on that Node; a reader without one sees every
// member (an agent that needs them all, say on the Node holding the IP,
// watches without a nodeName).
type EgressGroup struct {
	SpanMeta
	// UID is the Egress's UID.
	UID k8stypes.UID
	// Name is the Egress's name.
	Name string
	// Members are the members on each Node, sorted by Node and then Key, as
	// AppliedToGroup.Members; never modified once built.
	Members []NodeMember
}
