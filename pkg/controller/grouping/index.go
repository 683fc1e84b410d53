package grouping

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// EventHandler is told the key of a group whose member list changed: a Pod
// joined or left it, or a member's data (IPs, Node, ports, phase) changed.
type EventHandler func(groupKey string)

// Index holds Pods, Namespaces and groups, and keeps each group's member set
// up to date as Pods and Namespaces come, change and go. It is safe for
// concurrent use; handlers run after the index has released its lock, so they
// may call back into it.
type Index struct {
	mu         sync.RWMutex
	pods       map[string]*podItem
	namespaces map[string]*nsItem
	// nsIndex finds Namespaces by label for cluster-scoped groups.
	nsIndex *itemIndex[*nsItem]
	groups  map[string]*groupItem
	// clusterByPod and clusterByNs file cluster-scoped groups by their Pod and
	// Namespace selectors; Namespace-scoped groups live in their nsItem.
	clusterByPod *selectorIndex[*groupItem]
	clusterByNs  *selectorIndex[*groupItem]
	// blocks files the ipBlock groups by CIDR.
	blocks   *blockIndex
	handlers []EventHandler
	// scratch is reused, under mu, to collect a new group's members.
	scratch []*podItem
}

type podItem struct {
	ns  *nsItem
	pod *v1.Pod
	// pos is the Pod's place in its Namespace's index (itemIndex.all).
	pos int
	// derived is the caller's slot (see VisitGroupPods).
	derived atomic.Value
}

type nsItem struct {
	name   string
	labels labels.Set
	// known is set while the Namespace object exists; an nsItem also exists,
	// with only the name label, while Pods or groups refer to the Namespace.
	known bool
	// pos is the Namespace's place in the Namespace index (itemIndex.all).
	pos  int
	pods *itemIndex[*podItem]
	// groups holds the Namespace-scoped groups of this Namespace.
	groups *selectorIndex[*groupItem]
	// clusterGroups holds the cluster-scoped groups whose Namespace selector
	// matches this Namespace.
	clusterGroups set[*groupItem]
}

func (p *podItem) allPos() *int { return &p.pos }
func (n *nsItem) allPos() *int  { return &n.pos }

type groupItem struct {
	key     string
	sel     *Selector
	members set[*podItem]
	// namespaces holds, for a cluster-scoped group, the Namespaces it matches.
	namespaces set[*nsItem]
}

// NewIndex returns an empty Index.
func NewIndex() *Index {
	return &Index{
		pods:         map[string]*podItem{},
		namespaces:   map[string]*nsItem{},
		nsIndex:      newItemIndex[*nsItem](),
		groups:       map[string]*groupItem{},
		clusterByPod: newSelectorIndex[*groupItem](),
		clusterByNs:  newSelectorIndex[*groupItem](),
		blocks:       newBlockIndex(),
	}
}

// AddEventHandler registers h to hear about affected groups.
func (i *Index) AddEventHandler(h EventHandler) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.handlers = append(i.handlers, h)
}

func podLabels(p *podItem) labels.Set      { return p.pod.Labels }
func nsLabels(n *nsItem) labels.Set        { return n.labels }
func podKey(namespace, name string) string { return namespace + "/" + name }

// selectsLocked tells whether g selects the Pod of item as the index holds
// it now.
func (i *Index) selectsLocked(g *groupItem, item *podItem) bool {
	if b := g.sel.IPBlock; b != nil {
		return i.blocks.holds(b, item)
	}
	if sa := g.sel.ServiceAccount; sa != "" && item.pod.Spec.ServiceAccountName != sa {
		return false
	}
	return (!g.sel.ClusterScoped() || item.ns.clusterGroups.has(g)) && g.sel.PodSelector.Matches(labels.Set(item.pod.Labels))
}

// AddGroup registers the group of sel, computing its members, and returns its
// key. Registering a selector whose key is already known is a no-op. No event
// is sent for the new group: the caller syncs it.
func (i *Index) AddGroup(sel *Selector) string {
	key := sel.Key()
	i.mu.Lock()
	defer i.mu.Unlock()
	if _, ok := i.groups[key]; ok {
		return key
	}
	g := &groupItem{key: key, sel: sel}
	i.groups[key] = g
	i.collectMembersLocked(g)
	return key
}

