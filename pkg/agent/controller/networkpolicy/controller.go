// Package networkpolicy is the agent half of the policy path (seed 000, "three
// watchers"): it watches the controlplane API's NetworkPolicies,
// AppliedToGroups and AddressGroups whose span holds this node, keeps them in
// a cache, and reconciles each policy into conjunctive OpenFlow rules for the
// local pods it applies to. Groups arrive as patches (members added/removed),
// so an agent's work follows what changes on its node, not the cluster size.
// After a reconnect the watchers list again and the reconciler changes only
// what differs: nothing is flushed, so there is no gap in enforcement.
package networkpolicy

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// PolicyFlows is the part of the agent's OpenFlow client this controller drives.
type PolicyFlows interface {
	InstallPolicyRule(ctx context.Context, r *agentof.PolicyRule) error
	UninstallPolicyRule(ctx context.Context, id uint32) error
	SetIsolatedPorts(ctx context.Context, d agentof.Direction, ports []uint32) error
}

// Interfaces finds local pods' interfaces (the agent's interface store).
type Interfaces interface {
	GetContainerInterfacesByPod(podName, podNamespace string) []*interfacestore.InterfaceConfig
	GetInterfaceByName(name string) (*interfacestore.InterfaceConfig, bool)
}

// Controller keeps this node's policy flows equal to the computed policies.
type Controller struct {
	nodeName string
	client   versioned.Interface
	flows    PolicyFlows
	ifaces   Interfaces

	mu    sync.Mutex
	cache *cache
	// installed rules per policy: rule key -> conjunction id.
	installed map[string]map[string]uint32
	// isolation contributed by each policy, per direction.
	isolation map[string][2]sets.Set[uint32]
	// isolated is the last isolation set written, per direction.
	isolated [2]sets.Set[uint32]
	ids      *idAllocator
	// realized generation reported per policy.
	reported map[string]int64

	queue  workqueue.TypedRateLimitingInterface[string]
	status workqueue.TypedRateLimitingInterface[string]
	synced chan struct{}
	// initial holds the policies known when the watchers synced that have
	// not been realized yet; realized is closed when it becomes empty.
	initial  sets.Set[string]
	realized chan struct{}
	// listed counts the watchers that finished their first list.
	listed sets.Set[string]
	// OnRealized, if set, is called after a policy's flows changed (set it
	// before Run).
	OnRealized func()
}

// NewController makes a controller for this node.
func NewController(nodeName string, client versioned.Interface, flows PolicyFlows, ifaces Interfaces) *Controller {
	return &Controller{
		nodeName:  nodeName,
		client:    client,
		flows:     flows,
		ifaces:    ifaces,
		cache:     newCache(),
		installed: map[string]map[string]uint32{},
		isolation: map[string][2]sets.Set[uint32]{},
		isolated:  [2]sets.Set[uint32]{sets.New[uint32](), sets.New[uint32]()},
		ids:       newIDAllocator(),
		reported:  map[string]int64{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "networkpolicy"}),
		status: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "networkpolicy-status"}),
		synced:   make(chan struct{}),
		realized: make(chan struct{}),
		listed:   sets.New[string](),
	}
}

// Run starts the three watchers and the reconciler until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	defer c.status.ShutDown()
	for _, w := range c.watchers() {
		go w.run(ctx)
	}
	select {
	case <-c.synced:
	case <-ctx.Done():
		return
	}
	c.mu.Lock()
	c.initial = sets.KeySet(c.cache.policies)
	c.markRealizedLocked("")
	n := c.initial.Len()
	c.mu.Unlock()
	klog.InfoS("NetworkPolicy watchers synced; reconciling", "node", c.nodeName, "policies", n)
	go c.worker(ctx)
	go c.statusWorker(ctx)
	<-ctx.Done()
}

// InitialRealized is closed once every policy that applied to this node
// when the watchers first synced has been realized in OVS: the agent lets
// traffic flow through a restarted OVS only then (flow-restore-wait).
func (c *Controller) InitialRealized() <-chan struct{} { return c.realized }

// markRealizedLocked records that policy name was realized (or nothing, for
// ""); c.mu is held.
func (c *Controller) markRealizedLocked(name string) {
	if c.initial == nil {
		return
	}
	c.initial.Delete(name)
	if c.initial.Len() == 0 {
		c.initial = nil
		close(c.realized)
	}
}

// HasSynced reports whether the first full list of every watcher is in.
func (c *Controller) HasSynced() bool {
	select {
	case <-c.synced:
		return true
	default:
		return false
	}
}

func (c *Controller) markListed(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listed.Insert(kind)
	if c.listed.Len() == 3 && !c.HasSynced() {
		close(c.synced)
	}
}

// enqueue schedules policies for reconciliation.
func (c *Controller) enqueue(policies sets.Set[string]) {
	for p := range policies {
		c.queue.Add(p)
	}
}

