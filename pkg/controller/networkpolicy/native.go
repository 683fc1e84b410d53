package networkpolicy

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
	"antrea.io/antrea/pkg/controller/grouping"
	"antrea.io/antrea/pkg/controller/types"
)

// Realizer tells how many Nodes of an internal policy's span realized its
// current generation (the agents' reports, registry.StatusStore).
type Realizer interface {
	Realization(name string) (realized, failed, desired int)
}

// AntreaPolicyConfig wires the Antrea-native policy kinds into a Controller.
type AntreaPolicyConfig struct {
	// CRDClient writes the status of policies and groups.
	CRDClient versioned.Interface
	// CRDInformers is the factory of crd.antrea.io informers; the caller
	// starts it.
	CRDInformers crdinformers.SharedInformerFactory
	// Realizer feeds the policies' status; nil leaves it Pending.
	Realizer Realizer
}

// native is the state of the Antrea-native kinds, nil when not enabled.
type native struct {
	client   versioned.Interface
	realizer Realizer

	acnpLister crdlisters.ClusterNetworkPolicyLister
	annpLister crdlisters.NetworkPolicyLister
	tierLister crdlisters.TierLister
	cgLister   crdlisters.ClusterGroupLister
	grpLister  crdlisters.GroupLister
	svcLister  corelisters.ServiceLister
	nsLister   corelisters.NamespaceLister
	nodeLister corelisters.NodeLister
	synced     []cache.InformerSynced
	// sig is the state of the SIG network-policy-api kinds (sig_policy.go),
	// nil unless EnableSIGPolicies was called.
	sig *sig
}

// EnableAntreaPolicies makes the controller compute ClusterNetworkPolicies
// and Antrea NetworkPolicies (with Tiers, ClusterGroups and Groups, and the
// Nodes and Services they may select) and write their status and the
// groups' GroupMembersComputed condition. Call it before Run and before the
// informer factories start.
func (c *Controller) EnableAntreaPolicies(cfg AntreaPolicyConfig) error {
	crd := cfg.CRDInformers.Crd().V1beta1()
	core := c.informerFactory.Core().V1()
	n := &native{
		client:     cfg.CRDClient,
		realizer:   cfg.Realizer,
		acnpLister: crd.ClusterNetworkPolicies().Lister(),
		annpLister: crd.NetworkPolicies().Lister(),
		tierLister: crd.Tiers().Lister(),
		cgLister:   crd.ClusterGroups().Lister(),
		grpLister:  crd.Groups().Lister(),
		svcLister:  core.Services().Lister(),
		nsLister:   core.Namespaces().Lister(),
		nodeLister: core.Nodes().Lister(),
	}
	c.native = n
	// Each kind's add and delete run event; an update runs update. The
	// controller's own status writes come back as updates: for the kinds it
	// writes status to, only a changed spec needs a computation.
	for _, w := range []struct {
		what     string
		informer cache.SharedIndexInformer
		event    func(any)
		update   func(old, cur any)
	}{
		{"ClusterNetworkPolicies", crd.ClusterNetworkPolicies().Informer(), c.acnpEvent, onSpecChange(c.acnpEvent, specOf[*crdv1beta1.ClusterNetworkPolicy])},
		{"Antrea NetworkPolicies", crd.NetworkPolicies().Informer(), c.annpEvent, onSpecChange(c.annpEvent, specOf[*crdv1beta1.NetworkPolicy])},
		{"Tiers", crd.Tiers().Informer(), c.tierEvent, func(_, cur any) { c.tierEvent(cur) }},
		{"ClusterGroups", crd.ClusterGroups().Informer(), c.clusterGroupEvent, onSpecChange(c.clusterGroupEvent, specOf[*crdv1beta1.ClusterGroup])},
		{"Groups", crd.Groups().Informer(), c.groupEvent, onSpecChange(c.groupEvent, specOf[*crdv1beta1.Group])},
		{"Services", core.Services().Informer(), c.serviceEvent, c.serviceUpdate},
		{"Nodes", core.Nodes().Informer(), c.nodeEvent, onChange(c.nodeEvent, nodeChanged)},
	} {
		if err := n.handle(w.informer, w.event, w.update, w.event); err != nil {
			return fmt.Errorf("watching %s: %w", w.what, err)
		}
	}
	if cfg.Realizer != nil {
		if h, ok := cfg.Realizer.(interface{ AddHandler(func(string)) }); ok {
			h.AddHandler(c.internalStatusChanged)
		}
	}
	return nil
}

