package storage

import (
	"fmt"
	"reflect"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/types"
)

// Index names offered by the stores.
const (
	// SelectorIndex indexes groups by their selector's NormalizedName.
	SelectorIndex = "selector"
	// AppliedToGroupIndex indexes NetworkPolicies by the AppliedToGroups they use.
	AppliedToGroupIndex = "appliedToGroup"
	// AddressGroupIndex indexes NetworkPolicies by the AddressGroups they use.
	AddressGroupIndex = "addressGroup"
)

func objectMeta(name string, uid string, rv uint64) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, UID: typesUID(uid), ResourceVersion: strconv.FormatUint(rv, 10)}
}

// ---- AddressGroup ----

type addressGroupResource struct{}

// NewAddressGroupStore returns the store of AddressGroups; it holds
// *types.AddressGroup. Every Node in the span gets all members.
func NewAddressGroupStore(opts ...Options) Interface {
	return newStore(addressGroupResource{}, Indexers{SelectorIndex: selectorIndexFunc}, firstOptions(opts))
}

func (addressGroupResource) groupResource() schema.GroupResource {
	return controlplane.Resource("addressgroups")
}

func (addressGroupResource) key(obj any) (string, error) {
	g, ok := obj.(*types.AddressGroup)
	if !ok {
		return "", fmt.Errorf("addressgroups store got %T, want *types.AddressGroup", obj)
	}
	return g.Name, nil
}

func (addressGroupResource) span(obj any) sets.Set[string] {
	return obj.(*types.AddressGroup).NodeNames
}

func (addressGroupResource) inSpan(obj any, node string) bool {
	return obj.(*types.AddressGroup).Has(node)
}

func (addressGroupResource) view(obj any, _ string, rv uint64) runtime.Object {
	g := obj.(*types.AddressGroup)
	return &controlplane.AddressGroup{ObjectMeta: objectMeta(g.Name, string(g.UID), rv), GroupMembers: g.GroupMembers.Items()}
}

func (addressGroupResource) prepare(prev, cur any, rv uint64) any {
	p, c := prev.(*types.AddressGroup), cur.(*types.AddressGroup)
	added, removed := c.GroupMembers.Difference(p.GroupMembers), p.GroupMembers.Difference(c.GroupMembers)
	if len(added) == 0 && len(removed) == 0 {
		return nil
	}
	return &controlplane.AddressGroupPatch{
		ObjectMeta:          objectMeta(c.Name, string(c.UID), rv),
		AddedGroupMembers:   added.Items(),
		RemovedGroupMembers: removed.Items(),
	}
}

func (addressGroupResource) modified(prepared any, _ string) runtime.Object {
	if prepared == nil {
		return nil
	}
	return prepared.(*controlplane.AddressGroupPatch)
}

func (addressGroupResource) empty() runtime.Object { return &controlplane.AddressGroup{} }

// ---- AppliedToGroup ----

type appliedToGroupResource struct{}

// NewAppliedToGroupStore returns the store of AppliedToGroups; it holds
// *types.AppliedToGroup. A Node sees only the members on it.
func NewAppliedToGroupStore(opts ...Options) Interface {
	return newStore(appliedToGroupResource{}, Indexers{SelectorIndex: selectorIndexFunc}, firstOptions(opts))
}

func (appliedToGroupResource) groupResource() schema.GroupResource {
	return controlplane.Resource("appliedtogroups")
}

func (appliedToGroupResource) key(obj any) (string, error) {
	g, ok := obj.(*types.AppliedToGroup)
	if !ok {
		return "", fmt.Errorf("appliedtogroups store got %T, want *types.AppliedToGroup", obj)
	}
	return g.Name, nil
}

func (appliedToGroupResource) span(obj any) sets.Set[string] {
	return obj.(*types.AppliedToGroup).NodeNames
}

func (appliedToGroupResource) inSpan(obj any, node string) bool {
	return obj.(*types.AppliedToGroup).Has(node)
}

// membersOn returns the members on a Node, or on every Node for "", sorted
// by key.
func membersOn(members []types.NodeMember, node string) []controlplane.GroupMember {
	if node != "" {
		on := types.MembersOn(members, node)
		items := make([]controlplane.GroupMember, len(on))
		for i := range on {
			items[i] = *on[i].Member
		}
		return items
	}
	// A member on several Nodes is listed once.
	all := controlplane.GroupMemberSet{}
	for _, m := range members {
		all[m.Key] = m.Member
	}
	return all.Items()
}

