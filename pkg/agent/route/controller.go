// Package route keeps this node's paths to every other node's pod CIDR: the
// OpenFlow flows that send traffic for a remote pod CIDR through the tunnel to
// that node's underlay IP, and the host routes that send the node's own traffic
// for it into OVS through the gateway. It has the sample-controller shape:
// a Node informer feeds a workqueue of node names and sync(name) applies the
// difference between the desired and the installed state. At start it removes
// routes and flows left by an earlier run for nodes that are gone.
//
// It also keeps AntreaProxy's node path (nodepath.go, proxyAll): the routes
// and neighbours of the virtual IPs and of Service addresses, and what the
// NodePort sets must hold, which pkg/agent/nodenet (the one owner of the
// node's netfilter) writes (docs/design/node-netfilter.md).
package route

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/types"
)

// FlowInstaller programs the per-node forwarding flows (implemented by the
// agent's OpenFlow client).
type FlowInstaller interface {
	// InstallNodeFlows installs the flows to a peer's pod CIDR: into the
	// tunnel to tunnelPeerIP or, when it is nil, none (the gateway takes
	// the traffic, which the node routes over the underlay).
	InstallNodeFlows(nodeName string, peerPodCIDR *net.IPNet, peerGatewayIP, tunnelPeerIP net.IP) error
	UninstallNodeFlows(nodeName string) error
}

// HostRoutes programs the node's kernel routes towards remote pod CIDRs.
type HostRoutes interface {
	// Reconcile makes the routes via the gateway exactly the given set.
	Reconcile(desired map[string]*PeerRoute) error
	Add(r *PeerRoute) error
	Delete(r *PeerRoute) error
}

// PeerRoute is what this node needs to reach one remote node's pods.
type PeerRoute struct {
	NodeName  string
	PodCIDR   *net.IPNet
	GatewayIP net.IP // first address of PodCIDR: the remote antrea-gw0
	NodeIP    net.IP // the remote node's underlay IP (tunnel destination or next hop)
	// Encap: the traffic goes through the tunnel to NodeIP; otherwise the
	// underlay routes it, unencapsulated, with NodeIP as the next hop
	// (trafficEncapMode noEncap).
	Encap bool
	// PodCIDRv6 is a dual-stack peer's IPv6 pod CIDR (nil otherwise, and
	// on a node that carries no IPv6: SetIPv6), GatewayIPv6 its first
	// address. It takes the peer's one path (Encap): through the tunnel
	// to NodeIP (an IPv4 underlay carries the inner IPv6 frames), or
	// routed by the underlay via NodeIPv6.
	PodCIDRv6   *net.IPNet
	GatewayIPv6 net.IP
	// NodeIPv6 is a routed dual-stack peer's IPv6 InternalIP, the next
	// hop of PodCIDRv6 over the underlay; nil when the peer is
	// tunnelled.
	NodeIPv6 net.IP
	// PublicKey is the peer's WireGuard public key, from its Node
	// annotation (types.NodeWireGuardPublicKeyAnnotation); "" when it has
	// none. Only trafficEncryptionMode wireGuard's routes use it.
	PublicKey string
}

// samePath says whether o goes the same way as r: only the peer's
// WireGuard key may differ, which the routes update in place.
func (r *PeerRoute) samePath(o *PeerRoute) bool {
	return o != nil && r.PodCIDR.String() == o.PodCIDR.String() && r.NodeIP.Equal(o.NodeIP) && r.Encap == o.Encap &&
		r.PodCIDRv6.String() == o.PodCIDRv6.String() && r.NodeIPv6.Equal(o.NodeIPv6)
}

func (r *PeerRoute) equal(o *PeerRoute) bool {
	return r.samePath(o) && r.PublicKey == o.PublicKey
}

