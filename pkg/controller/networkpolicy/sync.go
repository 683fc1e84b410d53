package networkpolicy

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/grouping"
	"antrea.io/antrea/pkg/controller/types"
)

// selectorGroups are the groups built from one index selector; the selector
// stays registered in the index while either exists.
type selectorGroups struct {
	sel       *grouping.Selector
	name      string
	typesSel  *types.GroupSelector
	appliedTo *appliedToGroupState
	address   *addressGroupState
}

// typesSelector is the selector in the stores' form, built once per selector.
func (sg *selectorGroups) typesSelector() *types.GroupSelector {
	if sg.typesSel != nil {
		return sg.typesSel
	}
	if b := sg.sel.IPBlock; b != nil {
		block := &controlplane.IPBlock{CIDR: prefixIPNet(b.CIDR)}
		for _, e := range b.Except {
			block.Except = append(block.Except, prefixIPNet(e))
		}
		sg.typesSel = types.NewIPBlockGroupSelector(block, b.String())
	} else if sg.sel.External() || sg.sel.ServiceAccount != "" {
		sg.typesSel = &types.GroupSelector{Namespace: sg.sel.Namespace, NormalizedName: sg.sel.Key()}
	} else {
		sg.typesSel = types.NewGroupSelector(sg.sel.Namespace, sg.sel.PodSelector, sg.sel.NamespaceSelector)
	}
	return sg.typesSel
}

// appliedToGroupState is the computation's view of one AppliedToGroup.
type appliedToGroupState struct {
	name     string
	sel      *grouping.Selector
	typesSel *types.GroupSelector
	// policies are the keys of the policies applied to this group.
	policies keySet
	// addressGroups counts, per AddressGroup, the policies that link it to
	// this group: the AddressGroup's span includes this group's span.
	addressGroups map[*addressGroupState]int
	// members (sorted as types.AppliedToGroup.Members) and span are
	// immutable once set: a change replaces them.
	members   []types.NodeMember
	span      sets.Set[string]
	dirty     bool
	published *types.AppliedToGroup
}

// addressGroupState is the computation's view of one AddressGroup.
type addressGroupState struct {
	name     string
	sel      *grouping.Selector
	typesSel *types.GroupSelector
	// policies are the keys of the policies whose rules use this group.
	policies keySet
	// appliedToGroups mirrors appliedToGroupState.addressGroups.
	appliedToGroups map[*appliedToGroupState]int
	// nodeCount counts, per Node, the linked AppliedToGroups spanning it; the
	// span is its key set. Counting makes a span change O(changed Nodes).
	// It is nil while at most one AppliedToGroup is linked: the span is then
	// that group's (see moveSpan).
	nodeCount map[string]int
	// members and span are immutable once set: a change replaces them.
	members   controlplane.GroupMemberSet
	span      sets.Set[string]
	dirty     bool
	published *types.AddressGroup
}

// policyState is the computation's view of one user policy: a K8s
// NetworkPolicy (one AppliedToGroup) or an Antrea-native policy (any number).
type policyState struct {
	key           string
	name          string
	appliedTo     []*appliedToGroupState
	addressGroups []*addressGroupState
	generation    int64
	published     *types.NetworkPolicy
}

// span is the union of the spans of the policy's AppliedToGroups: with one
// group, that group's (immutable) set itself.
func (p *policyState) span() sets.Set[string] {
	switch len(p.appliedTo) {
	case 0:
		return sets.New[string]()
	case 1:
		return p.appliedTo[0].span
	}
	s := sets.New[string]()
	for _, atg := range p.appliedTo {
		s = s.Union(atg.span)
	}
	return s
}

// appliesTo tells whether atg is one of the policy's AppliedToGroups.
func (p *policyState) appliesTo(atg *appliedToGroupState) bool {
	for _, a := range p.appliedTo {
		if a == atg {
			return true
		}
	}
	return false
}

