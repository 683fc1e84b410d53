package route

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/nodenet"
	"antrea.io/antrea/pkg/agent/types"
)

// The node path of AntreaProxy (antreaProxy.proxyAll): what the node's own
// network stack does so that Services work for traffic that does not start
// in a pod of this node. OVS does the load balancing (pkg/agent/openflow,
// service.go); the node steers traffic into the bridge:
//
//   - NodePorts: in the node's nftables table (pkg/agent/nodenet, feature
//     nodeport: chains nodeport-*), NAT prerouting (traffic entering the
//     node) and output (the node's own processes) DNAT every connection to
//     one of the node's NodePort addresses (the set nodeport-addrs) and a
//     NodePort (the set nodeports, protocol . port) to NodePortVirtualIP,
//     keeping the port;
//   - the node routes NodePortVirtualIP, and HairpinIP, to the gateway
//     through neighbours pinned to the global virtual MAC, and routes each
//     Service address (ClusterIPs, external IPs, LoadBalancer ingress IPs)
//     there via NodePortVirtualIP, from the gateway IP;
//   - NAT postrouting (nodeport-postrouting) masquerades to the gateway IP what leaves through the
//     gateway from another of the node's own addresses (a process bound to
//     the node IP, a NodePort reached from the node) and the NodePort
//     traffic of the node's pods, which enters the node from the gateway:
//     OVS tells the node's and pods' traffic (the gateway IP as source)
//     from traffic from outside the node (any other source), to which
//     externalTrafficPolicy Local applies, and replies to the gateway IP
//     come back through the node, which un-NATs them. It masquerades
//     HairpinIP leaving by any other interface (a Service connection from
//     the gateway to an endpoint outside the node, source-NATed to
//     HairpinIP by OVS so its replies come back through the bridge).
//
// Upstream Antrea does the same with iptables and ipsets
// (ANTREA-NODEPORT-IP, "DNAT external/local to NodePort packets",
// "masquerade LOCAL traffic", "masquerade OVS virtual source IP").

// The node path's virtual addresses, declared in pkg/agent/types.
var (
	NodePortVirtualIP = types.NodePortVirtualIP
	HairpinIP         = types.HairpinIP
)

// NodePort is a Service's NodePort (declared in pkg/agent/types).
type NodePort = types.NodePort

// ServiceNeeds is what one Service needs of the node: its NodePorts and the
// addresses the node routes to the gateway.
type ServiceNeeds struct {
	NodePorts []NodePort
	Addresses []netip.Addr
}

// NodePathConfig says how the node path is laid out on this node.
type NodePathConfig struct {
	// GatewayName is the gateway interface (antrea-gw0), GatewayIP its
	// IPv4 address, PodCIDR this node's pod CIDR.
	GatewayName string
	GatewayIP   netip.Addr
	PodCIDR     netip.Prefix
	// NodeIP is the node's transport address: the source of the node's
	// route to HairpinIP, so a hostNetwork endpoint's UDP answers to a
	// Service client source-NATed to HairpinIP leave from the address the
	// client was DNATed to. Unset: the gateway's address.
	NodeIP netip.Addr
	// GatewayIPv6 and PodCIDRv6 are a dual-stack node's IPv6 gateway
	// address and pod CIDR, NodeIPv6 its IPv6 transport address (the
	// source of the route to HairpinIPv6; unset: GatewayIPv6). With them
	// the node path serves IPv6 too: the node's IPv6 addresses' NodePorts
	// are DNATed to NodePortVirtualIPv6, and IPv6 Service addresses are
	// routed to the gateway via it. Unset: IPv4 only, as before.
	GatewayIPv6 netip.Addr
	PodCIDRv6   netip.Prefix
	NodeIPv6    netip.Addr
	// NodePortAddresses selects the node addresses NodePorts are served on
	// (antreaProxy.nodePortAddresses); empty: every address of the
	// node's families but loopback, link-local ones and the gateway's.
	NodePortAddresses []netip.Prefix
	// ResyncPeriod is how often the node addresses are read again besides
	// the kernel's address events; default 30 s.
	ResyncPeriod time.Duration
}