// collectMembersLocked files a new group and finds its members. They are
// collected first (in scratch space kept under i.mu), so that the member set
// is made at its final size.
func (i *Index) collectMembersLocked(g *groupItem) {
	found := i.scratch[:0]
	defer func() {
		g.members = make(set[*podItem], len(found))
		for _, p := range found {
			g.members[p] = struct{}{}
		}
		clear(found)
		i.scratch = found[:0]
	}()
	sel := g.sel
	addMember := func(p *podItem) { found = append(found, p) }
	if sel.IPBlock != nil {
		if !i.blocks.active() {
			i.blocks.activate(i.pods)
		}
		i.blocks.add(g)
		i.blocks.covered(sel.IPBlock, addMember)
		return
	}
	if sel.External() {
		// Node and Service groups are the caller's: the index only remembers the key.
		return
	}
	if !sel.ClusterScoped() {
		ns := i.namespaceLocked(sel.Namespace)
		ns.groups.add(g, sel.PodSelector)
		if sa := sel.ServiceAccount; sa != "" {
			ns.pods.matching(sel.PodSelector, podLabels, func(p *podItem) {
				if p.pod.Spec.ServiceAccountName == sa {
					addMember(p)
				}
			})
			return
		}
		ns.pods.matching(sel.PodSelector, podLabels, addMember)
		return
	}
	g.namespaces = set[*nsItem]{}
	i.clusterByPod.add(g, sel.PodSelector)
	i.clusterByNs.add(g, sel.NamespaceSelector)
	i.nsIndex.matching(sel.NamespaceSelector, nsLabels, func(ns *nsItem) {
		ns.clusterGroups[g] = struct{}{}
		g.namespaces[ns] = struct{}{}
		ns.pods.matching(sel.PodSelector, podLabels, addMember)
	})
}

// DeleteGroup forgets the group of key; unknown keys are ignored.
func (i *Index) DeleteGroup(key string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	g, ok := i.groups[key]
	if !ok {
		return
	}
	delete(i.groups, key)
	if g.sel.IPBlock != nil {
		i.blocks.remove(g)
		return
	}
	if g.sel.External() {
		return
	}
	if !g.sel.ClusterScoped() {
		ns := i.namespaces[g.sel.Namespace]
		ns.groups.remove(g, g.sel.PodSelector)
		i.gcNamespaceLocked(ns)
		return
	}
	i.clusterByPod.remove(g, g.sel.PodSelector)
	i.clusterByNs.remove(g, g.sel.NamespaceSelector)
	for ns := range g.namespaces {
		delete(ns.clusterGroups, g)
	}
}

// HasGroup tells whether a group with key is registered.
func (i *Index) HasGroup(key string) bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	_, ok := i.groups[key]
	return ok
}

// GroupPods returns the Pods the group of key selects (in no particular
// order) and whether the group is registered. The Pods are the informer's
// objects: callers must not modify them.
func (i *Index) GroupPods(key string) ([]*v1.Pod, bool) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	g, ok := i.groups[key]
	if !ok {
		return nil, false
	}
	pods := make([]*v1.Pod, 0, len(g.members))
	for p := range g.members {
		pods = append(pods, p.pod)
	}
	return pods, true
}

// VisitGroupPods calls visit for each Pod the group of key selects (in no
// particular order) and reports whether the group is registered. With each
// Pod comes a slot that lives as long as the index holds the Pod (across its
// updates): callers may keep there data derived from the Pod object, such as
// the group member built from it, and check on use that it derives from the
// object visited. Visits run under the index's read lock: visit must not call
// into the index.
func (i *Index) VisitGroupPods(key string, visit func(pod *v1.Pod, derived *atomic.Value)) bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	g, ok := i.groups[key]
	if !ok {
		return false
	}
	for p := range g.members {
		visit(p.pod, &p.derived)
	}
	return true
}

// Counts returns the numbers of Pods, Namespaces (with objects or
// references) and groups held, for logs and tests.
func (i *Index) Counts() (pods, namespaces, groups int) {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return len(i.pods), len(i.namespaces), len(i.groups)
}

