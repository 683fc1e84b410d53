// Package serviceexternalip is the antrea-controller's side of
// ServiceExternalIP (docs/service-loadbalancer.md): a Service of type
// LoadBalancer annotated service.antrea.io/external-ip-pool: <pool>, and
// without spec.loadBalancerClass, gets an IP of that ExternalIPPool in
// status.loadBalancer.ingress (ipMode VIP: AntreaProxy serves it on every
// Node). spec.loadBalancerIP, when set, is the IP taken, if the pool has it.
// The IP is released when the Service goes, stops being a LoadBalancer, loses
// the annotation, names another pool or asks for another IP.
//
// As for Egresses, the allocations live only in the objects (here the
// Services' status): on start the controller takes back the IPs the
// statuses hold before it allocates anything, and it is a Restorer of the
// allocator, so a pool deleted and created again gives the Services their
// IPs back and does not hand them out to others. A Service whose pool is gone
// keeps its status (and gets a Warning Event), as an Egress keeps its IP.
//
// A LoadBalancer Service without the annotation is left alone (another
// LoadBalancer implementation may serve it): the controller records one
// Normal Event on it saying why it gives no IP, unless its status already has
// an ingress. Unless a default pool is configured (antrea-controller.conf
// serviceExternalIP.defaultExternalIPPool, not an upstream key): then the
// controller writes the annotation naming that pool on such a Service (one
// without a loadBalancerClass and without an ingress from elsewhere), and
// from there on the Service is like any annotated one; the annotation shows
// where its IP came from and keeps it there if the default changes.
//
// A Service this controller gives an IP carries the finalizer
// service.kubernetes.io/load-balancer-cleanup, as cloud load balancers'
// controllers put it: its IP is released before the Service is gone, and the
// finalizer is removed once the Service no longer takes an IP from a pool.
// The agents do the rest: a Node of the pool's nodeSelector answers for the
// IP.
package serviceexternalip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/controller/externalippool"
)

// Allocator is what the controller needs of the ExternalIPPool allocator
// (externalippool.Controller).
type Allocator interface {
	AllocateIPOfFamily(pool, owner string, bits int) (netip.Addr, error)
	AllocateSpecificIP(pool string, ip netip.Addr, owner string) error
	ReleaseIP(pool string, ip netip.Addr, owner string)
	RestoreAllocations(allocs []externalippool.Allocation) (failed []externalippool.Allocation)
	AddPoolHandler(h externalippool.PoolHandler)
	AddRestorer(r externalippool.Restorer)
	HasSynced() bool
	Usage(pool string) (crdv1beta1.IPPoolUsage, error)
}

// Event reasons recorded on Services.
const (
	ReasonAllocated       = "ExternalIPAllocated"
	ReasonAllocationError = "ExternalIPAllocationFailed"
	// ReasonNoPool: a LoadBalancer Service without the annotation.
	ReasonNoPool = "NoExternalIPPool"
	// ReasonOtherClass: an annotated Service with a loadBalancerClass.
	ReasonOtherClass = "LoadBalancerClassSet"
	// ReasonDefaultPool: a LoadBalancer Service without the annotation was
	// given the default pool's.
	ReasonDefaultPool = "DefaultExternalIPPool"
)

// CleanupFinalizer is the finalizer of the Services this controller gives an
// IP (Kubernetes' service.kubernetes.io/load-balancer-cleanup, which cloud
// providers' service controllers use).
const CleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// poolIndex indexes Services by the pool their annotation names.
const poolIndex = "serviceexternalip.pool"

// Owner is the allocation owner of a Service's IP ("Service/ns/name").
func Owner(key string) string { return "Service/" + key }

// allocation is the IP the controller holds for a Service.
type allocation struct {
	pool string
	ip   netip.Addr
}

// Controller allocates the ingress IPs of LoadBalancer Services.
type Controller struct {
	client    kubernetes.Interface
	lister    corelisters.ServiceLister
	indexer   cache.Indexer
	synced    cache.InformerSynced
	allocator Allocator
	queue     workqueue.TypedRateLimitingInterface[string]
	recorder  record.EventRecorder
	// defaultPool is given to LoadBalancer Services without the
	// annotation ("": none).
	defaultPool string

	mu sync.Mutex
	// held is the IP held for each Service (by ns/name).
	held map[string]allocation
	// noted are the Services (ns/name: UID) told why they get no IP (one
	// Event each).
	noted map[string]types.UID
}

