package app

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/interfacestore"
)

// setupPodInterfaces rebuilds the interface store from OVSDB (the ports'
// external_ids) and puts existing pods' flows back, before the CNI server
// takes new pods. The agent API's /podinterfaces and the local pod count
// read the store.
func setupPodInterfaces(ctx context.Context, d *deps) (component, error) {
	ports, err := d.bridge.GetPortList(ctx)
	if err != nil {
		return nil, err
	}
	store := interfacestore.NewInterfaceStore()
	store.Initialize(interfacestore.InterfaceConfigsFromOVSPorts(ports))
	for _, iface := range store.GetInterfacesByType(interfacestore.ContainerInterface) {
		if iface.OVSPortConfig == nil || iface.OFPort <= 0 {
			continue
		}
		if err := d.flows.InstallPodFlows(iface.InterfaceName, iface.IPs, iface.MAC, uint32(iface.OFPort)); err != nil {
			return nil, fmt.Errorf("restore flows of pod %s/%s: %w", iface.PodNamespace, iface.PodName, err)
		}
	}
	klog.InfoS("Restored pod interfaces from OVSDB", "pods", store.GetContainerInterfaceNum())
	d.store = store
	d.api.querier.Interfaces = store
	d.api.metrics.LocalPods = store.GetContainerInterfaceNum
	return nil, nil
}
