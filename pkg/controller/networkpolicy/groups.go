package networkpolicy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/grouping"
	"antrea.io/antrea/pkg/controller/types"
)

// link records that a policy applied to atg uses ag in a rule: ag then spans
// atg's Nodes too.
func link(atg *appliedToGroupState, ag *addressGroupState) {
	atg.addressGroups[ag]++
	ag.appliedToGroups[atg]++
	if atg.addressGroups[ag] == 1 {
		ag.moveSpan(nil, atg.span)
	}
}

// unlink undoes one link.
func unlink(atg *appliedToGroupState, ag *addressGroupState) {
	if atg == nil {
		return
	}
	n := atg.addressGroups[ag] - 1
	if n > 0 {
		atg.addressGroups[ag] = n
		ag.appliedToGroups[atg] = n
		return
	}
	delete(atg.addressGroups, ag)
	delete(ag.appliedToGroups, atg)
	ag.moveSpan(atg.span, nil)
}

// moveSpan replaces the contribution of one linked AppliedToGroup, whose span
// went from old to cur, in the AddressGroup's span. It is called once the
// link itself is made or undone (ag.appliedToGroups is current).
//
// While at most one AppliedToGroup is linked (most AddressGroups: a policy's
// peer is often its own podSelector), the span is that group's immutable
// span itself and no Node is counted; counting starts, from the linked
// groups' spans, when a second one links, and stops when one is left.
func (ag *addressGroupState) moveSpan(old, cur sets.Set[string]) {
	if len(ag.appliedToGroups) <= 1 {
		ag.nodeCount = nil
		var span sets.Set[string]
		for atg := range ag.appliedToGroups {
			span = atg.span
		}
		if span == nil {
			span = sets.New[string]()
		}
		if !sameSet(ag.span, span) {
			ag.dirty = true
		}
		ag.span = span
		return
	}
	if ag.nodeCount == nil {
		ag.nodeCount = map[string]int{}
		for atg := range ag.appliedToGroups {
			for n := range atg.span {
				ag.nodeCount[n]++
			}
		}
		if len(ag.nodeCount) != len(ag.span) {
			ag.dirty = true
		} else {
			for n := range ag.nodeCount {
				if !ag.span.Has(n) {
					ag.dirty = true
					break
				}
			}
		}
		ag.span = sets.KeySet(ag.nodeCount)
		return
	}
	changed := false
	for n := range old {
		if cur.Has(n) {
			continue
		}
		if ag.nodeCount[n]--; ag.nodeCount[n] <= 0 {
			delete(ag.nodeCount, n)
			changed = true
		}
	}
	for n := range cur {
		if old.Has(n) {
			continue
		}
		if ag.nodeCount[n]++; ag.nodeCount[n] == 1 {
			changed = true
		}
	}
	if changed {
		ag.span = sets.KeySet(ag.nodeCount)
		ag.dirty = true
	}
}

// cachedMember is the GroupMember of one version of a Pod, shared by every
// group holding the Pod, so that a Pod in several groups costs one member.
// It lives in the index's slot of the Pod (grouping.Index.VisitGroupPods),
// so it goes with the Pod and costs no lookup.
type cachedMember struct {
	pod    *v1.Pod
	key    string
	member *controlplane.GroupMember
}

// memberOf returns the member of pod, building it when the slot holds none
// or one of an earlier version of the Pod. Two syncs racing on one Pod build
// equal members; either may stay.
func memberOf(pod *v1.Pod, slot *atomic.Value) *cachedMember {
	if m, ok := slot.Load().(*cachedMember); ok && m.pod == pod {
		return m
	}
	member := podMember(pod)
	m := &cachedMember{pod: pod, key: podMemberKey(member), member: member}
	slot.Store(m)
	return m
}

