// Package proxy is AntreaProxy, the agent's Service load balancer: it
// watches Services and EndpointSlices and keeps, in OVS, one select group per
// Service port with a bucket per endpoint, and the flows that send a new
// connection to the port through that group and DNAT it to the chosen
// endpoint (pkg/agent/openflow, service.go).
//
// It has the sample-controller shape: both informers feed one workqueue of
// Service keys (namespace/name); sync(key) reads the caches, computes the
// Service's desired state (desiredState: its ports on each ClusterIP,
// external IP and LoadBalancer ingress IP, their endpoints under the traffic
// policies, what happens without endpoints, session affinity) and, only when
// it differs from what was last installed, hands it to the OpenFlow client,
// which writes just the difference as one bundle. A sync that fails is
// retried with rate-limited backoff and leaves the record as it was, so the
// retry starts from the truth.
//
// A change that finds the queue idle is installed alone, at once. Under a
// stream of changes the worker takes what is queued with it (up to maxBatch
// Services or maxBatchWork of computing) and installs the Services that
// changed in one bundle (FlowInstaller.InstallServices): one OVS round trip
// instead of one per Service, which is what kept the queue from draining.
// The bundle is all or nothing; when it fails each Service is installed
// alone, and those that fail again are retried with backoff.
//
// Besides, it answers the packets the data path sends up for ports without
// endpoints (reject.go), expires the session affinities longer than OpenFlow
// can time out, and, at start, lets the OpenFlow client adopt what the
// previous agent run left in OVS rather than rewrite it.
//
// With proxyAll (Config.ProxyAll, on by default in the agent) it also
// realizes the node path, for traffic that does not start in a pod of this
// node: each NodePort is a port on agentof.NodePortVirtualIP, to which the
// node's netfilter DNATs the node's NodePort addresses, and every Service
// address is routed from the node to the gateway (pkg/agent/route's
// NodePath, which the proxy tells what each Service needs after its flows
// are in). The data path source-NATs traffic from outside the node to
// endpoints on other nodes (externalTrafficPolicy Cluster), keeps the
// client address and only local endpoints under Local, and gives the
// node's own traffic every endpoint (docs/design/ovs-pipeline.md, "The
// node path").
//
// Kubernetes semantics beyond the ports and endpoints:
//   - topology (topology.go): the endpoints' forNodes and forZones hints,
//     which the EndpointSlice controller writes for trafficDistribution
//     PreferSameNode, PreferSameZone and PreferClose, narrow the cluster
//     endpoints as kube-proxy narrows them (only when every ready endpoint
//     has a hint and one is for this node or its zone, the zone being the
//     topology.kubernetes.io/zone label of this node's Node object);
//   - stale UDP conntrack entries (the OpenFlow client,
//     service_conntrack.go): after a UDP endpoint leaves a port, or a UDP
//     port goes, the entries DNATed to it are flushed, so clients that keep
//     their socket (DNS) reach a live endpoint with their next datagram;
//   - healthCheckNodePort (healthcheck.go): a LoadBalancer with
//     externalTrafficPolicy Local has its health check served on the node's
//     addresses, 200 with the count of local ready endpoints, 503 without
//     (the agent turns it off without proxyAll, when kube-proxy serves the
//     NodePorts);
//   - Warning Events (events.go): what the data path cannot realize (SCTP
//     ports, IPv6 addresses, an address and port another Service holds, a
//     health check port that cannot be opened) gets a Warning Event on the
//     Service, once per generation of it; every other port and Service
//     works.
//
// IPv4 TCP and UDP ports are realized. Headless Services and Services
// without a ClusterIP (ExternalName) are skipped by design (kube-proxy
// skips them too); SCTP ports and IPv6 addresses are skipped with a
// Warning Event.
package proxy

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/route"
	agenttypes "antrea.io/antrea/pkg/agent/types"
)

// FlowInstaller realizes Services in OVS (implemented by the agent's
// OpenFlow client).
type FlowInstaller interface {
	// InstallService makes OVS hold exactly these ports and endpoints for
	// the Service (an empty state removes it).
	InstallService(ctx context.Context, name string, want agentof.ServiceState) error
	// InstallServices does what InstallService does for several Services
	// in one bundle, all or nothing: when it fails, OVS and the installer's
	// record hold every one of them as before.
	InstallServices(ctx context.Context, changes []agentof.ServiceChange) error
	// RecoverServices reads what an earlier agent run left in OVS, for
	// InstallService to adopt (changing only what differs); called once,
	// before the first install.
	RecoverServices(ctx context.Context) (int, error)
	// FinishServiceRecovery removes what no Service adopted; called once,
	// when every Service known at start was installed.
	FinishServiceRecovery(ctx context.Context) error
	// SetLoadBalancerSourceRanges makes OVS hold exactly these
	// loadBalancerSourceRanges for the Service (nil: none), writing
	// nothing when they are already there.
	SetLoadBalancerSourceRanges(ctx context.Context, name string, want agentof.SourceRanges) error
	// FinishSourceRangesRecovery removes the ranges an earlier run left
	// and this one did not set; called once, when every Service known at
	// start was installed.
	FinishSourceRangesRecovery(ctx context.Context) error
}