// AddPod adds or updates a Pod and notifies the groups it joins, leaves, or
// belongs to while its member data changes.
func (i *Index) AddPod(pod *v1.Pod) {
	i.notify(i.addPod(pod))
}

func (i *Index) addPod(pod *v1.Pod) []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	key := podKey(pod.Namespace, pod.Name)
	ns := i.namespaceLocked(pod.Namespace)
	item := i.pods[key]
	var old *v1.Pod
	if item == nil {
		item = &podItem{ns: ns}
		i.pods[key] = item
	} else {
		old = item.pod
		ns.pods.remove(item, old.Labels)
	}
	item.pod = pod
	ns.pods.add(item, pod.Labels)
	oldIPs, newIPs := i.blocks.repod(item, old, pod)

	dataChanged := old == nil || MemberDataChanged(old, pod)
	var affected []string
	seen := set[*groupItem]{}
	check := func(g *groupItem) {
		if seen.has(g) {
			return
		}
		seen[g] = struct{}{}
		was := g.members.has(item)
		is := i.selectsLocked(g, item)
		if is {
			g.members[item] = struct{}{}
		} else if was {
			delete(g.members, item)
		}
		if was != is || is && dataChanged {
			affected = append(affected, g.key)
		}
	}
	if old != nil {
		ns.groups.candidates(old.Labels, check)
		i.clusterByPod.candidates(old.Labels, check)
		i.blocks.candidates(oldIPs, check)
	}
	ns.groups.candidates(pod.Labels, check)
	i.clusterByPod.candidates(pod.Labels, check)
	i.blocks.candidates(newIPs, check)
	return affected
}

// DeletePod removes a Pod and notifies the groups it belonged to.
func (i *Index) DeletePod(namespace, name string) {
	i.notify(i.deletePod(namespace, name))
}

func (i *Index) deletePod(namespace, name string) []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	key := podKey(namespace, name)
	item, ok := i.pods[key]
	if !ok {
		return nil
	}
	delete(i.pods, key)
	ns := item.ns
	ns.pods.remove(item, item.pod.Labels)
	var affected []string
	check := func(g *groupItem) {
		if g.members.has(item) {
			delete(g.members, item)
			affected = append(affected, g.key)
		}
	}
	// A group visited twice (an ipBlock holding two of the Pod's addresses)
	// is no member any more the second time.
	ns.groups.candidates(item.pod.Labels, check)
	i.clusterByPod.candidates(item.pod.Labels, check)
	i.blocks.candidates(i.blocks.addrs[item], check)
	i.blocks.unfile(item)
	i.gcNamespaceLocked(ns)
	return affected
}

// AddNamespace adds or updates a Namespace and notifies the cluster-scoped
// groups whose selection changes with its labels.
func (i *Index) AddNamespace(namespace *v1.Namespace) {
	i.notify(i.addNamespace(namespace))
}

func (i *Index) addNamespace(namespace *v1.Namespace) []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	ns := i.namespaceLocked(namespace.Name)
	ns.known = true
	return i.relabelNamespaceLocked(ns, namespaceLabels(namespace.Name, namespace.Labels))
}

// DeleteNamespace removes a Namespace. Its Pods stay until they are deleted
// themselves, seen as in a Namespace carrying only its name label.
func (i *Index) DeleteNamespace(name string) {
	i.notify(i.deleteNamespace(name))
}

func (i *Index) deleteNamespace(name string) []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	ns, ok := i.namespaces[name]
	if !ok {
		return nil
	}
	ns.known = false
	affected := i.relabelNamespaceLocked(ns, namespaceLabels(name, nil))
	i.gcNamespaceLocked(ns)
	return affected
}

func namespaceLabels(name string, lbls map[string]string) labels.Set {
	out := make(labels.Set, len(lbls)+1)
	for k, v := range lbls {
		out[k] = v
	}
	out[NamespaceNameLabel] = name
	return out
}

