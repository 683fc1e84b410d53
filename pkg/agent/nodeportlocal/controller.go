// Package nodeportlocal is NodePortLocal (docs/node-port-local.md), upstream
// Antrea's feature of that name: every backend Pod on this node of a Service
// annotated nodeportlocal.antrea.io/enabled: "true" gets, per (IP family,
// protocol, target port), a port of the node from nodePortLocal.portRange;
// the node DNATs nodeIP:nodePort to podIP:targetPort (the nodeportlocal
// chains of pkg/agent/nodenet) and the Pod's annotation
// nodeportlocal.antrea.io lists the mappings, for external load balancers.
//
// It has the sample-controller shape: Pod and Service events queue the
// keys of the Pods concerned; one worker syncs a Pod at a time (sync): the
// mappings it needs, from the Services selecting it, are allocated or kept,
// the node's rules are rewritten from the whole state when it changed, and
// the annotation is patched when it says something else; a failed sync is
// retried with back-off. Each node port held is also bound (Opener), as
// upstream does, so another process cannot take it, and a port bound by
// another process is skipped. At start (restore) the mappings written in
// the Pods' annotations are taken back and the rules written from them at
// once, so a restarted agent keeps the ports consumers know.
package nodeportlocal

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/nodenet"
	"antrea.io/antrea/pkg/agent/types"
)

// Rules writes the node's NodePortLocal DNAT rules, whole state per call
// (nodenet.Table).
type Rules interface {
	SetNodePortLocal(ctx context.Context, gateway string, rules []nodenet.NodePortLocalRule) error
}

// Config is what the controller needs.
type Config struct {
	NodeName string
	Client   kubernetes.Interface
	// Pods informs of this node's Pods (a field selector on spec.nodeName);
	// Services of every Service.
	Pods, Services cache.SharedIndexInformer
	Rules          Rules
	// Gateway is the gateway interface (antrea-gw0).
	Gateway string
	// NodeIPs are the node's addresses, at most one per family: the
	// annotation's nodeIP. A family without one gets no mappings.
	NodeIPs []netip.Addr
	// Range is nodePortLocal.portRange.
	Range PortRange
	// Opener holds the node ports; nil: SocketOpener.
	Opener Opener
}

// key names one mapping: a Pod's port, per family and protocol.
type key struct {
	pod      string // namespace/name
	v6       bool
	protocol uint8
	podPort  uint16
}

// mapping is where a key goes: the Pod's address and the node port. A
// hostPort mapping is the container's own hostPort (upstream's rule: no
// extra port is allocated), written by the hostport feature, not here.
type mapping struct {
	podIP    netip.Addr
	nodePort uint16
	hostPort bool
}

type poolKey struct {
	v6       bool
	protocol uint8
}

// Controller is NodePortLocal on one node.
type Controller struct {
	cfg      Config
	pods     corelisters.PodLister
	services corelisters.ServiceLister
	queue    workqueue.TypedRateLimitingInterface[string]

	// mu guards what follows; the one worker and restore take it.
	mu       sync.Mutex
	mappings map[key]mapping
	pools    map[poolKey]*pool
	// written are the rules the kernel last took, sorted; nil: none yet
	// (the first sync writes, removing what an earlier agent left).
	written []nodenet.NodePortLocalRule
}

// NewController registers the event handlers; Run starts the work.
func NewController(cfg Config) *Controller {
	if cfg.Opener == nil {
		cfg.Opener = SocketOpener{}
	}
	c := &Controller{cfg: cfg,
		pods:     corelisters.NewPodLister(cfg.Pods.GetIndexer()),
		services: corelisters.NewServiceLister(cfg.Services.GetIndexer()),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeportlocal"}),
		mappings: map[key]mapping{},
		pools:    map[poolKey]*pool{},
	}
	enqueuePod := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			c.queue.Add(d.Key)
		} else if k, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(k)
		}
	}
	if _, err := cfg.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueuePod, UpdateFunc: func(_, obj any) { enqueuePod(obj) }, DeleteFunc: enqueuePod,
	}); err != nil {
		klog.ErrorS(err, "NodePortLocal cannot watch Pods")
	}
	if _, err := cfg.Services.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueServicePods(obj) },
		UpdateFunc: func(old, obj any) { c.enqueueServicePods(old); c.enqueueServicePods(obj) },
		DeleteFunc: func(obj any) { c.enqueueServicePods(obj) },
	}); err != nil {
		klog.ErrorS(err, "NodePortLocal cannot watch Services")
	}
	return c
}

