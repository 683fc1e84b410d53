// Package egress is the antrea-controller's side of Egress
// (crd.antrea.io/v1beta1, docs/egress.md). For each Egress it
//   - allocates spec.egressIP from spec.externalIPPool when the IP is empty,
//     and writes it into the spec, as upstream's controller does; takes the
//     given IP from the pool when both are set; releases the IP when the
//     Egress goes or its pool changes. After a restart it first takes back
//     the IPs the Egresses hold (RestoreAllocations), then allocates new
//     ones, so no IP is handed out twice;
//   - computes the Pods spec.appliedTo selects, through the grouping index
//     (pkg/controller/grouping), and writes them as the EgressGroup of the
//     same name into the store the controlplane API serves
//     (controlplane.antrea.io/v1beta2 egressgroups) to the agents.
//
// The agents do the rest: choose the Node that holds the IP among the pool's
// Nodes, assign and announce it, steer the members' traffic there and SNAT it,
// and write status.egressNode and status.egressIP.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/storage"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions/crd/v1beta1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
	"antrea.io/antrea/pkg/controller/externalippool"
	"antrea.io/antrea/pkg/controller/grouping"
	"antrea.io/antrea/pkg/controller/types"
)

// Allocator is what the controller needs of the ExternalIPPool allocator
// (externalippool.Controller).
type Allocator interface {
	AllocateIP(pool, owner string) (netip.Addr, error)
	AllocateSpecificIP(pool string, ip netip.Addr, owner string) error
	ReleaseIP(pool string, ip netip.Addr, owner string)
	RestoreAllocations(allocs []externalippool.Allocation) (failed []externalippool.Allocation)
	AddPoolHandler(h externalippool.PoolHandler)
	AddRestorer(r externalippool.Restorer)
	HasSynced() bool
}

// Event reasons recorded on Egresses.
const (
	ReasonAllocated       = "IPAllocated"
	ReasonAllocationError = "IPAllocationFailed"
)

// Owner is the allocation owner of an Egress's IP.
func Owner(egressName string) string { return "Egress/" + egressName }

// allocation is the IP the controller holds for an Egress.
type allocation struct {
	pool string
	ip   netip.Addr
}

// Controller allocates Egress IPs and computes EgressGroups.
type Controller struct {
	client    versioned.Interface
	lister    crdlisters.EgressLister
	synced    []cache.InformerSynced
	allocator Allocator
	store     storage.Interface
	index     *grouping.Index
	queue     workqueue.TypedRateLimitingInterface[string]
	recorder  record.EventRecorder

	mu sync.Mutex
	// allocated is the IPs held for each Egress (by name), one per slot
	// (see Egress.IPSlots); a zero allocation is a slot without an IP.
	allocated map[string][]allocation
	// selectorOf is the grouping key of each Egress's appliedTo, and
	// bySelector the Egresses of each key (groups are shared by selector).
	selectorOf map[string]string
	bySelector map[string]sets.Set[string]
}

