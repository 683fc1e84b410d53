package route

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/types"
)

var everything = labels.Everything()

// GatewayRoutes installs `PODCIDR via GWIP dev antrea-gw0 onlink` routes in the
// agent's network namespace: the node's own traffic to remote pods enters OVS
// through the gateway, which forwards it through the tunnel.
type GatewayRoutes struct {
	// GatewayName is the gateway interface, normally antrea-gw0.
	GatewayName string
	// LocalPodCIDR is this node's pod CIDR; its connected route is left alone.
	LocalPodCIDR *net.IPNet
}

var _ HostRoutes = (*GatewayRoutes)(nil)

func (g *GatewayRoutes) link() (netlink.Link, error) {
	l, err := netlink.LinkByName(g.GatewayName)
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", g.GatewayName, err)
	}
	return l, nil
}

func (g *GatewayRoutes) route(l netlink.Link, r *PeerRoute) *netlink.Route {
	return &netlink.Route{
		LinkIndex: l.Attrs().Index,
		Dst:       r.PodCIDR,
		Gw:        r.GatewayIP,
		Flags:     int(netlink.FLAG_ONLINK),
		Protocol:  unix.RTPROT_STATIC,
	}
}

// route6 is the route to a dual-stack peer's IPv6 pod CIDR, via its IPv6
// gateway address, onlink: there is no ARP for it, so neigh6 pins that
// address to the global virtual MAC, as upstream Antrea does, and the
// packets enter OVS addressed to the MAC the tunnel flows route.
func (g *GatewayRoutes) route6(l netlink.Link, r *PeerRoute) *netlink.Route {
	return &netlink.Route{LinkIndex: l.Attrs().Index, Dst: r.PodCIDRv6, Gw: r.GatewayIPv6,
		Flags: int(netlink.FLAG_ONLINK), Protocol: unix.RTPROT_STATIC}
}

func (g *GatewayRoutes) neigh6(l netlink.Link, r *PeerRoute) *netlink.Neigh {
	return g.neigh(l, r.GatewayIPv6)
}

// neigh is the entry pinning IPv6 gateway address ip to the global virtual
// MAC.
func (g *GatewayRoutes) neigh(l netlink.Link, ip net.IP) *netlink.Neigh {
	return &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V6, State: netlink.NUD_PERMANENT,
		IP: ip, HardwareAddr: types.GlobalVirtualMAC}
}

// Add installs (or replaces) the route to one peer (and, for a dual-stack
// peer, its IPv6 route and the neighbour entry of its IPv6 gateway).
func (g *GatewayRoutes) Add(r *PeerRoute) error {
	l, err := g.link()
	if err != nil {
		return err
	}
	if r.GatewayIP.To4() == nil {
		// An IPv6-only node's peer: its IPv6 gateway has no ARP for the
		// ARP responder to answer; pinned as a dual-stack peer's is.
		if err := netlink.NeighSet(g.neigh(l, r.GatewayIP)); err != nil {
			return fmt.Errorf("neighbour %s lladdr %s dev %s: %w", r.GatewayIP, types.GlobalVirtualMAC, g.GatewayName, err)
		}
	}
	if err := netlink.RouteReplace(g.route(l, r)); err != nil {
		return fmt.Errorf("route %s via %s dev %s: %w", r.PodCIDR, r.GatewayIP, g.GatewayName, err)
	}
	if r.PodCIDRv6 == nil {
		return nil
	}
	if err := netlink.NeighSet(g.neigh6(l, r)); err != nil {
		return fmt.Errorf("neighbour %s lladdr %s dev %s: %w", r.GatewayIPv6, types.GlobalVirtualMAC, g.GatewayName, err)
	}
	if err := netlink.RouteReplace(g.route6(l, r)); err != nil {
		return fmt.Errorf("route %s via %s dev %s: %w", r.PodCIDRv6, r.GatewayIPv6, g.GatewayName, err)
	}
	return nil
}