// nativeLister adapts the listers to the computation.
func (n *native) tier(name string) (*crdv1beta1.Tier, error) {
	if t := sigTier(name); t != nil {
		return t, nil
	}
	return n.tierLister.Get(name)
}
func (n *native) clusterGroup(name string) (*crdv1beta1.ClusterGroup, error) {
	return n.cgLister.Get(name)
}
func (n *native) group(ns, name string) (*crdv1beta1.Group, error) {
	return n.grpLister.Groups(ns).Get(name)
}
func (n *native) service(ns, name string) (*v1.Service, error) {
	return n.svcLister.Services(ns).Get(name)
}
func (n *native) namespaces() ([]*v1.Namespace, error) { return n.nsLister.List(labels.Everything()) }

// The native kinds' event handlers (EnableAntreaPolicies registers them).

func (c *Controller) acnpEvent(obj any) {
	if p, ok := obj.(*crdv1beta1.ClusterNetworkPolicy); ok {
		c.nativeQueue.Add(nativeKeyACNP(p.Name))
	}
}

func (c *Controller) annpEvent(obj any) {
	if p, ok := obj.(*crdv1beta1.NetworkPolicy); ok {
		c.nativeQueue.Add(nativeKeyANNP(p.Namespace, p.Name))
	}
}

func (c *Controller) tierEvent(obj any) {
	if t, ok := obj.(*crdv1beta1.Tier); ok {
		c.enqueueDep(depTier(t.Name))
	}
}

func (c *Controller) clusterGroupEvent(obj any) {
	if g, ok := obj.(*crdv1beta1.ClusterGroup); ok {
		c.groupChanged(depClusterGroup(g.Name))
	}
}

func (c *Controller) groupEvent(obj any) {
	if g, ok := obj.(*crdv1beta1.Group); ok {
		c.groupChanged(depGroup(g.Namespace, g.Name))
	}
}

// groupChanged sends a group's change to the policies reading it, its own
// status and its parents' (a ClusterGroup of ClusterGroups).
func (c *Controller) groupChanged(dep string) {
	c.enqueueDep(dep)
	c.groupStatusQueue.Add(dep)
	for _, parent := range c.parentsOf(dep) {
		c.groupStatusQueue.Add(parent)
	}
}

func (c *Controller) serviceEvent(obj any) {
	if s, ok := obj.(*v1.Service); ok {
		c.enqueueDep(depService(s.Namespace, s.Name))
		c.serviceGroupsChanged(s.Namespace, s.Name)
	}
}

// serviceUpdate: new NodePorts change the groups of policies applied to the
// Service; a new selector changes the policies reading it.
func (c *Controller) serviceUpdate(old, cur any) {
	o, ok1 := old.(*v1.Service)
	s, ok2 := cur.(*v1.Service)
	if !ok1 || !ok2 {
		return
	}
	if !slices.EqualFunc(nodePorts(o), nodePorts(s), func(a, b controlplane.NamedPort) bool { return a == b }) {
		c.serviceGroupsChanged(s.Namespace, s.Name)
	}
	if !labelsEqual(o.Spec.Selector, s.Spec.Selector) {
		c.enqueueDep(depService(s.Namespace, s.Name))
	}
}

func (c *Controller) nodeEvent(any) { c.nodeGroupsChanged() }

// onChange makes an update handler that runs event on the new object only
// when changed says the update changed what the controller reads (or when
// the objects are not both Ts).
func onChange[T any](event func(any), changed func(old, cur T) bool) func(old, cur any) {
	return func(old, cur any) {
		o, ok1 := old.(T)
		n, ok2 := cur.(T)
		if ok1 && ok2 && !changed(o, n) {
			return
		}
		event(cur)
	}
}

// onSpecChange is onChange for the kinds the controller writes status to:
// an update changes something when the object was replaced (another UID),
// or its generation or spec (given by spec) changed. Their CRDs have the
// status subresource, so a status write leaves the generation alone.
func onSpecChange[T metav1.Object](event func(any), spec func(T) any) func(old, cur any) {
	return onChange(event, func(o, n T) bool {
		return o.GetUID() != n.GetUID() || o.GetGeneration() != n.GetGeneration() || !reflect.DeepEqual(spec(o), spec(n))
	})
}

// specOf gives the spec of the kinds onSpecChange watches.
func specOf[T *crdv1beta1.ClusterNetworkPolicy | *crdv1beta1.NetworkPolicy | *crdv1beta1.ClusterGroup | *crdv1beta1.Group](obj T) any {
	switch o := any(obj).(type) {
	case *crdv1beta1.ClusterNetworkPolicy:
		return o.Spec
	case *crdv1beta1.NetworkPolicy:
		return o.Spec
	case *crdv1beta1.ClusterGroup:
		return o.Spec
	case *crdv1beta1.Group:
		return o.Spec
	}
	return nil
}

