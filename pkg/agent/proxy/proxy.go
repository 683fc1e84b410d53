// Package proxy is AntreaProxy, the agent's Service load balancer: it
// watches Services and EndpointSlices and keeps, in OVS, one select group per
// Service port with a bucket per ready endpoint, and the flows that send a new
// connection to a ClusterIP port through that group and DNAT it to the chosen
// endpoint (pkg/agent/openflow, service.go).
//
// It has the sample-controller shape: both informers feed one workqueue of
// Service keys (namespace/name); sync(key) reads the caches, computes the
// Service's desired state (desiredState: ClusterIP ports and their endpoints)
// and, only when it differs from what was last installed, hands it to the
// OpenFlow client, which writes just the difference as one bundle. A sync
// that fails is retried with rate-limited backoff and leaves the record as it
// was, so the retry starts from the truth.
//
// This first slice realizes IPv4 ClusterIPs for TCP and UDP. Headless
// Services, Services without a ClusterIP (ExternalName) and SCTP ports are
// skipped; NodePort, LoadBalancer, externalIPs, session affinity and traffic
// policies are not realized yet.
package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

// FlowInstaller realizes Services in OVS (implemented by the agent's
// OpenFlow client).
type FlowInstaller interface {
	// InstallService makes OVS hold exactly these ports and endpoints for
	// the Service (an empty state removes it).
	InstallService(ctx context.Context, name string, want agentof.ServiceState) error
	// DeleteAllGroups removes the groups (and the flows using them) an
	// earlier agent run left; called once before the first install.
	DeleteAllGroups(ctx context.Context) error
}

// serviceIndex indexes EndpointSlices by the namespace/name of their Service.
const serviceIndex = "service"

func sliceServiceKey(obj interface{}) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + name}, nil
}

// Proxy keeps the Services of the cluster in this node's OVS.
type Proxy struct {
	nodeName  string
	flows     FlowInstaller
	services  corelisters.ServiceLister
	slices    cache.Indexer
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	packets   PacketIO
	rejected  atomic.Uint64
	agePeriod time.Duration
	mu        sync.Mutex
	installed map[string]agentof.ServiceState // by Service key, as last accepted by OVS
}

// Config is what the proxy needs to know besides its informers and the
// OpenFlow client. The zero value of every field but NodeName is a sensible
// default.
type Config struct {
	// NodeName is this node: endpoints on it are local.
	NodeName string
	// Packets is the switch's packet-in/packet-out channel, through which
	// the proxy rejects connections to Services without endpoints. Without
	// it such connections are dropped (they time out).
	Packets PacketIO
	// AffinityAgingPeriod is how often the flows of session affinities
	// longer than the switch can time out (65535 s) are aged; default one
	// minute, which is also the precision of their expiry.
	AffinityAgingPeriod time.Duration
}

// DefaultAffinityAgingPeriod is Config.AffinityAgingPeriod's default.
const DefaultAffinityAgingPeriod = time.Minute

// affinityAger expires the session affinities the switch cannot (an
// *agentof.Client).
type affinityAger interface {
	AgeSessionAffinity(ctx context.Context) (int, error)
}

// New makes a proxy for node nodeName with the defaults of Config; see
// NewWithConfig.
func New(nodeName string, services coreinformers.ServiceInformer, slices discoveryinformers.EndpointSliceInformer, flows FlowInstaller) (*Proxy, error) {
	return NewWithConfig(Config{NodeName: nodeName}, services, slices, flows)
}

// NewWithConfig makes a proxy. It adds an index to the EndpointSlice
// informer, so it must be called before the informers start.
func NewWithConfig(cfg Config, services coreinformers.ServiceInformer, slices discoveryinformers.EndpointSliceInformer, flows FlowInstaller) (*Proxy, error) {
	if cfg.NodeName == "" {
		return nil, fmt.Errorf("proxy: no node name")
	}
	if cfg.AffinityAgingPeriod <= 0 {
		cfg.AffinityAgingPeriod = DefaultAffinityAgingPeriod
	}
	if err := slices.Informer().AddIndexers(cache.Indexers{serviceIndex: sliceServiceKey}); err != nil {
		return nil, fmt.Errorf("index EndpointSlices by Service: %w", err)
	}
	p := &Proxy{
		nodeName:  cfg.NodeName,
		packets:   cfg.Packets,
		agePeriod: cfg.AffinityAgingPeriod,
		flows:     flows,
		services:  services.Lister(),
		slices:    slices.Informer().GetIndexer(),
		synced:    []cache.InformerSynced{services.Informer().HasSynced, slices.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "proxy"}),
		installed: map[string]agentof.ServiceState{},
	}
	_, err := services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.enqueueService,
		UpdateFunc: func(_, n interface{}) { p.enqueueService(n) },
		DeleteFunc: p.enqueueService,
	})
	if err != nil {
		return nil, err
	}
	_, err = slices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: p.enqueueSlice,
		UpdateFunc: func(o, n interface{}) {
			p.enqueueSlice(o) // the slice may have moved to another Service
			p.enqueueSlice(n)
		},
		DeleteFunc: p.enqueueSlice,
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Proxy) enqueueService(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	p.queue.Add(key)
}

func (p *Proxy) enqueueSlice(obj interface{}) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	keys, _ := sliceServiceKey(obj)
	for _, k := range keys {
		p.queue.Add(k)
	}
}