// NodePath keeps the node's side of the node path: the nftables table and
// the routes. Services' needs are recorded as they come (SetService) and
// applied by Run's worker, which coalesces bursts and writes only the
// difference: one nft transaction and the route changes per batch.
type NodePath struct {
	cfg NodePathConfig
	// open opens the node's netfilter table, once (nodenet.New).
	open      func() (*nodenet.Table, error)
	nodePorts nodePortTable

	mu       sync.Mutex
	services map[string]ServiceNeeds
	ports    map[NodePort]int    // wanted NodePorts, with the number of Services wanting each
	addrs    map[netip.Addr]int  // wanted routed addresses, likewise
	synced   bool                // every Service known at start was set
	dirty    chan struct{}       // signals the worker
	haveAddr []netip.Addr        // node addresses in the set (nil: not written yet)
	havePort map[NodePort]bool   // NodePorts in the set
	haveIP   map[netip.Addr]bool // routes in place
	full     bool                // next apply rewrites the sets and reconciles the routes
}

// NewNodePath makes the node path of this node.
func NewNodePath(cfg NodePathConfig) (*NodePath, error) {
	v4 := cfg.GatewayIP.IsValid() || cfg.PodCIDR.IsValid()
	v6 := cfg.GatewayIPv6.IsValid() || cfg.PodCIDRv6.IsValid()
	if cfg.GatewayName == "" || (!v4 && !v6) {
		return nil, fmt.Errorf("node path: the gateway name, its address and the pod CIDR are required")
	}
	if v4 {
		if !cfg.GatewayIP.IsValid() || !cfg.PodCIDR.IsValid() {
			return nil, fmt.Errorf("node path: the gateway address (%s) and the pod CIDR (%s) go together", cfg.GatewayIP, cfg.PodCIDR)
		}
		if err := checkRealized("node path: gateway "+cfg.GatewayIP.String(), cfg.GatewayIP); err != nil {
			return nil, err
		}
		if err := checkRealized("node path: pod CIDR "+cfg.PodCIDR.String(), cfg.PodCIDR.Addr()); err != nil {
			return nil, err
		}
	}
	if v6 {
		if !cfg.GatewayIPv6.Is6() || !cfg.PodCIDRv6.Addr().Is6() || cfg.GatewayIPv6.Is4In6() {
			return nil, fmt.Errorf("node path: the IPv6 gateway address (%s) and IPv6 pod CIDR (%s) go together, both IPv6", cfg.GatewayIPv6, cfg.PodCIDRv6)
		}
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = 30 * time.Second
	}
	return &NodePath{
		cfg: cfg, open: nodenet.New,
		services: map[string]ServiceNeeds{}, ports: map[NodePort]int{}, addrs: map[netip.Addr]int{},
		dirty: make(chan struct{}, 1), havePort: map[NodePort]bool{}, haveIP: map[netip.Addr]bool{},
	}, nil
}

// SetService records what a Service needs of the node (the zero value:
// nothing, for a deleted Service).
func (n *NodePath) SetService(key string, needs ServiceNeeds) {
	n.mu.Lock()
	old := n.services[key]
	for _, p := range old.NodePorts {
		if n.ports[p]--; n.ports[p] == 0 {
			delete(n.ports, p)
		}
	}
	for _, a := range old.Addresses {
		if n.addrs[a]--; n.addrs[a] == 0 {
			delete(n.addrs, a)
		}
	}
	needs.NodePorts = uniq(needs.NodePorts, func(a, b NodePort) int {
		return int(a.Protocol)<<16 + int(a.Port) - (int(b.Protocol)<<16 + int(b.Port))
	})
	needs.Addresses = uniq(needs.Addresses, func(a, b netip.Addr) int { return a.Compare(b) })
	for _, p := range needs.NodePorts {
		n.ports[p]++
	}
	for _, a := range needs.Addresses {
		n.addrs[a]++
	}
	if len(needs.NodePorts) == 0 && len(needs.Addresses) == 0 {
		delete(n.services, key)
	} else {
		n.services[key] = needs
	}
	n.mu.Unlock()
	n.kick()
}