// NewController watches Services through informer, takes IPs from
// allocator and writes the Services' status with client; recorder receives
// the Services' Events. defaultPool, when not empty, is the pool of
// LoadBalancer Services without the annotation.
func NewController(client kubernetes.Interface, informer coreinformers.ServiceInformer, allocator Allocator,
	recorder record.EventRecorder, defaultPool string) (*Controller, error) {
	c := &Controller{
		defaultPool: defaultPool,
		client:      client,
		lister:      informer.Lister(),
		indexer:     informer.Informer().GetIndexer(),
		allocator:   allocator,
		recorder:    recorder,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "serviceexternalip"}),
		held:  map[string]allocation{},
		noted: map[string]types.UID{},
	}
	err := informer.Informer().AddIndexers(cache.Indexers{poolIndex: func(obj any) ([]string, error) {
		if svc, ok := obj.(*corev1.Service); ok {
			if p := svc.Annotations[crdv1beta1.ServiceExternalIPPoolAnnotationKey]; p != "" {
				return []string{p}, nil
			}
			if c.takesDefault(svc) {
				// Given the default pool once it exists.
				return []string{c.defaultPool}, nil
			}
		}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("adding the %s index to the Service informer: %w", poolIndex, err)
	}
	reg, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur any) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("watching Services: %w", err)
	}
	c.synced = reg.HasSynced
	allocator.AddPoolHandler(c.enqueuePool)
	allocator.AddRestorer(c.poolAllocations)
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// enqueuePool enqueues the Services that name pool: it came, went or
// changed, or one of its IPs was released.
func (c *Controller) enqueuePool(pool string) {
	objs, err := c.indexer.ByIndex(poolIndex, pool)
	if err != nil {
		return
	}
	for _, o := range objs {
		c.enqueue(o)
	}
}

// poolOf is the pool a Service takes its IP from, and whether it takes one:
// a LoadBalancer with the annotation and no loadBalancerClass.
func poolOf(svc *corev1.Service) (string, bool) {
	pool := svc.Annotations[crdv1beta1.ServiceExternalIPPoolAnnotationKey]
	return pool, svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil && pool != ""
}

// statusIPs are the valid IPs of a Service's status.loadBalancer.ingress.
func statusIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// poolAllocations are the IPs of pool the Services hold, as the informer
// has them (the allocator takes them back when it builds the pool afresh).
func (c *Controller) poolAllocations(pool string) []externalippool.Allocation {
	objs, err := c.indexer.ByIndex(poolIndex, pool)
	if err != nil {
		return nil
	}
	var out []externalippool.Allocation
	for _, o := range objs {
		svc := o.(*corev1.Service)
		if _, ok := poolOf(svc); !ok {
			continue
		}
		for _, ip := range statusIPs(svc) {
			out = append(out, externalippool.Allocation{Pool: pool, IP: ip, Owner: Owner(svc.Namespace + "/" + svc.Name)})
		}
	}
	return out
}

// Run restores the allocations the Services hold, then syncs Services with
// workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced, c.allocator.HasSynced) {
		return
	}
	c.restore()
	for range workers {
		go func() {
			for c.processNext(ctx) {
			}
		}()
	}
	klog.InfoS("Started the ServiceExternalIP controller")
	<-ctx.Done()
}

