// Package networkpolicy computes, once for the whole cluster, what agents
// need to enforce Kubernetes NetworkPolicies: for each policy an internal
// NetworkPolicy whose rules refer to AddressGroups (the peers' addresses) and
// AppliedToGroups (the Pods the policy applies to). Groups are shared by
// normalized selector, and each object carries a span — the Nodes that need
// it — so that every agent receives only its slice.
//
// The controller follows the sample-controller shape: informer events feed a
// selector index (pkg/controller/grouping) and three workqueues of keys
// (policies, AppliedToGroups, AddressGroups); each sync reads the caches,
// computes the desired object and writes the difference into the apiserver
// stores (pkg/apiserver/storage). Syncs are idempotent and retried with
// rate-limited backoff.
//
// What agents receive for a K8s NetworkPolicy (the contract):
//   - one AppliedToGroup per distinct podSelector (members: scheduled, live
//     Pods, by Node) and one AddressGroup per distinct peer selector
//     (members: live Pods with an IP); both kinds carry each member's named
//     container ports, so named ports in rules are resolved per Pod by the agent;
//   - rules only for the directions the policy isolates (policyTypes, or its
//     API default: Ingress, plus Egress when egress rules exist); Action nil
//     (Allow) and Priority -1 on every rule; Priority and TierPriority nil;
//   - a direction isolated without rules becomes one rule with an empty peer
//     and no services: it matches nothing, so only the default drop of the
//     applied-to Pods remains (upstream Antrea's representation);
//   - an absent or empty peer list becomes IPBlocks 0.0.0.0/0 and ::/0, plus
//     the all-Pods AddressGroup for an egress rule with a named port; absent
//     or empty ports become nil Services (every port);
//   - an egress rule with a named port also gets, for each ipBlock peer, the
//     AddressGroup of the Pods with an address in the block (minus except)
//     and a named port, holding only those addresses: Kubernetes resolves a
//     named port on the destination Pod whichever peer matched its address;
//   - spans: an AppliedToGroup spans the Nodes of its members, a policy spans
//     its AppliedToGroup, and an AddressGroup spans every policy using it;
//   - group names are UUIDs derived from the normalized selector, stable
//     across restarts; a policy is named by the K8s policy's UID; Generation
//     starts at 1 and increases when rules or groups change, not on span
//     changes.
//
// With EnableAntreaPolicies, ClusterNetworkPolicies and Antrea NetworkPolicies
// (crd.antrea.io) are computed into the same stores and groups (native.go,
// native_compute.go: tier priority, priority, ordered rules with actions,
// appliedTo per policy or rule, Namespace-relative peers expanded per
// Namespace, ClusterGroups and Groups resolved to selectors and ipBlocks,
// Node groups), re-synced when what they read changes (Tiers, groups,
// Services, Namespaces, Nodes), and their status is written back from the
// agents' realization reports (status.go). docs/design/controlplane-api.md
// states what agents receive for them.
package networkpolicy

import (
	"context"
	"crypto/sha1"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/controller/grouping"
	"antrea.io/antrea/pkg/controller/types"
)

const controllerName = "NetworkPolicyController"

// Store is the part of an apiserver store (storage.Interface) the computation
// writes to. Objects handed to Create and Update are never modified later.
type Store interface {
	Create(obj any) error
	Update(obj any) error
	Delete(key string) error
	Get(key string) (any, bool, error)
}

// groupNamespace seeds the name-based UUIDs of groups and policies, so that
// names are stable across controller restarts.
var groupNamespace = uuid.MustParse("5a5e6c1e-8d3b-4c55-9a0e-2f2b8a1d7c40")

// groupName is the name of the AppliedToGroup and of the AddressGroup built
// from a selector: a UUID derived from its normalized key.
func groupName(selectorKey string) string {
	return nameUUID(selectorKey)
}

// nameUUID is uuid.NewSHA1(groupNamespace, []byte(data)).String() without
// its hasher and slice allocations: the string is the only one.
func nameUUID(data string) string {
	var buf [256]byte
	in := append(append(buf[:0], groupNamespace[:]...), data...)
	sum := sha1.Sum(in)
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return u.String()
}