// Synced says every Service known at start was set: from now on what no
// Service wants is removed (before, a restarted agent only adds, so the
// NodePorts and routes of Services not synced yet keep working).
func (n *NodePath) Synced() {
	n.mu.Lock()
	n.synced, n.full = true, true
	n.mu.Unlock()
	n.kick()
}

// families are the IP families the node path serves: those it has a
// gateway address of (IPv4 on an IPv4 node, both on a dual-stack node,
// IPv6 on an IPv6-only node).
func (c NodePathConfig) families() []types.IPFamily {
	return types.Families(func(f types.IPFamily) bool { return c.gatewayIP(f).IsValid() })
}

// gatewayIP is the gateway's address of family f.
func (c NodePathConfig) gatewayIP(f types.IPFamily) netip.Addr {
	return types.ByFamily(f, c.GatewayIP, c.GatewayIPv6)
}

// nodeIP is the node's transport address of family f (possibly unset).
func (c NodePathConfig) nodeIP(f types.IPFamily) netip.Addr {
	return types.ByFamily(f, c.NodeIP, c.NodeIPv6)
}

func (n *NodePath) kick() {
	select {
	case n.dirty <- struct{}{}:
	default:
	}
}

func uniq[T comparable](in []T, cmp func(a, b T) int) []T {
	out := slices.Clone(in)
	slices.SortFunc(out, cmp)
	return slices.Compact(out)
}

// Run installs the fixed part (routes and neighbours of the virtual IPs,
// the table's chains and sets: the sets keep their elements, so NodePorts
// keep working while an agent restarts) and then applies the Services'
// needs and the node's addresses as they change, until ctx ends. It runs in
// the node's network namespace.
func (n *NodePath) Run(ctx context.Context) error {
	if err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 10 * time.Second},
		func(ctx context.Context) (bool, error) {
			if err := n.ensureBase(ctx); err != nil {
				klog.ErrorS(err, "Cannot set up the node path; retrying")
				return false, nil
			}
			return true, nil
		}); err != nil {
		return nil // ctx ended
	}
	var vips []netip.Addr
	for _, f := range n.cfg.families() {
		vips = append(vips, types.NodePortVirtualIPOf(f))
	}
	klog.InfoS("Node path set up", "table", string(nodenet.TableFamily)+" "+nodenet.TableName, "gateway", n.cfg.GatewayName, "nodePortVirtualIPs", vips)
	updates := make(chan netlink.AddrUpdate, 64)
	if err := netlink.AddrSubscribeWithOptions(updates, ctx.Done(), netlink.AddrSubscribeOptions{}); err != nil {
		klog.ErrorS(err, "Cannot follow the node's address changes; reading them periodically only")
	}
	ticker := time.NewTicker(n.cfg.ResyncPeriod)
	defer ticker.Stop()
	backoff := time.Duration(0)
	for {
		err := n.apply(ctx)
		if err != nil && ctx.Err() == nil {
			// The table or the gateway's routes may be gone (flushed by
			// hand, the gateway re-created): set them up again.
			if err := n.ensureBase(ctx); err != nil {
				klog.ErrorS(err, "Cannot set up the node path again")
			}
		}
		if err != nil {
			backoff = min(max(2*backoff, 100*time.Millisecond), 10*time.Second)
			klog.ErrorS(err, "Cannot apply the node path; retrying", "after", backoff)
			n.mu.Lock()
			n.full = true
			n.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		select {
		case <-ctx.Done():
			return nil
		case <-n.dirty:
		case <-updates:
		case <-ticker.C:
		}
	}
}

