package app

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"antrea.io/antrea/pkg/agent/packetcapture"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdscheme "antrea.io/antrea/pkg/client/clientset/versioned/scheme"
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
	// Warning Events on the captures whose upload failed.
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.kube.CoreV1().Events("")})
	c := packetcapture.NewController(packetcapture.Config{NodeName: d.o.NodeName, PodName: os.Getenv("POD_NAME"),
		Namespace: os.Getenv("POD_NAMESPACE"),
		Recorder:  events.NewRecorder(crdscheme.Scheme, corev1.EventSource{Component: "antrea-agent", Host: d.o.NodeName}),
		Client:    crd, Kube: d.kube, Informer: f.Crd().V1alpha1().PacketCaptures(), Flows: d.flows, IO: d.packets,
		Interfaces: d.store, Datapath: d.purger})
	d.api.handle(packetcapture.APIPath, c.Handler())
	f.Start(ctx.Done())
	return loop(func(ctx context.Context) {
		c.Run(ctx)
		f.Shutdown()
		events.Shutdown()
	}), nil
}
