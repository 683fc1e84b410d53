package networkpolicy

import (
	"context"
	"fmt"
	"net/netip"
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
	// single is the set holding only this member, shared by the Node
	// entries of every AppliedToGroup where the Pod is alone on its Node
	// (most entries of groups spread over many Nodes). Built under c.mu.
	single controlplane.GroupMemberSet
}

// podOnNode is a member and its Pod's Node, in the scratch space of the
// group computations.
type podOnNode struct {
	node string
	m    *cachedMember
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
	var byNode map[string]controlplane.GroupMemberSet
	if atg.sel.NodeSelector != nil || atg.sel.Service != "" {
		byNode = make(map[string]controlplane.GroupMemberSet, len(atg.membersByNode))
	}
	if atg.sel.NodeSelector != nil {
		// A Node is its own Node's member.
		for _, node := range c.selectedNodes(atg.sel.NodeSelector) {
			m := nodeMember(node)
			byNode[node.Name] = controlplane.GroupMemberSet{controlplane.MemberKey(m): m}
		}
	}
	if atg.sel.Service != "" {
		// A NodePort is served on every Node: the Service is every Node's
		// member, while it exists and has NodePorts.
		if m := c.serviceMember(atg.sel.Namespace, atg.sel.Service); m != nil {
			set := controlplane.GroupMemberSet{controlplane.MemberKey(m): m}
			for _, node := range c.selectedNodes(labels.Everything()) {
				byNode[node.Name] = set
			}
		}
	}
	// Two passes over the Pods, so that every map is made at its final size
	// (growing them was most of the allocation of groups of a few Pods):
	// the first collects the members and counts them per Node in scratch
	// space kept under c.mu.
	pods, counts := c.scratchPods[:0], c.scratchCounts
	clear(counts)
	c.index.VisitGroupPods(atg.sel.Key(), func(pod *v1.Pod, slot *atomic.Value) {
		node := pod.Spec.NodeName
		if node == "" || podTerminated(pod) {
			return
		}
		pods = append(pods, podOnNode{node: node, m: memberOf(pod, slot)})
		counts[node]++
	})
	if len(byNode) == 0 {
		byNode = make(map[string]controlplane.GroupMemberSet, len(counts))
	}
	// counts[node] becomes 0 once the Node's set is the group's own.
	for _, p := range pods {
		m, s, n := p.m, byNode[p.node], counts[p.node]
		switch {
		case s == nil && n == 1:
			// Sets are never modified once built, so Nodes where the Pod is
			// alone share its singleton.
			if m.single == nil {
				m.single = controlplane.GroupMemberSet{m.key: m.member}
			}
			byNode[p.node] = m.single
		case s == nil:
			s = make(controlplane.GroupMemberSet, n)
			s[m.key] = m.member
			byNode[p.node] = s
			counts[p.node] = 0
		case n > 0:
			// A Node or Service member's set (maybe shared): the Node's own
			// set starts here.
			own := make(controlplane.GroupMemberSet, len(s)+int(n))
			for k, v := range s {
				own[k] = v
			}
			own[m.key] = m.member
			byNode[p.node] = own
			counts[p.node] = 0
		default:
			s[m.key] = m.member
		}
	}
	clear(pods)
	c.scratchPods = pods[:0]
	changed := len(byNode) != len(atg.membersByNode)
	for node, s := range byNode {
		// Keep the previous set of a Node whose members are the same, so the
		// store's diff finds nothing there and memory is shared.
		if old, ok := atg.membersByNode[node]; ok && old.Equal(s) {
			byNode[node] = old
		} else {
			changed = true
		}
	}
	if !changed {
		return nil, false
	}
	atg.membersByNode = byNode
	atg.dirty = true
	if len(byNode) == len(atg.span) {
		same := true
		for node := range byNode {
			if !atg.span.Has(node) {
				same = false
				break
			}
		}
		if same {
			return nil, false
		}
	}
	old := atg.span
	atg.span = sets.KeySet(byNode)
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
		pods = append(pods, podOnNode{m: memberOf(pod, slot)})
	})
	members := make(controlplane.GroupMemberSet, len(nodes)+len(pods))
	for _, m := range nodes {
		members[controlplane.MemberKey(m)] = m
	}
	block := ag.sel.IPBlock
	for _, p := range pods {
		if block == nil {
			members[p.m.key] = p.m.member
		} else if key, member := blockMember(block, p.m); member != nil {
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
		SpanMeta:          types.SpanMeta{NodeNames: atg.span},
		UID:               k8stypes.UID(atg.name),
		Name:              atg.name,
		Selector:          atg.typesSel,
		GroupMemberByNode: atg.membersByNode,
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
