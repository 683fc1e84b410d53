package app

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"antrea.io/antrea/pkg/agent/monitor"
)

// setupMonitor keeps the agent's AntreaAgentInfo (pkg/agent/monitor); the
// agent API's /agentinfo answers what it holds.
func setupMonitor(_ context.Context, d *deps) (component, error) {
	m := newMonitor(d)
	d.api.querier.AgentInfo = m.Info
	return loop(m.Run), nil
}

// newMonitor is the agent's AntreaAgentInfo keeper, reading the parts
// before it.
func newMonitor(d *deps) *monitor.Monitor {
	o, ovsdb, store, policies := d.o, d.ovsdb, d.store, d.policies
	subnets := make([]string, 0, len(d.podCIDRs))
	for _, c := range d.podCIDRs {
		subnets = append(subnets, c.String())
	}
	return monitor.New(d.crd, monitor.Config{NodeName: o.NodeName, PodName: os.Getenv("POD_NAME"), PodNamespace: os.Getenv("POD_NAMESPACE"),
		NodeSubnets: subnets, BridgeName: d.nc.BridgeName, APIPort: o.APIPort}, monitor.Sources{
		OVSVersion: func(ctx context.Context) (string, error) {
			if !ovsdb.Connected() {
				return "", fmt.Errorf("not connected to ovsdb-server at %s", ovsdb.Endpoint())
			}
			return ovsdb.GetOVSVersion(ctx)
		},
		FlowTable: func(ctx context.Context) (map[string]int32, error) {
			stats, err := d.tableStats(ctx)
			if err != nil {
				return nil, err
			}
			out := map[string]int32{}
			for _, t := range stats {
				if t.ActiveCount > 0 {
					out[strconv.Itoa(int(t.TableID))] = int32(t.ActiveCount)
				}
			}
			return out, nil
		},
		// Connected to the controller means what it means to policy: every
		// watcher of the controlplane API has its watch open (as upstream).
		// A probe request instead would fail on any 503 kube-apiserver's
		// aggregator answers while it re-checks the APIService, with the
		// watches undisturbed.
		ControllerUp: func(context.Context) error { return policies.ControllerConnected() },
		LocalPods:    store.GetContainerInterfaceNum,
		Policies: func() monitor.PolicyCounts {
			c := policies.Counts()
			return monitor.PolicyCounts{NetworkPolicies: c.NetworkPolicies, AddressGroups: c.AddressGroups, AppliedToGroups: c.AppliedToGroups}
		},
	})
}
