// Package traceflow is the antrea-controller's side of Traceflow
// (crd.antrea.io/v1beta1): it validates each new Traceflow (its source Pod,
// its destination Pod, Service or IP, the IP family of its packet:
// pkg/util/traceflowip), gives it a data-plane tag (6 bits of
// the IP DSCP field, 1..59, unique among running Traceflows) and the phase
// Running; the agents then trace the tagged packet and write what their
// Node saw into status.results. The controller alone decides the end: it
// sets Succeeded once the results hold the packet's fate (Delivered,
// Dropped, Rejected or ForwardedOutOfOverlay), Failed when spec.timeout
// (default 20 s) passes first, and frees the tag of every Traceflow that is
// no longer running (or deleted).
package traceflow

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions/crd/v1beta1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
	"antrea.io/antrea/pkg/util/suggest"
	"antrea.io/antrea/pkg/util/traceflowip"
)

// ClientQPS and ClientBurst are the rate limit of the Traceflow clients of
// the controller and the agents: a Traceflow makes a burst of requests
// (validation, tag, each Node's result, the end), which client-go's default
// (5/s, burst 10) spread over most of a second once a few ran in a row
// (p50 0.79 s across two lab Nodes, of which the data path takes
// milliseconds).
const (
	ClientQPS   = 50
	ClientBurst = 100
)

// DefaultTimeout is the timeout of a Traceflow without spec.timeout.
const DefaultTimeout = 20 * time.Second

// Tags: the DSCP field has 6 bits; 0 is untagged traffic and 60..63 are
// left alone (upstream's range).
const (
	MinTag int8 = 1
	MaxTag int8 = 59
)

// Controller drives the phase of every Traceflow.
type Controller struct {
	client    versioned.Interface
	tfLister  crdlisters.TraceflowLister
	podLister corelisters.PodLister
	nsLister  corelisters.NamespaceLister
	svcLister corelisters.ServiceLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	tags      *TagAllocator
	now       func() time.Time
}

// NewController watches Traceflows and reads Pods, Namespaces and Services
// from the given informers.
func NewController(client versioned.Interface, tfInformer crdinformers.TraceflowInformer, pods cache.SharedIndexInformer,
	namespaces cache.SharedIndexInformer, services cache.SharedIndexInformer) *Controller {
	c := &Controller{
		client:    client,
		tfLister:  tfInformer.Lister(),
		podLister: corelisters.NewPodLister(pods.GetIndexer()),
		nsLister:  corelisters.NewNamespaceLister(namespaces.GetIndexer()),
		svcLister: corelisters.NewServiceLister(services.GetIndexer()),
		synced:    []cache.InformerSynced{tfInformer.Informer().HasSynced, pods.HasSynced, namespaces.HasSynced, services.HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "traceflow"}),
		tags: NewTagAllocator(),
		now:  time.Now,
	}
	enqueue := func(obj any) {
		if tf, ok := obj.(*crdv1beta1.Traceflow); ok {
			c.queue.Add(tf.Name)
			return
		}
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			c.queue.Add(d.Key)
		}
	}
	_, _ = tfInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	return c
}

// Run syncs Traceflows until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return
	}
	// Running Traceflows keep the tags they have (a restarted controller).
	if tfs, err := c.tfLister.List(labels.Everything()); err == nil {
		for _, tf := range tfs {
			if tf.Status.Phase == crdv1beta1.TraceflowRunning && tf.Status.DataplaneTag != 0 {
				c.tags.Reserve(tf.Name, tf.Status.DataplaneTag)
			}
		}
	}
	klog.InfoS("Started the Traceflow controller")
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
	requeue, err := c.sync(ctx, name)
	switch {
	case err != nil:
		klog.ErrorS(err, "Could not sync Traceflow", "traceflow", name)
		c.queue.AddRateLimited(name)
	case requeue > 0:
		c.queue.Forget(name)
		c.queue.AddAfter(name, requeue)
	default:
		c.queue.Forget(name)
	}
	return true
}