// NodePath is the node's side of the node path (implemented by
// pkg/agent/route's NodePath): the netfilter rules that DNAT NodePorts to
// the bridge and the routes of Service addresses to the gateway.
type NodePath interface {
	// SetService records what a Service needs of the node (the zero value:
	// nothing); it does not block.
	SetService(key string, needs route.ServiceNeeds)
	// Synced says every Service known at start was set: what no Service
	// needs may go.
	Synced()
}

// serviceIndex indexes EndpointSlices by the namespace/name of their Service.
const serviceIndex = "service"

func sliceServiceKey(obj any) ([]string, error) {
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
	nodeName string
	// serviceProxyName is Config.ServiceProxyName.
	serviceProxyName string
	flows            FlowInstaller
	services         corelisters.ServiceLister
	slices           cache.Indexer
	synced           []cache.InformerSynced
	queue            workqueue.TypedRateLimitingInterface[string]
	packets          PacketIO
	proxyAll         bool
	ipv6             bool
	nodePath         NodePath
	rejected         atomic.Uint64
	agePeriod        time.Duration
	recorder         record.EventRecorder
	datapath         string
	health           *healthServer // nil: health checks not served
	mu               sync.Mutex
	zone             string                                  // this node's zone label
	warned           map[string]*warned                      // Events posted, by Service key
	installed        map[string]agentof.ServiceState         // by Service key, as last accepted by OVS
	pending          map[string]bool                         // Services known at start not installed yet (nil once all were)
	started          bool                                    // pending was filled
	claims           map[agentof.ServicePort]string          // the Service realizing each port
	waiting          map[agentof.ServicePort]map[string]bool // Services that want a port another realizes

	// proxyHealth follows the queue for kube-proxy's health port (nil: none).
	proxyHealth *ProxyHealthServer
}