// policyName is the name of the internal NetworkPolicy of a K8s policy: its
// UID, as upstream Antrea names it. Objects without a UID (hand-made ones in
// tests) get a UUID derived from their namespace and name.
func policyName(np *networkingv1.NetworkPolicy) string {
	if np.UID != "" {
		return string(np.UID)
	}
	return uuid.NewSHA1(groupNamespace, []byte("K8sNetworkPolicy:"+np.Namespace+"/"+np.Name)).String()
}

// Controller computes internal NetworkPolicies and their groups.
type Controller struct {
	kubeClient      kubernetes.Interface
	informerFactory informers.SharedInformerFactory
	// native holds the Antrea-native policy kinds' listers; nil unless
	// EnableAntreaPolicies was called.
	native *native

	npLister        networkinglisters.NetworkPolicyLister
	nsLister        corelisters.NamespaceLister
	npSynced        cache.InformerSynced
	podSynced       cache.InformerSynced
	namespaceSynced cache.InformerSynced

	index *grouping.Index

	addressGroupStore   Store
	appliedToGroupStore Store
	networkPolicyStore  Store

	policyQueue         workqueue.TypedRateLimitingInterface[string]
	appliedToGroupQueue workqueue.TypedRateLimitingInterface[string]
	addressGroupQueue   workqueue.TypedRateLimitingInterface[string]
	// nativeQueue holds Antrea-native policy keys (acnp:name, annp:ns/name),
	// statusQueue the same keys for their status, groupStatusQueue group
	// keys (cg:name, grp:ns/name) for their condition.
	nativeQueue      workqueue.TypedRateLimitingInterface[string]
	statusQueue      workqueue.TypedRateLimitingInterface[string]
	groupStatusQueue workqueue.TypedRateLimitingInterface[string]

	// depsMu guards the dependencies of native policies: what each one's
	// computation read (Tiers, groups, Services, the Namespace list), so
	// that a change of it re-syncs exactly those policies.
	depsMu       sync.Mutex
	deps         map[string]sets.Set[string]
	depsByPolicy map[string]sets.Set[string]
	// depSeq counts dependency changes; depChanged holds the last change of
	// each dependency changed since the oldest computation in flight began
	// (depReading: the marks of the computations between depMark and
	// depDone, with their counts). A computation that read a dependency
	// changed after it started (before its dependencies were recorded, so
	// the change queued nothing) is queued again. Older changes concern no
	// computation: they are dropped, so that the Services, Tiers and groups
	// that come and go leave nothing behind.
	depSeq     uint64
	depChanged map[string]uint64
	depReading map[uint64]int

	// statusMu guards what the status of native policies derives from.
	statusMu          sync.Mutex
	statusInfo        map[string]nativeStatusInfo
	keyByInternalName map[string]string

	// mu guards the computation state below; syncs hold it while they compute
	// and write to the stores, so the stores see changes in a consistent order.
	mu              sync.Mutex
	policies        map[string]*policyState
	appliedToGroups map[string]*appliedToGroupState
	addressGroups   map[string]*addressGroupState
	// groupsBySelector maps an index key to the groups built from it.
	groupsBySelector map[string]*selectorGroups
	// orphans are selector keys whose groups may have lost their last policy.
	orphans sets.Set[string]
	// nodeGroupKeys are the selector keys of groups that select Nodes.
	nodeGroupKeys sets.Set[string]
	// serviceGroupKeys are the selector keys of groups whose member is a
	// Service (policies applied to NodePort Services).
	serviceGroupKeys sets.Set[string]
	// scratchPods and scratchMembers are reused by the group computations.
	scratchPods    []*cachedMember
	scratchMembers []types.NodeMember
}