// Run waits for the caches, clears groups of an earlier run, and syncs
// Services until ctx ends.
func (p *Proxy) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	defer p.queue.ShutDown()
	if p.packets != nil {
		go p.serveRejects(ctx)
	} else {
		klog.InfoS("No packet-in channel: connections to Services without endpoints are dropped, not rejected")
	}
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		return fmt.Errorf("proxy: informer caches did not sync")
	}
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := p.flows.DeleteAllGroups(ctx); err != nil {
			klog.ErrorS(err, "Cannot delete the groups of an earlier run; retrying")
			return false, nil
		}
		return true, nil
	}); err != nil {
		return nil
	}
	klog.InfoS("Proxy caches synced; installing Services", "queued", p.queue.Len())
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for p.processNext(ctx) {
		}
	}, time.Second)
	if ager, ok := p.flows.(affinityAger); ok {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			if _, err := ager.AgeSessionAffinity(ctx); err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "Cannot age session affinity")
			}
		}, p.agePeriod)
	}
	<-ctx.Done()
	return nil
}

func (p *Proxy) processNext(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	defer p.queue.Done(key)
	if err := p.sync(ctx, key); err != nil {
		klog.ErrorS(err, "Failed to sync Service; retrying", "service", key)
		p.queue.AddRateLimited(key)
		return true
	}
	p.queue.Forget(key)
	return true
}

// sync makes OVS hold the desired state of one Service, writing nothing
// when it is already installed.
func (p *Proxy) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	var want agentof.ServiceState
	svc, err := p.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		objs, err := p.slices.ByIndex(serviceIndex, key)
		if err != nil {
			return err
		}
		slices := make([]*discoveryv1.EndpointSlice, 0, len(objs))
		for _, o := range objs {
			slices = append(slices, o.(*discoveryv1.EndpointSlice))
		}
		want = desiredState(svc, slices, p.nodeName)
	}
	p.mu.Lock()
	have := p.installed[key]
	p.mu.Unlock()
	if have.Equal(want) {
		return nil
	}
	if err := p.flows.InstallService(ctx, key, want); err != nil {
		return fmt.Errorf("install service %s: %w", key, err)
	}
	p.mu.Lock()
	if len(want) == 0 {
		delete(p.installed, key)
	} else {
		p.installed[key] = want
	}
	p.mu.Unlock()
	klog.InfoS("Installed Service", "service", key, "ports", len(want), "endpoints", countEndpoints(want))
	return nil
}

func countEndpoints(s agentof.ServiceState) int {
	n := 0
	for _, ps := range s {
		n += len(ps.Endpoints)
	}
	return n
}

// desiredState is what the data path should hold for a Service: for each of
// its TCP and UDP ports on each IPv4 ClusterIP, the endpoints of its
// EndpointSlices for that port (matched by port name and protocol), at the
// slice port's number (the targetPort resolved). Ready endpoints are used;
// when none is ready, serving terminating ones (as kube-proxy does, so
// connections drain gracefully). Headless Services and Services without a
// ClusterIP have no state. A port without endpoints rejects new connections.
func desiredState(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, nodeName string) agentof.ServiceState {
	var vips []netip.Addr
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if s == corev1.ClusterIPNone {
			return nil
		}
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
			vips = append(vips, a)
		}
	}
	if len(vips) == 0 {
		return nil
	}
	out := agentof.ServiceState{}
	for _, sp := range svc.Spec.Ports {
		proto, ok := protocolNumber(sp.Protocol)
		if !ok {
			continue
		}
		ps := agentof.PortState{Endpoints: portEndpoints(sp, slices, nodeName), NoEndpoints: agentof.Reject, AffinityTimeout: affinityTimeout(svc)}
		for _, vip := range vips {
			out[agentof.ServicePort{IP: vip, Protocol: proto, Port: uint16(sp.Port)}] = ps
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// maxAffinitySeconds is the longest timeoutSeconds Kubernetes validates
// (pkg/apis/core/validation: one day).
const maxAffinitySeconds = 86400

// affinityTimeout is the Service's ClientIP session affinity in seconds (0:
// none); Kubernetes defaults it to 10800 and validates it within 1..86400.
func affinityTimeout(svc *corev1.Service) uint32 {
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return 0
	}
	if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
		return uint32(min(*c.ClientIP.TimeoutSeconds, maxAffinitySeconds))
	}
	return uint32(corev1.DefaultClientIPServiceAffinitySeconds)
}

func protocolNumber(p corev1.Protocol) (uint8, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return syscall.IPPROTO_TCP, true
	case corev1.ProtocolUDP:
		return syscall.IPPROTO_UDP, true
	}
	return 0, false // SCTP: not on this slice's data path
}

// portEndpoints collects the endpoints of one Service port from its slices.
func portEndpoints(sp corev1.ServicePort, slices []*discoveryv1.EndpointSlice, nodeName string) []agentof.Endpoint {
	var ready, terminating []agentof.Endpoint
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port, ok := slicePort(s, sp)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			isReady := e.Conditions.Ready == nil || *e.Conditions.Ready
			serving := e.Conditions.Serving == nil || *e.Conditions.Serving
			isTerminating := e.Conditions.Terminating != nil && *e.Conditions.Terminating
			local := e.NodeName != nil && *e.NodeName == nodeName
			for _, a := range e.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || !ip.Is4() {
					continue
				}
				ep := agentof.Endpoint{IP: ip, Port: port, Local: local}
				switch {
				case isReady:
					ready = append(ready, ep)
				case serving && isTerminating:
					terminating = append(terminating, ep)
				}
			}
		}
	}
	if len(ready) == 0 {
		ready = terminating
	}
	return agentof.NormalizeEndpoints(ready)
}

// slicePort finds the port of a slice serving a Service port: same name (the
// empty name of a single-port Service included) and protocol.
func slicePort(s *discoveryv1.EndpointSlice, sp corev1.ServicePort) (uint16, bool) {
	for _, p := range s.Ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if name == sp.Name && proto == sp.Protocol && p.Port != nil && *p.Port > 0 && *p.Port < 65536 {
			return uint16(*p.Port), true
		}
	}
	return 0, false
}