// Config is what the proxy needs to know besides its informers and the
// OpenFlow client. The zero value of every field but NodeName is a sensible
// default.
type Config struct {
	// NodeName is this node: endpoints on it are local.
	NodeName string
	// ServiceProxyName is the value of LabelServiceProxyName of the
	// Services this proxy serves; empty: those without the label.
	ServiceProxyName string
	// Packets is the switch's packet-in/packet-out channel, through which
	// the proxy rejects connections to Services without endpoints. Without
	// it such connections are dropped (they time out).
	Packets PacketIO
	// AffinityAgingPeriod is how often the flows of session affinities
	// longer than the switch can time out (65535 s) are aged; default one
	// minute, which is also the precision of their expiry.
	AffinityAgingPeriod time.Duration
	// ProxyAll (antreaProxy.proxyAll) realizes the node path: NodePorts,
	// and Services for traffic that does not start in a pod of this node
	// (from the node itself, from outside). NodePath, required with it,
	// steers that traffic into the bridge.
	ProxyAll bool
	NodePath NodePath
	// Recorder posts the Warning Events on Services the data path cannot
	// wholly realize (events.go); nil: they are only logged.
	Recorder record.EventRecorder
	// DatapathType is the bridge's datapath ("system", "netdev"), which
	// some warnings name.
	DatapathType string
	// Nodes, when set, lets the proxy follow this node's zone label
	// (topology.kubernetes.io/zone) for the endpoints' zone hints; without
	// it the zone is Zone, fixed.
	Nodes coreinformers.NodeInformer
	Zone  string
	// HealthCheckAddresses are the addresses the healthCheckNodePorts of
	// externalTrafficPolicy Local LoadBalancers are served on (none: every
	// IPv4 address of the node); NoHealthChecks serves none.
	HealthCheckAddresses []netip.Addr
	NoHealthChecks       bool
	// ProxyHealth, when set, is told of every change queued and every
	// drained queue, for kube-proxy's health port (proxyhealth.go).
	ProxyHealth *ProxyHealthServer
	// IPv6 says the node carries IPv6 (a dual-stack node: its gateway has
	// an IPv6 address): the IPv6 ClusterIPs of Services are realized in
	// the bridge beside the IPv4 ones. The node path (NodePorts, proxyAll)
	// stays IPv4 (realizes).
	IPv6 bool
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
	if cfg.ProxyAll && cfg.NodePath == nil {
		return nil, fmt.Errorf("proxy: proxyAll needs the node path")
	}
	if err := slices.Informer().AddIndexers(cache.Indexers{serviceIndex: sliceServiceKey}); err != nil {
		return nil, fmt.Errorf("index EndpointSlices by Service: %w", err)
	}
	p := &Proxy{
		nodeName:         cfg.NodeName,
		serviceProxyName: cfg.ServiceProxyName,
		zone:             cfg.Zone,
		recorder:         cfg.Recorder,
		datapath:         cfg.DatapathType,
		warned:           map[string]*warned{},
		packets:          cfg.Packets,
		proxyAll:         cfg.ProxyAll,
		ipv6:             cfg.IPv6,
		nodePath:         cfg.NodePath,
		agePeriod:        cfg.AffinityAgingPeriod,
		flows:            flows,
		services:         services.Lister(),
		slices:           slices.Informer().GetIndexer(),
		synced:           []cache.InformerSynced{services.Informer().HasSynced, slices.Informer().HasSynced},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "proxy"}),
		installed: map[string]agentof.ServiceState{},
		claims:    map[agentof.ServicePort]string{},
		waiting:   map[agentof.ServicePort]map[string]bool{},
	}
	p.proxyHealth = cfg.ProxyHealth
	if !cfg.NoHealthChecks {
		p.health = newHealthServer(cfg.HealthCheckAddresses, p.installedAtStart)
	}
	if cfg.Nodes != nil {
		p.synced = append(p.synced, cfg.Nodes.Informer().HasSynced)
		if _, err := cfg.Nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    p.followNodeZone,
			UpdateFunc: func(_, n any) { p.followNodeZone(n) },
		}); err != nil {
			return nil, err
		}
	}
	_, err := services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.enqueueService,
		UpdateFunc: func(_, n any) { p.enqueueService(n) },
		DeleteFunc: p.enqueueService,
	})
	if err != nil {
		return nil, err
	}
	_, err = slices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: p.enqueueSlice,
		UpdateFunc: func(o, n any) {
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

func (p *Proxy) enqueueService(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	p.queue.Add(key)
	p.proxyHealth.QueuedUpdate()
}

func (p *Proxy) enqueueSlice(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	keys, _ := sliceServiceKey(obj)
	for _, k := range keys {
		p.queue.Add(k)
		p.proxyHealth.QueuedUpdate()
	}
}

// Run waits for the caches, recovers what an earlier run left in OVS, and
// syncs Services until ctx ends.
func (p *Proxy) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	defer p.queue.ShutDown()
	if p.packets != nil {
		p.packets.Handle(agentof.PacketInServiceReject, p.rejectPacketIn)
	} else {
		klog.InfoS("No packet-in channel: connections to Services without endpoints are dropped, not rejected")
	}
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		return fmt.Errorf("proxy: informer caches did not sync")
	}
	if p.health != nil {
		go p.health.stopWith(ctx)
	}
	// Restart: what the previous run left stays in OVS (and keeps serving)
	// until each Service adopts its part; what no Service adopts goes once
	// every Service known now was installed.
	var recovered int
	if err := retry(ctx, "recover the Services of an earlier run", func(ctx context.Context) (err error) {
		recovered, err = p.flows.RecoverServices(ctx)
		return err
	}); err != nil {
		return nil
	}
	services, err := p.services.List(labels.Everything())
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.pending, p.started = map[string]bool{}, true
	for _, svc := range services {
		p.pending[svc.Namespace+"/"+svc.Name] = true
	}
	p.mu.Unlock()
	klog.InfoS("Proxy caches synced; installing Services", "services", len(services), "recoveredPorts", recovered)
	p.markSynced(ctx, "")
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for p.processNext(ctx) {
			p.reportDrained()
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

// Batches: under a stream of changes the worker takes, besides the key it
// waited for, what is already queued (up to maxBatch keys, or maxBatchWork
// of computing them) and installs the Services that changed in one bundle,
// one OVS round trip for all of them. A key that arrives at an idle queue
// goes alone, as before, so a single change waits for nothing.
const (
	maxBatch     = 200
	maxBatchWork = 50 * time.Millisecond
)

func (p *Proxy) processNext(ctx context.Context) bool {
	key, quit := p.queue.Get()
	if quit {
		return false
	}
	if p.queue.Len() == 0 {
		defer p.queue.Done(key)
		if err := p.sync(ctx, key); err != nil {
			klog.ErrorS(err, "Failed to sync Service; retrying", "service", key)
			p.queue.AddRateLimited(key)
			return true
		}
		p.queue.Forget(key)
		p.markSynced(ctx, key)
		return true
	}
	var batch []*plan
	start := time.Now()
	for {
		if pl := p.planOrFail(key); pl != nil {
			if pl.have.Equal(pl.want) {
				if err := p.setSourceRanges(ctx, pl); err != nil {
					klog.ErrorS(err, "Failed to sync Service; retrying", "service", key)
					p.queue.AddRateLimited(key)
					p.queue.Done(key)
				} else {
					p.applied(pl)
					p.finish(ctx, key)
				}
			} else {
				batch = append(batch, pl)
			}
		}
		if len(batch) >= maxBatch || time.Since(start) >= maxBatchWork || p.queue.Len() == 0 {
			break
		}
		if key, quit = p.queue.Get(); quit {
			break
		}
	}
	p.installBatch(ctx, batch)
	return true
}

// planOrFail plans the sync of key; on failure the key is retried later.
func (p *Proxy) planOrFail(key string) *plan {
	pl, err := p.plan(key)
	if err != nil {
		klog.ErrorS(err, "Failed to sync Service; retrying", "service", key)
		p.queue.AddRateLimited(key)
		p.queue.Done(key)
		return nil
	}
	return pl
}

// finish ends a key's successful sync.
func (p *Proxy) finish(ctx context.Context, key string) {
	p.queue.Forget(key)
	p.queue.Done(key)
	p.markSynced(ctx, key)
}

// installBatch installs the Services of a batch in one bundle. When the
// bundle fails (nothing of it is in OVS), each Service is synced alone, so
// one that OVS refuses (or that wants a port another Service of the batch
// takes) does not hold the others back; those that fail alone are retried
// with backoff.
func (p *Proxy) installBatch(ctx context.Context, batch []*plan) {
	if len(batch) == 0 {
		return
	}
	changes := make([]agentof.ServiceChange, len(batch))
	var err error
	for i, pl := range batch {
		changes[i] = agentof.ServiceChange{Name: pl.key, Want: pl.want}
		if err == nil && len(pl.ranges) > 0 {
			err = p.setSourceRanges(ctx, pl)
		}
	}
	if err == nil {
		err = p.flows.InstallServices(ctx, changes)
	}
	if err == nil {
		klog.V(2).InfoS("Installed Services in one bundle", "services", len(batch))
		for _, pl := range batch {
			p.recordInstalled(pl)
			if len(pl.ranges) == 0 {
				if err := p.setSourceRanges(ctx, pl); err != nil {
					klog.ErrorS(err, "Failed to sync Service; retrying", "service", pl.key)
					p.queue.AddRateLimited(pl.key)
					p.queue.Done(pl.key)
					continue
				}
			}
			p.finish(ctx, pl.key)
		}
		return
	}
	klog.ErrorS(err, "Failed to install a batch of Services; installing them one by one", "services", len(batch))
	for _, pl := range batch {
		if err := p.sync(ctx, pl.key); err != nil {
			klog.ErrorS(err, "Failed to sync Service; retrying", "service", pl.key)
			p.queue.AddRateLimited(pl.key)
			p.queue.Done(pl.key)
			continue
		}
		p.finish(ctx, pl.key)
	}
}

// installedAtStart says every Service known at start is installed (the
// health checks answer 503 before).
func (p *Proxy) installedAtStart() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending == nil && p.started
}