// enqueueServicePods queues the Pods a Service with the annotation selects
// (on an update the old and the new Service are both passed: a Service
// losing the annotation or its selector requeues the Pods it had).
func (c *Controller) enqueueServicePods(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok || svc.Annotations[EnabledAnnotation] != "true" || len(svc.Spec.Selector) == 0 {
		return
	}
	pods, err := c.pods.Pods(svc.Namespace).List(labels.SelectorFromSet(svc.Spec.Selector))
	if err != nil {
		return
	}
	for _, p := range pods {
		c.queue.Add(p.Namespace + "/" + p.Name)
	}
}

// Run restores the mappings of the Pods' annotations once the caches
// synced, then syncs queued Pods until ctx ends. The rules stay when it
// returns (an agent restart keeps the mappings working); the sockets close.
func (c *Controller) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	defer c.closeSockets()
	if !cache.WaitForNamedCacheSync("NodePortLocal", ctx.Done(), c.cfg.Pods.HasSynced, c.cfg.Services.HasSynced) {
		return
	}
	c.restore(ctx)
	klog.InfoS("NodePortLocal started", "portRange", c.cfg.Range, "nodeIPs", c.cfg.NodeIPs)
	for c.next(ctx) {
	}
}

func (c *Controller) next(ctx context.Context) bool {
	k, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(k)
	if err := c.sync(ctx, k); err != nil {
		klog.ErrorS(err, "NodePortLocal sync failed; retrying", "pod", k)
		c.queue.AddRateLimited(k)
		return true
	}
	c.queue.Forget(k)
	return true
}

func (c *Controller) closeSockets() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pools {
		p.closeAll()
	}
}

func (c *Controller) pool(v6 bool, protocol uint8) *pool {
	k := poolKey{v6, protocol}
	p, ok := c.pools[k]
	if !ok {
		p = newPool(c.cfg.Range)
		c.pools[k] = p
	}
	return p
}

// want is one mapping a Pod needs.
type want struct {
	key
	podIP    netip.Addr
	hostPort uint16 // the container's hostPort for that port, 0: none
}

// wanted lists the mappings pod needs: for each Service of its namespace
// that has the annotation, is neither NodePort nor ExternalName and whose
// selector matches it, each TCP and UDP port's target port (a named one
// resolved through the Pod's container ports; SCTP is not supported), for
// each of the Service's IP families in which the Pod and the node have an
// address. A hostNetwork Pod needs none: its ports are the node's.
func (c *Controller) wanted(pod *corev1.Pod) ([]want, error) {
	if pod == nil || pod.Spec.HostNetwork || pod.Spec.NodeName != c.cfg.NodeName {
		return nil, nil
	}
	podIPs := map[bool]netip.Addr{}
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			if _, ok := podIPs[a.Is6()]; !ok {
				podIPs[a.Is6()] = a
			}
		}
	}
	if len(podIPs) == 0 {
		return nil, nil
	}
	services, err := c.services.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	seen := map[key]bool{}
	var out []want
	for _, svc := range services {
		if svc.Annotations[EnabledAnnotation] != "true" || svc.Spec.Type == corev1.ServiceTypeNodePort ||
			svc.Spec.Type == corev1.ServiceTypeExternalName || len(svc.Spec.Selector) == 0 ||
			!labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			continue
		}
		families := map[bool]bool{}
		for _, f := range svc.Spec.IPFamilies {
			families[f == corev1.IPv6Protocol] = true
		}
		if len(families) == 0 { // not defaulted (an old or a fake API server): the Pod's
			for v6 := range podIPs {
				families[v6] = true
			}
		}
		for _, sp := range svc.Spec.Ports {
			protocol := protocolNumber(sp.Protocol)
			if protocol == 0 {
				continue
			}
			port, hostPort := targetPort(pod, sp)
			if port == 0 {
				continue
			}
			for _, v6 := range []bool{false, true} {
				ip, ok := podIPs[v6]
				if !families[v6] || !ok || !c.nodeIP(v6).IsValid() {
					continue
				}
				k := key{pod: pod.Namespace + "/" + pod.Name, v6: v6, protocol: protocol, podPort: port}
				if !seen[k] {
					seen[k] = true
					out = append(out, want{key: k, podIP: ip, hostPort: hostPort})
				}
			}
		}
	}
	return out, nil
}