// Controller watches Nodes and keeps the peer routes and flows.
type Controller struct {
	nodeName  string
	flows     FlowInstaller
	routes    HostRoutes
	lister    corelisters.NodeLister
	synced    cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[string]
	mu        sync.Mutex
	installed map[string]*PeerRoute
	// onPeer, if set, is told each remote node IP reached through the
	// tunnel (e.g. to pin its tunnel neighbour).
	onPeer func(nodeIP net.IP)
	// encap says whether traffic to a peer is encapsulated (nil: always).
	encap Encap
	// onChange, if set, is told the pod CIDRs of the installed peers after
	// each change (e.g. the node's masquerade exception, in noEncap).
	onChange func(peerPodCIDRs []*net.IPNet)
	// ipv6: this node carries IPv6 (dual-stack), so peers' IPv6 pod
	// CIDRs get flows and routes too (SetIPv6).
	ipv6 bool
	// ipv6Only: this node is an IPv6-only node (SetIPv6Only): a peer is
	// reached by its IPv6 pod CIDR, through the tunnel to its IPv6
	// InternalIP.
	ipv6Only bool
}

// SetIPv6Only makes the controller route, for each peer, its IPv6 pod CIDR
// (the peer's PodCIDR, GatewayIP its first address) through the tunnel to
// the peer's IPv6 InternalIP: this node's gateway and transport address
// are IPv6 alone (an IPv6-only cluster). Call it before Run.
func (c *Controller) SetIPv6Only(on bool) { c.ipv6Only = on }

// SetIPv6 makes the controller install, for each peer, the path of its
// IPv6 pod CIDR beside its IPv4 one: this node is dual-stack (its gateway
// has an IPv6 address). A tunnelled peer's IPv6 pod CIDR goes through the
// tunnel to its IPv4 node IP; a routed peer's is routed via its IPv6
// InternalIP (dualStackPath). Call it before Run.
func (c *Controller) SetIPv6(on bool) { c.ipv6 = on }

// SetEncap decides per peer, by its node IP, whether its traffic goes
// through the tunnel or is routed by the underlay (EncapAll, EncapNone,
// EncapOutside for hybrid). Call it before Run.
func (c *Controller) SetEncap(encap Encap) { c.encap = encap }

// OnChange registers f, told the pod CIDRs of every installed peer after
// each change. Call it before Run.
func (c *Controller) OnChange(f func(peerPodCIDRs []*net.IPNet)) { c.onChange = f }

// peerRoute is the route to node n as this controller's mode wants it.
func (c *Controller) peerRoute(n *corev1.Node) *PeerRoute {
	var r *PeerRoute
	if c.ipv6Only {
		r = peerRouteOf(n, types.IPv6)
	} else {
		r = peerRoute(n)
	}
	if r == nil {
		return nil
	}
	encap := c.encap
	if encap == nil {
		encap = EncapAll
	}
	r.Encap = encap(r.NodeIP)
	if c.ipv6 && !c.ipv6Only {
		dualStackPath(n, r, encap)
	}
	return r
}

// dualStackPath adds peer n's IPv6 pod CIDR to r, its route on a
// dual-stack node, on the one path both families of a peer take. The
// peer is routed only when both its node IPs are: when its IPv6
// InternalIP is outside this node's IPv6 transport subnet (hybrid), or it
// has none, both families go through the tunnel to its IPv4 node IP,
// which carries IPv6 frames on any underlay. In noEncap (no tunnel) a peer
// without an IPv6 InternalIP has no next hop for its IPv6 pods: they are
// not reached.
func dualStackPath(n *corev1.Node, r *PeerRoute, encap Encap) {
	cidr := podCIDROf(n, types.IPv6)
	if cidr == nil {
		return
	}
	ip6 := internalIPOf(n, types.IPv6)
	if !r.Encap && encap(ip6) {
		r.Encap = true
	}
	if !r.Encap {
		if ip6 == nil {
			klog.InfoS("Peer has no IPv6 InternalIP to route its IPv6 pod CIDR to: its IPv6 pods are not reached", "node", n.Name, "podCIDRv6", cidr)
			return
		}
		r.NodeIPv6 = ip6
	}
	r.PodCIDRv6, r.GatewayIPv6 = cidr, GatewayIP(cidr)
}