// ensureBase installs the routes and neighbours of the virtual IPs and the
// table with its chains (rewritten) and sets (kept).
func (n *NodePath) ensureBase(ctx context.Context) error {
	link, err := netlink.LinkByName(n.cfg.GatewayName)
	if err != nil {
		return fmt.Errorf("gateway %s: %w", n.cfg.GatewayName, err)
	}
	for _, f := range n.cfg.families() {
		hairpin := types.HairpinIPOf(f)
		for _, ip := range []netip.Addr{types.NodePortVirtualIPOf(f), hairpin} {
			src := n.cfg.gatewayIP(f)
			if ip == hairpin && n.cfg.nodeIP(f).IsValid() {
				src = n.cfg.nodeIP(f)
			}
			if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: NetlinkFamily(f), State: netlink.NUD_PERMANENT,
				IP: ip.AsSlice(), HardwareAddr: types.GlobalVirtualMAC}); err != nil {
				return fmt.Errorf("neighbour %s on %s: %w", ip, n.cfg.GatewayName, err)
			}
			r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: hostNet(ip), Scope: netlink.SCOPE_LINK, Src: src.AsSlice(), Protocol: unix.RTPROT_STATIC}
			err := netlink.RouteReplace(r)
			if err != nil && f == types.IPv6 && src != n.cfg.GatewayIPv6 {
				// The Node's IPv6 InternalIP is not (yet) usable as a
				// source here (still tentative, or on no link of this
				// node): the gateway's address serves, as without it.
				klog.InfoS("Node IPv6 address not usable as the hairpin route's source; using the gateway's", "address", src, "err", err)
				r.Src = n.cfg.GatewayIPv6.AsSlice()
				err = netlink.RouteReplace(r)
			}
			if err != nil {
				return fmt.Errorf("route %s dev %s: %w", ip, n.cfg.GatewayName, err)
			}
		}
	}
	if n.nodePorts == nil {
		t, err := n.open()
		if err != nil {
			return err
		}
		n.nodePorts = t.NodePorts()
	}
	return n.nodePorts.Setup(ctx, nodenet.NodePortConfig{GatewayName: n.cfg.GatewayName, GatewayIP: n.cfg.GatewayIP, PodCIDR: n.cfg.PodCIDR,
		GatewayIPv6: n.cfg.GatewayIPv6, PodCIDRv6: n.cfg.PodCIDRv6})
}

// nodePortTable is what the node path writes of the node's netfilter
// (nodenet.NodePorts).
type nodePortTable interface {
	Setup(ctx context.Context, cfg nodenet.NodePortConfig) error
	Apply(ctx context.Context, c nodenet.NodePortChange) error
}

func hostNet(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}

// NetlinkFamily is netlink's name of family f.
func NetlinkFamily(f types.IPFamily) int {
	return types.ByFamily(f, netlink.FAMILY_V4, netlink.FAMILY_V6)
}

// apply writes what changed since the last apply: node addresses, NodePorts
// and routes.
func (n *NodePath) apply(ctx context.Context) error {
	addrs, err := n.nodePortAddresses()
	if err != nil {
		return err
	}
	n.mu.Lock()
	full, synced := n.full, n.synced
	wantPorts := make(map[NodePort]bool, len(n.ports))
	for p := range n.ports {
		wantPorts[p] = true
	}
	wantIPs := make(map[netip.Addr]bool, len(n.addrs))
	for a := range n.addrs {
		wantIPs[a] = true
	}
	havePort, haveIP, haveAddr := n.havePort, n.haveIP, n.haveAddr
	n.mu.Unlock()
	if addrs == nil {
		addrs = []netip.Addr{} // written, even if empty
	}

	change, ports := nftDiff(addrs, haveAddr, wantPorts, havePort, full, synced)
	change.V6 = n.cfg.GatewayIPv6.IsValid()
	if !change.Empty() {
		if err := n.nodePorts.Apply(ctx, change); err != nil {
			return err
		}
	}
	ips, err := n.applyRoutes(wantIPs, haveIP, full, synced)
	n.mu.Lock()
	n.haveAddr, n.havePort = addrs, ports
	if err == nil {
		n.haveIP = ips
		if synced {
			n.full = false
		}
	}
	n.mu.Unlock()
	return err
}