// namespaceLocked returns the nsItem of name, creating it (with only its name
// label) and matching it against cluster-scoped groups if needed.
func (i *Index) namespaceLocked(name string) *nsItem {
	if ns, ok := i.namespaces[name]; ok {
		return ns
	}
	ns := &nsItem{
		name:          name,
		labels:        namespaceLabels(name, nil),
		pods:          newItemIndex[*podItem](),
		groups:        newSelectorIndex[*groupItem](),
		clusterGroups: set[*groupItem]{},
	}
	i.namespaces[name] = ns
	i.nsIndex.add(ns, ns.labels)
	i.clusterByNs.candidates(ns.labels, func(g *groupItem) {
		if g.sel.NamespaceSelector.Matches(ns.labels) {
			ns.clusterGroups[g] = struct{}{}
			g.namespaces[ns] = struct{}{}
		}
	})
	return ns
}

// gcNamespaceLocked drops an nsItem nothing refers to any more.
func (i *Index) gcNamespaceLocked(ns *nsItem) {
	if ns.known || len(ns.pods.all) > 0 || ns.groups.size > 0 {
		return
	}
	delete(i.namespaces, ns.name)
	i.nsIndex.remove(ns, ns.labels)
	for g := range ns.clusterGroups {
		delete(g.namespaces, ns)
	}
}

// relabelNamespaceLocked moves ns to newLabels and updates the cluster-scoped
// groups that start or stop selecting it; it returns those whose members
// changed.
func (i *Index) relabelNamespaceLocked(ns *nsItem, newLabels labels.Set) []string {
	if labels.Equals(ns.labels, newLabels) {
		return nil
	}
	old := ns.labels
	i.nsIndex.remove(ns, old)
	ns.labels = newLabels
	i.nsIndex.add(ns, newLabels)
	var affected []string
	seen := set[*groupItem]{}
	check := func(g *groupItem) {
		if seen.has(g) {
			return
		}
		seen[g] = struct{}{}
		was := ns.clusterGroups.has(g)
		is := g.sel.NamespaceSelector.Matches(newLabels)
		if was == is {
			return
		}
		changed := false
		if is {
			ns.clusterGroups[g] = struct{}{}
			g.namespaces[ns] = struct{}{}
			ns.pods.matching(g.sel.PodSelector, podLabels, func(p *podItem) {
				g.members[p] = struct{}{}
				changed = true
			})
		} else {
			delete(ns.clusterGroups, g)
			delete(g.namespaces, ns)
			for _, p := range ns.pods.all {
				if g.members.has(p) {
					delete(g.members, p)
					changed = true
				}
			}
		}
		if changed {
			affected = append(affected, g.key)
		}
	}
	i.clusterByNs.candidates(old, check)
	i.clusterByNs.candidates(newLabels, check)
	return affected
}

func (i *Index) notify(keys []string) {
	if len(keys) == 0 {
		return
	}
	i.mu.RLock()
	handlers := i.handlers
	i.mu.RUnlock()
	for _, h := range handlers {
		for _, k := range keys {
			h(k)
		}
	}
}

// MemberDataChanged tells whether a Pod update changes what a group member is
// built from — its IPs, Node, container ports or phase — so that a label-only
// or condition-only update does not resync groups that keep the Pod.
func MemberDataChanged(old, cur *v1.Pod) bool {
	if old.Spec.NodeName != cur.Spec.NodeName || old.Status.Phase != cur.Status.Phase ||
		old.Status.PodIP != cur.Status.PodIP || len(old.Status.PodIPs) != len(cur.Status.PodIPs) {
		return true
	}
	for j := range old.Status.PodIPs {
		if old.Status.PodIPs[j].IP != cur.Status.PodIPs[j].IP {
			return true
		}
	}
	if len(old.Spec.Containers) != len(cur.Spec.Containers) {
		return true
	}
	for j := range old.Spec.Containers {
		op, cp := old.Spec.Containers[j].Ports, cur.Spec.Containers[j].Ports
		if len(op) != len(cp) {
			return true
		}
		for k := range op {
			if op[k].Name != cp[k].Name || op[k].ContainerPort != cp[k].ContainerPort || op[k].Protocol != cp[k].Protocol {
				return true
			}
		}
	}
	return false
}