// markSynced records that a Service was installed; once every Service known
// at start was, it finishes the recovery of the earlier run's state.
func (p *Proxy) markSynced(ctx context.Context, key string) {
	p.mu.Lock()
	if p.pending == nil {
		p.mu.Unlock()
		return
	}
	delete(p.pending, key)
	done := len(p.pending) == 0
	if done {
		p.pending = nil
	}
	p.mu.Unlock()
	if !done {
		return
	}
	if p.nodePath != nil {
		p.nodePath.Synced()
	}
	go func() {
		if err := retry(ctx, "remove what no Service adopted of an earlier run", p.flows.FinishServiceRecovery); err == nil {
			klog.InfoS("Every Service known at start is installed; the earlier run's leftovers are gone")
		}
		_ = retry(ctx, "remove the loadBalancerSourceRanges of an earlier run", p.flows.FinishSourceRangesRecovery)
	}()
}

// retry runs f until it succeeds or ctx ends, backing off from 100 ms to
// 10 s between failures.
func retry(ctx context.Context, what string, f func(context.Context) error) error {
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 10 * time.Second}
	return wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		if err := f(ctx); err != nil {
			klog.ErrorS(err, "Failed; retrying", "what", what)
			return false, nil
		}
		return true, nil
	})
}

// plan is what a sync computed for one Service: its desired state, what is
// installed, and what the node path and the health check need.
type plan struct {
	key        string
	svc        *corev1.Service // nil: deleted
	want, have agentof.ServiceState
	// ranges are the loadBalancerSourceRanges of the ports of want on
	// LoadBalancer ingress IPs.
	ranges agentof.SourceRanges
	needs  route.ServiceNeeds
	hc     healthCheck
}