func protocolNumber(p corev1.Protocol) uint8 {
	switch p {
	case corev1.ProtocolTCP, "":
		return types.ProtocolTCP
	case corev1.ProtocolUDP:
		return types.ProtocolUDP
	}
	return 0
}

// targetPort is the Pod's port a Service port goes to (0: the Pod has no
// container port of that name), and the container's hostPort for it.
func targetPort(pod *corev1.Pod, sp corev1.ServicePort) (port, hostPort uint16) {
	proto := cmp.Or(sp.Protocol, corev1.ProtocolTCP)
	switch {
	case sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != "":
		for _, ctr := range pod.Spec.Containers {
			for _, cp := range ctr.Ports {
				if cp.Name == sp.TargetPort.StrVal && cmp.Or(cp.Protocol, corev1.ProtocolTCP) == proto {
					port = uint16(cp.ContainerPort)
				}
			}
		}
	case sp.TargetPort.IntVal != 0:
		port = uint16(sp.TargetPort.IntVal)
	default: // unset: the API server defaults it to the port
		port = uint16(sp.Port)
	}
	for _, ctr := range pod.Spec.Containers {
		for _, cp := range ctr.Ports {
			if uint16(cp.ContainerPort) == port && cp.HostPort > 0 && cmp.Or(cp.Protocol, corev1.ProtocolTCP) == proto {
				hostPort = uint16(cp.HostPort)
			}
		}
	}
	return port, hostPort
}

func (c *Controller) nodeIP(v6 bool) netip.Addr {
	for _, a := range c.cfg.NodeIPs {
		if a.Is6() == v6 {
			return a
		}
	}
	return netip.Addr{}
}

// sync brings one Pod's mappings, the node's rules and the Pod's
// annotation to what the Services selecting it ask for.
func (c *Controller) sync(ctx context.Context, podKey string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(podKey)
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return err
	}
	wants, err := c.wanted(pod)
	if err != nil {
		return err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	old := map[key]mapping{}
	for k, m := range c.mappings {
		if k.pod == podKey {
			old[k] = m
		}
	}
	next := map[key]mapping{}
	type held struct {
		k    key
		port uint16
	}
	var allocated []held
	// The node ports other chains DNAT, read once per sync and only when a
	// port is allocated.
	var claimed map[protoPort]string
	releaseAllocated := func() {
		for _, h := range allocated {
			c.pool(h.k.v6, h.k.protocol).release(h.port)
		}
	}
	for _, w := range wants {
		m, had := old[w.key]
		switch {
		case w.hostPort != 0:
			next[w.key] = mapping{podIP: w.podIP, nodePort: w.hostPort, hostPort: true}
		case had && !m.hostPort:
			// Kept, also when the Pod's address changed (a new sandbox):
			// the consumers keep the port they know.
			next[w.key] = mapping{podIP: w.podIP, nodePort: m.nodePort}
		default:
			if claimed == nil {
				claimed = c.claimedElsewhere()
			}
			port, err := c.pool(w.v6, w.protocol).allocate(func(port uint16) (io.Closer, error) {
				if why := claimed[protoPort{w.protocol, port}]; why != "" {
					return nil, fmt.Errorf("node port %d is %s", port, why)
				}
				return c.open(w.v6, w.protocol, port)
			})
			if err != nil {
				releaseAllocated()
				return fmt.Errorf("pod %s, %s port %d: %w", podKey, types.ProtocolName(w.protocol), w.podPort, err)
			}
			allocated = append(allocated, held{w.key, port})
			next[w.key] = mapping{podIP: w.podIP, nodePort: port}
		}
	}
	for k := range old {
		delete(c.mappings, k)
	}
	for k, m := range next {
		c.mappings[k] = m
	}
	if err := c.writeRulesLocked(ctx); err != nil {
		for k := range next {
			delete(c.mappings, k)
		}
		for k, m := range old {
			c.mappings[k] = m
		}
		releaseAllocated()
		return err
	}
	// Free the ports no longer mapped, now that their rules are gone.
	for k, m := range old {
		if n, ok := next[k]; !m.hostPort && (!ok || n.hostPort) {
			c.pool(k.v6, k.protocol).release(m.nodePort)
		}
	}
	if len(allocated) > 0 || len(old) != len(next) {
		klog.InfoS("NodePortLocal mappings of a Pod", "pod", podKey, "mappings", len(next), "allocated", len(allocated))
	}
	if pod == nil {
		return nil
	}
	return c.annotate(ctx, pod, next)
}

