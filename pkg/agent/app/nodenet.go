package app

import (
	"context"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/cniserver"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/nodenet"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// setupNodeNetfilter sets up the parts of the node's netfilter table
// (pkg/agent/nodenet) that exist from the start: the masquerade of pod
// traffic leaving the node (in noEncap and hybrid sparing the other nodes' pods, whose
// CIDRs the node routes keep in its set; none with noSNAT), and the
// hostPorts of existing pods. In networkPolicyOnly the primary CNI masquerades, if anyone.
func setupNodeNetfilter(ctx context.Context, d *deps) (component, error) {
	nodeNet, err := nodenet.New()
	if err != nil {
		return nil, err
	}
	d.nodeNet = nodeNet
	switch {
	case d.o.TrafficEncapMode == agentconfig.EncapModeNetworkPolicyOnly:
		// The primary CNI owns pod traffic leaving the node, its SNAT
		// included (upstream's policy-only mode masquerades nothing).
		err = nodeNet.NoMasquerade(ctx)
	case !routedPeers(d.o.TrafficEncapMode):
		err = nodeNet.Masquerade(ctx, d.localPodPrefixes(), d.nc.Gateway.Name)
	case d.o.NoSNAT:
		// Both families: pod traffic leaves with its pod address.
		err = nodeNet.NoMasquerade(ctx)
	default:
		// Each family's rule spares its set of the cluster's pod CIDRs,
		// which the route controller fills as peers come and go.
		cidrs := d.localPodPrefixes()
		if err = nodeNet.MasqueradeRouted(ctx, cidrs, d.nc.Gateway.Name); err == nil {
			err = nodeNet.SetClusterPodCIDRs(ctx, cidrs)
		}
	}
	if err != nil {
		return nil, err
	}
	d.hostPorts = restoreHostPorts(ctx, nodeNet, d.nc.Gateway.Name, d.store)
	return nil, nil
}

// restoreHostPorts installs again, in the node's netfilter table, the
// hostPorts of the pods recorded in the interface store (OVSDB
// external_ids), before the CNI server takes new pods. If that fails the
// agent runs on, and the CNI server refuses pods with hostPorts (nil).
func restoreHostPorts(ctx context.Context, table *nodenet.Table, gateway string, store interfacestore.InterfaceStore) cniserver.HostPortInstaller {
	hp := table.HostPorts(nodenet.HostPortConfig{GatewayName: gateway})
	pods := map[string]nodenet.PodHostPorts{}
	for _, cfg := range store.GetInterfacesByType(interfacestore.ContainerInterface) {
		if len(cfg.PortMappings) > 0 {
			pods[cniserver.HostPortKey(cfg)] = cniserver.PodHostPorts(cfg)
		}
	}
	if err := hp.Restore(ctx, pods); err != nil {
		klog.ErrorS(err, "Cannot install the hostPorts of existing pods: pods with hostPorts will be refused")
		return nil
	}
	return hp
}