// NewController wires the informers of informerFactory (NetworkPolicies,
// Pods, Namespaces) to a new Controller writing into the three stores. The
// caller starts informerFactory; Run waits for its caches. It fails when an
// informer refuses the controller's handlers (a stopped informer).
func NewController(kubeClient kubernetes.Interface, informerFactory informers.SharedInformerFactory,
	addressGroupStore, appliedToGroupStore, networkPolicyStore Store) (*Controller, error) {
	rl := func(name string) workqueue.TypedRateLimitingInterface[string] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
	}
	npInformer := informerFactory.Networking().V1().NetworkPolicies()
	podInformer := informerFactory.Core().V1().Pods()
	nsInformer := informerFactory.Core().V1().Namespaces()
	c := &Controller{
		kubeClient:          kubeClient,
		informerFactory:     informerFactory,
		npLister:            npInformer.Lister(),
		nsLister:            nsInformer.Lister(),
		index:               grouping.NewIndex(),
		addressGroupStore:   addressGroupStore,
		appliedToGroupStore: appliedToGroupStore,
		networkPolicyStore:  networkPolicyStore,
		policyQueue:         rl("networkpolicy"),
		appliedToGroupQueue: rl("appliedtogroup"),
		addressGroupQueue:   rl("addressgroup"),
		nativeQueue:         rl("antreanetworkpolicy"),
		statusQueue:         rl("antreanetworkpolicystatus"),
		groupStatusQueue:    rl("groupstatus"),
		deps:                map[string]sets.Set[string]{},
		depsByPolicy:        map[string]sets.Set[string]{},
		depChanged:          map[string]uint64{},
		depReading:          map[uint64]int{},
		statusInfo:          map[string]nativeStatusInfo{},
		keyByInternalName:   map[string]string{},
		nodeGroupKeys:       sets.New[string](),
		serviceGroupKeys:    sets.New[string](),
		policies:            map[string]*policyState{},
		appliedToGroups:     map[string]*appliedToGroupState{},
		addressGroups:       map[string]*addressGroupState{},
		groupsBySelector:    map[string]*selectorGroups{},
		orphans:             sets.New[string](),
	}
	c.index.AddEventHandler(c.enqueueGroups)
	// The synced functions are those of the handler registrations, not of
	// the informers: they turn true once the handlers (and so the index) have
	// seen the initial list, not merely once the informer's cache holds it.
	for _, h := range []struct {
		what     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandlerFuncs
		synced   *cache.InformerSynced
	}{
		{"NetworkPolicies", npInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueuePolicy,
			UpdateFunc: func(_, cur any) { c.enqueuePolicy(cur) },
			DeleteFunc: c.enqueuePolicy,
		}, &c.npSynced},
		{"Pods", podInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addPod,
			UpdateFunc: c.updatePod,
			DeleteFunc: c.deletePod,
		}, &c.podSynced},
		{"Namespaces", nsInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addNamespace,
			UpdateFunc: c.updateNamespace,
			DeleteFunc: c.deleteNamespace,
		}, &c.namespaceSynced},
	} {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return nil, fmt.Errorf("watching %s: %w", h.what, err)
		}
		*h.synced = reg.HasSynced
	}
	return c, nil
}

func (c *Controller) enqueuePolicy(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		klog.ErrorS(err, "Cannot key NetworkPolicy", "object", obj)
		return
	}
	c.policyQueue.Add(key)
}

// enqueueGroups queues the groups built from a selector the index reports.
func (c *Controller) enqueueGroups(selectorKey string) {
	c.mu.Lock()
	sg := c.groupsBySelector[selectorKey]
	var atg, ag string
	if sg != nil {
		if sg.appliedTo != nil {
			atg = sg.appliedTo.name
		}
		if sg.address != nil {
			ag = sg.address.name
		}
	}
	c.mu.Unlock()
	if atg != "" {
		c.appliedToGroupQueue.Add(atg)
	}
	if ag != "" {
		c.addressGroupQueue.Add(ag)
	}
}

func (c *Controller) addPod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.HostNetwork {
		// Host-network Pods share the Node's IP: no policy selects them.
		return
	}
	c.index.AddPod(pod)
}

func (c *Controller) updatePod(oldObj, curObj any) {
	old, ok1 := oldObj.(*v1.Pod)
	cur, ok2 := curObj.(*v1.Pod)
	if !ok1 || !ok2 || cur.Spec.HostNetwork {
		return
	}
	// Most Pod updates are status conditions; skip what cannot change a group.
	if labelsEqual(old.Labels, cur.Labels) && !grouping.MemberDataChanged(old, cur) {
		return
	}
	c.index.AddPod(cur)
}

