package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/nodeinit"
	"antrea.io/antrea/pkg/agent/route"
	"antrea.io/antrea/pkg/agent/types"
	"antrea.io/antrea/pkg/agent/wireguard"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// setupRoutes keeps the routes to the other nodes' pod CIDRs (pkg/agent/route)
// and pins each new peer's tunnel neighbour.
func setupRoutes(ctx context.Context, d *deps) (component, error) {
	o, nc, purger := d.o, d.nc, d.purger
	if o.TrafficEncapMode == agentconfig.EncapModeNetworkPolicyOnly {
		// The primary CNI and the network route pod traffic between
		// nodes: no peer flows, no peer routes.
		klog.InfoS("trafficEncapMode networkPolicyOnly: pod traffic to other nodes is the primary CNI's to route")
		return nil, nil
	}
	// The node's transport interface: br-phy's internal port holds the
	// node IP with the netdev datapath.
	transport := nc.Uplink.BridgeName
	if transport == "" {
		transport = nc.Uplink.Name
	}
	paths := route.PathRoutes{
		Tunnel:   &route.GatewayRoutes{GatewayName: nc.Gateway.Name, LocalPodCIDR: d.podCIDRs[0]},
		Underlay: &route.UnderlayRoutes{LinkName: transport},
	}
	if d.wireGuard != nil {
		// trafficEncryptionMode wireGuard: every peer is routed (as in
		// noEncap), into antrea-wg0 instead of over the underlay; the
		// node's own packets leave with its gateway IP, which the peers
		// route back to it.
		paths.Underlay = &wireguard.Routes{Device: d.wireGuard, Port: o.WireGuardPort, Source: route.GatewayIP(d.podCIDRs[0])}
	}
	routes, err := route.NewController(o.NodeName, d.informers.Core().V1().Nodes(), d.flows, paths,
		func(peer net.IP) { go pinTunnelNeighbor(ctx, o, nc, peer, purger.Changed) })
	if err != nil {
		return nil, err
	}
	// A dual-stack node's hybrid decision has its IPv6 transport prefix
	// too (an IPv6-only node's NodeIP is IPv6 already).
	var transport6 *net.IPNet
	if d.gatewayIPv6 != nil && o.TrafficEncapMode == agentconfig.EncapModeHybrid {
		transport6 = transportPrefix(transport, d.nodeIPv6())
		if transport6 == nil {
			klog.InfoS("No IPv6 InternalIP of this node on the transport interface: hybrid tunnels every peer for both families",
				"interface", transport, "nodeIPv6", d.nodeIPv6())
		}
	}
	routes.SetEncap(encapDecision(o.TrafficEncapMode, nc.NodeIP, transport6))
	// WireGuard carries IPv4 pod CIDRs alone (docs/design/wireguard.md):
	// its peers get no IPv6 path.
	routes.SetIPv6(d.gatewayIPv6 != nil && d.wireGuard == nil)
	routes.SetIPv6Only(d.ipv6Only())
	if routedPeers(o.TrafficEncapMode) && d.wireGuard == nil && (d.gatewayIPv6 != nil || d.ipv6Only()) {
		// Routed peers' IPv6 pod traffic crosses the node's stack, between
		// the transport interface and the gateway.
		if err := ensureIPv6Forwarding(); err != nil {
			return nil, err
		}
	}
	if routedPeers(o.TrafficEncapMode) && !o.NoSNAT {
		// The masquerade spares the pod CIDRs of the peers, of each
		// family: those of routed peers leave through the node's stack
		// with the pod's address (the tunnelled ones never meet the
		// masquerade; sparing them too costs nothing and keeps the set
		// independent of the decision).
		local := d.localPodPrefixes()
		routes.OnChange(func(peers []*net.IPNet) {
			cidrs := append([]netip.Prefix(nil), local...)
			for _, p := range peers {
				cidrs = append(cidrs, prefixOf(p))
			}
			if err := d.nodeNet.SetClusterPodCIDRs(ctx, cidrs); err != nil {
				klog.ErrorS(err, "Cannot update the pod CIDRs the masquerade spares: pod traffic to other nodes may leave with the node's address")
			}
		})
	}
	d.routes = routes
	return runFunc(d.routes.Run), nil
}

// encapDecision is the per-peer decision of trafficEncapMode mode
// (route.Encap), given this node's underlay addresses with their prefixes
// (a dual-stack node's IPv6 one beside nodeIP, nil otherwise): the one
// function that picks both a peer's flows and its host route.
func encapDecision(mode string, nodeIP, nodeIPv6 *net.IPNet) route.Encap {
	switch mode {
	case agentconfig.EncapModeNoEncap:
		return route.EncapNone
	case agentconfig.EncapModeHybrid:
		return route.EncapOutside(nodeIP, nodeIPv6)
	}
	return route.EncapAll
}

// transportPrefix is ip with its prefix as the transport interface link
// holds it, nil when ip is not valid or not there.
func transportPrefix(link string, ip netip.Addr) *net.IPNet {
	if !ip.IsValid() {
		return nil
	}
	l, err := netlink.LinkByName(link)
	if err != nil {
		klog.ErrorS(err, "Cannot read the transport interface's addresses", "interface", link)
		return nil
	}
	addrs, err := netlink.AddrList(l, route.NetlinkFamily(types.FamilyOf(ip)))
	if err != nil {
		klog.ErrorS(err, "Cannot read the transport interface's addresses", "interface", link)
		return nil
	}
	for _, a := range addrs {
		if a.IPNet != nil && a.IP.Equal(net.IP(ip.AsSlice())) {
			return a.IPNet
		}
	}
	return nil
}