// protoPort is a node port of a protocol.
type protoPort struct {
	protocol uint8
	port     uint16
}

// claimedElsewhere maps the node ports the node's netfilter already DNATs
// to something else to why: a Service's NodePort
// (AntreaProxy's nodeport chains; the configured range may not overlap the
// default NodePort range, but a kube-apiserver with another range may hand
// one out in it) or a hostPort of a Pod of this node (the hostport chains).
// Neither binds a socket, so the Opener cannot see them.
func (c *Controller) claimedElsewhere() map[protoPort]string {
	claimed := map[protoPort]string{}
	services, _ := c.services.List(labels.Everything())
	for _, svc := range services {
		for _, sp := range svc.Spec.Ports {
			if sp.NodePort != 0 {
				claimed[protoPort{protocolNumber(sp.Protocol), uint16(sp.NodePort)}] = "the NodePort of Service " + svc.Namespace + "/" + svc.Name
			}
		}
	}
	pods, _ := c.pods.List(labels.Everything())
	for _, pod := range pods {
		for _, ctr := range pod.Spec.Containers {
			for _, cp := range ctr.Ports {
				if cp.HostPort != 0 {
					claimed[protoPort{protocolNumber(cp.Protocol), uint16(cp.HostPort)}] = "a hostPort of Pod " + pod.Namespace + "/" + pod.Name
				}
			}
		}
	}
	return claimed
}

// open holds a node port through the Opener.
func (c *Controller) open(v6 bool, protocol uint8, port uint16) (io.Closer, error) {
	return c.cfg.Opener.Open(v6, protocol, port)
}

// rulesLocked are the rules of every mapping but hostPort ones, sorted.
func (c *Controller) rulesLocked() []nodenet.NodePortLocalRule {
	rules := make([]nodenet.NodePortLocalRule, 0, len(c.mappings))
	for k, m := range c.mappings {
		if !m.hostPort {
			rules = append(rules, nodenet.NodePortLocalRule{Protocol: k.protocol, NodePort: m.nodePort,
				Pod: netip.AddrPortFrom(m.podIP, k.podPort)})
		}
	}
	slices.SortFunc(rules, func(a, b nodenet.NodePortLocalRule) int {
		return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.NodePort, b.NodePort), a.Pod.Compare(b.Pod))
	})
	return rules
}

// writeRulesLocked writes the rules when they differ from what the kernel
// took last.
func (c *Controller) writeRulesLocked(ctx context.Context) error {
	rules := c.rulesLocked()
	if c.written != nil && slices.Equal(rules, c.written) {
		return nil
	}
	if err := c.cfg.Rules.SetNodePortLocal(ctx, c.cfg.Gateway, rules); err != nil {
		return err
	}
	c.written = rules
	return nil
}