// restore takes back, from the pools, the first ingress IP of each Service
// that takes an IP from a pool. A Service whose IP cannot be restored (out of
// its pool, or held by another) is left to its sync, which allocates it
// another and reports why.
func (c *Controller) restore() {
	svcs, err := c.lister.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Could not list Services to restore their external IPs")
		return
	}
	var keys []string
	var allocs []externalippool.Allocation
	for _, svc := range svcs {
		pool, ok := poolOf(svc)
		if ips := statusIPs(svc); ok && len(ips) > 0 {
			key := svc.Namespace + "/" + svc.Name
			keys = append(keys, key)
			allocs = append(allocs, externalippool.Allocation{Pool: pool, IP: ips[0], Owner: Owner(key)})
		}
	}
	failed := map[externalippool.Allocation]bool{}
	for _, a := range c.allocator.RestoreAllocations(allocs) {
		failed[a] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, a := range allocs {
		if !failed[a] {
			c.held[keys[i]] = allocation{pool: a.Pool, ip: a.IP}
		}
	}
	klog.InfoS("Restored the Service external IP allocations", "restored", len(allocs)-len(failed), "failed", len(failed))
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		klog.ErrorS(err, "Could not sync the Service's external IP", "service", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// release frees the IP held for the Service, if any, returns it, and has
// the Services waiting for an IP of its pool try again.
func (c *Controller) release(key string) (allocation, bool) {
	c.mu.Lock()
	a, had := c.held[key]
	delete(c.held, key)
	c.mu.Unlock()
	if had {
		c.allocator.ReleaseIP(a.pool, a.ip, Owner(key))
		klog.InfoS("Released the Service external IP", "service", key, "pool", a.pool, "ip", a.ip)
		c.enqueuePool(a.pool)
	}
	return a, had
}

// sync brings the Service's IP allocation and its status in line with the
// Service (or frees the IP when it is gone).
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	svc, err := c.lister.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.release(key)
		c.mu.Lock()
		delete(c.noted, key)
		c.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	if svc.DeletionTimestamp != nil {
		// Going: the IP is released, then the Service may go.
		c.release(key)
		return c.setFinalizer(ctx, svc, false)
	}
	if c.takesDefault(svc) {
		if _, err := c.allocator.Usage(c.defaultPool); err == nil {
			return c.annotateDefault(ctx, svc)
		}
		// The default pool does not exist (yet): its creation enqueues
		// the Service again (poolIndex).
	}
	pool, managed := poolOf(svc)
	wantIP, lbIPErr := requestedIP(svc)
	c.mu.Lock()
	held, has := c.held[key]
	c.mu.Unlock()
	if has && (!managed || held.pool != pool || (wantIP.IsValid() && held.ip != wantIP)) {
		c.release(key)
		has = false
		if !managed && containsIP(statusIPs(svc), held.ip) {
			// Take back from the status the IP this controller wrote.
			if err := c.writeIngress(ctx, svc, netip.Addr{}, held.ip); err != nil {
				return err
			}
		}
	}
	if !managed {
		c.noteUnmanaged(svc, key, pool)
		return c.setFinalizer(ctx, svc, false)
	}
	if err := c.setFinalizer(ctx, svc, true); err != nil {
		return err
	}
	if lbIPErr != nil {
		return c.failed(ctx, svc, lbIPErr)
	}
	owner := Owner(key)
	if has {
		// Taken again: re-registers it in a pool deleted and created again.
		if err := c.allocator.AllocateSpecificIP(pool, held.ip, owner); err != nil {
			c.release(key)
			return c.failed(ctx, svc, err)
		}
	} else {
		ip, err := c.adoptOrAllocate(svc, pool, owner, wantIP)
		if err != nil {
			return c.failed(ctx, svc, err)
		}
		held = allocation{pool: pool, ip: ip}
		c.mu.Lock()
		c.held[key] = held
		c.mu.Unlock()
		klog.InfoS("Allocated the Service external IP", "service", key, "pool", pool, "ip", ip)
		if c.recorder != nil {
			c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonAllocated, "Allocated %s from ExternalIPPool %s", ip, pool)
		}
	}
	return c.writeIngress(ctx, svc, held.ip, netip.Addr{})
}

// takesDefault says whether the Service is to be given the default pool: a
// LoadBalancer without the annotation, without a loadBalancerClass and
// without an ingress written by another implementation.
func (c *Controller) takesDefault(svc *corev1.Service) bool {
	_, annotated := svc.Annotations[crdv1beta1.ServiceExternalIPPoolAnnotationKey]
	return c.defaultPool != "" && !annotated && svc.Spec.Type == corev1.ServiceTypeLoadBalancer &&
		svc.Spec.LoadBalancerClass == nil && len(svc.Status.LoadBalancer.Ingress) == 0
}

