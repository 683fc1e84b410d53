package app

import (
	"context"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/cniserver"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// setupCNIServer serves the CNI (pkg/agent/cniserver) and reports the agent
// ready: last, once the pipeline, existing pods' flows and hostPorts are in
// place.
func setupCNIServer(_ context.Context, d *deps) (component, error) {
	o := d.o
	cni, err := cniserver.New(cniserver.Config{
		SocketPath:  o.CNISocket,
		NodeName:    o.NodeName,
		PodCIDRs:    d.podCIDRs,
		MTU:         d.nc.PodMTU,
		IPAMDataDir: o.IPAMDataDir,
		// networkPolicyOnly: chained after the primary CNI, which made
		// the pod's interface and addresses.
		Chained:     o.TrafficEncapMode == agentconfig.EncapModeNetworkPolicyOnly,
		GatewayName: d.nc.Gateway.Name,
	}, cniserver.Deps{OVS: d.bridge, Flows: d.flows, InterfaceStore: d.store, PodEvents: d.podEvents, HostPorts: d.hostPorts})
	if err != nil {
		return nil, err
	}
	if o.CNIConfDir != "" {
		if err := cni.WriteConfList(o.CNIConfDir); err != nil {
			return nil, err
		}
	}
	cni.SetReady()
	klog.InfoS("Agent ready", "node", o.NodeName, "podCIDRs", d.podCIDRs, "gateway", d.gatewayIP, "flowRound", d.round,
		"tunnel", d.nc.TunnelType, "datapath", d.nc.DatapathType, "proxy", o.EnableProxy)
	return runFunc(cni.Run), nil
}