// sync makes OVS hold the desired state of one Service, writing nothing
// when it is already installed; it posts the Warning Events of what it
// cannot realize and keeps the Service's health check.
func (p *Proxy) sync(ctx context.Context, key string) error {
	pl, err := p.plan(key)
	if err != nil {
		return err
	}
	if pl.have.Equal(pl.want) {
		if err := p.setSourceRanges(ctx, pl); err != nil {
			return err
		}
		p.applied(pl)
		return nil
	}
	// Ranges go in before the ports they guard, and go after them: a
	// LoadBalancer port is never open to everyone in between.
	if len(pl.ranges) > 0 {
		if err := p.setSourceRanges(ctx, pl); err != nil {
			return err
		}
	}
	if err := p.flows.InstallService(ctx, key, pl.want); err != nil {
		return fmt.Errorf("install service %s: %w", key, err)
	}
	p.recordInstalled(pl)
	if len(pl.ranges) == 0 {
		return p.setSourceRanges(ctx, pl)
	}
	return nil
}

// setSourceRanges writes the Service's loadBalancerSourceRanges (the data
// path writes nothing when they did not change).
func (p *Proxy) setSourceRanges(ctx context.Context, pl *plan) error {
	if err := p.flows.SetLoadBalancerSourceRanges(ctx, pl.key, pl.ranges); err != nil {
		return fmt.Errorf("loadBalancerSourceRanges of service %s: %w", pl.key, err)
	}
	return nil
}

// plan reads the caches for one Service and computes its desired state; it
// posts the Warning Events of what cannot be realized.
func (p *Proxy) plan(key string) (*plan, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, err
	}
	pl := &plan{key: key}
	var warnings []warning
	svc, err := p.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		svc = nil
		p.forgetWarnings(key)
	case err != nil:
		return nil, err
	case !servedBy(svc.Labels, p.serviceProxyName):
		klog.V(2).InfoS("Service is not for this proxy (its labels); realizing none of it", "service", key)
		svc = nil
		p.forgetWarnings(key)
	default:
		objs, err := p.slices.ByIndex(serviceIndex, key)
		if err != nil {
			return nil, err
		}
		slices := make([]*discoveryv1.EndpointSlice, 0, len(objs))
		for _, o := range objs {
			// kube-proxy watches slices with the same label selector
			// as Services: a slice labelled for another proxy, or
			// headless, is none of this proxy's.
			if s := o.(*discoveryv1.EndpointSlice); servedBy(s.Labels, p.serviceProxyName) {
				slices = append(slices, s)
			}
		}
		node := p.view() // one reading of the node for the whole sync
		fams := node.families()
		pl.want = desiredState(svc, slices, node)
		warnings = unrealized(svc, p.datapath, fams)
		pl.hc = healthCheckOf(svc, slices, p.nodeName, fams)
		if p.proxyAll {
			pl.needs = nodeNeeds(svc, node)
		}
	}
	pl.svc = svc
	p.mu.Lock()
	taken := p.withoutTakenLocked(key, pl.want)
	pl.have = p.installed[key]
	p.mu.Unlock()
	if svc != nil {
		pl.ranges = sourceRanges(svc, pl.want)
	}
	for _, port := range taken {
		klog.InfoS("Service port already realized for another Service; waiting for it", "service", key, "port", port.String(), "owner", p.claimOwner(port))
	}
	if len(taken) > 0 {
		warnings = append(warnings, conflictWarning(taken, p.claimOwner))
	}
	if svc != nil {
		p.warn(key, svc, warnings)
	}
	return pl, nil
}

// applied completes the sync of a Service whose flows are as planned: the
// node path and the health check follow.
func (p *Proxy) applied(pl *plan) {
	p.setNodePath(pl.key, pl.needs)
	p.setHealthCheck(pl.key, pl.svc, pl.hc)
}

