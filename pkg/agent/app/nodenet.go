package app

import (
	"context"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/cniserver"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/nodenet"
)

// setupHostPorts installs again, in the node's netfilter table, the
// hostPorts of the pods recorded in the interface store (OVSDB
// external_ids), before the CNI server takes new pods. If that fails the
// agent runs on, and the CNI server refuses pods with hostPorts (nil).
func setupHostPorts(ctx context.Context, table *nodenet.Table, gateway string, store interfacestore.InterfaceStore) cniserver.HostPortInstaller {
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