// Delete removes the route to one peer; a missing route is not an error.
func (g *GatewayRoutes) Delete(r *PeerRoute) error {
	l, err := g.link()
	if err != nil {
		return err
	}
	if err := netlink.RouteDel(g.route(l, r)); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("delete route %s dev %s: %w", r.PodCIDR, g.GatewayName, err)
	}
	if r.GatewayIP.To4() == nil {
		if err := netlink.NeighDel(g.neigh(l, r.GatewayIP)); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete neighbour %s dev %s: %w", r.GatewayIP, g.GatewayName, err)
		}
	}
	if r.PodCIDRv6 == nil {
		return nil
	}
	if err := netlink.RouteDel(g.route6(l, r)); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("delete route %s dev %s: %w", r.PodCIDRv6, g.GatewayName, err)
	}
	if err := netlink.NeighDel(g.neigh6(l, r)); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete neighbour %s dev %s: %w", r.GatewayIPv6, g.GatewayName, err)
	}
	return nil
}

// Reconcile deletes gateway routes that match no desired peer (left by an
// earlier run for nodes that are gone) and adds the desired ones.
func (g *GatewayRoutes) Reconcile(desired map[string]*PeerRoute) error {
	l, err := g.link()
	if err != nil {
		return err
	}
	// Both families: a dual-stack peer has an IPv6 route too.
	routes, err := netlink.RouteList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list routes of %s: %w", g.GatewayName, err)
	}
	want := map[string]bool{}
	for _, r := range desired {
		want[r.PodCIDR.String()] = true
		if r.PodCIDRv6 != nil {
			want[r.PodCIDRv6.String()] = true
		}
	}
	for i := range routes {
		rt := routes[i]
		if rt.Dst == nil || rt.Gw == nil {
			continue // connected routes (e.g. the local pod CIDR) stay
		}
		if g.LocalPodCIDR != nil && rt.Dst.String() == g.LocalPodCIDR.String() {
			continue
		}
		if !want[rt.Dst.String()] {
			klog.InfoS("Deleting stale route via gateway", "dst", rt.Dst, "gw", rt.Gw)
			if err := netlink.RouteDel(&rt); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("delete stale route %s: %w", rt.Dst, err)
			}
		}
	}
	for _, r := range desired {
		if err := g.Add(r); err != nil {
			return err
		}
	}
	return nil
}

// RTProtAntrea marks the host routes the agent installs (UnderlayRoutes',
// and those into WireGuard): the route's protocol, as routing daemons mark
// theirs (bird 12, zebra 11), so that a Reconcile removes only its own
// routes from a link that also carries the node's default and connected
// routes.
const RTProtAntrea = 0x8a

// UnderlayRoutes installs `PODCIDR via NODEIP dev LINK proto 0x8a` routes
// (trafficEncapMode noEncap): the node routes its own and its pods' traffic
// to a peer's pods over the underlay, to the peer's node IP, unencapsulated.
// LINK is the transport interface: br-phy with the netdev datapath (its
// internal port holds the node IP), the uplink otherwise. A dual-stack
// peer's IPv6 pod CIDR gets its own route, via the peer's IPv6 InternalIP
// (`PODCIDRv6 via NODEIPv6 dev LINK proto 0x8a`); on an IPv6-only node the
// one route is IPv6. The node must forward each family it routes
// (net.ipv6.conf.all.forwarding for IPv6).
type UnderlayRoutes struct {
	LinkName string
}

var _ HostRoutes = (*UnderlayRoutes)(nil)

// routes are the routes of peer r: its pod CIDR's, and a routed
// dual-stack peer's IPv6 one.
func (u *UnderlayRoutes) routes(l netlink.Link, r *PeerRoute) []*netlink.Route {
	out := []*netlink.Route{{LinkIndex: l.Attrs().Index, Dst: r.PodCIDR, Gw: r.NodeIP, Protocol: RTProtAntrea}}
	if r.PodCIDRv6 != nil && r.NodeIPv6 != nil {
		out = append(out, &netlink.Route{LinkIndex: l.Attrs().Index, Dst: r.PodCIDRv6, Gw: r.NodeIPv6, Protocol: RTProtAntrea})
	}
	return out
}