// sync moves one Traceflow on; it returns when to look at it again.
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	tf, err := c.tfLister.Get(name)
	if apierrors.IsNotFound(err) {
		c.tags.Release(name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	switch tf.Status.Phase {
	case "":
		return c.start(ctx, tf)
	case crdv1beta1.TraceflowRunning:
		if Complete(tf) {
			c.tags.Release(name)
			return 0, c.finish(ctx, name, crdv1beta1.TraceflowSucceeded, "")
		}
		timeout := Timeout(tf)
		start := tf.CreationTimestamp.Time
		if tf.Status.StartTime != nil {
			start = tf.Status.StartTime.Time
		}
		if left := start.Add(timeout).Sub(c.now()); left > 0 {
			c.tags.Reserve(name, tf.Status.DataplaneTag)
			return left, nil
		}
		c.tags.Release(name)
		return 0, c.finish(ctx, name, crdv1beta1.TraceflowFailed, timeoutReason(tf, timeout))
	default:
		c.tags.Release(name)
		return 0, nil
	}
}

// Timeout is a Traceflow's timeout.
func Timeout(tf *crdv1beta1.Traceflow) time.Duration {
	if tf.Spec.Timeout > 0 {
		return time.Duration(tf.Spec.Timeout) * time.Second
	}
	return DefaultTimeout
}

func timeoutReason(tf *crdv1beta1.Traceflow, timeout time.Duration) string {
	seen := "no Node reported the packet"
	if n := len(tf.Status.Results); n > 0 {
		last := tf.Status.Results[n-1]
		seen = fmt.Sprintf("last seen on Node %s", last.Node)
		if k := len(last.Observations); k > 0 {
			o := last.Observations[k-1]
			seen += fmt.Sprintf(" (%s %s)", o.Component, o.Action)
		}
	}
	if tf.Spec.LiveTraffic && len(tf.Status.Results) == 0 {
		seen = "no matching packet was seen"
	}
	return fmt.Sprintf("Traceflow timed out after %s: %s", timeout, seen)
}

// Complete reports whether the results hold the packet's fate: an
// observation that ends its path (delivered to a Pod, dropped, rejected, or
// forwarded out of the overlay), and, for a Traceflow from a Pod, the
// result of the Pod's Node (the sender), whose write may land after the
// receiver's.
func Complete(tf *crdv1beta1.Traceflow) bool {
	st := &tf.Status
	if tf.Spec.Source.Pod != "" {
		sender := false
		for _, r := range st.Results {
			sender = sender || r.Role == crdv1beta1.RoleSender
		}
		if !sender {
			return false
		}
	}
	for _, r := range st.Results {
		for _, o := range r.Observations {
			switch o.Action {
			case crdv1beta1.ActionDelivered, crdv1beta1.ActionDropped, crdv1beta1.ActionRejected,
				crdv1beta1.ActionForwardedOutOfOverlay:
				return true
			}
		}
	}
	return false
}

// start validates a new Traceflow and, when valid, tags it and sets it
// Running; an invalid one fails with a reason naming what is wrong.
func (c *Controller) start(ctx context.Context, tf *crdv1beta1.Traceflow) (time.Duration, error) {
	if reason := c.validate(tf); reason != "" {
		klog.InfoS("Traceflow is invalid", "traceflow", tf.Name, "reason", reason)
		return 0, c.finish(ctx, tf.Name, crdv1beta1.TraceflowFailed, reason)
	}
	tag, ok := c.tags.Allocate(tf.Name)
	if !ok {
		// Every tag is in use: wait for one to be freed.
		klog.InfoS("No free Traceflow tag, waiting", "traceflow", tf.Name)
		return time.Second, nil
	}
	now := metav1.NewTime(c.now())
	err := c.updateStatus(ctx, tf.Name, func(st *crdv1beta1.TraceflowStatus) bool {
		if st.Phase != "" {
			return false
		}
		st.Phase, st.DataplaneTag, st.StartTime, st.Reason = crdv1beta1.TraceflowRunning, tag, &now, ""
		return true
	})
	if err != nil {
		c.tags.Release(tf.Name)
		return 0, err
	}
	klog.InfoS("Started Traceflow", "traceflow", tf.Name, "tag", tag, "timeout", Timeout(tf))
	return Timeout(tf), nil
}

// finish sets the final phase (once).
func (c *Controller) finish(ctx context.Context, name string, phase crdv1beta1.TraceflowPhase, reason string) error {
	err := c.updateStatus(ctx, name, func(st *crdv1beta1.TraceflowStatus) bool {
		if st.Phase == crdv1beta1.TraceflowSucceeded || st.Phase == crdv1beta1.TraceflowFailed {
			return false
		}
		st.Phase, st.Reason = phase, reason
		return true
	})
	if err == nil {
		klog.InfoS("Traceflow finished", "traceflow", name, "phase", phase, "reason", reason)
	}
	return err
}

// updateStatus applies change to the latest status and writes it, retried
// on conflict: the agents write results into the same status.
func (c *Controller) updateStatus(ctx context.Context, name string, change func(*crdv1beta1.TraceflowStatus) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tf, err := c.client.CrdV1beta1().Traceflows().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		tf = tf.DeepCopy()
		if !change(&tf.Status) {
			return nil
		}
		_, err = c.client.CrdV1beta1().Traceflows().UpdateStatus(ctx, tf, metav1.UpdateOptions{})
		return err
	})
}

