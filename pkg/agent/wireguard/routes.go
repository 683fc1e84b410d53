package wireguard

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/route"
)

// fallbackMetric is the metric of each peer's blackhole route, beside its
// route into the device (metric 0): when the device goes (a userspace
// device goes with the agent's process, e.g. while it restarts) the kernel
// drops the traffic to remote pods instead of sending it in the clear by
// the default route. Fail closed.
const fallbackMetric = 4242

// Routes is route.HostRoutes for trafficEncryptionMode wireGuard: each peer
// node is a WireGuard peer of Device (its public key from its Node
// annotation, endpoint its InternalIP:Port, allowed IPs its pod CIDR) and
// the node routes the peer's pod CIDR into the device. A peer whose key is
// not known yet (or cannot be read) still gets the route but no WireGuard
// peer: WireGuard drops what no peer allows, so its traffic is held back,
// never sent in the clear over the underlay.
type Routes struct {
	Device Device
	// Port is the peers' WireGuard port (wireGuard.port).
	Port int
	// Source is the source address of the node's own packets to remote
	// pods (its gateway IP, which the peers route back to it).
	Source net.IP

	mu sync.Mutex
	// keys are the peer keys configured, by node name.
	keys map[string]wgtypes.Key
}

var _ route.HostRoutes = (*Routes)(nil)

func (r *Routes) link() (netlink.Link, error) {
	l, err := netlink.LinkByName(r.Device.Name())
	if err != nil {
		return nil, fmt.Errorf("WireGuard interface %s: %w", r.Device.Name(), err)
	}
	return l, nil
}

func (r *Routes) route(l netlink.Link, p *route.PeerRoute) *netlink.Route {
	return &netlink.Route{LinkIndex: l.Attrs().Index, Dst: p.PodCIDR, Src: r.Source, Scope: netlink.SCOPE_LINK, Protocol: route.RTProtAntrea}
}

func fallback(p *route.PeerRoute) *netlink.Route {
	return &netlink.Route{Dst: p.PodCIDR, Type: unix.RTN_BLACKHOLE, Priority: fallbackMetric, Protocol: route.RTProtAntrea}
}

// peerKey is p's public key, or false when it has none that parses.
func peerKey(p *route.PeerRoute) (wgtypes.Key, bool) {
	if p.PublicKey == "" {
		return wgtypes.Key{}, false
	}
	k, err := wgtypes.ParseKey(p.PublicKey)
	if err != nil {
		klog.ErrorS(err, "Peer node's WireGuard public key cannot be read: its pods are unreachable until it is fixed", "node", p.NodeName, "key", p.PublicKey)
		return wgtypes.Key{}, false
	}
	return k, true
}

// Add configures the peer (replacing the key it had, in the same
// configuration: a rotated key never leaves the peer without one) and
// routes its pod CIDR into the device.
func (r *Routes) Add(p *route.PeerRoute) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[string]wgtypes.Key{}
	}
	var peers []wgtypes.PeerConfig
	old, had := r.keys[p.NodeName]
	key, ok := peerKey(p)
	if had && (!ok || old != key) {
		peers = append(peers, wgtypes.PeerConfig{PublicKey: old, Remove: true})
	}
	if ok {
		peers = append(peers, wgtypes.PeerConfig{PublicKey: key, Endpoint: Endpoint(p.NodeIP, r.Port),
			ReplaceAllowedIPs: true, AllowedIPs: []net.IPNet{*p.PodCIDR}})
	}
	if len(peers) > 0 {
		if err := r.Device.Configure(wgtypes.Config{Peers: peers}); err != nil {
			return fmt.Errorf("WireGuard peer %s: %w", p.NodeName, err)
		}
	}
	delete(r.keys, p.NodeName)
	if ok {
		r.keys[p.NodeName] = key
		if had && old != key {
			klog.InfoS("WireGuard peer's key changed", "node", p.NodeName, "key", p.PublicKey)
		}
	}
	if err := netlink.RouteReplace(fallback(p)); err != nil {
		return fmt.Errorf("blackhole route %s metric %d: %w", p.PodCIDR, fallbackMetric, err)
	}
	l, err := r.link()
	if err != nil {
		return err
	}
	if err := netlink.RouteReplace(r.route(l, p)); err != nil {
		return fmt.Errorf("route %s dev %s: %w", p.PodCIDR, r.Device.Name(), err)
	}
	return nil
}

// Delete removes the peer and its route (a node that left).
func (r *Routes) Delete(p *route.PeerRoute) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, had := r.keys[p.NodeName]; had {
		if err := r.Device.Configure(wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: old, Remove: true}}}); err != nil {
			return fmt.Errorf("remove WireGuard peer %s: %w", p.NodeName, err)
		}
		delete(r.keys, p.NodeName)
	}
	l, err := r.link()
	if err != nil {
		return err
	}
	if err := netlink.RouteDel(r.route(l, p)); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("delete route %s dev %s: %w", p.PodCIDR, r.Device.Name(), err)
	}
	if err := netlink.RouteDel(fallback(p)); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("delete blackhole route %s: %w", p.PodCIDR, err)
	}
	return nil
}

// Reconcile removes the peers and routes that belong to no desired peer
// (left in a kernel device by an earlier run) and adds the desired ones.
func (r *Routes) Reconcile(desired map[string]*route.PeerRoute) error {
	want := map[wgtypes.Key]bool{}
	cidrs := map[string]bool{}
	for _, p := range desired {
		if k, ok := peerKey(p); ok {
			want[k] = true
		}
		cidrs[p.PodCIDR.String()] = true
	}
	have, err := r.Device.Peers()
	if err != nil {
		return fmt.Errorf("peers of %s: %w", r.Device.Name(), err)
	}
	var stale []wgtypes.PeerConfig
	for _, p := range have {
		if !want[p.PublicKey] {
			stale = append(stale, wgtypes.PeerConfig{PublicKey: p.PublicKey, Remove: true})
		}
	}
	if len(stale) > 0 {
		klog.InfoS("Removing stale WireGuard peers", "count", len(stale))
		if err := r.Device.Configure(wgtypes.Config{Peers: stale}); err != nil {
			return fmt.Errorf("remove stale peers of %s: %w", r.Device.Name(), err)
		}
	}
	l, err := r.link()
	if err != nil {
		return err
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{LinkIndex: l.Attrs().Index, Protocol: route.RTProtAntrea},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list routes of %s: %w", r.Device.Name(), err)
	}
	for i := range routes {
		rt := routes[i]
		if rt.Dst != nil && !cidrs[rt.Dst.String()] {
			klog.InfoS("Deleting stale route into WireGuard", "dst", rt.Dst, "dev", r.Device.Name())
			if err := netlink.RouteDel(&rt); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("delete stale route %s: %w", rt.Dst, err)
			}
		}
	}
	holes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Type: unix.RTN_BLACKHOLE, Protocol: route.RTProtAntrea},
		netlink.RT_FILTER_TYPE|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list blackhole routes: %w", err)
	}
	for i := range holes {
		rt := holes[i]
		if rt.Dst != nil && rt.Priority == fallbackMetric && !cidrs[rt.Dst.String()] {
			klog.InfoS("Deleting stale blackhole route", "dst", rt.Dst)
			if err := netlink.RouteDel(&rt); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("delete stale blackhole route %s: %w", rt.Dst, err)
			}
		}
	}
	for _, p := range desired {
		if err := r.Add(p); err != nil {
			return err
		}
	}
	return nil
}
