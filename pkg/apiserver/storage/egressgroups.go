package storage

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/types"
)

// ---- EgressGroup ----

// egressGroupResource serves EgressGroups as appliedToGroupResource serves
// AppliedToGroups: the members per Node, patches per Node, and the whole
// group to a reader without a Node.
type egressGroupResource struct{}

// NewEgressGroupStore returns the store of EgressGroups; it holds
// *types.EgressGroup. A Node sees only the members on it.
func NewEgressGroupStore(opts ...Options) Interface {
	return newStore(egressGroupResource{}, Indexers{}, firstOptions(opts))
}

func (egressGroupResource) groupResource() schema.GroupResource {
	return controlplane.Resource("egressgroups")
}

func (egressGroupResource) key(obj any) (string, error) {
	g, ok := obj.(*types.EgressGroup)
	if !ok {
		return "", fmt.Errorf("egressgroups store got %T, want *types.EgressGroup", obj)
	}
	return g.Name, nil
}

func (egressGroupResource) span(obj any) sets.Set[string] {
	return obj.(*types.EgressGroup).NodeNames
}

func (egressGroupResource) inSpan(obj any, node string) bool {
	return obj.(*types.EgressGroup).Has(node)
}

func (egressGroupResource) view(obj any, node string, rv uint64) runtime.Object {
	g := obj.(*types.EgressGroup)
	return &controlplane.EgressGroup{ObjectMeta: objectMeta(g.Name, string(g.UID), rv), GroupMembers: membersOn(g.Members, node)}
}

// egressGroupChange holds the patch of every Node whose members changed,
// and the patch of watchers without a Node ("").
type egressGroupChange map[string]*controlplane.EgressGroupPatch

func (egressGroupResource) prepare(prev, cur any, rv uint64) any {
	p, c := prev.(*types.EgressGroup), cur.(*types.EgressGroup)
	d := &groupDiff{meta: objectMeta(c.Name, string(c.UID), rv), change: appliedToGroupChange{},
		allAdded: controlplane.GroupMemberSet{}, allRemoved: controlplane.GroupMemberSet{}}
	d.merge(p.Members, c.Members)
	if len(d.change) == 0 {
		return nil
	}
	change := egressGroupChange{}
	for node, pt := range d.change {
		change[node] = &controlplane.EgressGroupPatch{ObjectMeta: pt.ObjectMeta,
			AddedGroupMembers: pt.AddedGroupMembers, RemovedGroupMembers: pt.RemovedGroupMembers}
	}
	// A reader without a Node sees a member come only when it was on no
	// Node, and go only when it is on none now.
	added, removed := d.allAdded, d.allRemoved
	dropPresent(added, p.Members)
	dropPresent(removed, c.Members)
	if len(added) > 0 || len(removed) > 0 {
		change[""] = &controlplane.EgressGroupPatch{ObjectMeta: d.meta,
			AddedGroupMembers: added.Items(), RemovedGroupMembers: removed.Items()}
	}
	return change
}

func (egressGroupResource) modified(prepared any, node string) runtime.Object {
	if prepared == nil {
		return nil
	}
	if p, ok := prepared.(egressGroupChange)[node]; ok {
		return p
	}
	return nil
}

func (egressGroupResource) empty() runtime.Object { return &controlplane.EgressGroup{} }