// validate returns why a Traceflow cannot run, or "".
func (c *Controller) validate(tf *crdv1beta1.Traceflow) string {
	s, d := tf.Spec.Source, tf.Spec.Destination
	if s.Pod == "" && !(tf.Spec.LiveTraffic && s.IP != "" && d.Pod != "") {
		return "spec.source.pod is required (or, for live traffic to a Pod, spec.source.ip)"
	}
	if reason := traceflowip.HeaderError(&tf.Spec.Packet); reason != "" {
		return reason
	}
	var src, dst traceflowip.End
	if s.Pod != "" {
		pod, reason := c.pod("source", s.Namespace, s.Pod)
		if reason != "" {
			return reason
		}
		src = traceflowip.End{What: fmt.Sprintf("source Pod %s/%s", s.Namespace, s.Pod), Addrs: traceflowip.PodAddrs(pod)}
	} else {
		ip, err := netip.ParseAddr(s.IP)
		if err != nil {
			return fmt.Sprintf("spec.source.ip %q is not an IP address", s.IP)
		}
		src = traceflowip.End{What: "spec.source.ip", Addrs: []netip.Addr{ip.Unmap()}, Given: true}
	}
	n := 0
	for _, v := range []string{d.Pod, d.Service, d.IP} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return "spec.destination needs exactly one of pod, service, ip"
	}
	switch {
	case d.Pod != "":
		pod, reason := c.pod("destination", d.Namespace, d.Pod)
		if reason != "" {
			return reason
		}
		dst = traceflowip.End{What: fmt.Sprintf("destination Pod %s/%s", d.Namespace, d.Pod), Addrs: traceflowip.PodAddrs(pod)}
	case d.Service != "":
		if reason := c.namespace("destination", d.Namespace); reason != "" {
			return reason
		}
		svc, err := c.svcLister.Services(d.Namespace).Get(d.Service)
		if err != nil {
			return fmt.Sprintf("destination Service %s/%s not found%s", d.Namespace, d.Service,
				suggest.DidYouMean(d.Service, c.serviceNames(d.Namespace), 3))
		}
		dst = traceflowip.End{What: fmt.Sprintf("destination Service %s/%s", d.Namespace, d.Service),
			Addrs: traceflowip.ServiceAddrs(svc)}
		if len(dst.Addrs) == 0 {
			return fmt.Sprintf("destination Service %s/%s has no ClusterIP", d.Namespace, d.Service)
		}
	default:
		ip, err := netip.ParseAddr(d.IP)
		if err != nil {
			return fmt.Sprintf("spec.destination.ip %q is not an IP address", d.IP)
		}
		dst = traceflowip.End{What: "spec.destination.ip", Addrs: []netip.Addr{ip.Unmap()}, Given: true}
	}
	if _, _, _, err := traceflowip.Pick(&tf.Spec.Packet, src, dst); err != nil {
		return err.Error()
	}
	if tf.Spec.DroppedOnly && !tf.Spec.LiveTraffic {
		return "spec.droppedOnly applies to live traffic only (spec.liveTraffic)"
	}
	if h := tf.Spec.Packet.IPv6Header; h != nil {
		if nh := h.NextHeader; nh != nil && *nh != protoTCP && *nh != protoUDP && *nh != protoICMPv6 {
			return fmt.Sprintf("spec.packet.ipv6Header.nextHeader %d: an IPv6 Traceflow packet is TCP (6), UDP (17) or ICMPv6 (58)", *nh)
		}
		if h.HopLimit < 0 || h.HopLimit > 255 {
			return fmt.Sprintf("spec.packet.ipv6Header.hopLimit %d: want 0..255 (0: the default, 64)", h.HopLimit)
		}
	}
	h := tf.Spec.Packet.TransportHeader
	n = 0
	for _, set := range []bool{h.ICMP != nil, h.UDP != nil, h.TCP != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return "spec.packet.transportHeader needs at most one of icmp, udp, tcp"
	}
	return ""
}

