package app

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// setupNeighbors keeps the other nodes' tunnel neighbours pinned in
// ovs-vswitchd (the netdev datapath's neighbour black hole,
// ENVIRONMENT.md): every neighborRepinInterval, after ovs-vswitchd
// reconnected, and as soon as a peer's underlay address takes a new MAC.
func setupNeighbors(_ context.Context, d *deps) (component, error) {
	o, nc, routes, purger := d.o, d.nc, d.routes, d.purger
	if routes == nil {
		return nil, nil // networkPolicyOnly: no tunnel, no peers
	}
	peers := func() []net.IP {
		var ips []net.IP
		for _, r := range routes.Installed() {
			ips = append(ips, r.NodeIP)
		}
		return ips
	}
	isPeer := func(ip net.IP) bool {
		for _, r := range routes.Installed() {
			if r.NodeIP.Equal(ip) {
				return true
			}
		}
		return false
	}
	return loop(func(ctx context.Context) {
		var wg sync.WaitGroup
		if link := nc.Uplink.BridgeName; link != "" {
			wg.Go(func() {
				if err := followPeerNeighbors(ctx, link, isPeer, func(peer net.IP, mac net.HardwareAddr) {
					if err := nc.PinTunnelNeighbor(ctx, peer, mac); err != nil {
						klog.ErrorS(err, "Cannot pin tunnel neighbour", "peer", peer)
						return
					}
					purger.Changed()
				}); err != nil {
					// The periodic pin still corrects a peer's MAC change.
					klog.ErrorS(err, "Cannot follow the kernel's neighbour changes; a peer's new MAC is pinned within 10 minutes", "link", link)
				}
			})
		}
		keepNeighborsPinned(ctx, neighborRepinInterval, d.repinNow, peers, func(peer net.IP) {
			// No purge: the pin keeps the same MAC, and a restarted
			// ovs-vswitchd has no cached datapath flow.
			pinTunnelNeighbor(ctx, o, nc, peer, func() {})
		})
		wg.Wait()
	}), nil
}

// neighborRepinInterval is how often the agent pins every remote node's
// tunnel neighbour again. ovs-vswitchd ages even entries set with
// tnl/neigh/set (at most an hour: nodeinit sets the longest aging OVS
// accepts), and an expired entry turns the cached tunnel flows to that node
// into drops with no ARP sent (ENVIRONMENT.md: the neighbour black hole).
// Pinning once when the route is installed lasted an hour.
const neighborRepinInterval = 10 * time.Minute

// keepNeighborsPinned calls pin for every remote node IP peers returns,
// every interval and whenever now fires (ovs-vswitchd restarted: it forgot
// every entry), until ctx ends.
func keepNeighborsPinned(ctx context.Context, interval time.Duration, now <-chan struct{}, peers func() []net.IP, pin func(net.IP)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		reason := "periodic"
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-now:
			reason = "ovs-vswitchd reconnected"
		}
		ips := peers()
		klog.V(2).InfoS("Pinning the tunnel neighbours again", "reason", reason, "peers", len(ips))
		for _, ip := range ips {
			pin(ip)
		}
	}
}

// followNeighborChanges pins a peer's tunnel neighbour again as soon as the
// kernel's entry for it on the underlay link (linkIndex) takes a new MAC. A
// peer's address answers with a new MAC once its antrea-ovs moved it from
// the uplink to br-phy, and this agent may have pinned the old one before:
// the peer's Node, and so its route, can be known before the peer's agent
// moved its address. Such a pin black-holes the tunnel to that peer (br-phy
// does not pop packets sent to the uplink's MAC) until the next periodic pin.
// The peer's gratuitous ARP, or the kernel's next resolution, updates the
// kernel's entry: that update is the signal. Updates of entries that are not
// a peer's (isPeer), or that only change state, pin nothing.
func followNeighborChanges(ctx context.Context, linkIndex int, updates <-chan netlink.NeighUpdate, isPeer func(net.IP) bool, pin func(net.IP, net.HardwareAddr)) {
	last := map[string]string{}
	for {
		var u netlink.NeighUpdate
		var ok bool
		select {
		case <-ctx.Done():
			return
		case u, ok = <-updates:
			if !ok {
				return
			}
		}
		if u.Type != unix.RTM_NEWNEIGH || u.LinkIndex != linkIndex || len(u.HardwareAddr) != 6 ||
			u.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) != 0 || !isPeer(u.IP) {
			continue
		}
		ip, mac := u.IP.String(), u.HardwareAddr.String()
		if last[ip] == mac {
			continue
		}
		klog.InfoS("A peer node's underlay address has a new MAC: pinning its tunnel neighbour", "peer", ip, "mac", mac, "before", last[ip])
		last[ip] = mac
		pin(u.IP, u.HardwareAddr)
	}
}

// followPeerNeighbors subscribes to the kernel's neighbour updates and runs
// followNeighborChanges on those of link until ctx ends; it returns at once
// if it cannot subscribe.
func followPeerNeighbors(ctx context.Context, link string, isPeer func(net.IP) bool, pin func(net.IP, net.HardwareAddr)) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return err
	}
	updates := make(chan netlink.NeighUpdate, 64)
	if err := netlink.NeighSubscribeWithOptions(updates, ctx.Done(), netlink.NeighSubscribeOptions{
		ErrorCallback: func(err error) { klog.ErrorS(err, "Neighbour updates", "link", link) },
	}); err != nil {
		return err
	}
	followNeighborChanges(ctx, l.Attrs().Index, updates, isPeer, pin)
	return nil
}