// nftDiff is the change from the installed state to the wanted one (empty
// when nothing changes) and the NodePorts in the set afterwards. With full
// it rewrites both sets (flush and add, in one transaction); before the
// Services synced it only adds NodePorts.
func nftDiff(addrs, haveAddrs []netip.Addr, want, have map[NodePort]bool, full, synced bool) (nodenet.NodePortChange, map[NodePort]bool) {
	var c nodenet.NodePortChange
	after := map[NodePort]bool{}
	for p := range have {
		after[p] = true
	}
	if full || haveAddrs == nil || !slices.Equal(addrs, haveAddrs) {
		c.SetAddrs, c.Addrs = true, slices.Clone(addrs)
	}
	var adds, dels []NodePort
	if full && synced {
		c.FlushPorts = true
		after = map[NodePort]bool{}
		for p := range want {
			adds = append(adds, p)
		}
	} else {
		for p := range want {
			if !have[p] || full {
				adds = append(adds, p)
			}
		}
		if synced {
			for p := range have {
				if !want[p] {
					dels = append(dels, p)
				}
			}
		}
	}
	sortPorts(adds)
	sortPorts(dels)
	c.Del, c.Add = dels, adds
	for _, p := range dels {
		delete(after, p)
	}
	for _, p := range adds {
		after[p] = true
	}
	return c, after
}

func sortPorts(ps []NodePort) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Protocol != ps[j].Protocol {
			return ps[i].Protocol < ps[j].Protocol
		}
		return ps[i].Port < ps[j].Port
	})
}

// applyRoutes makes the routes of Service addresses via the gateway the
// wanted ones: adds the missing ones and, once the Services synced, deletes
// the others (with full, every route via NodePortVirtualIP on the gateway
// that is not wanted, whoever left it). It returns the routes in place.
func (n *NodePath) applyRoutes(want, have map[netip.Addr]bool, full, synced bool) (map[netip.Addr]bool, error) {
	after := make(map[netip.Addr]bool, len(want))
	for a := range have {
		after[a] = true
	}
	if !full && len(want) == len(have) && func() bool {
		for a := range want {
			if !have[a] {
				return false
			}
		}
		return true
	}() {
		return after, nil
	}
	link, err := netlink.LinkByName(n.cfg.GatewayName)
	if err != nil {
		return after, fmt.Errorf("gateway %s: %w", n.cfg.GatewayName, err)
	}
	route := func(a netip.Addr) *netlink.Route {
		f := types.FamilyOf(a)
		return &netlink.Route{LinkIndex: link.Attrs().Index, Dst: hostNet(a), Gw: types.NodePortVirtualIPOf(f).AsSlice(), Flags: int(netlink.FLAG_ONLINK),
			Src: n.cfg.gatewayIP(f).AsSlice(), Protocol: unix.RTPROT_STATIC}
	}
	if full {
		// What is on the gateway via the virtual IP (an earlier run's).
		after = map[netip.Addr]bool{}
		for _, f := range n.cfg.families() {
			routes, err := netlink.RouteList(link, NetlinkFamily(f))
			if err != nil {
				return after, fmt.Errorf("list routes of %s: %w", n.cfg.GatewayName, err)
			}
			for _, r := range routes {
				if r.Dst == nil || !r.Gw.Equal(types.NodePortVirtualIPOf(f).AsSlice()) {
					continue
				}
				if a := types.Addr(r.Dst.IP); a.IsValid() {
					if ones, _ := r.Dst.Mask.Size(); ones == a.BitLen() {
						after[a] = true
					}
				}
			}
		}
	}
	families := n.cfg.families()
	for a := range want {
		if !slices.Contains(families, types.FamilyOf(a)) {
			continue // a family this node path does not serve
		}
		if after[a] && !full {
			continue
		}
		if err := netlink.RouteReplace(route(a)); err != nil {
			return after, fmt.Errorf("route %s via %s dev %s: %w", a, NodePortVirtualIP, n.cfg.GatewayName, err)
		}
		after[a] = true
	}
	if synced {
		for a := range after {
			if want[a] {
				continue
			}
			if err := netlink.RouteDel(route(a)); err != nil && !errors.Is(err, unix.ESRCH) {
				return after, fmt.Errorf("delete route %s dev %s: %w", a, n.cfg.GatewayName, err)
			}
			delete(after, a)
		}
	}
	return after, nil
}