// NewController watches Egresses, and Pods and Namespaces (for the groups),
// through the given informers; it writes EgressGroups into store and
// spec.egressIP with client.
func NewController(client versioned.Interface, egresses crdinformers.EgressInformer, pods, namespaces cache.SharedIndexInformer,
	allocator Allocator, store storage.Interface, recorder record.EventRecorder) (*Controller, error) {
	c := &Controller{
		client:     client,
		lister:     egresses.Lister(),
		allocator:  allocator,
		store:      store,
		index:      grouping.NewIndex(),
		recorder:   recorder,
		queue:      workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "egress"}),
		allocated:  map[string][]allocation{},
		selectorOf: map[string]string{},
		bySelector: map[string]sets.Set[string]{},
	}
	c.index.AddEventHandler(c.groupChanged)
	regs := []struct {
		what     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{"Egresses", egresses.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueEgress,
			UpdateFunc: func(_, cur any) { c.enqueueEgress(cur) },
			DeleteFunc: c.enqueueEgress,
		}},
		{"Pods", pods, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addPod,
			UpdateFunc: func(_, cur any) { c.addPod(cur) },
			DeleteFunc: c.deletePod,
		}},
		{"Namespaces", namespaces, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addNamespace,
			UpdateFunc: func(_, cur any) { c.addNamespace(cur) },
			DeleteFunc: c.deleteNamespace,
		}},
	}
	for _, r := range regs {
		reg, err := r.informer.AddEventHandler(r.handler)
		if err != nil {
			return nil, fmt.Errorf("watching %s: %w", r.what, err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	allocator.AddPoolHandler(c.enqueuePoolEgresses)
	allocator.AddRestorer(c.poolAllocations)
	return c, nil
}

// poolAllocations are the IPs of pool the Egresses hold, as the informer has
// them (the allocator takes them back when it builds the pool afresh).
func (c *Controller) poolAllocations(pool string) []externalippool.Allocation {
	egresses, err := c.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []externalippool.Allocation
	for _, eg := range egresses {
		for _, sl := range eg.IPSlots() {
			if sl.Pool == pool && sl.IP.IsValid() {
				out = append(out, externalippool.Allocation{Pool: pool, IP: sl.IP, Owner: Owner(eg.Name)})
			}
		}
	}
	return out
}

func (c *Controller) enqueueEgress(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if eg, ok := obj.(*crdv1beta1.Egress); ok {
		c.queue.Add(eg.Name)
	}
}

// enqueuePoolEgresses enqueues the Egresses that name pool: it came, went
// or changed, or one of its IPs was released.
func (c *Controller) enqueuePoolEgresses(pool string) {
	egresses, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, eg := range egresses {
		if eg.Spec.ExternalIPPool == pool {
			c.queue.Add(eg.Name)
		}
	}
}

func (c *Controller) groupChanged(key string) {
	c.mu.Lock()
	names := c.bySelector[key].UnsortedList()
	c.mu.Unlock()
	for _, n := range names {
		c.queue.Add(n)
	}
}

func (c *Controller) addPod(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok && !pod.Spec.HostNetwork {
		// Host-network Pods leave with the Node's IP: no Egress applies.
		c.index.AddPod(pod)
	}
}

func (c *Controller) deletePod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		c.index.DeletePod(pod.Namespace, pod.Name)
	}
}

func (c *Controller) addNamespace(obj any) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.index.AddNamespace(ns)
	}
}

func (c *Controller) deleteNamespace(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if ns, ok := obj.(*corev1.Namespace); ok {
		c.index.DeleteNamespace(ns.Name)
	}
}

// Run restores the allocations the Egresses hold, then syncs Egresses with
// workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), append(c.synced, c.allocator.HasSynced)...) {
		return
	}
	c.restore()
	for range workers {
		go func() {
			for c.processNext(ctx) {
			}
		}()
	}
	klog.InfoS("Started the Egress controller")
	<-ctx.Done()
}