// annotateDefault writes the default pool's annotation on the Service; its
// update brings it back to sync as an annotated Service.
func (c *Controller) annotateDefault(ctx context.Context, svc *corev1.Service) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations":     map[string]string{crdv1beta1.ServiceExternalIPPoolAnnotationKey: c.defaultPool},
		"resourceVersion": svc.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or changed: its next event syncs it again
	}
	if err != nil {
		return fmt.Errorf("annotating with the default ExternalIPPool %s: %w", c.defaultPool, err)
	}
	klog.InfoS("Gave the Service the default ExternalIPPool", "service", klog.KObj(svc), "pool", c.defaultPool)
	if c.recorder != nil {
		c.recorder.Eventf(svc, corev1.EventTypeNormal, ReasonDefaultPool, "No %s annotation: ExternalIPPool %s is the default",
			crdv1beta1.ServiceExternalIPPoolAnnotationKey, c.defaultPool)
	}
	return nil
}

// setFinalizer adds or removes CleanupFinalizer, when that changes
// anything.
func (c *Controller) setFinalizer(ctx context.Context, svc *corev1.Service, want bool) error {
	if slices.Contains(svc.Finalizers, CleanupFinalizer) == want {
		return nil
	}
	fins := slices.DeleteFunc(slices.Clone(svc.Finalizers), func(f string) bool { return f == CleanupFinalizer })
	if want {
		fins = append(fins, CleanupFinalizer)
	}
	// The resourceVersion makes it a compare-and-swap of the list.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": fins, "resourceVersion": svc.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or changed: its next event syncs it again
	}
	if apierrors.IsForbidden(err) {
		// A ClusterRole older than this controller (no patch of
		// Services): the IP is still served, and released when the
		// Service's deletion is seen, only without the finalizer's
		// guarantee.
		klog.ErrorS(err, "Could not set the Service's cleanup finalizer: antrea-controller's ClusterRole lacks patch on services", "service", klog.KObj(svc))
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s the finalizer %s: %w", map[bool]string{true: "adding", false: "removing"}[want], CleanupFinalizer, err)
	}
	return nil
}

// requestedIP is spec.loadBalancerIP (invalid when unset), or why it is not
// an IP.
func requestedIP(svc *corev1.Service) (netip.Addr, error) {
	if svc.Spec.LoadBalancerIP == "" {
		return netip.Addr{}, nil
	}
	ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("spec.loadBalancerIP %q is not an IP address", svc.Spec.LoadBalancerIP)
	}
	return ip.Unmap(), nil
}

// adoptOrAllocate takes again the IP the Service's status holds, if it is
// in the pool, free or the Service's already (restored by the allocator when
// it rebuilt the pool), and is the one asked for if one is; else it
// allocates one.
func (c *Controller) adoptOrAllocate(svc *corev1.Service, pool, owner string, want netip.Addr) (netip.Addr, error) {
	if ips := statusIPs(svc); len(ips) > 0 && (!want.IsValid() || ips[0] == want) {
		if err := c.allocator.AllocateSpecificIP(pool, ips[0], owner); err == nil {
			return ips[0], nil
		} else if errors.Is(err, externalippool.ErrPoolNotFound) {
			return netip.Addr{}, err
		}
	}
	return c.allocate(svc, pool, owner, want)
}

// allocate takes spec.loadBalancerIP from the pool when it is set, else the
// lowest free IP of the first of the Service's ipFamilies the pool has a
// range of (one IP: a dual-stack Service gets an IP of one family).
func (c *Controller) allocate(svc *corev1.Service, pool, owner string, want netip.Addr) (netip.Addr, error) {
	if want.IsValid() {
		if err := c.allocator.AllocateSpecificIP(pool, want, owner); err != nil {
			return netip.Addr{}, fmt.Errorf("spec.loadBalancerIP %s: %w", want, err)
		}
		return want, nil
	}
	families := svc.Spec.IPFamilies
	if len(families) == 0 {
		return c.allocator.AllocateIPOfFamily(pool, owner, 0)
	}
	var firstErr error
	for _, f := range families {
		bits := 32
		if f == corev1.IPv6Protocol {
			bits = 128
		}
		ip, err := c.allocator.AllocateIPOfFamily(pool, owner, bits)
		if err == nil {
			return ip, nil
		}
		if !errors.Is(err, externalippool.ErrNoRangeOfFamily) {
			return netip.Addr{}, err
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return netip.Addr{}, fmt.Errorf("%w (the Service's ipFamilies are %v)", firstErr, families)
}

// failed reports why the Service has no IP as a Warning Event, and empties
// its status.loadBalancer.ingress: the Service is this controller's (a
// LoadBalancer with the annotation and no class), so what is there is an IP
// it wrote and no longer holds (stale, or restored by another owner). When
// the pool is gone the status stays, as an Egress keeps its egressIP: it is
// the record of the allocation, which the pool takes back if it is created
// again (the webhook refuses to delete a pool in use). No retry: a change of
// the pool, or an IP released from it, enqueues the Service again.
func (c *Controller) failed(ctx context.Context, svc *corev1.Service, err error) error {
	klog.InfoS("Could not allocate the Service external IP", "service", klog.KObj(svc), "err", err)
	if c.recorder != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, ReasonAllocationError, "No external IP: %v", err)
	}
	if len(svc.Status.LoadBalancer.Ingress) == 0 || errors.Is(err, externalippool.ErrPoolNotFound) {
		return nil
	}
	return c.writeIngress(ctx, svc, netip.Addr{}, netip.Addr{})
}

