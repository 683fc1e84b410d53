package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	npcontroller "antrea.io/antrea/pkg/agent/controller/networkpolicy"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/monitor"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// startMonitor keeps the agent's AntreaAgentInfo (pkg/agent/monitor) until
// ctx ends and returns what the agent API's /agentinfo answers.
func startMonitor(ctx context.Context, o Options, client versioned.Interface, ovsdb *ovsconfig.Connection, ofc *binding.Client,
	store interfacestore.InterfaceStore, policies *npcontroller.Controller, podCIDRs []*net.IPNet, bridge string) func(context.Context) (any, error) {
	subnets := make([]string, 0, len(podCIDRs))
	for _, c := range podCIDRs {
		subnets = append(subnets, c.String())
	}
	m := monitor.New(client, monitor.Config{NodeName: o.NodeName, PodName: os.Getenv("POD_NAME"), PodNamespace: os.Getenv("POD_NAMESPACE"),
		NodeSubnets: subnets, BridgeName: bridge, APIPort: o.APIPort}, monitor.Sources{
		OVSVersion: func(ctx context.Context) (string, error) {
			if !ovsdb.Connected() {
				return "", fmt.Errorf("not connected to ovsdb-server at %s", ovsdb.Endpoint())
			}
			return ovsdb.GetOVSVersion(ctx)
		},
		FlowTable: func(ctx context.Context) (map[string]int32, error) {
			conn, err := ofc.Conn(ctx)
			if err != nil {
				return nil, err
			}
			stats, err := conn.TableStats(ctx)
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
	go m.Run(ctx)
	return m.Info
}