func (c *Controller) deletePod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		klog.ErrorS(nil, "Unexpected object in Pod delete event", "object", obj)
		return
	}
	c.index.DeletePod(pod.Namespace, pod.Name)
}

func (c *Controller) addNamespace(obj any) {
	if ns, ok := obj.(*v1.Namespace); ok {
		c.index.AddNamespace(ns)
		c.enqueueDep(depNamespaces)
		if namespaceLogs(ns) {
			c.enqueueNamespacePolicies(ns.Name)
		}
	}
}

func (c *Controller) updateNamespace(oldObj, curObj any) {
	old, ok1 := oldObj.(*v1.Namespace)
	cur, ok2 := curObj.(*v1.Namespace)
	if !ok1 || !ok2 {
		return
	}
	c.index.AddNamespace(cur)
	if !labelsEqual(old.Labels, cur.Labels) {
		c.enqueueDep(depNamespaces)
	}
	if namespaceLogs(old) != namespaceLogs(cur) {
		c.enqueueNamespacePolicies(cur.Name)
	}
}

// EnableLoggingAnnotation on a Namespace, set to "true", makes the K8s
// NetworkPolicies of the Namespace log what their rules allow and what
// their isolation drops (upstream's annotation and value).
const EnableLoggingAnnotation = "networkpolicy.antrea.io/enable-logging"

// namespaceLogs reports whether a Namespace enables the audit logging of
// its K8s NetworkPolicies.
func namespaceLogs(ns *v1.Namespace) bool {
	return ns != nil && ns.Annotations[EnableLoggingAnnotation] == "true"
}

// enqueueNamespacePolicies queues the K8s NetworkPolicies of a Namespace
// (their rules' enableLogging follows the Namespace's annotation).
func (c *Controller) enqueueNamespacePolicies(namespace string) {
	nps, err := c.npLister.NetworkPolicies(namespace).List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Cannot list the NetworkPolicies of a Namespace", "namespace", namespace)
		return
	}
	for _, np := range nps {
		c.policyQueue.Add(np.Namespace + "/" + np.Name)
	}
}

func (c *Controller) deleteNamespace(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if ns, ok := obj.(*v1.Namespace); ok {
		c.index.DeleteNamespace(ns.Name)
		c.enqueueDep(depNamespaces)
	}
}

func labelsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// Run waits for the informer caches, then runs workers goroutines per queue
// until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.policyQueue.ShutDown()
	defer c.appliedToGroupQueue.ShutDown()
	defer c.addressGroupQueue.ShutDown()
	defer c.nativeQueue.ShutDown()
	defer c.statusQueue.ShutDown()
	defer c.groupStatusQueue.ShutDown()

	klog.InfoS("Starting controller", "controller", controllerName)
	defer klog.InfoS("Shutting down controller", "controller", controllerName)
	if !c.waitForCacheSync(ctx) {
		return
	}
	if workers < 1 {
		workers = 1
	}
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { c.worker(ctx, c.policyQueue, c.syncPolicy) }, time.Second)
		go wait.UntilWithContext(ctx, func(ctx context.Context) { c.worker(ctx, c.appliedToGroupQueue, c.syncAppliedToGroup) }, time.Second)
		go wait.UntilWithContext(ctx, func(ctx context.Context) { c.worker(ctx, c.addressGroupQueue, c.syncAddressGroup) }, time.Second)
	}
	if c.native != nil {
		for i := 0; i < workers; i++ {
			go wait.UntilWithContext(ctx, func(ctx context.Context) { c.worker(ctx, c.nativeQueue, c.syncNativePolicy) }, time.Second)
		}
		go wait.UntilWithContext(ctx, func(ctx context.Context) { c.worker(ctx, c.statusQueue, c.syncNativeStatus) }, time.Second)
		go wait.UntilWithContext(ctx, func(ctx context.Context) { c.worker(ctx, c.groupStatusQueue, c.syncGroupStatus) }, time.Second)
	}
	<-ctx.Done()
}

