// Package serviceexternalip is the agent's side of ServiceExternalIP: the
// IP of a Service of type LoadBalancer that antrea-controller allocated from
// an ExternalIPPool (annotation service.antrea.io/external-ip-pool, written
// in status.loadBalancer.ingress) is answered for on the underlay by one
// node: among the alive agents (the memberlist cluster of pkg/agent/egress)
// that the pool's nodeSelector allows, the rendezvous-hash owner of the IP,
// the same rule as an Egress IP, so it moves within seconds when that node
// fails and comes back when it returns.
//
// The holder does not make the IP an address of its own: AntreaProxy's node
// path (proxyAll) routes every LoadBalancer ingress IP into OVS through the
// gateway, and a local address would be delivered to the node's own stack
// instead. The holder answers ARP for it as a proxy neighbour on the
// transport interface (the kernel answers for a proxy entry whose route
// leaves by another interface, here antrea-gw0) and announces it with
// gratuitous ARP; OVS load-balances what arrives, as for any external IP.
package serviceexternalip

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/egress"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
	"antrea.io/antrea/pkg/controller/externalippool"
	"antrea.io/antrea/pkg/util/garp"
)

// Config is what the controller needs.
type Config struct {
	NodeName string
	Services corelisters.ServiceLister
	// EndpointSlices tell which nodes have an endpoint of a Service with
	// externalTrafficPolicy Local: only those may answer for its IP.
	EndpointSlices discoverylisters.EndpointSliceLister
	Pools          crdlisters.ExternalIPPoolLister
	Nodes          corelisters.NodeLister
	Informers      []cache.SharedIndexInformer
	Neighbors      *ProxyNeighbors
	Cluster        *egress.Cluster
	// Resync is how often the whole state is written again (default 10 s).
	Resync time.Duration
}

// Controller answers for the LoadBalancer IPs this node owns.
type Controller struct {
	// Syncer: Trigger, MembershipChanged (a listener of the Cluster).
	*egress.Syncer
	cfg  Config
	last []netip.Addr
}

// NewController makes the controller and adds its event handlers; add
// MembershipChanged as a listener of the cluster.
func NewController(cfg Config) *Controller {
	if cfg.Resync == 0 {
		cfg.Resync = 10 * time.Second
	}
	return &Controller{cfg: cfg, Syncer: egress.NewSyncer(cfg.Informers)}
}

// Run syncs until ctx ends. The proxy entries stay: an agent restarting
// keeps answering (it is most likely the owner again once it rejoined).
func (c *Controller) Run(ctx context.Context) {
	c.Syncer.Run(ctx, "ServiceExternalIP", c.cfg.Resync, func(context.Context) error { return c.sync() })
}

// Owned computes the LoadBalancer IPs this node answers for, given the
// alive members.
func (c *Controller) Owned(alive []string) ([]netip.Addr, error) {
	svcs, err := c.cfg.Services.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	nodes, err := c.cfg.Nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var out []netip.Addr
	for _, s := range svcs {
		pool := s.Annotations[crdv1beta1.ServiceExternalIPPoolAnnotationKey]
		// As antrea-controller: a Service with a loadBalancerClass
		// belongs to that implementation.
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer || pool == "" || s.Spec.LoadBalancerClass != nil {
			continue
		}
		candidates, ranges := c.candidates(pool, alive, byName)
		if s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
			candidates = mostEndpoints(candidates, c.endpointsPerNode(s))
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(in.IP)
			if err != nil || !ip.Is4() { // IPv6 neighbours: with the IPv6 issue
				continue
			}
			// The status outlives a deleted pool (to get the IP back when
			// it is made again): only an IP of an existing pool is
			// answered for.
			if !slices.ContainsFunc(ranges, func(r externalippool.Range) bool { return r.Contains(ip) }) {
				continue
			}
			if egress.Owner(ip.String(), candidates) == c.cfg.NodeName && !slices.Contains(out, ip) {
				out = append(out, ip)
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out, nil
}

// mostEndpoints keeps the candidates with the most ready endpoints of a
// Service under externalTrafficPolicy Local, none when no candidate has one.
// Only a node with an endpoint may serve the IP (the others drop outside
// traffic under Local), as upstream; of those, upstream lets the hash pick
// any. One node answers ARP for the IP and serves only its own endpoints, so
// picking among the nodes with the most of them lets the most Pods serve
// (with 3 replicas on 2 nodes, 2 Pods instead of maybe 1). The cost: the IP
// moves when the Pods move so that its node no longer has the most; ties
// keep the hash's choice, so equal counts do not move it.
func mostEndpoints(candidates []string, perNode map[string]int) []string {
	most := 0
	for _, n := range candidates {
		most = max(most, perNode[n])
	}
	if most == 0 {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(candidates), func(n string) bool { return perNode[n] < most })
}

// endpointsPerNode counts the ready endpoints of the Service on each node.
func (c *Controller) endpointsPerNode(svc *corev1.Service) map[string]int {
	out := map[string]int{}
	if c.cfg.EndpointSlices == nil {
		return out
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	slices_, err := c.cfg.EndpointSlices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return out
	}
	for _, es := range slices_ {
		for _, ep := range es.Endpoints {
			if ep.NodeName != nil && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				out[*ep.NodeName]++
			}
		}
	}
	return out
}

// candidates are the alive members the pool allows, and the pool's ranges
// (none without the pool).
func (c *Controller) candidates(poolName string, alive []string, nodes map[string]*corev1.Node) ([]string, []externalippool.Range) {
	pool, err := c.cfg.Pools.Get(poolName)
	if err != nil {
		return nil, nil // no pool, no IP of it
	}
	ranges, err := externalippool.ParseRanges(pool.Spec)
	if err != nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&pool.Spec.NodeSelector)
	if err != nil {
		return nil, nil
	}
	var out []string
	for _, n := range alive {
		if node := nodes[n]; node != nil && sel.Matches(labels.Set(node.Labels)) {
			out = append(out, n)
		}
	}
	return out, ranges
}