// recordInstalled records a Service OVS took (the ports it claims, freeing those
// it let go for the Services waiting on them) and completes its sync. The
// node steers a NodePort to the bridge only once the bridge has its flows.
func (p *Proxy) recordInstalled(pl *plan) {
	p.setNodePath(pl.key, pl.needs)
	p.mu.Lock()
	if len(pl.want) == 0 {
		delete(p.installed, pl.key)
	} else {
		p.installed[pl.key] = pl.want
	}
	freed := p.claimLocked(pl.key, pl.have, pl.want)
	p.mu.Unlock()
	for _, k := range freed {
		p.queue.Add(k)
	}
	p.setHealthCheck(pl.key, pl.svc, pl.hc)
	klog.InfoS("Installed Service", "service", pl.key, "ports", len(pl.want), "endpoints", countEndpoints(pl.want))
}

// healthCheckRetry is how long a health check port that could not be
// opened waits before the next try (kube-proxy tries at every sync).
const healthCheckRetry = 10 * time.Second

// setHealthCheck keeps the Service's health check; a port that cannot be
// opened gets a Warning Event and is tried again after healthCheckRetry.
func (p *Proxy) setHealthCheck(key string, svc *corev1.Service, hc healthCheck) {
	if p.health == nil {
		return
	}
	if err := p.health.set(key, hc); err != nil {
		klog.ErrorS(err, "Cannot serve the Service's health check; retrying", "service", key, "port", hc.port)
		if svc != nil {
			p.warn(key, svc, []warning{{ReasonFailedToStartHealthcheck,
				fmt.Sprintf("node %s cannot serve the health check on port %d: %v", p.nodeName, hc.port, err)}})
		}
		p.queue.AddAfter(key, healthCheckRetry)
	}
}

func (p *Proxy) setNodePath(key string, needs route.ServiceNeeds) {
	if p.nodePath != nil {
		p.nodePath.SetService(key, needs)
	}
}

// nodeNeeds is what a Service needs of the node under proxyAll: its
// NodePorts DNATed to the bridge, and its ClusterIPs, external IPs and
// LoadBalancer ingress IPs routed to the gateway (so the node's own
// processes reach them, and traffic from outside for external addresses
// enters the bridge). Services that desiredState skips need nothing.
func nodeNeeds(svc *corev1.Service, node nodeView) route.ServiceNeeds {
	var needs route.ServiceNeeds
	clusterIPs := node.addrs(agenttypes.ServiceClusterIPs(svc))
	if len(clusterIPs) == 0 {
		return needs
	}
	needs.Addresses = append(append(needs.Addresses, clusterIPs...), node.addrs(externalAddresses(svc))...)
	if hasNodePorts(svc) {
		for _, sp := range svc.Spec.Ports {
			if proto, ok := protocolNumber(sp.Protocol); ok && sp.NodePort > 0 && sp.NodePort < 65536 {
				needs.NodePorts = append(needs.NodePorts, route.NodePort{Protocol: proto, Port: uint16(sp.NodePort)})
			}
		}
	}
	return needs
}

// hasNodePorts says whether the Service's ports have NodePorts: a NodePort
// Service, or a LoadBalancer (unless allocateLoadBalancerNodePorts is
// false, when only the ports given one have it).
func hasNodePorts(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// The labels by which a Service asks to be left to another proxy, or to
// none (kube-proxy's selector: !service.kubernetes.io/service-proxy-name,
// !service.kubernetes.io/headless).
const (
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	LabelHeadless         = corev1.IsHeadlessService
)

// servedBy reports whether the proxy named name (empty: the default one)
// serves a Service or EndpointSlice with these labels: one labelled
// headless is served by none, one with a service-proxy-name only by the
// proxy of that name.
func servedBy(labels map[string]string, name string) bool {
	if _, ok := labels[LabelHeadless]; ok {
		return false
	}
	v, ok := labels[LabelServiceProxyName]
	if name == "" {
		return !ok
	}
	return ok && v == name
}

// externalAddresses are the Service's external IPs of every family and, for a
// LoadBalancer, its ingress IPs (but those whose ipMode is Proxy: that load
// balancer proxies, and sends to the nodes).
func externalAddresses(svc *corev1.Service) []netip.Addr {
	return append(parseAddrs(svc.Spec.ExternalIPs), loadBalancerIPs(svc)...)
}

// loadBalancerIPs are a LoadBalancer's ingress IPs of every family, but
// those whose ipMode is Proxy.
func loadBalancerIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IPMode != nil && *in.IPMode == corev1.LoadBalancerIPModeProxy {
				continue
			}
			out = append(out, parseAddrs([]string{in.IP})...)
		}
	}
	return out
}