func (u *UnderlayRoutes) link() (netlink.Link, error) {
	l, err := netlink.LinkByName(u.LinkName)
	if err != nil {
		return nil, fmt.Errorf("transport interface %s: %w", u.LinkName, err)
	}
	return l, nil
}

// Add installs (or replaces) the route to one peer.
func (u *UnderlayRoutes) Add(r *PeerRoute) error {
	l, err := u.link()
	if err != nil {
		return err
	}
	for _, rt := range u.routes(l, r) {
		if err := netlink.RouteReplace(rt); err != nil {
			return fmt.Errorf("route %s via %s dev %s: %w", rt.Dst, rt.Gw, u.LinkName, err)
		}
	}
	return nil
}

// Delete removes the route to one peer; a missing route is not an error.
func (u *UnderlayRoutes) Delete(r *PeerRoute) error {
	l, err := u.link()
	if err != nil {
		return err
	}
	for _, rt := range u.routes(l, r) {
		if err := netlink.RouteDel(rt); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("delete route %s dev %s: %w", rt.Dst, u.LinkName, err)
		}
	}
	return nil
}

// Reconcile deletes this type's routes that match no desired peer and adds
// the desired ones; the link's other routes are left alone.
func (u *UnderlayRoutes) Reconcile(desired map[string]*PeerRoute) error {
	l, err := u.link()
	if err != nil {
		return err
	}
	// Both families: a dual-stack peer's IPv6 route, an IPv6-only node's.
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: l.Attrs().Index, Protocol: RTProtAntrea},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list routes of %s: %w", u.LinkName, err)
	}
	want := map[string]bool{}
	for _, r := range desired {
		for _, rt := range u.routes(l, r) {
			want[rt.Dst.String()+" "+rt.Gw.String()] = true
		}
	}
	for i := range routes {
		rt := routes[i]
		if rt.Dst != nil && !want[rt.Dst.String()+" "+rt.Gw.String()] {
			klog.InfoS("Deleting stale route over the underlay", "dst", rt.Dst, "via", rt.Gw, "dev", u.LinkName)
			if err := netlink.RouteDel(&rt); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("delete stale route %s: %w", rt.Dst, err)
			}
		}
	}
	for _, r := range desired {
		if err := u.Add(r); err != nil {
			return err
		}
	}
	return nil
}

// PathRoutes gives each peer the routes of its path: Tunnel's (through the
// gateway into the tunnel) when its traffic is encapsulated, Underlay's
// when it is routed. Either may be nil when no peer takes that path.
type PathRoutes struct {
	Tunnel, Underlay HostRoutes
}

var _ HostRoutes = PathRoutes{}

func (p PathRoutes) of(r *PeerRoute) (HostRoutes, error) {
	h := p.Underlay
	if r.Encap {
		h = p.Tunnel
	}
	if h == nil {
		return nil, fmt.Errorf("route to %s: no routes for encap=%t", r.NodeName, r.Encap)
	}
	return h, nil
}

// Add installs the route to one peer on its path.
func (p PathRoutes) Add(r *PeerRoute) error {
	h, err := p.of(r)
	if err != nil {
		return err
	}
	return h.Add(r)
}

// Delete removes the route to one peer from its path.
func (p PathRoutes) Delete(r *PeerRoute) error {
	h, err := p.of(r)
	if err != nil {
		return err
	}
	return h.Delete(r)
}

// Reconcile reconciles each path with its own peers (none: its stale
// routes go).
func (p PathRoutes) Reconcile(desired map[string]*PeerRoute) error {
	split := map[bool]map[string]*PeerRoute{true: {}, false: {}}
	for name, r := range desired {
		split[r.Encap][name] = r
	}
	for encap, h := range map[bool]HostRoutes{true: p.Tunnel, false: p.Underlay} {
		if h == nil {
			if len(split[encap]) > 0 {
				return fmt.Errorf("%d peers with encap=%t and no routes for them", len(split[encap]), encap)
			}
			continue
		}
		if err := h.Reconcile(split[encap]); err != nil {
			return err
		}
	}
	return nil
}
