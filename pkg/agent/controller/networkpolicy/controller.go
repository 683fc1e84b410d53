// Package networkpolicy is the agent half of the policy path (seed 000, "three
// watchers"): it watches the controlplane API's NetworkPolicies,
// AppliedToGroups and AddressGroups whose span holds this node and realizes
// them as conjunctive OpenFlow rules for the local pods they apply to.
//
// It is cut in four parts, each with its own lock (docs/design/agent-policy.md):
//   - the watchers apply events to the rule cache (cache.go), indexed by
//     policy, by group and by pod, and enqueue the policies an event touches;
//     its lock is held only while an event is applied or a policy's rules are
//     computed, so a watcher never waits on OVS;
//   - the reconciler (reconciler.go) owns conjunction ids and isolation and
//     takes each queued policy from realized to desired, sending OVS only the
//     difference as one bundle: nothing when nothing changed;
//   - the status reporter (status.go) tells the controller which generation
//     this node realized, from its own queue;
//   - pod events from the CNI server (published once a pod's interface is
//     recorded, or removed) enqueue the policies applying to that pod.
//
// Rules of policies applied to this Node itself (a nodeSelector appliedTo:
// upstream's NodeNetworkPolicy) are not OVS flows: nodepolicy.go keeps
// them per policy and writes them, in evaluation order, into the node's
// netfilter (Options.NodePolicy, pkg/agent/nodenet) after each sync that
// changed them.
//
// Groups arrive as patches (members added/removed), so an agent's work
// follows what changes on its node, not the cluster size. After a reconnect
// the watchers list again and only policies whose objects differ are
// reconciled; after an agent restart the reconciler adopts the flows the
// previous run left (ids noted on them) and writes only what changed.
package networkpolicy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/flowexporter"
	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// Interfaces finds local pods' interfaces (the agent's interface store).
type Interfaces interface {
	GetContainerInterfacesByPod(podName, podNamespace string) []*interfacestore.InterfaceConfig
	// GetInterfaceByIP and GetInterfaceByOFPort name the pod of an audit
	// log line and the client a reject answers.
	GetInterfaceByIP(ip string) (*interfacestore.InterfaceConfig, bool)
	GetInterfaceByOFPort(ofPort int32) (*interfacestore.InterfaceConfig, bool)
}

// Options are the optional inputs of a Controller.
type Options struct {
	// Recovered are the conjunction ids of the rules an earlier agent run
	// installed, by rule key (agentof.Client.RecoverPolicy).
	Recovered map[string]uint32
	// PodEvents are the CNI server's pod events.
	PodEvents <-chan interfacestore.PodEvent
	// OnNarrowed, if set, is called after a write that may forbid traffic
	// that was allowed (the agent then revalidates the datapath's cached
	// flows); never after a write that only allows more, nor after none.
	OnNarrowed func()
	// PacketIns, if set, serves the packet-ins of rejecting and logging
	// rules: rejects answered, audit log lines written.
	PacketIns *PacketIns
	// FQDN, if set (with PacketIns), realizes toFQDN rules from the DNS
	// answers the node's pods receive (fqdn.go). Without it a toFQDN peer
	// selects no address.
	FQDN *FQDNOptions
	// Denied, if set, is given every packet a rule or the isolation of K8s
	// NetworkPolicies denied whose packet-in says so (the flows report
	// them with the FlowExporter on: agentof's SetDenyTracking), named with
	// the rule. It must not block: the packet-in handler calls it.
	Denied func(flowexporter.DeniedPacket)
	// NodePolicy, if set, realizes the rules of the policies applied to
	// this Node itself (nodeSelector appliedTo) in the node's netfilter.
	// Without it they are left out.
	NodePolicy NodePolicyWriter
	// Services, if set, resolves the Services of toServices rules and
	// tells which changed (NewServiceLookup). Without it a toServices rule
	// matches nothing.
	Services ServiceLookup
	// L7, if set, is the layer 7 engine that enforces the rules with
	// l7Protocols (l7.go). Without it those rules are left out.
	L7 L7Engine
	// Observe, if set, is called by the watchers with every list they
	// receive and every watch event (bookmarks aside), before it is applied
	// to the cache; it must not block. The agent simulator records with it.
	Observe func(Observation)
}