// withoutTakenLocked removes from want the ports another Service realizes
// (two Services may list the same external IP and port): the first keeps
// it, the other waits until it is free. p.mu is held.
func (p *Proxy) withoutTakenLocked(key string, want agentof.ServiceState) []agentof.ServicePort {
	var taken []agentof.ServicePort
	for port := range want {
		if owner, ok := p.claims[port]; ok && owner != key {
			delete(want, port)
			taken = append(taken, port)
			if p.waiting[port] == nil {
				p.waiting[port] = map[string]bool{}
			}
			p.waiting[port][key] = true
		}
	}
	return taken
}

func (p *Proxy) claimOwner(port agentof.ServicePort) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.claims[port]
}

// claimLocked records the ports a Service now realizes and returns the
// Services waiting for the ports it let go. p.mu is held.
func (p *Proxy) claimLocked(key string, have, want agentof.ServiceState) []string {
	var freed []string
	for port := range have {
		if _, keep := want[port]; keep {
			continue
		}
		delete(p.claims, port)
		for k := range p.waiting[port] {
			freed = append(freed, k)
		}
		delete(p.waiting, port)
	}
	for port := range want {
		p.claims[port] = key
	}
	return freed
}

func countEndpoints(s agentof.ServiceState) int {
	n := 0
	for _, ps := range s {
		n += len(ps.Endpoints)
	}
	return n
}

// desiredState is what the data path should hold for a Service, as
// kube-proxy realizes it:
//   - each TCP and UDP port on each IPv4 ClusterIP, for every client, with
//     the Service's cluster endpoints, or its local ones under
//     internalTrafficPolicy Local;
//   - the same ports on each external IP (spec.externalIPs) and, for a
//     LoadBalancer, each ingress IP of its status (unless its ipMode is
//     Proxy: the load balancer then proxies, and sends to the nodes), with
//     the cluster endpoints; under externalTrafficPolicy Local, traffic from
//     outside the cluster (entering from the gateway) to those addresses
//     gets its own entry with the local endpoints only, and keeps its
//     client address (nothing is source-NATed);
//   - with proxyAll, each NodePort (of a NodePort or LoadBalancer Service)
//     as a port on NodePortVirtualIP, where the node's netfilter DNATs it:
//     with the cluster endpoints for every client (the node itself and its
//     pods come with the gateway IP as source) and, under
//     externalTrafficPolicy Local, its own entry for traffic from outside
//     the node with the local endpoints only. Traffic from outside to a
//     remote endpoint under Cluster is source-NATed by the data path.
//
// The endpoints of a port are those of the Service's EndpointSlices for it
// (matched by port name and protocol), at the slice port's number (the
// targetPort resolved). Cluster endpoints are the ready ones (narrowed by
// topology hints, see topologyMode) or, when none is ready, the serving
// terminating ones (connections drain gracefully);
// local endpoints, the ready ones on this node or, when none is, the
// serving terminating ones on this node. A port without endpoints rejects
// new connections when the Service has no endpoint at all, and drops them
// when it has some on other nodes only (a Local policy). Headless Services
// and Services without a ClusterIP have no state. Every port carries the
// Service's session affinity.
//
// It is the join of familyState over the families AntreaProxy realizes
// in the bridge on this node (IPv6 on a dual-stack node); a Service of
// another family alone has no state.
func desiredState(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, node nodeView) agentof.ServiceState {
	var out agentof.ServiceState
	for _, f := range node.families() {
		for p, ps := range familyState(svc, slices, node, f) {
			if out == nil {
				out = agentof.ServiceState{}
			}
			out[p] = ps
		}
	}
	return out
}

