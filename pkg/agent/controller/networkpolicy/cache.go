package networkpolicy

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// ruleCache holds this node's slice of the computed policy, indexed by
// policy, by group (which policies use it) and by pod (which
// AppliedToGroups hold it). Its lock is held only while an event is applied
// or a policy's rules are computed from it: never across an OVS write, so
// the watchers never wait on OVS.
type ruleCache struct {
	mu              sync.RWMutex
	policies        map[string]*cpv1beta2.NetworkPolicy
	addressGroups   map[string]map[string]cpv1beta2.GroupMember
	appliedToGroups map[string]map[string]cpv1beta2.GroupMember
	// byAddressGroup and byAppliedToGroup: group name -> policies using it.
	byAddressGroup, byAppliedToGroup map[string]sets.Set[string]
	// byPod: "namespace/name" -> AppliedToGroups holding the pod.
	byPod map[string]sets.Set[string]
	// byService: "namespace/name" -> policies whose toServices name it.
	byService map[string]sets.Set[string]
	// services, if set, resolves toServices (toservices.go).
	services ServiceLookup
	// nodeName is this Node's: a policy applies to the Node itself when
	// one of its applied-to groups holds the member "node:<nodeName>".
	nodeName string
	// fqdn, if set, holds the addresses learned for toFQDN rules' names
	// (its own lock, taken under mu, never the other way).
	fqdn *fqdnCache
}

func newRuleCache() *ruleCache {
	return &ruleCache{
		policies:         map[string]*cpv1beta2.NetworkPolicy{},
		addressGroups:    map[string]map[string]cpv1beta2.GroupMember{},
		appliedToGroups:  map[string]map[string]cpv1beta2.GroupMember{},
		byAddressGroup:   map[string]sets.Set[string]{},
		byAppliedToGroup: map[string]sets.Set[string]{},
		byPod:            map[string]sets.Set[string]{},
		byService:        map[string]sets.Set[string]{},
	}
}

// memberKey identifies a member: its pod, else its node, else its addresses.
func memberKey(m *cpv1beta2.GroupMember) string {
	if m.Pod != nil {
		return "pod:" + m.Pod.Namespace + "/" + m.Pod.Name
	}
	if m.Node != nil {
		return "node:" + m.Node.Name
	}
	if m.Service != nil {
		return "service:" + m.Service.Namespace + "/" + m.Service.Name
	}
	ips := make([]string, 0, len(m.IPs))
	for _, ip := range m.IPs {
		ips = append(ips, net.IP(ip).String())
	}
	sort.Strings(ips)
	return "ips:" + strings.Join(ips, ",")
}

func memberMap(ms []cpv1beta2.GroupMember) map[string]cpv1beta2.GroupMember {
	out := make(map[string]cpv1beta2.GroupMember, len(ms))
	for i := range ms {
		out[memberKey(&ms[i])] = ms[i]
	}
	return out
}

// policyGroups are the groups a policy references, by kind.
func policyGroups(p *cpv1beta2.NetworkPolicy) (address, appliedTo sets.Set[string]) {
	address, appliedTo = sets.New[string](), sets.New[string](p.AppliedToGroups...)
	for _, r := range p.Rules {
		address.Insert(r.From.AddressGroups...)
		address.Insert(r.To.AddressGroups...)
		appliedTo.Insert(r.AppliedToGroups...)
	}
	return address, appliedTo
}

func indexAdd[K comparable](idx map[K]sets.Set[string], key K, v string) {
	if idx[key] == nil {
		idx[key] = sets.New[string]()
	}
	idx[key].Insert(v)
}

func indexDel[K comparable](idx map[K]sets.Set[string], key K, v string) {
	if s := idx[key]; s != nil {
		s.Delete(v)
		if s.Len() == 0 {
			delete(idx, key)
		}
	}
}

// setPolicyLocked stores (p != nil) or removes a policy and its index
// entries; it reports whether anything changed. c.mu is held.
func (c *ruleCache) setPolicyLocked(name string, p *cpv1beta2.NetworkPolicy) bool {
	old := c.policies[name]
	if old != nil && p != nil && old.Generation == p.Generation && old.ResourceVersion == p.ResourceVersion {
		return false
	}
	if old == nil && p == nil {
		return false
	}
	if old != nil {
		a, at := policyGroups(old)
		for g := range a {
			indexDel(c.byAddressGroup, g, name)
		}
		for g := range at {
			indexDel(c.byAppliedToGroup, g, name)
		}
		for svc := range policyServices(old) {
			indexDel(c.byService, svc, name)
		}
		delete(c.policies, name)
	}
	if p != nil {
		a, at := policyGroups(p)
		for g := range a {
			indexAdd(c.byAddressGroup, g, name)
		}
		for g := range at {
			indexAdd(c.byAppliedToGroup, g, name)
		}
		for svc := range policyServices(p) {
			indexAdd(c.byService, svc, name)
		}
		c.policies[name] = p
	}
	return true
}

func (c *ruleCache) groups(address bool) map[string]map[string]cpv1beta2.GroupMember {
	if address {
		return c.addressGroups
	}
	return c.appliedToGroups
}

func (c *ruleCache) users(address bool, group string) sets.Set[string] {
	idx := c.byAppliedToGroup
	if address {
		idx = c.byAddressGroup
	}
	return idx[group].Clone()
}

