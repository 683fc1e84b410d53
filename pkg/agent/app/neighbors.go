package app

import (
	"context"
	"net"
	"time"

	"k8s.io/klog/v2"
)

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
