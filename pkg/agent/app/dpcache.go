package app

import (
	"context"

	"antrea.io/antrea/pkg/agent/dpcache"
)

// setupDatapathCache purges ovs-vswitchd's datapath flow cache when a part
// asks: after policy changes that narrow what is allowed, after the br-int
// hold is lifted, and after a tunnel neighbour is pinned (cached datapath
// flows carry the tunnel header with the neighbour's MAC built in).
func setupDatapathCache(_ context.Context, d *deps) (component, error) {
	d.purger = dpcache.New(dpcache.AppctlPurge(d.o.OVSRunDir))
	return loop(d.purger.Run), nil
}