func (c *Controller) sync() error {
	if !c.cfg.Cluster.Joined() {
		return nil
	}
	want, err := c.Owned(c.cfg.Cluster.Alive())
	if err != nil {
		return err
	}
	added, err := c.cfg.Neighbors.Sync(want)
	if c.TakeReannounce() {
		c.cfg.Neighbors.Announce(slices.DeleteFunc(slices.Clone(want), func(ip netip.Addr) bool { return slices.Contains(added, ip) }))
	}
	if !slices.Equal(want, c.last) {
		klog.InfoS("LoadBalancer IPs answered by this node", "ips", want)
		c.last = want
	}
	return err
}

// ProxyNeighbors answers ARP for IPs on one interface as proxy neighbour
// entries (ip neigh add proxy IP dev LINK). Every IPv4 proxy entry on the
// link is taken as its own: nothing else of the agent adds them.
type ProxyNeighbors struct {
	link     string
	announce func(link string, ip net.IP) error
}

// NewProxyNeighbors answers on link.
func NewProxyNeighbors(link string) *ProxyNeighbors {
	return &ProxyNeighbors{link: link, announce: func(link string, ip net.IP) error {
		return garp.Announce(link, ip, 3, 200*time.Millisecond)
	}}
}

// Held lists the proxy entries on the link.
func (p *ProxyNeighbors) Held() ([]netip.Addr, error) {
	l, err := netlink.LinkByName(p.link)
	if err != nil {
		return nil, fmt.Errorf("LoadBalancer IPs: link %s: %w", p.link, err)
	}
	ns, err := netlink.NeighProxyList(l.Attrs().Index, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("LoadBalancer IPs: proxy neighbours of %s: %w", p.link, err)
	}
	var out []netip.Addr
	for _, n := range ns {
		if ip, ok := netip.AddrFromSlice(n.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// Sync makes the proxy entries exactly want, announcing the new ones; it
// returns them.
func (p *ProxyNeighbors) Sync(want []netip.Addr) ([]netip.Addr, error) {
	held, err := p.Held()
	if err != nil {
		return nil, err
	}
	l, err := netlink.LinkByName(p.link)
	if err != nil {
		return nil, err
	}
	entry := func(ip netip.Addr) *netlink.Neigh {
		return &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4, Flags: netlink.NTF_PROXY, IP: net.IP(ip.AsSlice())}
	}
	var errs []error
	var added []netip.Addr
	for _, ip := range want {
		if slices.Contains(held, ip) {
			continue
		}
		if err := netlink.NeighAdd(entry(ip)); err != nil {
			errs = append(errs, fmt.Errorf("answer for LoadBalancer IP %s on %s: %w", ip, p.link, err))
			continue
		}
		added = append(added, ip)
		klog.InfoS("Answering for LoadBalancer IP", "ip", ip, "link", p.link)
		if err := p.announce(p.link, net.IP(ip.AsSlice())); err != nil {
			klog.ErrorS(err, "Cannot announce LoadBalancer IP", "ip", ip)
		}
	}
	for _, ip := range held {
		if slices.Contains(want, ip) {
			continue
		}
		if err := netlink.NeighDel(entry(ip)); err != nil {
			errs = append(errs, fmt.Errorf("stop answering for %s on %s: %w", ip, p.link, err))
			continue
		}
		klog.InfoS("No longer answering for LoadBalancer IP", "ip", ip, "link", p.link)
	}
	return added, errors.Join(errs...)
}

// Announce sends gratuitous ARP for ips again.
func (p *ProxyNeighbors) Announce(ips []netip.Addr) {
	for _, ip := range ips {
		if err := p.announce(p.link, net.IP(ip.AsSlice())); err != nil {
			klog.ErrorS(err, "Cannot announce LoadBalancer IP", "ip", ip)
		}
	}
}