// PodInterfaceReady tells the controller that a local pod's port exists (its
// flows are installed), so the policies applying to it are reconciled again.
func (c *Controller) PodInterfaceReady(ifName string) {
	go func() {
		// The CNI server records the interface just after its flows; wait for it, bounded.
		for i := 0; i < 50; i++ {
			if iface, ok := c.ifaces.GetInterfaceByName(ifName); ok && iface.ContainerInterfaceConfig != nil {
				c.mu.Lock()
				ps := c.cache.policiesForPod(iface.PodNamespace, iface.PodName)
				c.mu.Unlock()
				c.enqueue(ps)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

func (c *Controller) worker(ctx context.Context) {
	for {
		key, quit := c.queue.Get()
		if quit {
			return
		}
		if err := c.syncPolicy(ctx, key); err != nil {
			klog.ErrorS(err, "Failed to realize NetworkPolicy; retrying", "policy", key)
			c.queue.AddRateLimited(key)
		} else {
			c.queue.Forget(key)
		}
		c.queue.Done(key)
	}
}

// syncPolicy makes the flows of one policy match the cache. Order keeps the
// data path safe: new and changed rules first (each change is one bundle),
// then isolation, then removal of rules no longer wanted.
func (c *Controller) syncPolicy(ctx context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	policy := c.cache.policies[name]
	desired := map[string]*agentof.PolicyRule{}
	iso := [2]sets.Set[uint32]{sets.New[uint32](), sets.New[uint32]()}
	complete := true
	if policy != nil {
		desired, iso, complete = c.computeRules(policy)
	}
	have := c.installed[name]
	if have == nil {
		have = map[string]uint32{}
	}
	newHave := map[string]uint32{}
	keys := make([]string, 0, len(desired))
	for k := range desired {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r := desired[k]
		id, ok := have[k]
		if !ok {
			id = c.ids.allocate()
		}
		r.ID = id
		if err := c.flows.InstallPolicyRule(ctx, r); err != nil {
			if !ok {
				c.ids.release(id)
			}
			c.installed[name] = mergeInstalled(have, newHave)
			return fmt.Errorf("policy %s rule %s: %w", name, k, err)
		}
		newHave[k] = id
	}
	if policy != nil {
		c.isolation[name] = iso
	} else {
		delete(c.isolation, name)
	}
	if err := c.applyIsolation(ctx); err != nil {
		c.installed[name] = mergeInstalled(have, newHave)
		return err
	}
	for k, id := range have {
		if _, ok := newHave[k]; ok {
			continue
		}
		if err := c.flows.UninstallPolicyRule(ctx, id); err != nil {
			c.installed[name] = mergeInstalled(have, newHave)
			return fmt.Errorf("policy %s: remove rule %s: %w", name, k, err)
		}
		c.ids.release(id)
	}
	if len(newHave) == 0 {
		delete(c.installed, name)
	} else {
		c.installed[name] = newHave
	}
	if policy != nil && complete {
		c.status.Add(name)
	}
	if c.OnRealized != nil {
		c.OnRealized()
	}
	if policy == nil {
		delete(c.reported, name)
	}
	c.markRealizedLocked(name)
	return nil
}

// mergeInstalled keeps track of every rule that may be in OVS after a
// partial failure, so a retry removes what is no longer wanted.
func mergeInstalled(have, newHave map[string]uint32) map[string]uint32 {
	out := map[string]uint32{}
	for k, v := range have {
		out[k] = v
	}
	for k, v := range newHave {
		out[k] = v
	}
	return out
}

// applyIsolation writes the union of every policy's isolated ports, per
// direction, when it changed. c.mu is held.
func (c *Controller) applyIsolation(ctx context.Context) error {
	for d := range c.isolated {
		want := sets.New[uint32]()
		for _, iso := range c.isolation {
			want = want.Union(iso[d])
		}
		if want.Equal(c.isolated[d]) {
			continue
		}
		if err := c.flows.SetIsolatedPorts(ctx, agentof.Direction(d), sets.List(want)); err != nil {
			return fmt.Errorf("%s isolation: %w", agentof.Direction(d), err)
		}
		c.isolated[d] = want
	}
	return nil
}

func (c *Controller) statusWorker(ctx context.Context) {
	for {
		name, quit := c.status.Get()
		if quit {
			return
		}
		if err := c.reportStatus(ctx, name); err != nil {
			klog.ErrorS(err, "Failed to report NetworkPolicy realization; retrying", "policy", name)
			c.status.AddRateLimited(name)
		} else {
			c.status.Forget(name)
		}
		c.status.Done(name)
	}
}

// reportStatus tells the controller which generation of a policy this node realized.
func (c *Controller) reportStatus(ctx context.Context, name string) error {
	c.mu.Lock()
	p := c.cache.policies[name]
	var gen int64
	if p != nil {
		gen = p.Generation
	}
	done := p != nil && c.reported[name] == gen
	c.mu.Unlock()
	if p == nil || done {
		return nil
	}
	st := &cpv1beta2.NetworkPolicyStatus{Nodes: []cpv1beta2.NetworkPolicyNodeStatus{{NodeName: c.nodeName, Generation: gen}}}
	st.Name = name
	if _, err := c.client.ControlplaneV1beta2().NetworkPolicies().UpdateStatus(ctx, name, st, metav1.CreateOptions{}); err != nil {
		return err
	}
	c.mu.Lock()
	c.reported[name] = gen
	c.mu.Unlock()
	return nil
}

// idAllocator hands out conjunction ids, reusing released ones.
type idAllocator struct {
	next uint32
	free []uint32
}

func newIDAllocator() *idAllocator { return &idAllocator{next: 1} }

func (a *idAllocator) allocate() uint32 {
	if n := len(a.free); n > 0 {
		id := a.free[n-1]
		a.free = a.free[:n-1]
		return id
	}
	id := a.next
	a.next++
	return id
}

func (a *idAllocator) release(id uint32) { a.free = append(a.free, id) }
