package app

import (
	"context"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/cniserver"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/nodenet"
)

// setupHostPorts opens the node's netfilter table (pkg/agent/nodenet) and
// installs again the hostPorts of the pods recorded in the interface store
// (OVSDB external_ids), before the CNI server takes new pods. Without nft
// the agent runs on, and the CNI server refuses pods with hostPorts (nil).
func setupHostPorts(ctx context.Context, gateway string, store interfacestore.InterfaceStore) cniserver.HostPortInstaller {
	table, err := nodenet.New()
	if err != nil {
		klog.ErrorS(err, "The node's netfilter is not available: pods with hostPorts will be refused")
		return nil
	}
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