// renameLocked gives the policy a new internal name: the user's policy was
// deleted and created again (a new UID) before this sync, so agents must see
// the old object go and a new one come.
func (c *Controller) renameLocked(p *policyState, name string) error {
	if p.name == name {
		return nil
	}
	if p.published != nil {
		if err := c.networkPolicyStore.Delete(p.name); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting replaced internal NetworkPolicy %s of %s: %w", p.name, p.key, err)
		}
	}
	p.name, p.published, p.generation = name, nil, 0
	return nil
}

// setGroupsLocked makes the policy use the groups of atgSels and agSels:
// it acquires them, links every AppliedToGroup with every AddressGroup (an
// AddressGroup reaches every Node of the policies using it), then unlinks
// and releases what the policy used before and no longer does. Linking comes
// first so that a span shared by old and new links never drops to zero in
// between. It returns the AddressGroups the policy used before.
func (c *Controller) setGroupsLocked(p *policyState, atgSels []*grouping.Selector, agSels map[string]*grouping.Selector) []*addressGroupState {
	atgs := make([]*appliedToGroupState, 0, len(atgSels))
	for _, sel := range atgSels {
		atg := c.acquireAppliedToGroupLocked(sel, p.key)
		if !slicesContains(atgs, atg) {
			atgs = append(atgs, atg)
		}
	}
	agKeys := make([]string, 0, len(agSels))
	for k := range agSels {
		agKeys = append(agKeys, k)
	}
	sort.Strings(agKeys)
	ags := make([]*addressGroupState, 0, len(agKeys))
	for _, k := range agKeys {
		ags = append(ags, c.acquireAddressGroupLocked(agSels[k], p.key))
	}
	for _, atg := range atgs {
		for _, ag := range ags {
			link(atg, ag)
		}
	}
	for _, atg := range p.appliedTo {
		for _, ag := range p.addressGroups {
			unlink(atg, ag)
		}
	}
	for _, atg := range p.appliedTo {
		if !slicesContains(atgs, atg) {
			c.releaseAppliedToGroupLocked(atg, p.key)
		}
	}
	kept := make(map[*addressGroupState]bool, len(ags))
	for _, ag := range ags {
		kept[ag] = true
	}
	for _, ag := range p.addressGroups {
		if !kept[ag] {
			c.releaseAddressGroupLocked(ag, p.key)
		}
	}
	oldAGs := p.addressGroups
	p.appliedTo, p.addressGroups = atgs, ags
	return oldAGs
}

// keySet is a set of policy keys (never empty strings) that costs no map
// while it holds one key, as most groups' sets do.
type keySet struct {
	one  string
	many map[string]struct{}
}

func (s *keySet) Insert(k string) {
	switch {
	case s.many != nil:
		s.many[k] = struct{}{}
	case s.one == "" || s.one == k:
		s.one = k
	default:
		s.many = map[string]struct{}{s.one: {}, k: {}}
		s.one = ""
	}
}

func (s *keySet) Delete(k string) {
	if s.many != nil {
		delete(s.many, k)
		if len(s.many) == 0 {
			s.many = nil
		}
		return
	}
	if s.one == k {
		s.one = ""
	}
}

func (s *keySet) Len() int {
	if s.many != nil {
		return len(s.many)
	}
	if s.one != "" {
		return 1
	}
	return 0
}

func (s *keySet) Has(k string) bool {
	if s.many != nil {
		_, ok := s.many[k]
		return ok
	}
	return k != "" && s.one == k
}

// List returns the keys, in no particular order.
func (s *keySet) List() []string {
	if s.many == nil {
		if s.one == "" {
			return nil
		}
		return []string{s.one}
	}
	out := make([]string, 0, len(s.many))
	for k := range s.many {
		out = append(out, k)
	}
	return out
}

// All visits the keys, in no particular order; the set must not change meanwhile.
func (s *keySet) All(yield func(string) bool) {
	if s.many == nil {
		if s.one != "" {
			yield(s.one)
		}
		return
	}
	for k := range s.many {
		if !yield(k) {
			return
		}
	}
}