// nodePortAddresses are the node's addresses NodePorts are served on, sorted.
func (n *NodePath) nodePortAddresses() ([]netip.Addr, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var all []netip.Addr
	for _, l := range links {
		if l.Attrs().Name == n.cfg.GatewayName {
			continue
		}
		for _, f := range n.cfg.families() {
			addrs, err := netlink.AddrList(l, NetlinkFamily(f))
			if err != nil {
				return nil, fmt.Errorf("addresses of %s: %w", l.Attrs().Name, err)
			}
			for _, a := range addrs {
				if ip := types.Addr(a.IP); ip.IsValid() {
					all = append(all, ip)
				}
			}
		}
	}
	var out []netip.Addr
	for _, f := range n.cfg.families() {
		out = append(out, selectNodePortAddresses(all, n.cfg.NodePortAddresses, n.cfg.gatewayIP(f), f)...)
	}
	return uniq(out, func(a, b netip.Addr) int { return a.Compare(b) }), nil
}

// SelectNodePortAddresses picks, sorted and once each, the addresses of
// node that serve NodePorts: those within one of the prefixes or, without
// prefixes, every address of a realized family but loopback, link-local ones and the
// gateway's (kube-proxy serves NodePorts on every local address; the
// gateway's belongs to the pod network, link-local ones to the node path).
func SelectNodePortAddresses(node []netip.Addr, prefixes []netip.Prefix, gatewayIP netip.Addr) []netip.Addr {
	return selectNodePortAddresses(node, prefixes, gatewayIP, types.Families(realizes)...)
}

// selectNodePortAddresses is SelectNodePortAddresses of the given families.
func selectNodePortAddresses(node []netip.Addr, prefixes []netip.Prefix, gatewayIP netip.Addr, families ...types.IPFamily) []netip.Addr {
	var out []netip.Addr
	for _, a := range node {
		if !slices.Contains(families, types.FamilyOf(a)) || a.IsLoopback() || a.IsLinkLocalUnicast() || a == gatewayIP {
			continue
		}
		if len(prefixes) > 0 && !slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) }) {
			continue
		}
		out = append(out, a)
	}
	return uniq(out, func(a, b netip.Addr) int { return a.Compare(b) })
}

// RemoveNodePath removes what the node path put on the node (when Antrea is
// uninstalled, or at start with proxyAll off): the nodeport chains and sets
// of the node's netfilter table (and the table ip antrea-proxy of earlier
// agents), the routes via
// the virtual IP on the gateway and the virtual IPs' routes and
// neighbours. What is not there is no error.
func RemoveNodePath(ctx context.Context, gatewayName string) error {
	var errs []error
	if t, err := nodenet.New(); err != nil {
		errs = append(errs, err)
	} else if err := t.NodePorts().Remove(ctx); err != nil {
		errs = append(errs, err)
	}
	link, err := netlink.LinkByName(gatewayName)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return errors.Join(errs...)
		}
		return errors.Join(append(errs, fmt.Errorf("gateway %s: %w", gatewayName, err))...)
	}
	for _, f := range []types.IPFamily{types.IPv4, types.IPv6} {
		vip, hairpin := types.NodePortVirtualIPOf(f), types.HairpinIPOf(f)
		routes, err := netlink.RouteList(link, NetlinkFamily(f))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range routes {
			r := routes[i]
			if r.Dst == nil {
				continue
			}
			virtual := r.Dst.IP.Equal(vip.AsSlice()) || r.Dst.IP.Equal(hairpin.AsSlice())
			if ones, _ := r.Dst.Mask.Size(); ones == vip.BitLen() && (virtual || r.Gw.Equal(vip.AsSlice())) {
				if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
					errs = append(errs, fmt.Errorf("delete route %s: %w", r.Dst, err))
				}
			}
		}
		for _, ip := range []netip.Addr{vip, hairpin} {
			// A gateway without IPv6 (an IPv4 node) has no IPv6 neighbour table.
			if err := netlink.NeighDel(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: NetlinkFamily(f), IP: ip.AsSlice()}); err != nil &&
				!errors.Is(err, unix.ENOENT) && !(f == types.IPv6 && (errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EADDRNOTAVAIL))) {
				errs = append(errs, fmt.Errorf("delete neighbour %s: %w", ip, err))
			}
		}
	}
	return errors.Join(errs...)
}