// restore takes back, from the pools, the IPs the Egresses hold (an
// egressIP with an externalIPPool, or the egressIPs of externalIPPools). An
// Egress whose IP cannot be restored (out of its pool, or held by another)
// is left to its sync, which reports the error on it.
func (c *Controller) restore() {
	egresses, err := c.lister.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Could not list Egresses to restore their IPs")
		return
	}
	type held struct {
		name string
		slot int
		a    externalippool.Allocation
	}
	var all []held
	for _, eg := range egresses {
		for i, sl := range eg.IPSlots() {
			if sl.Pool != "" && sl.IP.IsValid() {
				all = append(all, held{eg.Name, i, externalippool.Allocation{Pool: sl.Pool, IP: sl.IP, Owner: Owner(eg.Name)}})
			}
		}
	}
	allocs := make([]externalippool.Allocation, len(all))
	for i := range all {
		allocs[i] = all[i].a
	}
	failed := map[externalippool.Allocation]bool{}
	for _, a := range c.allocator.RestoreAllocations(allocs) {
		failed[a] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range all {
		if failed[h.a] {
			continue
		}
		held := c.allocated[h.name]
		for len(held) <= h.slot {
			held = append(held, allocation{})
		}
		held[h.slot] = allocation{pool: h.a.Pool, ip: h.a.IP}
		c.allocated[h.name] = held
	}
	klog.InfoS("Restored the Egress IP allocations", "restored", len(all)-len(failed), "failed", len(failed))
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	if err := c.sync(ctx, name); err != nil {
		klog.ErrorS(err, "Could not sync the Egress", "egress", name)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// sync brings the Egress's IP allocation and its EgressGroup in line with
// the Egress (or removes them when it is gone).
func (c *Controller) sync(ctx context.Context, name string) error {
	eg, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		c.release(name)
		c.setGroupSelector(name, nil)
		if err := c.store.Delete(name); err != nil {
			if _, exists, _ := c.store.Get(name); exists {
				return err
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.syncIP(ctx, eg); err != nil {
		return err
	}
	return c.syncGroup(eg)
}

// release frees the IPs held for the Egress, and has the Egresses waiting
// for an IP of those pools try again.
func (c *Controller) release(name string) {
	c.mu.Lock()
	held := c.allocated[name]
	delete(c.allocated, name)
	c.mu.Unlock()
	for _, a := range held {
		c.releaseOne(name, a)
	}
}

func (c *Controller) releaseOne(name string, a allocation) {
	if a.pool == "" {
		return
	}
	c.allocator.ReleaseIP(a.pool, a.ip, Owner(name))
	klog.InfoS("Released the Egress IP", "egress", name, "pool", a.pool, "ip", a.ip)
	c.enqueuePoolEgresses(a.pool)
}

// syncIP allocates, takes or releases the Egress's IPs, slot by slot, and
// writes the allocated ones into the spec.
func (c *Controller) syncIP(ctx context.Context, eg *crdv1beta1.Egress) error {
	want := eg.IPSlots()
	c.mu.Lock()
	held := append([]allocation(nil), c.allocated[eg.Name]...)
	c.mu.Unlock()
	// Release what no slot holds any more: the pool changed, or the spec
	// gives another IP.
	for i := range held {
		if i >= len(want) || held[i].pool != want[i].Pool || (want[i].IP.IsValid() && held[i].ip != want[i].IP) {
			c.releaseOne(eg.Name, held[i])
			held[i] = allocation{}
		}
	}
	held = held[:min(len(held), len(want))]
	for len(held) < len(want) {
		held = append(held, allocation{})
	}
	owner := Owner(eg.Name)
	var allocated []netip.Addr
	toWrite := false
	var failure error
	for i, sl := range want {
		switch {
		case sl.Pool == "":
			continue
		case held[i].pool != "":
			// Held: taken again, which costs a lookup and re-registers it in
			// a pool deleted and created again (whose allocator starts empty).
			if err := c.allocator.AllocateSpecificIP(sl.Pool, held[i].ip, owner); err != nil {
				failure = err
				held[i] = allocation{}
				continue
			}
			// Written already unless an earlier write failed.
			toWrite = toWrite || !sl.IP.IsValid()
		case sl.IP.IsValid():
			if err := c.allocator.AllocateSpecificIP(sl.Pool, sl.IP, owner); err != nil {
				failure = err
				continue
			}
			held[i] = allocation{pool: sl.Pool, ip: sl.IP}
			allocated = append(allocated, sl.IP)
		default:
			ip, err := c.allocator.AllocateIP(sl.Pool, owner)
			if err != nil {
				failure = err
				continue
			}
			held[i] = allocation{pool: sl.Pool, ip: ip}
			allocated = append(allocated, ip)
			toWrite = true
			if c.recorder != nil {
				c.recorder.Eventf(eg, corev1.EventTypeNormal, ReasonAllocated, "Allocated %s from ExternalIPPool %s", ip, sl.Pool)
			}
		}
	}
	c.mu.Lock()
	c.allocated[eg.Name] = held
	c.mu.Unlock()
	if toWrite {
		if err := c.writeIPs(ctx, eg, held); err != nil {
			return err
		}
	}
	if failure != nil {
		c.allocationFailed(ctx, eg, failure)
		return nil
	}
	if len(allocated) > 0 {
		return c.setAllocated(ctx, eg.Name, allocated)
	}
	return nil
}

// writeIPs writes the held IPs into spec.egressIP (or the entries of
// spec.egressIPs). An Egress that changed meanwhile is read again; one whose
// pools changed is left to its next sync.
func (c *Controller) writeIPs(ctx context.Context, eg *crdv1beta1.Egress, held []allocation) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.CrdV1beta1().Egresses().Get(ctx, eg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != eg.UID || cur.Spec.ExternalIPPool != eg.Spec.ExternalIPPool ||
			!slices.Equal(cur.Spec.ExternalIPPools, eg.Spec.ExternalIPPools) {
			return nil
		}
		changed := false
		if len(cur.Spec.ExternalIPPools) == 0 {
			if cur.Spec.EgressIP == "" && len(held) == 1 && held[0].pool != "" {
				cur.Spec.EgressIP, changed = held[0].ip.String(), true
			}
		} else {
			ips := append([]string(nil), cur.Spec.EgressIPs...)
			for len(ips) < len(held) {
				ips = append(ips, "")
			}
			for i, a := range held {
				if ips[i] == "" && a.pool != "" {
					ips[i], changed = a.ip.String(), true
				}
			}
			cur.Spec.EgressIPs = ips
		}
		if !changed {
			return nil
		}
		_, err = c.client.CrdV1beta1().Egresses().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the Egress IPs into Egress %s: %w", eg.Name, err)
	}
	klog.InfoS("Wrote the allocated Egress IPs", "egress", eg.Name, "ips", held)
	return nil
}

// allocationFailed reports why the Egress has no IP, as an Event and the
// IPAllocated condition. No retry: a change of the pool, or an IP released
// from it, enqueues the Egress again.
func (c *Controller) allocationFailed(ctx context.Context, eg *crdv1beta1.Egress, err error) {
	klog.InfoS("Could not allocate the Egress IP", "egress", eg.Name, "pool", eg.Spec.ExternalIPPool, "err", err)
	if c.recorder != nil {
		c.recorder.Eventf(eg, corev1.EventTypeWarning, ReasonAllocationError, "%v", err)
	}
	reason := "AllocationError"
	if errors.Is(err, externalippool.ErrExhausted) {
		reason = "PoolExhausted"
	}
	cond := crdv1beta1.EgressCondition{Type: crdv1beta1.IPAllocated, Status: corev1.ConditionFalse, Reason: reason, Message: err.Error()}
	if serr := c.setCondition(ctx, eg.Name, cond); serr != nil {
		klog.ErrorS(serr, "Could not write the Egress condition", "egress", eg.Name)
	}
}

func (c *Controller) setAllocated(ctx context.Context, name string, ips []netip.Addr) error {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return c.setCondition(ctx, name, crdv1beta1.EgressCondition{Type: crdv1beta1.IPAllocated, Status: corev1.ConditionTrue,
		Reason: "Allocated", Message: "EgressIP " + strings.Join(s, ", ") + " is allocated"})
}

// setCondition writes cond into status.conditions when it differs from the
// condition of its type there (its transition time kept when its status did
// not change).
func (c *Controller) setCondition(ctx context.Context, name string, cond crdv1beta1.EgressCondition) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.CrdV1beta1().Egresses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds := cur.Status.Conditions
		i := 0
		for i < len(conds) && conds[i].Type != cond.Type {
			i++
		}
		cond.LastTransitionTime = metav1.Now()
		if i < len(conds) {
			old := conds[i]
			if old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
				return nil
			}
			if old.Status == cond.Status {
				cond.LastTransitionTime = old.LastTransitionTime
			}
			conds[i] = cond
		} else {
			cur.Status.Conditions = append(conds, cond)
		}
		_, err = c.client.CrdV1beta1().Egresses().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// groupSelector is the grouping selector of an appliedTo: podSelector alone
// selects in every Namespace, namespaceSelector alone every Pod of the
// Namespaces, both the matching Pods of the matching Namespaces; nil for an
// empty appliedTo, which selects nothing.
func groupSelector(at crdv1beta1.EgressAppliedTo) (*grouping.Selector, error) {
	if at.PodSelector == nil && at.NamespaceSelector == nil {
		return nil, nil
	}
	nsSel := at.NamespaceSelector
	if nsSel == nil {
		nsSel = &metav1.LabelSelector{}
	}
	return grouping.NewSelector("", at.PodSelector, nsSel)
}

// setGroupSelector points the Egress at the group of sel (nil for none) and
// returns the group's key: it registers the group in the index and forgets
// the one the Egress leaves if no other Egress uses it, under c.mu, so that
// a group shared by two Egresses is never dropped between one's
// registration and the other's release.
func (c *Controller) setGroupSelector(name string, sel *grouping.Selector) string {
	key := ""
	if sel != nil {
		key = sel.Key()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, had := c.selectorOf[name]; had && old != key {
		c.bySelector[old].Delete(name)
		if c.bySelector[old].Len() == 0 {
			delete(c.bySelector, old)
			c.index.DeleteGroup(old)
		}
		delete(c.selectorOf, name)
	}
	if sel == nil {
		return ""
	}
	c.index.AddGroup(sel)
	c.selectorOf[name] = key
	if c.bySelector[key] == nil {
		c.bySelector[key] = sets.New[string]()
	}
	c.bySelector[key].Insert(name)
	return key
}

// syncGroup writes the Egress's members into its EgressGroup.
func (c *Controller) syncGroup(eg *crdv1beta1.Egress) error {
	sel, err := groupSelector(eg.Spec.AppliedTo)
	if err != nil {
		// Admission refuses bad selectors: serve an empty group.
		klog.InfoS("Bad appliedTo of an Egress", "egress", eg.Name, "err", err)
	}
	byNode := map[string][]*controlplane.GroupMember{}
	if key := c.setGroupSelector(eg.Name, sel); key != "" {
		pods, _ := c.index.GroupPods(key)
		for _, pod := range pods {
			if m := podMember(pod); m != nil {
				byNode[pod.Spec.NodeName] = append(byNode[pod.Spec.NodeName], m)
			}
		}
	}
	g := &types.EgressGroup{UID: eg.UID, Name: eg.Name, Members: types.NewNodeMembers(byNode)}
	g.NodeNames = sets.New[string]()
	for node := range byNode {
		g.NodeNames.Insert(node)
	}
	if _, exists, _ := c.store.Get(eg.Name); exists {
		return c.store.Update(g)
	}
	return c.store.Create(g)
}

// podMember is the group member of a Pod that runs on a Node with an IP;
// nil for a Pod not scheduled, without IPs yet, or terminated.
func podMember(pod *corev1.Pod) *controlplane.GroupMember {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	var ips []controlplane.IPAddress
	for _, pip := range pod.Status.PodIPs {
		if ip, err := netip.ParseAddr(pip.IP); err == nil {
			ips = append(ips, controlplane.IPAddress(ip.Unmap().AsSlice()))
		}
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		if ip, err := netip.ParseAddr(pod.Status.PodIP); err == nil {
			ips = append(ips, controlplane.IPAddress(ip.Unmap().AsSlice()))
		}
	}
	if len(ips) == 0 {
		return nil
	}
	return &controlplane.GroupMember{Pod: &controlplane.PodReference{Name: pod.Name, Namespace: pod.Namespace}, IPs: ips}
}