func slicesContains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// publishAllLocked writes the policy's groups, then desired, then the
// groups it stopped using (their spans may have shrunk), then collects
// unused groups.
func (c *Controller) publishAllLocked(p *policyState, desired *types.NetworkPolicy, oldAGs []*addressGroupState) error {
	for _, atg := range p.appliedTo {
		if err := c.publishAppliedToGroupLocked(atg); err != nil {
			return err
		}
	}
	if err := c.publishAddressGroupsLocked(p.addressGroups); err != nil {
		return err
	}
	if err := c.publishPolicyLocked(p, desired); err != nil {
		return err
	}
	if err := c.publishAddressGroupsLocked(oldAGs); err != nil {
		return err
	}
	return c.collectGarbageLocked()
}

// syncPolicy computes the internal NetworkPolicy of the K8s policy key
// (namespace/name), acquires and releases its groups, and writes the groups
// and then the policy into the stores; a deleted policy is removed.
func (c *Controller) syncPolicy(_ context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		klog.ErrorS(err, "Dropping malformed NetworkPolicy key", "key", key)
		return nil
	}
	np, err := c.npLister.NetworkPolicies(namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting NetworkPolicy %s: %w", key, err)
	}
	ns, err := c.nsLister.Get(namespace)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting Namespace %s of NetworkPolicy %s: %w", namespace, key, err)
	}
	logs := namespaceLogs(ns)
	// The rules and the groups' members are computed before taking c.mu, so
	// that syncs of different policies do that part concurrently.
	var computed *computedPolicy
	if np != nil {
		computed, err = computePolicy(np, groupName)
		if err != nil {
			// The API server validates policies, so this is a malformed object a
			// retry cannot fix; the previous computation, if any, stays.
			klog.ErrorS(err, "Cannot compute NetworkPolicy", "networkPolicy", key)
			return nil
		}
		c.prepareGroups([]*grouping.Selector{computed.appliedTo}, computed.addressGroups)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.policies[key]
	if np == nil {
		if p == nil {
			return c.collectGarbageLocked()
		}
		return c.deletePolicyLocked(p)
	}
	for i := range computed.rules {
		computed.rules[i].EnableLogging = logs
	}
	internalName := policyName(np)
	if p == nil {
		p = &policyState{key: key, name: internalName}
		c.policies[key] = p
	} else if err := c.renameLocked(p, internalName); err != nil {
		c.unprepareLocked([]*grouping.Selector{computed.appliedTo}, computed.addressGroups)
		return err
	}
	oldAGs := c.setGroupsLocked(p, []*grouping.Selector{computed.appliedTo}, computed.addressGroups)
	atg := p.appliedTo[0]
	desired := &types.NetworkPolicy{
		SpanMeta:        types.SpanMeta{NodeNames: atg.span},
		UID:             k8stypes.UID(p.name),
		Name:            p.name,
		SourceRef:       &controlplane.NetworkPolicyReference{Type: controlplane.K8sNetworkPolicy, Namespace: np.Namespace, Name: np.Name, UID: np.UID},
		Rules:           computed.rules,
		AppliedToGroups: []string{atg.name},
	}
	return c.publishAllLocked(p, desired, oldAGs)
}

// publishAddressGroupsLocked writes the AddressGroups that changed and are
// still used; unused ones are left to collectGarbageLocked.
func (c *Controller) publishAddressGroupsLocked(ags []*addressGroupState) error {
	for _, ag := range ags {
		if ag.policies.Len() == 0 {
			continue
		}
		if err := c.publishAddressGroupLocked(ag); err != nil {
			return err
		}
	}
	return nil
}

// deletePolicyLocked removes a policy from the store and releases its groups.
func (c *Controller) deletePolicyLocked(p *policyState) error {
	if p.published != nil {
		if err := c.networkPolicyStore.Delete(p.name); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting internal NetworkPolicy %s of %s: %w", p.name, p.key, err)
		}
		p.published = nil
	}
	for _, atg := range p.appliedTo {
		for _, ag := range p.addressGroups {
			unlink(atg, ag)
		}
	}
	for _, ag := range p.addressGroups {
		c.releaseAddressGroupLocked(ag, p.key)
	}
	for _, atg := range p.appliedTo {
		c.releaseAppliedToGroupLocked(atg, p.key)
	}
	delete(c.policies, p.key)
	klog.V(2).InfoS("Deleted internal NetworkPolicy", "networkPolicy", p.key, "name", p.name)
	// AddressGroups other policies still use may have lost Nodes from their span.
	if err := c.publishAddressGroupsLocked(p.addressGroups); err != nil {
		return err
	}
	return c.collectGarbageLocked()
}

