// Package externalippool is the antrea-controller's keeper of the IPs of
// ExternalIPPools (crd.antrea.io/v1beta1): one allocator per pool, IPv4 and
// IPv6 ranges, used by the controllers of the objects that take IPs from a
// pool (the Egress controller and the LoadBalancer Service controller,
// pkg/controller/serviceexternalip) through AllocateIP, AllocateSpecificIP, ReleaseIP and
// RestoreAllocations. Allocations are not stored anywhere but in the objects
// that hold the IPs (an Egress's spec.egressIP with its spec.externalIPPool),
// as upstream does: on start each consumer restores what its objects hold
// before it allocates anything new, and whenever a pool's allocator is built
// afresh (a pool deleted and created again) it asks the consumers' Restorers
// for what their objects hold of it, so an IP is never handed out twice
// across a restart. The controller writes each pool's status.usage and
// records an Event on a pool that is exhausted.
package externalippool

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions/crd/v1beta1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
)

// Allocation is an IP of a pool held by an owner ("Egress/name").
type Allocation struct {
	Pool  string
	IP    netip.Addr
	Owner string
}

// PoolHandler is told the name of a pool that was created, changed or deleted.
type PoolHandler func(pool string)

// Restorer returns the allocations of pool that a consumer's objects record
// (for the Egress controller, the Egresses' IPs of that pool). It reads
// informer caches only: it is called with the allocator's lock held.
type Restorer func(pool string) []Allocation

// ReasonExhausted is the reason of the Event recorded on an exhausted pool.
const ReasonExhausted = "IPPoolExhausted"

// Controller keeps an allocator per ExternalIPPool, in step with the
// informer's objects: each call rebuilds a pool's allocator when the pool's
// spec changed (its generation), keeping the allocations still in range.
type Controller struct {
	client   versioned.Interface
	lister   crdlisters.ExternalIPPoolLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder

	mu    sync.Mutex
	pools map[string]*pool
	// handlers are told of pool changes (consumers re-check their owners).
	handlers []PoolHandler
	// restorers fill a pool's new allocator (see AddRestorer).
	restorers []Restorer
}

type pool struct {
	uid        types.UID
	generation int64
	alloc      *poolAllocator
	// err is why the pool's ranges could not be used (admission refuses
	// such pools; this guards against ones written around it).
	err error
}

// NewController watches ExternalIPPools through informer and writes their
// status with client; recorder receives the exhaustion Events.
func NewController(client versioned.Interface, informer crdinformers.ExternalIPPoolInformer, recorder record.EventRecorder) (*Controller, error) {
	c := &Controller{
		client:   client,
		lister:   informer.Lister(),
		synced:   informer.Informer().HasSynced,
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "externalippool"}),
		recorder: recorder,
		pools:    map[string]*pool{},
	}
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.poolChanged(obj) },
		UpdateFunc: func(_, obj any) { c.poolChanged(obj) },
		DeleteFunc: func(obj any) { c.poolChanged(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("watching ExternalIPPools: %w", err)
	}
	return c, nil
}

// AddPoolHandler registers h; call it before Run.
func (c *Controller) AddPoolHandler(h PoolHandler) {
	c.handlers = append(c.handlers, h)
}

// AddRestorer registers r; call it before Run. Whenever a pool's allocator
// is built afresh (the first use after a start, or a pool deleted and created
// again under its name), it takes back the allocations every restorer
// reports, before anything is allocated from it, so that an IP an object
// holds is not handed out again.
func (c *Controller) AddRestorer(r Restorer) {
	c.restorers = append(c.restorers, r)
}

// HasSynced reports whether the pools have been listed.
func (c *Controller) HasSynced() bool { return c.synced() }

func (c *Controller) poolChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*crdv1beta1.ExternalIPPool)
	if !ok {
		return
	}
	c.queue.Add(p.Name)
	for _, h := range c.handlers {
		h(p.Name)
	}
}

// poolLocked returns the allocator of the pool as the informer has it now,
// or nil (and ErrPoolNotFound, or why its ranges are bad).
func (c *Controller) poolLocked(name string) (*poolAllocator, error) {
	obj, err := c.lister.Get(name)
	if err != nil {
		delete(c.pools, name)
		return nil, fmt.Errorf("%s: %w", name, ErrPoolNotFound)
	}
	p := c.pools[name]
	if p != nil && p.uid == obj.UID && p.generation == obj.Generation {
		return p.alloc, p.err
	}
	ranges, rerr := ParseRanges(obj.Spec)
	fresh := p == nil || p.uid != obj.UID
	if fresh {
		p = &pool{alloc: newPoolAllocator(nil)}
		c.pools[name] = p
	}
	p.uid, p.generation, p.err = obj.UID, obj.Generation, nil
	if rerr != nil {
		p.err = fmt.Errorf("ExternalIPPool %s: %w", name, rerr)
		ranges = nil
	}
	for ip, owner := range p.alloc.reshape(ranges) {
		klog.InfoS("An allocated IP left its ExternalIPPool's ranges", "pool", name, "ip", ip, "owner", owner)
	}
	if fresh {
		n := 0
		for _, r := range c.restorers {
			for _, a := range r(name) {
				if err := p.alloc.allocateSpecific(a.IP, a.Owner); err != nil {
					klog.InfoS("Could not restore an IP allocation", "pool", name, "ip", a.IP, "owner", a.Owner, "err", err)
					continue
				}
				n++
			}
		}
		if n > 0 {
			klog.InfoS("Restored the IP allocations of an ExternalIPPool", "pool", name, "allocations", n)
			c.queue.Add(name)
		}
	}
	return p.alloc, p.err
}