// familyState is desiredState's part of family f: the Service's ports on
// its addresses of family f, with the endpoints of its slices of family
// f, and its NodePorts on f's NodePortVirtualIP. Nil when the Service has
// no ClusterIP of family f.
func familyState(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, node nodeView, f agenttypes.IPFamily) agentof.ServiceState {
	clusterIPs := f.Of(agenttypes.ServiceClusterIPs(svc))
	if len(clusterIPs) == 0 {
		return nil
	}
	external := f.Of(externalAddresses(svc))
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	externalLocal := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	affinity := affinityTimeout(svc)
	out := agentof.ServiceState{}
	for _, sp := range svc.Spec.Ports {
		proto, ok := protocolNumber(sp.Protocol)
		if !ok {
			continue
		}
		eps := portCandidates(sp, slices, node.name, f)
		cluster := agentof.PortState{Endpoints: eps.cluster(node), AffinityTimeout: affinity}
		local := agentof.PortState{Endpoints: eps.local(), AffinityTimeout: affinity}
		if len(local.Endpoints) == 0 && eps.any() {
			local.NoEndpoints = agentof.Drop
		}
		internal := cluster
		if internalLocal {
			internal = local
		}
		for _, ip := range clusterIPs {
			out[agentof.ServicePort{IP: ip, Protocol: proto, Port: uint16(sp.Port)}] = internal
		}
		for _, ip := range external {
			port := agentof.ServicePort{IP: ip, Protocol: proto, Port: uint16(sp.Port)}
			out[port] = cluster
			if externalLocal {
				port.External = true
				out[port] = local
			}
		}
		if node.proxyAll && hasNodePorts(svc) && sp.NodePort > 0 && sp.NodePort < 65536 {
			port := agentof.ServicePort{IP: agenttypes.NodePortVirtualIPOf(f), Protocol: proto, Port: uint16(sp.NodePort)}
			out[port] = cluster
			if externalLocal {
				port.External = true
				out[port] = local
			}
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

// candidate is an endpoint of a Service port with its conditions and its
// topology hints (the zones and nodes the EndpointSlice controller meant
// it for; nil when it has none).
type candidate struct {
	ep                           agentof.Endpoint
	ready, servingAndTerminating bool
	forZones, forNodes           []string
}

type candidates []candidate

// portCandidates collects the endpoints of one Service port from its
// slices of family f.
func portCandidates(sp corev1.ServicePort, slices []*discoveryv1.EndpointSlice, nodeName string, f agenttypes.IPFamily) candidates {
	var out candidates
	for _, s := range slices {
		if sf, ok := sliceFamily(s.AddressType); !ok || sf != f {
			continue
		}
		port, ok := slicePort(s, sp)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			c := candidate{
				// Unset conditions mean ready and serving (the API's contract).
				ready:                 e.Conditions.Ready == nil || *e.Conditions.Ready,
				servingAndTerminating: (e.Conditions.Serving == nil || *e.Conditions.Serving) && e.Conditions.Terminating != nil && *e.Conditions.Terminating,
			}
			if e.Hints != nil {
				for _, z := range e.Hints.ForZones {
					c.forZones = append(c.forZones, z.Name)
				}
				for _, n := range e.Hints.ForNodes {
					c.forNodes = append(c.forNodes, n.Name)
				}
			}
			local := e.NodeName != nil && *e.NodeName == nodeName
			for _, a := range e.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || agenttypes.FamilyOf(ip) != f {
					continue
				}
				c.ep = agentof.Endpoint{IP: ip, Port: port, Local: local}
				out = append(out, c)
			}
		}
	}
	return out
}

// pick returns the ready endpoints that keep holds or, when there is none,
// the serving terminating ones.
func (cs candidates) pick(keep func(agentof.Endpoint) bool) []agentof.Endpoint {
	var ready, terminating []agentof.Endpoint
	for _, c := range cs {
		switch {
		case !keep(c.ep):
		case c.ready:
			ready = append(ready, c.ep)
		case c.servingAndTerminating:
			terminating = append(terminating, c.ep)
		}
	}
	if len(ready) == 0 {
		ready = terminating
	}
	return agentof.NormalizeEndpoints(ready)
}

// cluster returns the endpoints of the port for traffic under a Cluster
// policy: the ready ones meant for this node by the topology hints (all
// of them when hints do not apply), else the serving terminating ones.
func (cs candidates) cluster(node nodeView) []agentof.Endpoint {
	mode := cs.topologyMode(node)
	var ready, terminating []agentof.Endpoint
	for _, c := range cs {
		switch {
		case c.ready:
			if c.availableFor(mode, node) {
				ready = append(ready, c.ep)
			}
		case c.servingAndTerminating:
			terminating = append(terminating, c.ep)
		}
	}
	if len(ready) == 0 {
		ready = terminating
	}
	return agentof.NormalizeEndpoints(ready)
}

func (cs candidates) local() []agentof.Endpoint {
	return cs.pick(func(e agentof.Endpoint) bool { return e.Local })
}

// any says whether the port has a usable endpoint anywhere.
func (cs candidates) any() bool {
	for _, c := range cs {
		if c.ready || c.servingAndTerminating {
			return true
		}
	}
	return false
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