// publishPolicyLocked writes desired unless the store already holds the same
// content and span. The generation increases when rules or groups change.
func (c *Controller) publishPolicyLocked(p *policyState, desired *types.NetworkPolicy) error {
	prev := p.published
	sameContent := prev != nil && reflect.DeepEqual(prev.Rules, desired.Rules) &&
		reflect.DeepEqual(prev.AppliedToGroups, desired.AppliedToGroups) && reflect.DeepEqual(prev.SourceRef, desired.SourceRef) &&
		reflect.DeepEqual(prev.Priority, desired.Priority) && reflect.DeepEqual(prev.TierPriority, desired.TierPriority) &&
		prev.AppliedToPerRule == desired.AppliedToPerRule
	if sameContent && sameSet(prev.NodeNames, desired.NodeNames) {
		return nil
	}
	if sameContent {
		desired.Generation = p.generation
	} else {
		desired.Generation = p.generation + 1
	}
	var err error
	if prev == nil {
		err = createOrUpdate(c.networkPolicyStore, desired)
	} else {
		err = c.networkPolicyStore.Update(desired)
	}
	if err != nil {
		return fmt.Errorf("writing internal NetworkPolicy %s of %s: %w", p.name, p.key, err)
	}
	p.published, p.generation = desired, desired.Generation
	if desired.SourceRef != nil && desired.SourceRef.Type != controlplane.K8sNetworkPolicy {
		c.enqueueStatus(p.key)
	}
	return nil
}

// sameSet compares spans; the common case is the very same immutable set.
func sameSet(a, b sets.Set[string]) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		return true
	}
	return a.Equal(b)
}

// createOrUpdate creates obj, or updates it when a previous attempt (whose
// outcome was lost to an error) already created it.
func createOrUpdate(s Store, obj any) error {
	err := s.Create(obj)
	// IsAlreadyExists allocates even for nil: most writes succeed.
	if err != nil && apierrors.IsAlreadyExists(err) {
		return s.Update(obj)
	}
	return err
}

// selectorLocked returns the selector entry of sel, registering sel in the
// index when it is new.
func (c *Controller) selectorLocked(sel *grouping.Selector) *selectorGroups {
	key := sel.Key()
	sg := c.groupsBySelector[key]
	if sg == nil {
		c.index.AddGroup(sel)
		sg = &selectorGroups{sel: sel, name: groupName(key)}
		c.groupsBySelector[key] = sg
		if sel.NodeSelector != nil {
			c.nodeGroupKeys.Insert(key)
		}
		if sel.Service != "" {
			c.serviceGroupKeys.Insert(key)
		}
	}
	return sg
}

func (c *Controller) acquireAppliedToGroupLocked(sel *grouping.Selector, policyKey string) *appliedToGroupState {
	sg := c.selectorLocked(sel)
	if sg.appliedTo == nil {
		atg := &appliedToGroupState{
			name:          sg.name,
			sel:           sg.sel,
			typesSel:      sg.typesSelector(),
			addressGroups: map[*addressGroupState]int{},
			span:          sets.New[string](),
		}
		sg.appliedTo = atg
		c.appliedToGroups[atg.name] = atg
		c.computeAppliedToGroupLocked(atg)
		atg.dirty = true
	}
	sg.appliedTo.policies.Insert(policyKey)
	return sg.appliedTo
}