// IP protocols of an IPv6 Traceflow packet (IANA).
const (
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
)

func (c *Controller) namespace(role, ns string) string {
	if ns == "" {
		return fmt.Sprintf("spec.%s.namespace is required", role)
	}
	if _, err := c.nsLister.Get(ns); err != nil {
		var names []string
		if all, err := c.nsLister.List(labels.Everything()); err == nil {
			for _, n := range all {
				names = append(names, n.Name)
			}
		}
		return fmt.Sprintf("%s Namespace %s not found%s", role, ns, suggest.DidYouMean(ns, names, 3))
	}
	return ""
}

func (c *Controller) pod(role, ns, name string) (*corev1.Pod, string) {
	if reason := c.namespace(role, ns); reason != "" {
		return nil, reason
	}
	pod, err := c.podLister.Pods(ns).Get(name)
	if err != nil {
		var names []string
		if all, err := c.podLister.Pods(ns).List(labels.Everything()); err == nil {
			for _, p := range all {
				names = append(names, p.Name)
			}
		}
		return nil, fmt.Sprintf("%s Pod %s/%s not found%s", role, ns, name, suggest.DidYouMean(name, names, 3))
	}
	if role == "source" && (pod.Spec.NodeName == "" || pod.Status.PodIP == "") {
		return nil, fmt.Sprintf("source Pod %s/%s has no IP yet", ns, name)
	}
	if role == "source" && pod.Spec.HostNetwork {
		return nil, fmt.Sprintf("source Pod %s/%s is on the host network", ns, name)
	}
	return pod, ""
}

func (c *Controller) serviceNames(ns string) []string {
	var names []string
	if all, err := c.svcLister.Services(ns).List(labels.Everything()); err == nil {
		for _, s := range all {
			names = append(names, s.Name)
		}
	}
	return names
}

// TagAllocator hands out data-plane tags, one per running Traceflow.
type TagAllocator struct {
	mu     sync.Mutex
	byName map[string]int8
	byTag  map[int8]string
	next   int8
}

// NewTagAllocator returns an allocator with every tag free.
func NewTagAllocator() *TagAllocator {
	return &TagAllocator{byName: map[string]int8{}, byTag: map[int8]string{}, next: MinTag}
}

// Allocate returns the Traceflow's tag, giving it a free one if it has
// none; ok is false when all are in use. Tags are handed out round-robin,
// so a tag just freed is the last to be reused (agents may still be
// removing its flows).
func (a *TagAllocator) Allocate(name string) (int8, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.byName[name]; ok {
		return t, true
	}
	for range int(MaxTag - MinTag + 1) {
		t := a.next
		if a.next++; a.next > MaxTag {
			a.next = MinTag
		}
		if _, used := a.byTag[t]; !used {
			a.byName[name], a.byTag[t] = t, name
			return t, true
		}
	}
	return 0, false
}

// Reserve records a tag a Traceflow already has (after a restart).
func (a *TagAllocator) Reserve(name string, t int8) {
	if t < MinTag || t > MaxTag {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.byName[name]; ok {
		return
	}
	if _, used := a.byTag[t]; used {
		return
	}
	a.byName[name], a.byTag[t] = t, name
}

// Release frees a Traceflow's tag.
func (a *TagAllocator) Release(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.byName[name]; ok {
		delete(a.byName, name)
		delete(a.byTag, t)
	}
}

// InUse is the number of tags in use.
func (a *TagAllocator) InUse() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byTag)
}