// setGroupLocked replaces a group's members (nil members: the group is
// gone), keeping the pod index; it reports whether anything changed.
func (c *ruleCache) setGroupLocked(address bool, name string, members map[string]cpv1beta2.GroupMember) bool {
	gs := c.groups(address)
	old, had := gs[name]
	if had && members != nil && sameMembers(old, members) {
		return false
	}
	if !address {
		for k, m := range old {
			if _, keep := members[k]; !keep && m.Pod != nil {
				indexDel(c.byPod, m.Pod.Namespace+"/"+m.Pod.Name, name)
			}
		}
		for _, m := range members {
			if m.Pod != nil {
				indexAdd(c.byPod, m.Pod.Namespace+"/"+m.Pod.Name, name)
			}
		}
	}
	if members == nil {
		delete(gs, name)
		return had
	}
	gs[name] = members
	return true
}

// patchGroupLocked applies a patch of members in place.
func (c *ruleCache) patchGroupLocked(address bool, name string, added, removed []cpv1beta2.GroupMember) {
	gs := c.groups(address)
	members := gs[name]
	if members == nil {
		members = map[string]cpv1beta2.GroupMember{}
		gs[name] = members
	}
	for i := range removed {
		k := memberKey(&removed[i])
		if m, ok := members[k]; ok {
			delete(members, k)
			if !address && m.Pod != nil {
				indexDel(c.byPod, m.Pod.Namespace+"/"+m.Pod.Name, name)
			}
		}
	}
	for i := range added {
		m := added[i]
		members[memberKey(&m)] = m
		if !address && m.Pod != nil {
			indexAdd(c.byPod, m.Pod.Namespace+"/"+m.Pod.Name, name)
		}
	}
}

// replacePolicies replaces every policy after a list and returns the
// policies that changed.
func (c *ruleCache) replacePolicies(objs []runtime.Object) sets.Set[string] {
	c.mu.Lock()
	defer c.mu.Unlock()
	affected, seen := sets.New[string](), sets.New[string]()
	for _, o := range objs {
		p := o.(*cpv1beta2.NetworkPolicy)
		seen.Insert(p.Name)
		if c.setPolicyLocked(p.Name, p) {
			affected.Insert(p.Name)
		}
	}
	for name := range c.policies {
		if !seen.Has(name) && c.setPolicyLocked(name, nil) {
			affected.Insert(name)
		}
	}
	return affected
}

// applyPolicy applies one watch event of a policy.
func (c *ruleCache) applyPolicy(ev watch.Event) (sets.Set[string], error) {
	p, ok := ev.Object.(*cpv1beta2.NetworkPolicy)
	if !ok {
		return nil, fmt.Errorf("object %T", ev.Object)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Type == watch.Deleted {
		c.setPolicyLocked(p.Name, nil)
	} else if !c.setPolicyLocked(p.Name, p) {
		return nil, nil
	}
	return sets.New(p.Name), nil
}

// replaceGroups replaces every group of a kind after a list and returns
// the policies using a group that changed.
func (c *ruleCache) replaceGroups(address bool, objs []runtime.Object) sets.Set[string] {
	c.mu.Lock()
	defer c.mu.Unlock()
	affected, seen := sets.New[string](), sets.New[string]()
	for _, o := range objs {
		name, members := groupOf(o)
		seen.Insert(name)
		if c.setGroupLocked(address, name, memberMap(members)) {
			affected = affected.Union(c.users(address, name))
		}
	}
	for name := range c.groups(address) {
		if !seen.Has(name) && c.setGroupLocked(address, name, nil) {
			affected = affected.Union(c.users(address, name))
		}
	}
	return affected
}

// applyGroup applies one watch event of a group: a full object on ADDED
// and DELETED, a patch of members on MODIFIED.
func (c *ruleCache) applyGroup(address bool, ev watch.Event) (sets.Set[string], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var name string
	switch o := ev.Object.(type) {
	case *cpv1beta2.AddressGroupPatch:
		name = o.Name
		c.patchGroupLocked(address, name, o.AddedGroupMembers, o.RemovedGroupMembers)
	case *cpv1beta2.AppliedToGroupPatch:
		name = o.Name
		c.patchGroupLocked(address, name, o.AddedGroupMembers, o.RemovedGroupMembers)
	default:
		var members []cpv1beta2.GroupMember
		name, members = groupOf(ev.Object)
		if name == "" {
			return nil, fmt.Errorf("object %T", ev.Object)
		}
		if ev.Type == watch.Deleted {
			c.setGroupLocked(address, name, nil)
		} else {
			c.setGroupLocked(address, name, memberMap(members))
		}
	}
	return c.users(address, name), nil
}

// policiesForPod are the policies applied to a pod through any group.
func (c *ruleCache) policiesForPod(ns, name string) sets.Set[string] {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := sets.New[string]()
	for g := range c.byPod[ns+"/"+name] {
		out = out.Union(c.byAppliedToGroup[g])
	}
	return out
}

// policyNames lists every cached policy.
func (c *ruleCache) policyNames() sets.Set[string] {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return sets.KeySet(c.policies)
}

func groupOf(o runtime.Object) (string, []cpv1beta2.GroupMember) {
	switch g := o.(type) {
	case *cpv1beta2.AddressGroup:
		return g.Name, g.GroupMembers
	case *cpv1beta2.AppliedToGroup:
		return g.Name, g.GroupMembers
	}
	return "", nil
}

func sameMembers(a, b map[string]cpv1beta2.GroupMember) bool {
	if len(a) != len(b) {
		return false
	}
	for k, m := range a {
		n, ok := b[k]
		if !ok || fmt.Sprint(m) != fmt.Sprint(n) {
			return false
		}
	}
	return true
}