// annotate patches the Pod's annotation when it does not list ms.
func (c *Controller) annotate(ctx context.Context, pod *corev1.Pod, ms map[key]mapping) error {
	want := make([]Mapping, 0, len(ms))
	for k, m := range ms {
		proto := types.ProtocolName(k.protocol)
		family := IPFamilyIPv4
		if k.v6 {
			family = IPFamilyIPv6
		}
		want = append(want, Mapping{PodPort: int(k.podPort), NodeIP: c.nodeIP(k.v6).String(), NodePort: int(m.nodePort),
			Protocol: proto, Protocols: []string{proto}, IPFamily: family})
	}
	slices.SortFunc(want, compareMappings)
	value, has := pod.Annotations[PodAnnotation]
	if !has && len(want) == 0 {
		return nil
	}
	if has {
		if have, err := ParseAnnotation(value); err == nil && sameMappings(have, want) {
			return nil
		}
	}
	return patchAnnotation(ctx, c.cfg.Client, pod, want)
}

// restore takes back the mappings the Pods' annotations list (an earlier
// run's), holding their node ports, and writes the rules of all of them at
// once, before any sync: existing mappings keep working and keep their
// ports. An annotation that cannot be read, or on a Pod without an
// address, is removed; a mapping out of the range, of a family the Pod has
// no address in, or whose port cannot be held, is left for sync to replace
// (with a new port, in the annotation).
func (c *Controller) restore(ctx context.Context) {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "NodePortLocal cannot list Pods to restore their mappings")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	restored := 0
	for _, pod := range pods {
		value, ok := pod.Annotations[PodAnnotation]
		if !ok || pod.Spec.NodeName != c.cfg.NodeName {
			continue
		}
		ms, err := ParseAnnotation(value)
		if err != nil || len(pod.Status.PodIPs) == 0 || pod.Spec.HostNetwork {
			klog.InfoS("Removing a NodePortLocal annotation that cannot be restored", "pod", klog.KObj(pod), "err", err)
			if err := patchAnnotation(ctx, c.cfg.Client, pod, nil); err != nil {
				klog.ErrorS(err, "Cannot remove the NodePortLocal annotation", "pod", klog.KObj(pod))
			}
			continue
		}
		for _, m := range ms {
			protocol := protocolNumber(corev1.Protocol(strings.ToUpper(m.Protocol)))
			v6 := m.Family() == IPFamilyIPv6
			podIP := podIPOf(pod, v6)
			if protocol == 0 || m.Protocol == "" || m.PodPort <= 0 || m.PodPort > 65535 || !podIP.IsValid() ||
				!c.cfg.Range.Contains(m.NodePort) {
				continue
			}
			k := key{pod: pod.Namespace + "/" + pod.Name, v6: v6, protocol: protocol, podPort: uint16(m.PodPort)}
			if _, dup := c.mappings[k]; dup {
				continue
			}
			if err := c.pool(v6, protocol).reserve(uint16(m.NodePort), func(port uint16) (io.Closer, error) {
				return c.open(v6, protocol, port)
			}); err != nil {
				klog.InfoS("Cannot hold the node port of a NodePortLocal mapping; it will be replaced",
					"pod", klog.KObj(pod), "nodePort", m.NodePort, "err", err)
				continue
			}
			c.mappings[k] = mapping{podIP: podIP, nodePort: uint16(m.NodePort)}
			restored++
		}
	}
	if err := c.writeRulesLocked(ctx); err != nil {
		// The first sync writes them (written is still nil).
		klog.ErrorS(err, "Cannot write the restored NodePortLocal rules")
	}
	klog.InfoS("Restored NodePortLocal mappings from the Pods' annotations", "mappings", restored)
}

func podIPOf(pod *corev1.Pod, v6 bool) netip.Addr {
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is6() == v6 {
			return a
		}
	}
	return netip.Addr{}
}