// Observation is what a watcher received: a whole list (Listed, possibly
// empty, after every list) or one watch event.
type Observation struct {
	// Kind is the resource: networkpolicies, addressgroups or appliedtogroups.
	Kind   string
	Listed []runtime.Object
	Event  watch.Event
}

// Controller keeps this node's policy flows equal to the computed policies.
type Controller struct {
	nodeName string
	client   versioned.Interface
	ifaces   Interfaces
	opts     Options

	cache *ruleCache
	// audit is the audit log once Run opened it (IGMP rules log through it).
	audit      atomic.Pointer[auditLogger]
	fqdn       *fqdnState    // nil without Options.FQDN
	node       *nodePolicies // nil without Options.NodePolicy
	l7         *l7Rules      // nil without Options.L7
	reconciler *reconciler
	status     *statusReporter
	queue      workqueue.TypedRateLimitingInterface[string]

	// mu guards the start-up state below.
	mu     sync.Mutex
	synced chan struct{}
	// listed counts the watchers that finished their first list.
	listed sets.Set[string]
	// watching holds the watchers whose watch is open now.
	watching sets.Set[string]
	// initial holds the policies known when the watchers synced that have
	// not been realized yet; realized is closed when it becomes empty.
	initial  sets.Set[string]
	realized chan struct{}
	// recovering: the earlier run's flows not claimed yet are to be removed
	// once the initial policies are realized.
	recovering bool
}

// NewController makes a controller for this node.
func NewController(nodeName string, client versioned.Interface, flows PolicyFlows, ifaces Interfaces, opts Options) *Controller {
	c := &Controller{
		nodeName:   nodeName,
		client:     client,
		ifaces:     ifaces,
		opts:       opts,
		cache:      newRuleCache(),
		reconciler: newReconciler(flows, opts.Recovered),
		status:     newStatusReporter(nodeName, client),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "networkpolicy"}),
		synced:     make(chan struct{}),
		realized:   make(chan struct{}),
		listed:     sets.New[string](),
		watching:   sets.New[string](),
		recovering: true,
	}
	c.cache.nodeName = nodeName
	if opts.NodePolicy != nil {
		c.node = &nodePolicies{w: opts.NodePolicy}
	}
	if opts.Services != nil {
		c.cache.services = opts.Services
		opts.Services.OnChange(func(namespace, name string) {
			c.enqueue(c.cache.policiesForService(namespace, name))
			if c.cache.fqdn != nil {
				// A ClusterIP a toFQDN name answered may be this
				// Service's (fqdnservices.go).
				c.enqueue(c.cache.fqdnPolicies())
			}
		})
	}
	if opts.L7 != nil {
		c.l7 = newL7Rules(opts.L7)
	}
	if opts.FQDN != nil && opts.PacketIns != nil {
		c.fqdn = newFQDNState(*opts.FQDN)
		c.cache.fqdn = c.fqdn.cache
	}
	return c
}

// Run starts the three watchers, the pod event listener, the reconciler
// and the status reporter until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	go c.status.run(ctx)
	if p := c.opts.PacketIns; p != nil {
		dir := p.AuditLogDir
		if dir == "" {
			dir = DefaultAuditLogDir
		}
		audit, err := newAuditLogger(dir)
		if err != nil {
			klog.ErrorS(err, "No audit log: rules with enableLogging are not logged")
		}
		if audit != nil {
			c.audit.Store(audit)
		}
		p.IO.Handle(agentof.PacketInPolicy, c.policyPacketIn(p, audit))
		if c.l7 != nil && audit != nil {
			c.l7.engine.SetReport(l7Report(audit))
		}
		if c.fqdn != nil {
			p.IO.Handle(agentof.PacketInDNS, c.dnsPacketIn(p.IO))
			go c.runFQDNExpiry(ctx)
			if c.fqdn.resolve != nil {
				go c.runResolver(ctx)
			}
		}
	}
	for _, w := range c.watchers() {
		go w.run(ctx)
	}
	if c.opts.PodEvents != nil {
		go c.listenPods(ctx)
	}
	select {
	case <-c.synced:
	case <-ctx.Done():
		return
	}
	c.mu.Lock()
	c.initial = c.cache.policyNames()
	n := c.initial.Len()
	c.mu.Unlock()
	klog.InfoS("NetworkPolicy watchers synced; reconciling", "node", c.nodeName, "policies", n)
	c.markRealized(ctx, "")
	if n == 0 && c.node != nil {
		// No policy to realize: the first write removes the Node rules
		// an earlier run left.
		if err := c.node.set(ctx, "", nil, false); err != nil {
			klog.ErrorS(err, "Failed to clear the Node policy rules of an earlier run")
		}
	}
	go c.worker(ctx)
	<-ctx.Done()
}

