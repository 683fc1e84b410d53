package app

import (
	"context"
	"time"

	"antrea.io/antrea/pkg/agent/multicast"
)

// MulticastOptions are the multicast section's settings.
type MulticastOptions struct {
	// QueryVersions are multicast.igmpQueryVersions.
	QueryVersions []int
	// QueryInterval is multicast.igmpQueryInterval.
	QueryInterval time.Duration
}

// setupMulticast runs the multicast controller (pkg/agent/multicast) when
// featureGates.Multicast and multicast.enable are on: IGMP snooping of the
// local Pods, this Node's groups published in its annotation, and the
// groups' flows.
func setupMulticast(ctx context.Context, d *deps) (component, error) {
	if d.o.Multicast == nil {
		return nil, nil
	}
	nc := d.nc
	c := multicast.NewController(multicast.Config{
		NodeName: d.o.NodeName, Kube: d.kube, Nodes: d.informers.Core().V1().Nodes().Informer(),
		Interfaces: d.store, Flows: d.flows, IO: d.packets,
		GatewayIP: d.gatewayIP, GatewayMAC: nc.Gateway.MAC,
		QueryInterval: d.o.Multicast.QueryInterval, QueryVersions: d.o.Multicast.QueryVersions,
		Purge: d.purger.Sync,
	})
	if d.policies != nil {
		c.SetPolicy(d.policies)
	}
	d.informers.Start(ctx.Done())
	d.api.handle(multicast.PodStatsPath, c.PodStatsHandler())
	d.multicast = c
	return loop(c.Run), nil
}