// waitForCacheSync waits until every handler has seen its informer's initial
// list, so that the first syncs compute from complete Pod and Namespace sets.
// It polls every 10 ms rather than client-go's 100 ms: start-up latency
// counts in the scale benchmarks.
func (c *Controller) waitForCacheSync(ctx context.Context) bool {
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		if !c.npSynced() || !c.podSynced() || !c.namespaceSynced() {
			return false, nil
		}
		if c.native != nil {
			for _, synced := range c.native.synced {
				if !synced() {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		klog.InfoS("Stopped waiting for informer caches", "controller", controllerName, "err", err)
		return false
	}
	klog.InfoS("Informer caches synced", "controller", controllerName)
	return true
}

func (c *Controller) worker(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) {
	for c.processNext(ctx, q, sync) {
	}
}

// processNext runs one sync from q; it returns false once q is shut down.
func (c *Controller) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	defer c.observeSync(q, time.Now())
	if err := sync(ctx, key); err != nil {
		klog.ErrorS(err, "Sync failed, will retry", "key", key)
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}

// drainConcurrently processes every queued key with workers goroutines, as
// Run does, until all queues are empty: keys are taken from the queues in
// drain's order and each key is synced by one worker at a time (the queues
// guarantee that). Benchmarks use it to measure the computation as the
// controller runs it; it returns the first sync error.
func (c *Controller) drainConcurrently(ctx context.Context, workers int) error {
	type job struct {
		q    workqueue.TypedRateLimitingInterface[string]
		sync func(context.Context, string) error
		key  string
	}
	queues := []struct {
		q    workqueue.TypedRateLimitingInterface[string]
		sync func(context.Context, string) error
	}{
		{c.policyQueue, c.syncPolicy},
		{c.appliedToGroupQueue, c.syncAppliedToGroup},
		{c.addressGroupQueue, c.syncAddressGroup},
		{c.nativeQueue, c.syncNativePolicy},
		{c.statusQueue, c.syncNativeStatus},
		{c.groupStatusQueue, c.syncGroupStatus},
	}
	jobs := make(chan job, workers)
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	for i := 0; i < workers; i++ {
		go func() {
			for j := range jobs {
				err := j.sync(ctx, j.key)
				j.q.Done(j.key)
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("syncing %q: %w", j.key, err)
					}
					errMu.Unlock()
				} else {
					j.q.Forget(j.key)
				}
				wg.Done()
			}
		}()
	}
	defer close(jobs)
	for {
		busy := false
		for _, qs := range queues {
			for qs.q.Len() > 0 {
				busy = true
				key, _ := qs.q.Get()
				wg.Add(1)
				jobs <- job{q: qs.q, sync: qs.sync, key: key}
			}
		}
		if !busy {
			// Keys synced meanwhile may have queued others: look again once
			// every worker is idle.
			wg.Wait()
			busy = false
			for _, qs := range queues {
				if qs.q.Len() > 0 {
					busy = true
				}
			}
			if !busy {
				errMu.Lock()
				defer errMu.Unlock()
				return firstErr
			}
		}
	}
}

// drain processes every queued key on the calling goroutine until all queues
// are empty. Benchmarks and tests use it to measure or await the computation
// without worker scheduling noise; it returns the first sync error.
func (c *Controller) drain(ctx context.Context) error {
	queues := []struct {
		q    workqueue.TypedRateLimitingInterface[string]
		sync func(context.Context, string) error
	}{
		{c.policyQueue, c.syncPolicy},
		{c.appliedToGroupQueue, c.syncAppliedToGroup},
		{c.addressGroupQueue, c.syncAddressGroup},
		{c.nativeQueue, c.syncNativePolicy},
		{c.statusQueue, c.syncNativeStatus},
		{c.groupStatusQueue, c.syncGroupStatus},
	}
	for {
		busy := false
		for _, qs := range queues {
			for qs.q.Len() > 0 {
				busy = true
				key, _ := qs.q.Get()
				err := qs.sync(ctx, key)
				qs.q.Done(key)
				if err != nil {
					return fmt.Errorf("syncing %q: %w", key, err)
				}
				qs.q.Forget(key)
			}
		}
		if !busy {
			return nil
		}
	}
}