// InitialRealized is closed once every policy that applied to this node
// when the watchers first synced has been realized in OVS (and what an
// earlier run left that no policy wants any more is removed): the agent
// lets traffic flow through a restarted OVS only then.
func (c *Controller) InitialRealized() <-chan struct{} { return c.realized }

// markRealized records that policy name was realized (or nothing, for "").
// When the initial policies are all realized it finishes the recovery of
// the earlier run's flows and closes realized.
func (c *Controller) markRealized(ctx context.Context, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.initial != nil {
		c.initial.Delete(name)
		if c.initial.Len() > 0 {
			return
		}
		c.initial = nil
		defer close(c.realized)
	}
	if !c.recovering {
		return
	}
	if err := c.reconciler.finishRecovery(ctx); err != nil {
		klog.ErrorS(err, "Failed to remove the stale policy flows of an earlier run; retrying after the next sync")
		return
	}
	c.recovering = false
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
	if c.listed.Len() == len(watcherKinds) && !c.HasSynced() {
		close(c.synced)
	}
}

func (c *Controller) markWatching(kind string, open bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if open {
		c.watching.Insert(kind)
	} else {
		c.watching.Delete(kind)
	}
}

// ControllerConnected reports whether every watcher of the controlplane API
// (policies, address groups, applied-to groups) has its watch open: the
// agent receives policy changes as they happen. The error names the
// watchers that are not connected.
func (c *Controller) ControllerConnected() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var down []string
	for _, w := range watcherKinds {
		if !c.watching.Has(w) {
			down = append(down, w)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("no open watch of the controlplane API for %s", strings.Join(down, ", "))
	}
	return nil
}

// enqueue schedules policies for reconciliation.
func (c *Controller) enqueue(policies sets.Set[string]) {
	for p := range policies {
		c.queue.Add(p)
	}
}

// listenPods enqueues the policies of each pod whose interface the CNI
// server recorded or removed.
func (c *Controller) listenPods(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-c.opts.PodEvents:
			c.enqueue(c.cache.policiesForPod(ev.PodNamespace, ev.PodName))
		}
	}
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

// syncPolicy makes the flows of one policy match the cache: the rules are
// computed under the cache's read lock, then the reconciler writes the
// difference (one bundle, atomic: new rules, changed rules, isolation and
// removals take effect together).
func (c *Controller) syncPolicy(ctx context.Context, name string) error {
	var fqdnVersion uint64
	if c.fqdn != nil {
		// Read before the rules: they hold at least what this version does.
		fqdnVersion = c.fqdn.cache.currentVersion()
	}
	want := c.cache.desired(name, c.ifaces)
	c.l7.apply(name, want)
	w, err := c.reconciler.sync(ctx, name, want)
	if err != nil {
		return err
	}
	if c.fqdn != nil {
		if err := c.syncDNSIntercept(ctx); err != nil {
			return err
		}
		c.fqdn.markRealized(name, fqdnVersion, want.generation == 0)
	}
	if c.node != nil {
		// The Node's rules are written once the policies known at start
		// are all computed (this one is the last), then on each change.
		c.mu.Lock()
		hold := c.initial != nil && !(c.initial.Len() == 1 && c.initial.Has(name))
		c.mu.Unlock()
		if err := c.node.set(ctx, name, want.nodeRules, hold); err != nil {
			return err
		}
	}
	if w.Messages > 0 {
		klog.V(2).InfoS("Realized NetworkPolicy", "policy", name, "flowMods", w.Messages, "narrowed", w.Narrowed)
	}
	if w.Narrowed && c.opts.OnNarrowed != nil {
		c.opts.OnNarrowed()
	}
	switch {
	case want.generation == 0:
		c.status.setRealized(name, 0)
	case want.complete:
		c.status.setRealized(name, want.generation)
	}
	c.markRealized(ctx, name)
	return nil
}