// handlerFuncs registers add/update/delete callbacks and records the
// registration's synced function.
func (n *native) handle(inf cache.SharedIndexInformer, add func(any), update func(old, cur any), del func(any)) error {
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: update,
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			del(obj)
		},
	})
	if err != nil {
		return err
	}
	n.synced = append(n.synced, reg.HasSynced)
	return nil
}

// enqueueDep queues every native policy whose computation read dep.
func (c *Controller) enqueueDep(dep string) {
	c.depsMu.Lock()
	c.depSeq++
	if len(c.depReading) > 0 {
		// Only a computation in flight can miss this change.
		c.depChanged[dep] = c.depSeq
	}
	keys := sets.List(c.deps[dep])
	c.depsMu.Unlock()
	for _, k := range keys {
		c.nativeQueue.Add(k)
	}
}

// depMark is the dependency change count, taken before a computation reads;
// the computation calls depDone with it once it recorded its dependencies
// (setDepsSince) or gave up.
func (c *Controller) depMark() uint64 {
	c.depsMu.Lock()
	defer c.depsMu.Unlock()
	c.depReading[c.depSeq]++
	return c.depSeq
}

// depDone ends the computation that took mark, and drops the changes no
// computation still in flight can have missed: those up to the oldest mark.
func (c *Controller) depDone(mark uint64) {
	c.depsMu.Lock()
	defer c.depsMu.Unlock()
	if c.depReading[mark]--; c.depReading[mark] <= 0 {
		delete(c.depReading, mark)
	}
	if len(c.depReading) == 0 {
		clear(c.depChanged)
		return
	}
	oldest := uint64(math.MaxUint64)
	for m := range c.depReading {
		oldest = min(oldest, m)
	}
	for d, seq := range c.depChanged {
		if seq <= oldest {
			delete(c.depChanged, d)
		}
	}
}

// setDepsSince records what a native policy's computation, started at
// mark, read, and queues the policy again when one of those changed since
// mark: that change found no dependency to queue.
func (c *Controller) setDepsSince(key string, deps sets.Set[string], mark uint64) {
	c.setDeps(key, deps)
	c.depsMu.Lock()
	defer c.depsMu.Unlock()
	for d := range deps {
		if c.depChanged[d] > mark {
			c.nativeQueue.Add(key)
			return
		}
	}
}

// setDeps records what a native policy's computation read.
func (c *Controller) setDeps(key string, deps sets.Set[string]) {
	c.depsMu.Lock()
	defer c.depsMu.Unlock()
	for d := range c.depsByPolicy[key] {
		if deps.Has(d) {
			continue
		}
		if s := c.deps[d]; s != nil {
			s.Delete(key)
			if s.Len() == 0 {
				delete(c.deps, d)
			}
		}
	}
	for d := range deps {
		s := c.deps[d]
		if s == nil {
			s = sets.New[string]()
			c.deps[d] = s
		}
		s.Insert(key)
	}
	if deps.Len() == 0 {
		delete(c.depsByPolicy, key)
	} else {
		c.depsByPolicy[key] = deps
	}
}

func specOfACNP(p *crdv1beta1.ClusterNetworkPolicy) *nativeSpec {
	return &nativeSpec{tier: p.Spec.Tier, priority: p.Spec.Priority, appliedTo: p.Spec.AppliedTo, ingress: p.Spec.Ingress, egress: p.Spec.Egress}
}

func specOfANNP(p *crdv1beta1.NetworkPolicy) *nativeSpec {
	return &nativeSpec{tier: p.Spec.Tier, priority: p.Spec.Priority, appliedTo: p.Spec.AppliedTo, ingress: p.Spec.Ingress, egress: p.Spec.Egress}
}

// nativeInternalName is the internal policy's name: the user object's UID
// (upstream's convention), or for objects without one (hand-made in tests)
// a UUID derived from the key.
func nativeInternalName(uid k8stypes.UID, key string) string {
	if uid != "" {
		return string(uid)
	}
	return uuid.NewSHA1(groupNamespace, []byte(key)).String()
}

// nativeStatusInfo is what the status writer needs of a native policy.
type nativeStatusInfo struct {
	// name is the internal policy's name.
	name string
	// generation is the user object's metadata.generation last computed.
	generation int64
	// err says why the policy could not be computed (not realizable).
	err error
}