// AllocateIP gives owner a free IP of the pool.
func (c *Controller) AllocateIP(poolName, owner string) (netip.Addr, error) {
	return c.AllocateIPOfFamily(poolName, owner, 0)
}

// AllocateIPOfFamily gives owner a free IP of the pool's ranges of one
// family: bits 32 for IPv4, 128 for IPv6, 0 for either (AllocateIP). A pool
// without a range of that family fails with ErrNoRangeOfFamily.
func (c *Controller) AllocateIPOfFamily(poolName, owner string, bits int) (netip.Addr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.poolLocked(poolName)
	if err != nil {
		return netip.Addr{}, err
	}
	ip, err := p.allocateOfFamily(owner, bits)
	if errors.Is(err, ErrNoRangeOfFamily) {
		return netip.Addr{}, fmt.Errorf("ExternalIPPool %s: %w", poolName, err)
	}
	if err != nil {
		if obj, gerr := c.lister.Get(poolName); gerr == nil && c.recorder != nil {
			c.recorder.Eventf(obj, corev1.EventTypeWarning, ReasonExhausted,
				"No IP left for %s: all %d IPs are allocated", owner, p.total())
		}
		return netip.Addr{}, fmt.Errorf("ExternalIPPool %s: %w", poolName, err)
	}
	c.queue.Add(poolName)
	return ip, nil
}

// AllocateSpecificIP gives ip of the pool to owner (again: it is not an
// error if owner holds it).
func (c *Controller) AllocateSpecificIP(poolName string, ip netip.Addr, owner string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.poolLocked(poolName)
	if err != nil {
		return err
	}
	if err := p.allocateSpecific(ip, owner); err != nil {
		return fmt.Errorf("ExternalIPPool %s: %w", poolName, err)
	}
	c.queue.Add(poolName)
	return nil
}

// ReleaseIP frees ip of the pool if owner holds it ("" for any owner).
func (c *Controller) ReleaseIP(poolName string, ip netip.Addr, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, _ := c.poolLocked(poolName)
	if p != nil && p.release(ip, owner) {
		c.queue.Add(poolName)
	}
}

// IPInPool reports whether ip is in the pool's ranges (false for an unknown pool).
func (c *Controller) IPInPool(poolName string, ip netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, _ := c.poolLocked(poolName)
	return p != nil && p.contains(ip)
}

// RestoreAllocations takes back the allocations recorded in the consumers'
// objects, after a restart, and returns those that could not be (pool gone,
// IP out of range, or held twice: the first owner keeps it). Consumers call
// it once the pools have synced and before allocating anything.
func (c *Controller) RestoreAllocations(allocs []Allocation) (failed []Allocation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range allocs {
		p, err := c.poolLocked(a.Pool)
		if err == nil {
			err = p.allocateSpecific(a.IP, a.Owner)
		}
		if err != nil {
			klog.InfoS("Could not restore an IP allocation", "pool", a.Pool, "ip", a.IP, "owner", a.Owner, "err", err)
			failed = append(failed, a)
			continue
		}
		c.queue.Add(a.Pool)
	}
	return failed
}

// Usage returns the pool's total and used IPs as the allocator has them.
func (c *Controller) Usage(poolName string) (crdv1beta1.IPPoolUsage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.poolLocked(poolName)
	if p == nil {
		return crdv1beta1.IPPoolUsage{}, err
	}
	return crdv1beta1.IPPoolUsage{Total: p.total(), Used: p.used()}, nil
}

// Run writes the pools' status.usage until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	go func() {
		for c.processNext(ctx) {
		}
	}()
	<-ctx.Done()
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	if err := c.syncStatus(ctx, name); err != nil {
		klog.ErrorS(err, "Could not update the ExternalIPPool's status", "pool", name)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// syncStatus writes status.usage of the pool when it differs.
func (c *Controller) syncStatus(ctx context.Context, name string) error {
	obj, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	usage, err := c.Usage(name)
	if err != nil && usage == (crdv1beta1.IPPoolUsage{}) {
		// Bad ranges: nothing is allocatable.
		usage = crdv1beta1.IPPoolUsage{}
	}
	if obj.Status.Usage == usage {
		return nil
	}
	upd := obj.DeepCopy()
	upd.Status.Usage = usage
	_, err = c.client.CrdV1beta1().ExternalIPPools().UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// The informer will bring the new object; try again then.
		c.queue.AddAfter(name, 100*time.Millisecond)
		return nil
	}
	return err
}
