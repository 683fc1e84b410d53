package app

import (
	"context"
	"os"

	"antrea.io/antrea/pkg/agent/packetcapture"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// setupPacketCapture runs PacketCapture (pkg/agent/packetcapture) when its
// feature gate is on: the captures whose capture point is a Pod of this
// Node, and the agent API's /packetcaptures/NAME serving their files.
func setupPacketCapture(ctx context.Context, d *deps) (component, error) {
	if !d.o.FeatureGates[agentconfig.PacketCapture] {
		return nil, nil
	}
	crd, err := versioned.NewForConfig(d.kubeConfig)
	if err != nil {
		return nil, err
	}
	f := crdinformers.NewSharedInformerFactory(crd, 0)
	c := packetcapture.NewController(packetcapture.Config{NodeName: d.o.NodeName, PodName: os.Getenv("POD_NAME"),
		Client: crd, Kube: d.kube, Informer: f.Crd().V1alpha1().PacketCaptures(), Flows: d.flows, IO: d.packets,
		Interfaces: d.store, Datapath: d.purger})
	d.api.handle(packetcapture.APIPath, c.Handler())
	f.Start(ctx.Done())
	return loop(func(ctx context.Context) {
		c.Run(ctx)
		f.Shutdown()
	}), nil
}
