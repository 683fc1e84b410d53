package nodeinit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// The node's addresses and routes, once moved off the uplink, live only on
// br-phy's internal port, a tap device that goes away (with them) when the
// bridge is deleted. They are therefore recorded in the Open_vSwitch row's
// external_ids, which outlive any bridge, before the move, and every bring-up
// puts back what is missing.
const (
	externalIDUplinkAddresses = "antrea-uplink-addresses"
	externalIDUplinkRoutes    = "antrea-uplink-routes"
)

// savedRoute is the part of a route through the uplink that is recorded.
type savedRoute struct {
	Dst      *net.IPNet // nil: default route
	Gw       net.IP
	Priority int
}

// String prints the route in the form recorded in external_ids:
// "DST via GW metric N" (DST "default", "via GW" omitted for on-link routes).
func (r savedRoute) String() string {
	dst := "default"
	if r.Dst != nil {
		dst = r.Dst.String()
	}
	s := dst
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	return s + " metric " + strconv.Itoa(r.Priority)
}

func parseSavedRoute(s string) (savedRoute, error) {
	f := strings.Fields(s)
	var r savedRoute
	if len(f) == 0 {
		return r, fmt.Errorf("empty route")
	}
	if f[0] != "default" {
		_, dst, err := net.ParseCIDR(f[0])
		if err != nil {
			return r, fmt.Errorf("route %q: %w", s, err)
		}
		r.Dst = dst
	}
	for i := 1; i+1 < len(f); i += 2 {
		switch f[i] {
		case "via":
			if r.Gw = net.ParseIP(f[i+1]); r.Gw == nil {
				return r, fmt.Errorf("route %q: bad gateway", s)
			}
		case "metric":
			p, err := strconv.Atoi(f[i+1])
			if err != nil {
				return r, fmt.Errorf("route %q: %w", s, err)
			}
			r.Priority = p
		default:
			return r, fmt.Errorf("route %q: unknown field %q", s, f[i])
		}
	}
	return r, nil
}

func encodeAddrs(addrs []*net.IPNet) string {
	parts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		parts = append(parts, a.String())
	}
	return strings.Join(parts, ",")
}

func decodeAddrs(s string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		ip, n, err := net.ParseCIDR(part)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", part, err)
		}
		out = append(out, &net.IPNet{IP: ip, Mask: n.Mask})
	}
	return out, nil
}

func encodeRoutes(routes []savedRoute) string {
	parts := make([]string, 0, len(routes))
	for _, r := range routes {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ";")
}

func decodeRoutes(s string) ([]savedRoute, error) {
	var out []savedRoute
	for _, part := range strings.Split(s, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		r, err := parseSavedRoute(part)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// moveAddresses moves the node's addresses and routes from the uplink to the
// underlay bridge's internal port, records them in OVSDB, restores what the
// port lacks (the bridge was deleted and re-created), and returns the node IP.
// The addresses reach the bridge before they leave the uplink, and routes are
// added after, because the kernel drops a gateway route when its subnet's
// address goes away.
func moveAddresses(ctx context.Context, conn *ovsconfig.Connection, bridgeName, uplinkName string, want net.IP) (*net.IPNet, error) {
	uplink, err := waitLink(ctx, uplinkName)
	if err != nil {
		return nil, err
	}
	bridge, err := waitLink(ctx, bridgeName)
	if err != nil {
		return nil, err
	}
	upAddrs, err := addrList(uplink, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	var move []netlink.Addr
	var moveNets []*net.IPNet
	for _, a := range upAddrs {
		if movableAddr(a) {
			move = append(move, a)
			moveNets = append(moveNets, a.IPNet)
		}
	}
	if len(move) > 0 {
		routes, err := routeList(uplink)
		if err != nil {
			return nil, err
		}
		var saved []savedRoute
		for _, r := range routes {
			if r.Protocol == unix.RTPROT_KERNEL || (r.Dst != nil && r.Dst.IP.IsLinkLocalUnicast()) {
				continue // the kernel re-creates connected and link-local routes itself
			}
			saved = append(saved, savedRoute{Dst: r.Dst, Gw: r.Gw, Priority: r.Priority})
		}
		// Record first: if we die half-way, the next run finishes from the record.
		if err := conn.SetExternalIDs(ctx, map[string]string{
			externalIDUplinkAddresses: encodeAddrs(moveNets),
			externalIDUplinkRoutes:    encodeRoutes(saved),
		}); err != nil {
			return nil, err
		}
		if err := ensureAddrs(bridge, moveNets); err != nil {
			return nil, err
		}
		for _, a := range move {
			if err := netlink.AddrDel(uplink, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
				return nil, fmt.Errorf("link %s: remove address %s: %w", uplinkName, a.IPNet, err)
			}
		}
		klog.InfoS("Moved node addresses to the underlay bridge", "from", uplinkName, "to", bridgeName,
			"addresses", encodeAddrs(moveNets), "routes", encodeRoutes(saved))
	}

	ids, err := conn.GetExternalIDs(ctx)
	if err != nil {
		return nil, err
	}
	addrs, err := decodeAddrs(ids[externalIDUplinkAddresses])
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %s: %w", bridgeName, externalIDUplinkAddresses, err)
	}
	routes, err := decodeRoutes(ids[externalIDUplinkRoutes])
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %s: %w", bridgeName, externalIDUplinkRoutes, err)
	}
	if err := ensureAddrs(bridge, addrs); err != nil {
		return nil, err
	}
	if err := ensureRoutes(bridge, routes); err != nil {
		return nil, err
	}
	return findNodeIP(want, bridgeName)
}

// ensureRoutes adds the routes link lacks.
func ensureRoutes(link netlink.Link, routes []savedRoute) error {
	if len(routes) == 0 {
		return nil
	}
	have, err := routeList(link)
	if err != nil {
		return err
	}
	for _, r := range routes {
		if hasRoute(have, r) {
			continue
		}
		nr := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: r.Dst, Gw: r.Gw, Priority: r.Priority}
		if err := netlink.RouteReplace(nr); err != nil {
			return fmt.Errorf("link %s: add route %s: %w", link.Attrs().Name, r, err)
		}
	}
	return nil
}

func hasRoute(have []netlink.Route, want savedRoute) bool {
	for _, h := range have {
		sameDst := (h.Dst == nil && want.Dst == nil) ||
			(h.Dst != nil && want.Dst != nil && h.Dst.String() == want.Dst.String())
		// The kernel lists a default route with a 0/0 destination.
		if !sameDst && want.Dst == nil && h.Dst != nil {
			ones, _ := h.Dst.Mask.Size()
			sameDst = ones == 0
		}
		if sameDst && h.Gw.Equal(want.Gw) && h.Priority == want.Priority {
			return true
		}
	}
	return false
}