// syncNativePolicy computes the internal NetworkPolicy of a
// ClusterNetworkPolicy ("acnp:name") or Antrea NetworkPolicy
// ("annp:ns/name"), acquires and releases its groups and writes them and the
// policy into the stores; a deleted policy is removed.
func (c *Controller) syncNativePolicy(_ context.Context, key string) error {
	n := c.native
	kind, rest, _ := strings.Cut(key, ":")
	var (
		spec       *nativeSpec
		srcRef     *controlplane.NetworkPolicyReference
		generation int64
		err        error
	)
	switch kind {
	case "acnp":
		var p *crdv1beta1.ClusterNetworkPolicy
		p, err = n.acnpLister.Get(rest)
		if err == nil {
			spec, generation = specOfACNP(p), p.Generation
			srcRef = &controlplane.NetworkPolicyReference{Type: controlplane.AntreaClusterNetworkPolicy, Name: p.Name, UID: p.UID}
		}
	case "annp":
		ns, name, _ := strings.Cut(rest, "/")
		var p *crdv1beta1.NetworkPolicy
		p, err = n.annpLister.NetworkPolicies(ns).Get(name)
		if err == nil {
			spec, generation = specOfANNP(p), p.Generation
			srcRef = &controlplane.NetworkPolicyReference{Type: controlplane.AntreaNetworkPolicy, Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		}
	default:
		// The SIG network-policy-api kinds (sig_policy.go).
		var ok bool
		spec, srcRef, generation, ok, err = c.sigSource(kind, rest)
		if !ok {
			klog.ErrorS(nil, "Dropping malformed native policy key", "key", key)
			return nil
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("getting %s: %w", key, err)
	}

	mark := c.depMark()
	defer c.depDone(mark)
	// The rules and the groups' members are computed before taking c.mu, so
	// that syncs of different policies do that part concurrently.
	var (
		computed     *nativeComputed
		cerr         error
		internalName string
	)
	if spec != nil {
		internalName = nativeInternalName(srcRef.UID, key)
		computed, cerr = computeNative(n, srcRef.Type, srcRef.Namespace, srcRef.Name, spec, groupName)
		if cerr == nil {
			c.prepareGroups(computed.atgs, computed.ags)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.policies[key]
	if spec == nil {
		c.setDeps(key, nil)
		c.forgetStatus(key)
		if p == nil {
			return c.collectGarbageLocked()
		}
		return c.deletePolicyLocked(p)
	}
	c.setDepsSince(key, computed.deps, mark)
	if cerr != nil {
		// Not realizable until what is missing (a Tier) appears: the
		// dependency re-syncs it then. What was published is withdrawn.
		klog.InfoS("Antrea-native policy not realizable", "policy", key, "err", cerr)
		c.recordStatus(key, nativeStatusInfo{name: internalName, generation: generation, err: cerr})
		if p == nil {
			return nil
		}
		return c.deletePolicyLocked(p)
	}
	if p == nil {
		p = &policyState{key: key, name: internalName}
		c.policies[key] = p
	} else if err := c.renameLocked(p, internalName); err != nil {
		c.unprepareLocked(computed.atgs, computed.ags)
		return err
	}
	oldAGs := c.setGroupsLocked(p, computed.atgs, computed.ags)
	priority, tierPriority := spec.priority, computed.tierPriority
	desired := &types.NetworkPolicy{
		SpanMeta:         types.SpanMeta{NodeNames: p.span()},
		UID:              k8stypes.UID(p.name),
		Name:             p.name,
		SourceRef:        srcRef,
		Rules:            computed.rules,
		AppliedToGroups:  computed.appliedToGroups,
		Priority:         &priority,
		TierPriority:     &tierPriority,
		AppliedToPerRule: computed.appliedToPerRule,
	}
	c.recordStatus(key, nativeStatusInfo{name: internalName, generation: generation})
	if err := c.publishAllLocked(p, desired, oldAGs); err != nil {
		return err
	}
	c.enqueueStatus(key)
	return nil
}

// nodeGroupsChanged queues every group that selects Nodes, and every
// group of a Service, which spans every Node.
func (c *Controller) nodeGroupsChanged() {
	c.mu.Lock()
	keys := make([]string, 0, len(c.nodeGroupKeys)+len(c.serviceGroupKeys))
	for k := range c.nodeGroupKeys {
		keys = append(keys, k)
	}
	for k := range c.serviceGroupKeys {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.enqueueGroups(k)
	}
}

// serviceGroupsChanged queues the group of the Service namespace/name, if a
// policy applies to it.
func (c *Controller) serviceGroupsChanged(namespace, name string) {
	key := grouping.NewServiceSelector(namespace, name).Key()
	c.mu.Lock()
	ok := c.serviceGroupKeys.Has(key)
	c.mu.Unlock()
	if ok {
		c.enqueueGroups(key)
	}
}

// nodePorts are the NodePorts of a Service that has them (type NodePort or
// LoadBalancer; a LoadBalancer may go without), named by its ports' names.
func nodePorts(svc *v1.Service) []controlplane.NamedPort {
	if svc.Spec.Type != v1.ServiceTypeNodePort && svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return nil
	}
	var out []controlplane.NamedPort
	for _, p := range svc.Spec.Ports {
		if p.NodePort == 0 {
			continue
		}
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		out = append(out, controlplane.NamedPort{Port: p.NodePort, Name: p.Name, Protocol: controlplane.Protocol(proto)})
	}
	return out
}

// serviceMember is the member of a policy applied to the Service
// namespace/name: the Service with its NodePorts; nil while the Service does
// not exist or has no NodePort (a ClusterIP Service: the policy applies to
// nothing, as upstream's, which only NodePort traffic meets).
func (c *Controller) serviceMember(namespace, name string) *controlplane.GroupMember {
	if c.native == nil {
		return nil
	}
	svc, err := c.native.service(namespace, name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.ErrorS(err, "Cannot read Service", "service", namespace+"/"+name)
		}
		return nil
	}
	ports := nodePorts(svc)
	if len(ports) == 0 {
		return nil
	}
	return &controlplane.GroupMember{Service: &controlplane.ServiceReference{Namespace: namespace, Name: name}, Ports: ports}
}

// NodeTransportAddressAnnotation is upstream's annotation listing a Node's
// transport interface addresses (comma-separated), where it has one.
const NodeTransportAddressAnnotation = "node.antrea.io/transport-addresses"

// nodeMember is the member of a Node selected by a nodeSelector, with
// upstream's addresses (its GetNodeAllAddrs): per IP family the first
// InternalIP, else the first ExternalIP; the Antrea gateway's address, the
// first of each of its podCIDRs; and the addresses of the transport-addresses
// annotation. Sorted, so that the member's key is stable.
func nodeMember(node *v1.Node) *controlplane.GroupMember {
	m := &controlplane.GroupMember{Node: &controlplane.NodeReference{Name: node.Name}}
	addrs := sets.New[netip.Addr]()
	var v4, v6 bool
	for _, t := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		if v4 || v6 {
			// Upstream takes the addresses of the first type present.
			break
		}
		for _, a := range node.Status.Addresses {
			ip, err := netip.ParseAddr(a.Address)
			if a.Type != t || err != nil {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() && !v4 {
				addrs.Insert(ip)
				v4 = true
			} else if ip.Is6() && !v6 {
				addrs.Insert(ip)
				v6 = true
			}
		}
	}
	cidrs := node.Spec.PodCIDRs
	if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
		cidrs = []string{node.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			addrs.Insert(p.Masked().Addr().Next())
		}
	}
	if v := node.Annotations[NodeTransportAddressAnnotation]; v != "" {
		for _, a := range strings.Split(v, ",") {
			if ip, err := netip.ParseAddr(strings.TrimSpace(a)); err == nil {
				addrs.Insert(ip.Unmap())
			}
		}
	}
	sorted := addrs.UnsortedList()
	slices.SortFunc(sorted, func(a, b netip.Addr) int { return a.Compare(b) })
	for _, ip := range sorted {
		m.IPs = append(m.IPs, ipAddress(net.IP(ip.AsSlice())))
	}
	return m
}

// selectedNodes lists the Nodes a Node selector selects.
func (c *Controller) selectedNodes(sel labels.Selector) []*v1.Node {
	if c.native == nil {
		return nil
	}
	nodes, err := c.native.nodeLister.List(sel)
	if err != nil {
		klog.ErrorS(err, "Cannot list Nodes")
		return nil
	}
	return nodes
}

func nodeChanged(old, cur *v1.Node) bool {
	return !labelsEqual(old.Labels, cur.Labels) || !reflect.DeepEqual(old.Status.Addresses, cur.Status.Addresses) ||
		!slices.Equal(old.Spec.PodCIDRs, cur.Spec.PodCIDRs) || old.Spec.PodCIDR != cur.Spec.PodCIDR ||
		old.Annotations[NodeTransportAddressAnnotation] != cur.Annotations[NodeTransportAddressAnnotation]
}