// computeAppliedToGroupLocked recomputes the members of atg per Node. A Pod
// is a member once scheduled and until it terminates. It returns the previous
// span and true when the span changed.
func (c *Controller) computeAppliedToGroupLocked(atg *appliedToGroupState) (sets.Set[string], bool) {
	// The members are collected in scratch space kept under c.mu, sorted,
	// and copied at their final size only when they changed: one list, where
	// a set per Node cost a group spread over the cluster a one-member map
	// on most of its Nodes.
	members := c.scratchMembers[:0]
	if atg.sel.NodeSelector != nil {
		// A Node is its own Node's member.
		for _, node := range c.selectedNodes(atg.sel.NodeSelector) {
			m := nodeMember(node)
			members = append(members, types.NodeMember{Node: node.Name, Key: controlplane.MemberKey(m), Member: m})
		}
	}
	if atg.sel.Service != "" {
		// A NodePort is served on every Node: the Service is every Node's
		// member, while it exists and has NodePorts.
		if m := c.serviceMember(atg.sel.Namespace, atg.sel.Service); m != nil {
			key := controlplane.MemberKey(m)
			for _, node := range c.selectedNodes(labels.Everything()) {
				members = append(members, types.NodeMember{Node: node.Name, Key: key, Member: m})
			}
		}
	}
	// The Pods' members are collected first (in the scratch space the
	// AddressGroups use too), so that the list grows at most once.
	pods := c.scratchPods[:0]
	c.index.VisitGroupPods(atg.sel.Key(), func(pod *v1.Pod, slot *atomic.Value) {
		if pod.Spec.NodeName == "" || podTerminated(pod) {
			return
		}
		pods = append(pods, memberOf(pod, slot))
	})
	members = slices.Grow(members, len(pods))
	for _, m := range pods {
		members = append(members, types.NodeMember{Node: m.pod.Spec.NodeName, Key: m.key, Member: m.member})
	}
	clear(pods)
	c.scratchPods = pods[:0]
	slices.SortFunc(members, types.CompareNodeMembers)
	defer func() {
		clear(members)
		c.scratchMembers = members[:0]
	}()
	// Unchanged members keep the previous list (nothing to write).
	if slices.EqualFunc(members, atg.members, func(a, b types.NodeMember) bool { return a.Node == b.Node && a.Key == b.Key }) {
		return nil, false
	}
	atg.members = nil
	if len(members) > 0 {
		atg.members = slices.Clone(members)
	}
	atg.dirty = true
	nodes, same := 0, true
	for i := range members {
		if i == 0 || members[i].Node != members[i-1].Node {
			nodes++
			same = same && atg.span.Has(members[i].Node)
		}
	}
	if same && nodes == len(atg.span) {
		return nil, false
	}
	old := atg.span
	atg.span = make(sets.Set[string], nodes)
	for i := range members {
		atg.span.Insert(members[i].Node)
	}
	return old, true
}

// computeAddressGroupLocked recomputes the members of ag: every selected Pod
// with an IP that has not terminated (for an ipBlock group, see blockMember).
func (c *Controller) computeAddressGroupLocked(ag *addressGroupState) {
	var nodes []*controlplane.GroupMember
	if ag.sel.NodeSelector != nil {
		for _, node := range c.selectedNodes(ag.sel.NodeSelector) {
			if m := nodeMember(node); len(m.IPs) > 0 {
				nodes = append(nodes, m)
			}
		}
	}
	// The Pods are collected first (scratch space kept under c.mu), so that
	// the set is made at its final size.
	pods := c.scratchPods[:0]
	c.index.VisitGroupPods(ag.sel.Key(), func(pod *v1.Pod, slot *atomic.Value) {
		if podTerminated(pod) || pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
			return
		}
		pods = append(pods, memberOf(pod, slot))
	})
	members := make(controlplane.GroupMemberSet, len(nodes)+len(pods))
	for _, m := range nodes {
		members[controlplane.MemberKey(m)] = m
	}
	block := ag.sel.IPBlock
	for _, m := range pods {
		if block == nil {
			members[m.key] = m.member
		} else if key, member := blockMember(block, m); member != nil {
			members[key] = member
		}
	}
	clear(pods)
	c.scratchPods = pods[:0]
	if ag.members != nil && ag.members.Equal(members) {
		return
	}
	ag.members = members
	ag.dirty = true
}