// ipv6ForwardingPath is where the agent's network namespace (the node's)
// says whether it forwards IPv6.
const ipv6ForwardingPath = "/proc/sys/net/ipv6/conf/all/forwarding"

// ensureIPv6Forwarding makes the node forward IPv6, in the agent's own
// network namespace (the node's; /proc/sys/net is per namespace), as the
// routed path needs: a routed peer's IPv6 pod packets come in on the
// transport interface and leave through the gateway, and the reverse.
// Nothing is written when it already does.
func ensureIPv6Forwarding() error {
	if b, err := os.ReadFile(ipv6ForwardingPath); err == nil && strings.TrimSpace(string(b)) == "1" {
		return nil
	}
	if err := os.WriteFile(ipv6ForwardingPath, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("IPv6 forwarding for the routed path (%s): %w", ipv6ForwardingPath, err)
	}
	klog.InfoS("Turned on IPv6 forwarding for the routed path", "path", ipv6ForwardingPath)
	return nil
}

// routedPeers says whether mode routes the traffic to some peers through
// the node's stack (noEncap, hybrid): then the masquerade must spare the
// cluster's pod CIDRs and Egress's SNAT keeps their source.
func routedPeers(mode string) bool {
	return mode == agentconfig.EncapModeNoEncap || mode == agentconfig.EncapModeHybrid
}

// waitPeerRoutes waits (bounded) until every other node known at start has
// its route, once the informers started.
func waitPeerRoutes(ctx context.Context, d *deps) (component, error) {
	if d.routes == nil {
		return nil, nil // networkPolicyOnly: no peer routes
	}
	if !waitRoutesInstalled(ctx, d.routes, d.informers, d.o.NodeName) {
		return nil, ctx.Err()
	}
	return nil, nil
}

// waitRoutesInstalled waits (bounded) until every other node known at start
// has its route, so that stale flows of the previous round are deleted only
// after their replacements are in.
func waitRoutesInstalled(ctx context.Context, routes *route.Controller, f informers.SharedInformerFactory, self string) bool {
	lister := f.Core().V1().Nodes().Lister()
	f.WaitForCacheSync(ctx.Done())
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		nodes, err := lister.List(labels.Everything())
		if err != nil {
			return false, nil
		}
		installed := routes.Installed()
		for _, n := range nodes {
			if n.Name == self || n.Spec.PodCIDR == "" {
				continue
			}
			if _, ok := installed[n.Name]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	return ctx.Err() == nil
}

// tunnelNextHop is the address whose neighbour ovs-vswitchd's native
// tunnelling looks up for peer: the peer itself on the node's subnet, the
// gateway of the node's route to it when it is in another subnet (hybrid,
// or encap across a router), of either family.
func tunnelNextHop(peer net.IP) net.IP {
	if rs, err := netlink.RouteGet(peer); err == nil && len(rs) > 0 && rs[0].Gw != nil {
		return rs[0].Gw
	}
	return peer
}

// pinTunnelNeighbor resolves a peer node's underlay MAC through the kernel
// and pins it in OVS's tunnel neighbour cache, against the userspace
// datapath's neighbour black hole (ENVIRONMENT.md). Only the netdev datapath
// needs it.
func pinTunnelNeighbor(ctx context.Context, o Options, nc *nodeinit.NodeConfig, peer net.IP, pinned func()) {
	if nc.Uplink.BridgeName == "" {
		return
	}
	link, err := netlink.LinkByName(nc.Uplink.BridgeName)
	if err != nil {
		klog.ErrorS(err, "Cannot pin tunnel neighbour", "peer", peer)
		return
	}
	hop := tunnelNextHop(peer)
	for i := 0; i < 50 && ctx.Err() == nil; i++ {
		neighs, _ := netlink.NeighList(link.Attrs().Index, route.NetlinkFamily(types.FamilyOfIP(hop)))
		for _, n := range neighs {
			// Only a confirmed entry: a STALE one may hold the MAC of the
			// peer's uplink from when its address was on the uplink (its
			// antrea-ovs had stopped), not its br-phy's. Traffic below
			// makes the kernel confirm or replace it.
			if n.IP.Equal(hop) && len(n.HardwareAddr) == 6 && n.State&(netlink.NUD_REACHABLE|netlink.NUD_PERMANENT) != 0 {
				if err := nodeinit.PinTunnelNeighbor(ctx, o.OVSRunDir, nc.Uplink.BridgeName, hop, n.HardwareAddr); err != nil {
					klog.ErrorS(err, "Cannot pin tunnel neighbour", "peer", peer, "nextHop", hop)
				} else {
					pinned()
				}
				return
			}
		}
		// Make the kernel resolve the peer: a datagram to the discard port.
		if c, err := net.Dial("udp", net.JoinHostPort(peer.String(), "9")); err == nil {
			_, _ = c.Write([]byte{0})
			c.Close()
		}
		time.Sleep(200 * time.Millisecond)
	}
	klog.InfoS("Could not resolve the peer's underlay MAC; tunnel neighbour not pinned", "peer", peer, "nextHop", hop)
}