func (appliedToGroupResource) view(obj any, node string, rv uint64) runtime.Object {
	g := obj.(*types.AppliedToGroup)
	return &controlplane.AppliedToGroup{ObjectMeta: objectMeta(g.Name, string(g.UID), rv), GroupMembers: membersOn(g.Members, node)}
}

// appliedToGroupChange holds the patch of every Node whose members changed,
// and the patch of watchers without a Node ("").
type appliedToGroupChange map[string]*controlplane.AppliedToGroupPatch

// groupDiff collects the members added and removed per Node.
type groupDiff struct {
	meta                 metav1.ObjectMeta
	change               appliedToGroupChange
	allAdded, allRemoved controlplane.GroupMemberSet
}

func (d *groupDiff) patch(node string) *controlplane.AppliedToGroupPatch {
	pt := d.change[node]
	if pt == nil {
		pt = &controlplane.AppliedToGroupPatch{ObjectMeta: d.meta}
		d.change[node] = pt
	}
	return pt
}

// merge diffs two member lists sorted by Node and then key (see
// types.AppliedToGroup.Members): one pass finds every Node's added and
// removed members, in key order.
func (d *groupDiff) merge(was, is []types.NodeMember) {
	if len(was) == len(is) && (len(was) == 0 || &was[0] == &is[0]) {
		return
	}
	for i, j := 0, 0; i < len(was) || j < len(is); {
		c := 0
		switch {
		case i == len(was):
			c = 1
		case j == len(is):
			c = -1
		default:
			c = types.CompareNodeMembers(was[i], is[j])
		}
		switch {
		case c < 0:
			pt := d.patch(was[i].Node)
			pt.RemovedGroupMembers = append(pt.RemovedGroupMembers, *was[i].Member)
			d.allRemoved[was[i].Key] = was[i].Member
			i++
		case c > 0:
			pt := d.patch(is[j].Node)
			pt.AddedGroupMembers = append(pt.AddedGroupMembers, *is[j].Member)
			d.allAdded[is[j].Key] = is[j].Member
			j++
		default:
			i++
			j++
		}
	}
	for _, pt := range d.change {
		// Never nil, as GroupMemberSet.Items (the "" patch's) never is.
		if pt.AddedGroupMembers == nil {
			pt.AddedGroupMembers = []controlplane.GroupMember{}
		}
		if pt.RemovedGroupMembers == nil {
			pt.RemovedGroupMembers = []controlplane.GroupMember{}
		}
	}
}

func (appliedToGroupResource) prepare(prev, cur any, rv uint64) any {
	p, c := prev.(*types.AppliedToGroup), cur.(*types.AppliedToGroup)
	d := &groupDiff{meta: objectMeta(c.Name, string(c.UID), rv), change: appliedToGroupChange{},
		allAdded: controlplane.GroupMemberSet{}, allRemoved: controlplane.GroupMemberSet{}}
	d.merge(p.Members, c.Members)
	if len(d.change) == 0 {
		return nil
	}
	// A cluster-wide reader sees every Node's members together: a member
	// added on a Node is new to it only if it was on no Node (it may have
	// moved, or be on other Nodes too, as a Service's is), and one removed
	// from a Node is gone only if it is on no Node now.
	added, removed := d.allAdded, d.allRemoved
	dropPresent(added, p.Members)
	dropPresent(removed, c.Members)
	if len(added) > 0 || len(removed) > 0 {
		d.change[""] = &controlplane.AppliedToGroupPatch{
			ObjectMeta:          d.meta,
			AddedGroupMembers:   added.Items(),
			RemovedGroupMembers: removed.Items(),
		}
	}
	return d.change
}

// dropPresent removes from s the members of members, scanning them only
// while s holds some. Mostly s holds a member or two (the Pods added or
// removed), compared directly: a lookup in s would hash every key of a
// group of thousands.
func dropPresent(s controlplane.GroupMemberSet, members []types.NodeMember) {
	if len(s) > 8 {
		for i := 0; i < len(members) && len(s) > 0; i++ {
			delete(s, members[i].Key)
		}
		return
	}
	var buf [8]string
	keys := buf[:0]
	for k := range s {
		keys = append(keys, k)
	}
	for i := 0; i < len(members) && len(keys) > 0; i++ {
		for j, k := range keys {
			if members[i].Key == k {
				delete(s, k)
				keys[j] = keys[len(keys)-1]
				keys = keys[:len(keys)-1]
				break
			}
		}
	}
}