// changed tells onChange the installed peers' pod CIDRs.
func (c *Controller) changed() {
	if c.onChange == nil {
		return
	}
	c.mu.Lock()
	cidrs := make([]*net.IPNet, 0, len(c.installed))
	for _, r := range c.installed {
		cidrs = append(cidrs, r.PodCIDR)
		if r.PodCIDRv6 != nil {
			cidrs = append(cidrs, r.PodCIDRv6)
		}
	}
	c.mu.Unlock()
	c.onChange(cidrs)
}

// NewController makes a controller for this node; it fails when the Node
// informer refuses its handler (the informer was stopped).
func NewController(nodeName string, informer coreinformers.NodeInformer, flows FlowInstaller, routes HostRoutes, onPeer func(net.IP)) (*Controller, error) {
	c := &Controller{
		nodeName:  nodeName,
		flows:     flows,
		routes:    routes,
		lister:    informer.Lister(),
		synced:    informer.Informer().HasSynced,
		queue:     workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "noderoute"}),
		installed: map[string]*PeerRoute{},
		onPeer:    onPeer,
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, n any) { c.enqueue(n) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("node route controller: the Node informer refused its handler: %w", err)
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if n, ok := obj.(*corev1.Node); ok && n.Name != c.nodeName {
		c.queue.Add(n.Name)
	}
}

// Run reconciles once from the informer cache (removing stale routes), then
// processes node events until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("node route controller: informer cache did not sync")
	}
	if err := c.reconcile(); err != nil {
		return err
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for c.processNext() {
		}
	}, time.Second)
	<-ctx.Done()
	return nil
}

// reconcile installs every current peer and removes host routes that belong to
// no current peer (seed issue: stale gateway routes survive an agent restart).
func (c *Controller) reconcile() error {
	nodes, err := c.lister.List(everything)
	if err != nil {
		return err
	}
	desired := map[string]*PeerRoute{}
	for _, n := range nodes {
		if r := c.peerRoute(n); r != nil && n.Name != c.nodeName {
			desired[n.Name] = r
		}
	}
	if err := c.routes.Reconcile(desired); err != nil {
		return fmt.Errorf("reconcile host routes: %w", err)
	}
	for name := range desired {
		c.queue.Add(name)
	}
	return nil
}

func (c *Controller) processNext() bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(key); err != nil {
		klog.ErrorS(err, "Failed to sync routes to node; retrying", "node", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync applies the difference for one remote node.
func (c *Controller) sync(name string) error {
	node, err := c.lister.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var want *PeerRoute
	if node != nil {
		want = c.peerRoute(node)
	}
	c.mu.Lock()
	have := c.installed[name]
	c.mu.Unlock()
	if want != nil && want.equal(have) {
		return nil
	}
	if want != nil && want.samePath(have) {
		// Only the peer's WireGuard key changed (it rotated): the routes
		// swap it in place, without a moment with no route to the peer.
		if err := c.routes.Add(want); err != nil {
			return fmt.Errorf("update route to node %s: %w", name, err)
		}
		c.mu.Lock()
		c.installed[name] = want
		c.mu.Unlock()
		klog.InfoS("Updated the peer's key", "node", name, "publicKey", want.PublicKey)
		return nil
	}
	if have != nil {
		if err := c.routes.Delete(have); err != nil {
			return fmt.Errorf("delete route to node %s: %w", name, err)
		}
		if err := c.flows.UninstallNodeFlows(name); err != nil {
			return fmt.Errorf("uninstall flows to node %s: %w", name, err)
		}
		c.mu.Lock()
		delete(c.installed, name)
		c.mu.Unlock()
		klog.InfoS("Removed route to node", "node", name, "podCIDR", have.PodCIDR)
		c.changed()
	}
	if want == nil {
		return nil
	}
	tunnelPeer := want.NodeIP
	if !want.Encap {
		tunnelPeer = nil // routed: no flow into the tunnel
	} else if c.onPeer != nil {
		c.onPeer(want.NodeIP)
	}
	if err := c.flows.InstallNodeFlows(name, want.PodCIDR, want.GatewayIP, tunnelPeer); err != nil {
		return fmt.Errorf("install flows to node %s: %w", name, err)
	}
	if want.PodCIDRv6 != nil {
		if err := c.flows.InstallNodeFlows(name, want.PodCIDRv6, want.GatewayIPv6, tunnelPeer); err != nil {
			return fmt.Errorf("install IPv6 flows to node %s: %w", name, err)
		}
	}
	if err := c.routes.Add(want); err != nil {
		return fmt.Errorf("add route to node %s: %w", name, err)
	}
	c.mu.Lock()
	c.installed[name] = want
	c.mu.Unlock()
	klog.InfoS("Installed route to node", "node", name, "podCIDR", want.PodCIDR, "podCIDRv6", want.PodCIDRv6, "nodeIP", want.NodeIP, "nodeIPv6", want.NodeIPv6, "encap", want.Encap)
	c.changed()
	return nil
}

// Installed returns a copy of the peer routes currently in place.
func (c *Controller) Installed() map[string]PeerRoute {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]PeerRoute, len(c.installed))
	for k, v := range c.installed {
		out[k] = *v
	}
	return out
}