// noteUnmanaged records, once per Service, why a LoadBalancer Service gets no
// IP from this controller: it has no pool annotation (and no ingress from
// another implementation), or it has one and a loadBalancerClass.
func (c *Controller) noteUnmanaged(svc *corev1.Service, key, pool string) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || c.recorder == nil {
		return
	}
	reason, msg := "", ""
	switch {
	case svc.Spec.LoadBalancerClass != nil && pool != "":
		reason, msg = ReasonOtherClass, fmt.Sprintf("No external IP from ExternalIPPool %s: spec.loadBalancerClass is %q, "+
			"so that load balancer implementation serves the Service", pool, *svc.Spec.LoadBalancerClass)
	case svc.Spec.LoadBalancerClass == nil && pool == "" && len(svc.Status.LoadBalancer.Ingress) == 0:
		reason, msg = ReasonNoPool, "No external IP allocated by Antrea: the Service has no "+
			crdv1beta1.ServiceExternalIPPoolAnnotationKey+" annotation naming an ExternalIPPool"
		if c.defaultPool != "" {
			msg += ", and the default ExternalIPPool " + c.defaultPool + " does not exist"
		}
	default:
		return
	}
	c.mu.Lock()
	done := c.noted[key] == svc.UID
	c.noted[key] = svc.UID
	c.mu.Unlock()
	if !done {
		c.recorder.Event(svc, corev1.EventTypeNormal, reason, msg)
	}
}

func containsIP(ips []netip.Addr, ip netip.Addr) bool {
	for _, x := range ips {
		if ip.IsValid() && x == ip {
			return true
		}
	}
	return false
}

// writeIngress makes status.loadBalancer.ingress [{ip: set, ipMode: VIP}]
// when set is valid; otherwise it removes the entries of drop (every entry
// when drop is not valid either). It reads the
// Service again on a conflict, and leaves one that was recreated (another
// UID) to its own sync.
func (c *Controller) writeIngress(ctx context.Context, svc *corev1.Service, set, drop netip.Addr) error {
	vip := corev1.LoadBalancerIPModeVIP
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := c.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != svc.UID {
			return nil
		}
		var want []corev1.LoadBalancerIngress
		if set.IsValid() {
			want = []corev1.LoadBalancerIngress{{IP: set.String(), IPMode: &vip}}
		} else {
			for _, in := range cur.Status.LoadBalancer.Ingress {
				if ip, err := netip.ParseAddr(in.IP); !drop.IsValid() || (err == nil && ip.Unmap() == drop) {
					continue
				}
				want = append(want, in)
			}
		}
		if sameIngress(cur.Status.LoadBalancer.Ingress, want) {
			return nil
		}
		cur.Status.LoadBalancer.Ingress = want
		_, err = c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the ingress of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// sameIngress compares ingress lists by IP, hostname and ipMode (an unset
// ipMode is VIP, as kube-apiserver defaults it).
func sameIngress(a, b []corev1.LoadBalancerIngress) bool {
	if len(a) != len(b) {
		return false
	}
	mode := func(in corev1.LoadBalancerIngress) corev1.LoadBalancerIPMode {
		if in.IPMode == nil {
			return corev1.LoadBalancerIPModeVIP
		}
		return *in.IPMode
	}
	for i := range a {
		if a[i].IP != b[i].IP || a[i].Hostname != b[i].Hostname || mode(a[i]) != mode(b[i]) {
			return false
		}
	}
	return true
}