func (appliedToGroupResource) modified(prepared any, node string) runtime.Object {
	if prepared == nil {
		return nil
	}
	if p, ok := prepared.(appliedToGroupChange)[node]; ok {
		return p
	}
	return nil
}

func (appliedToGroupResource) empty() runtime.Object { return &controlplane.AppliedToGroup{} }

func selectorIndexFunc(obj any, buf []string) []string {
	var sel *types.GroupSelector
	switch g := obj.(type) {
	case *types.AddressGroup:
		sel = g.Selector
	case *types.AppliedToGroup:
		sel = g.Selector
	}
	if sel == nil {
		return buf
	}
	return append(buf, sel.NormalizedName)
}

// ---- NetworkPolicy ----

type networkPolicyResource struct{}

// NewNetworkPolicyStore returns the store of internal NetworkPolicies; it
// holds *types.NetworkPolicy, indexed by AppliedToGroupIndex and AddressGroupIndex.
func NewNetworkPolicyStore(opts ...Options) Interface {
	// The index values are those of GetAppliedToGroups and GetAddressGroups,
	// appended without building their sets (an index ignores repeats).
	return newStore(networkPolicyResource{}, Indexers{
		AppliedToGroupIndex: func(obj any, buf []string) []string {
			p := obj.(*types.NetworkPolicy)
			buf = append(buf, p.AppliedToGroups...)
			for i := range p.Rules {
				buf = append(buf, p.Rules[i].AppliedToGroups...)
			}
			return buf
		},
		AddressGroupIndex: func(obj any, buf []string) []string {
			p := obj.(*types.NetworkPolicy)
			for i := range p.Rules {
				buf = append(buf, p.Rules[i].From.AddressGroups...)
				buf = append(buf, p.Rules[i].To.AddressGroups...)
			}
			return buf
		},
	}, firstOptions(opts))
}

func (networkPolicyResource) groupResource() schema.GroupResource {
	return controlplane.Resource("networkpolicies")
}

func (networkPolicyResource) key(obj any) (string, error) {
	p, ok := obj.(*types.NetworkPolicy)
	if !ok {
		return "", fmt.Errorf("networkpolicies store got %T, want *types.NetworkPolicy", obj)
	}
	return p.Name, nil
}

func (networkPolicyResource) span(obj any) sets.Set[string] {
	return obj.(*types.NetworkPolicy).NodeNames
}

func (networkPolicyResource) inSpan(obj any, node string) bool {
	return obj.(*types.NetworkPolicy).Has(node)
}

func (networkPolicyResource) view(obj any, _ string, rv uint64) runtime.Object {
	p := obj.(*types.NetworkPolicy)
	meta := objectMeta(p.Name, string(p.UID), rv)
	meta.Generation = p.Generation
	return &controlplane.NetworkPolicy{
		ObjectMeta:       meta,
		Rules:            p.Rules,
		AppliedToGroups:  p.AppliedToGroups,
		Priority:         p.Priority,
		TierPriority:     p.TierPriority,
		SourceRef:        p.SourceRef,
		AppliedToPerRule: p.AppliedToPerRule,
	}
}

func (r networkPolicyResource) prepare(prev, cur any, rv uint64) any {
	p, c := prev.(*types.NetworkPolicy), cur.(*types.NetworkPolicy)
	// A change of span alone concerns only the Nodes entering or leaving it.
	if p.Generation == c.Generation && p.UID == c.UID && p.AppliedToPerRule == c.AppliedToPerRule &&
		reflect.DeepEqual(p.Rules, c.Rules) && reflect.DeepEqual(p.AppliedToGroups, c.AppliedToGroups) &&
		reflect.DeepEqual(p.Priority, c.Priority) && reflect.DeepEqual(p.TierPriority, c.TierPriority) &&
		reflect.DeepEqual(p.SourceRef, c.SourceRef) {
		return nil
	}
	return r.view(c, "", rv)
}

func (networkPolicyResource) modified(prepared any, _ string) runtime.Object {
	if prepared == nil {
		return nil
	}
	return prepared.(*controlplane.NetworkPolicy)
}

func (networkPolicyResource) empty() runtime.Object { return &controlplane.NetworkPolicy{} }

func firstOptions(opts []Options) Options {
	if len(opts) > 0 {
		return opts[0]
	}
	return Options{}
}

func typesUID(uid string) k8stypes.UID { return k8stypes.UID(uid) }