// peerRoute derives the route to a node, or nil while it lacks a pod CIDR or
// an InternalIP.
func peerRoute(n *corev1.Node) *PeerRoute {
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	// The pod CIDR of the first family routes are realized for.
	var ipnet *net.IPNet
	for _, c := range cidrs {
		if _, pn, err := net.ParseCIDR(c); err == nil && realizes(types.FamilyOfIP(pn.IP)) {
			ipnet = pn
			break
		}
	}
	if ipnet == nil {
		return nil
	}
	var nodeIP net.IP
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = net.ParseIP(a.Address)
			break
		}
	}
	if nodeIP == nil {
		return nil
	}
	return &PeerRoute{NodeName: n.Name, PodCIDR: ipnet, GatewayIP: GatewayIP(ipnet), NodeIP: nodeIP,
		PublicKey: n.Annotations[types.NodeWireGuardPublicKeyAnnotation]}
}

// peerRouteOf derives the route to a node by its pod CIDR and InternalIP of
// family f (an IPv6-only node's peers: both IPv6), or nil while it lacks
// either.
func peerRouteOf(n *corev1.Node, f types.IPFamily) *PeerRoute {
	cidr := podCIDROf(n, f)
	if cidr == nil {
		return nil
	}
	nodeIP := internalIPOf(n, f)
	if nodeIP == nil {
		return nil
	}
	return &PeerRoute{NodeName: n.Name, PodCIDR: cidr, GatewayIP: GatewayIP(cidr), NodeIP: nodeIP,
		PublicKey: n.Annotations[types.NodeWireGuardPublicKeyAnnotation]}
}

// internalIPOf is node n's first InternalIP of family f, nil if it has
// none.
func internalIPOf(n *corev1.Node, f types.IPFamily) net.IP {
	for _, a := range n.Status.Addresses {
		if ip := net.ParseIP(a.Address); a.Type == corev1.NodeInternalIP && ip != nil && types.FamilyOfIP(ip) == f {
			return ip
		}
	}
	return nil
}

// podCIDROf is node n's pod CIDR of family f, nil if it has none.
func podCIDROf(n *corev1.Node, f types.IPFamily) *net.IPNet {
	for _, c := range n.Spec.PodCIDRs {
		if _, pn, err := net.ParseCIDR(c); err == nil && types.FamilyOfIP(pn.IP) == f {
			return pn
		}
	}
	return nil
}

// GatewayIP is the first address of a pod CIDR, which a node's antrea-gw0
// holds, in its family's length (4 bytes for IPv4).
func GatewayIP(cidr *net.IPNet) net.IP {
	return net.IP(types.Addr(cidr.IP).Next().AsSlice())
}