func (c *Controller) acquireAddressGroupLocked(sel *grouping.Selector, policyKey string) *addressGroupState {
	sg := c.selectorLocked(sel)
	if sg.address == nil {
		ag := &addressGroupState{
			name:            sg.name,
			sel:             sg.sel,
			typesSel:        sg.typesSelector(),
			appliedToGroups: map[*appliedToGroupState]int{},
			span:            sets.New[string](),
		}
		sg.address = ag
		c.addressGroups[ag.name] = ag
		c.computeAddressGroupLocked(ag)
		ag.dirty = true
	}
	sg.address.policies.Insert(policyKey)
	return sg.address
}

func (c *Controller) releaseAppliedToGroupLocked(atg *appliedToGroupState, policyKey string) {
	atg.policies.Delete(policyKey)
	if atg.policies.Len() == 0 {
		c.orphans.Insert(atg.sel.Key())
	}
}

func (c *Controller) releaseAddressGroupLocked(ag *addressGroupState, policyKey string) {
	ag.policies.Delete(policyKey)
	if ag.policies.Len() == 0 {
		c.orphans.Insert(ag.sel.Key())
	}
}

// prepareGroups registers the selectors of a policy's groups in the index
// and builds the members of their Pods (memberOf) without holding c.mu, so
// that concurrent syncs do this work in parallel; under c.mu the groups then
// only collect the members built. Registering before the controller's group
// exists is safe: an index event for the selector meanwhile finds no group
// to queue, and the group, created later under c.mu, reads the index as it
// is then. A selector registered here that no sync acquires is removed from
// the index by collectGarbageLocked (unprepareLocked files it there).
func (c *Controller) prepareGroups(atgs []*grouping.Selector, ags map[string]*grouping.Selector) {
	prepare := func(sel *grouping.Selector) {
		if sel == nil || sel.External() {
			return
		}
		key := sel.Key()
		if c.index.HasGroup(key) {
			// In use already: its members are built.
			return
		}
		c.index.AddGroup(sel)
		c.index.VisitGroupPods(key, func(pod *v1.Pod, slot *atomic.Value) {
			if !podTerminated(pod) {
				memberOf(pod, slot)
			}
		})
	}
	for _, sel := range atgs {
		prepare(sel)
	}
	for _, sel := range ags {
		prepare(sel)
	}
}

// unprepareLocked files the selectors prepareGroups registered, for a sync
// that failed before acquiring them, for collection.
func (c *Controller) unprepareLocked(atgs []*grouping.Selector, ags map[string]*grouping.Selector) {
	for _, sel := range atgs {
		c.orphans.Insert(sel.Key())
	}
	for k := range ags {
		c.orphans.Insert(k)
	}
}

// collectGarbageLocked deletes the groups no policy uses any more: from the
// stores, from the computation state and, once both kinds of a selector are
// gone, from the index. Only selectors released since the last collection
// are visited; a failed delete stays queued for the next sync.
func (c *Controller) collectGarbageLocked() error {
	for key := range c.orphans {
		sg := c.groupsBySelector[key]
		if sg == nil {
			// Registered by prepareGroups for a sync that failed: a sync
			// preparing it now registers it again when it creates the group.
			c.index.DeleteGroup(key)
			c.orphans.Delete(key)
			continue
		}
		if atg := sg.appliedTo; atg != nil && atg.policies.Len() == 0 {
			if atg.published != nil {
				if err := c.appliedToGroupStore.Delete(atg.name); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("deleting AppliedToGroup %s (%s): %w", atg.name, key, err)
				}
			}
			delete(c.appliedToGroups, atg.name)
			sg.appliedTo = nil
		}
		if ag := sg.address; ag != nil && ag.policies.Len() == 0 {
			if ag.published != nil {
				if err := c.addressGroupStore.Delete(ag.name); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("deleting AddressGroup %s (%s): %w", ag.name, key, err)
				}
			}
			delete(c.addressGroups, ag.name)
			sg.address = nil
		}
		if sg.appliedTo == nil && sg.address == nil {
			c.index.DeleteGroup(key)
			delete(c.groupsBySelector, key)
			c.nodeGroupKeys.Delete(key)
			c.serviceGroupKeys.Delete(key)
		}
		c.orphans.Delete(key)
	}
	return nil
}
