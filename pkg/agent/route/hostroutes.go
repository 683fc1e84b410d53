package route

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
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

// Add installs (or replaces) the route to one peer.
func (g *GatewayRoutes) Add(r *PeerRoute) error {
	l, err := g.link()
	if err != nil {
		return err
	}
	if err := netlink.RouteReplace(g.route(l, r)); err != nil {
		return fmt.Errorf("route %s via %s dev %s: %w", r.PodCIDR, r.GatewayIP, g.GatewayName, err)
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
	return nil
}

// Reconcile deletes gateway routes that match no desired peer (left by an
// earlier run for nodes that are gone) and adds the desired ones.
func (g *GatewayRoutes) Reconcile(desired map[string]*PeerRoute) error {
	l, err := g.link()
	if err != nil {
		return err
	}
	routes, err := netlink.RouteList(l, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("list routes of %s: %w", g.GatewayName, err)
	}
	want := map[string]bool{}
	for _, r := range desired {
		want[r.PodCIDR.String()] = true
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