// blockMember is the member of a Pod in the group of an ipBlock: the Pod
// with only its addresses inside the block, so that a dual-stack Pod does
// not lend its ports to its other address. It is nil for a Pod without named
// ports, which such a group, there only to resolve named ports, can leave out.
func blockMember(block *grouping.IPBlock, m *cachedMember) (string, *controlplane.GroupMember) {
	if len(m.member.Ports) == 0 {
		return "", nil
	}
	var ips []controlplane.IPAddress
	for _, ip := range m.member.IPs {
		if a, ok := netip.AddrFromSlice(ip); ok && block.Contains(a) {
			ips = append(ips, ip)
		}
	}
	switch len(ips) {
	case 0:
		return "", nil
	case len(m.member.IPs):
		return m.key, m.member
	}
	// Members are never modified once built, so the copy may share the rest.
	member := *m.member
	member.IPs = ips
	return controlplane.MemberKey(&member), &member
}

func (c *Controller) publishAppliedToGroupLocked(atg *appliedToGroupState) error {
	if !atg.dirty && atg.published != nil {
		return nil
	}
	obj := &types.AppliedToGroup{
		SpanMeta: types.SpanMeta{NodeNames: atg.span},
		UID:      k8stypes.UID(atg.name),
		Name:     atg.name,
		Selector: atg.typesSel,
		Members:  atg.members,
	}
	var err error
	if atg.published == nil {
		err = createOrUpdate(c.appliedToGroupStore, obj)
	} else {
		err = c.appliedToGroupStore.Update(obj)
	}
	if err != nil {
		return fmt.Errorf("writing AppliedToGroup %s (%s): %w", atg.name, atg.sel.Key(), err)
	}
	atg.published, atg.dirty = obj, false
	return nil
}

func (c *Controller) publishAddressGroupLocked(ag *addressGroupState) error {
	if !ag.dirty && ag.published != nil {
		return nil
	}
	obj := &types.AddressGroup{
		SpanMeta:     types.SpanMeta{NodeNames: ag.span},
		UID:          k8stypes.UID(ag.name),
		Name:         ag.name,
		Selector:     ag.typesSel,
		GroupMembers: ag.members,
	}
	var err error
	if ag.published == nil {
		err = createOrUpdate(c.addressGroupStore, obj)
	} else {
		err = c.addressGroupStore.Update(obj)
	}
	if err != nil {
		return fmt.Errorf("writing AddressGroup %s (%s): %w", ag.name, ag.sel.Key(), err)
	}
	ag.published, ag.dirty = obj, false
	return nil
}

// syncAppliedToGroup recomputes the members of an AppliedToGroup. When its
// span changes, the AddressGroups used by its policies and the policies
// themselves get the new span; groups are written before the policies.
func (c *Controller) syncAppliedToGroup(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	atg := c.appliedToGroups[name]
	if atg == nil {
		return nil
	}
	if old, changed := c.computeAppliedToGroupLocked(atg); changed {
		for ag := range atg.addressGroups {
			ag.moveSpan(old, atg.span)
		}
		klog.V(2).InfoS("AppliedToGroup span changed", "appliedToGroup", name, "nodes", atg.span.Len())
	}
	if err := c.publishAppliedToGroupLocked(atg); err != nil {
		return err
	}
	// The loops below are no-ops unless a span changed now or in an earlier,
	// failed attempt: publishing compares with what the store holds.
	for ag := range atg.addressGroups {
		if err := c.publishAddressGroupLocked(ag); err != nil {
			return err
		}
	}
	for key := range atg.policies.All {
		p := c.policies[key]
		if p == nil || p.published == nil || !p.appliesTo(atg) {
			continue
		}
		span := p.span()
		if sameSet(p.published.NodeNames, span) {
			continue
		}
		desired := *p.published
		desired.SpanMeta = types.SpanMeta{NodeNames: span}
		if err := c.publishPolicyLocked(p, &desired); err != nil {
			return err
		}
	}
	return nil
}

// syncAddressGroup recomputes the members of an AddressGroup.
func (c *Controller) syncAddressGroup(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ag := c.addressGroups[name]
	if ag == nil {
		return nil
	}
	c.computeAddressGroupLocked(ag)
	return c.publishAddressGroupLocked(ag)
}
