package app

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"antrea.io/antrea/pkg/agent/trafficcontrol"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdscheme "antrea.io/antrea/pkg/client/clientset/versioned/scheme"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// setupTrafficControl runs TrafficControl (pkg/agent/trafficcontrol) when
// its feature gate is on: this Node's Pods' traffic mirrored or redirected
// to the TrafficControls' ports.
func setupTrafficControl(ctx context.Context, d *deps) (component, error) {
	if !d.o.FeatureGates[agentconfig.TrafficControl] {
		return nil, nil
	}
	crd, err := versioned.NewForConfig(d.kubeConfig)
	if err != nil {
		return nil, err
	}
	cf := crdinformers.NewSharedInformerFactory(crd, 0)
	// This Node's Pods only.
	pods := informers.NewSharedInformerFactoryWithOptions(d.kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", d.o.NodeName).String()
		}))
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.kube.CoreV1().Events("")})
	c := trafficcontrol.NewController(trafficcontrol.Config{
		TrafficControls: cf.Crd().V1alpha2().TrafficControls().Informer(),
		Pods:            pods.Core().V1().Pods().Informer(),
		Namespaces:      d.informers.Core().V1().Namespaces().Informer(),
		Interfaces:      d.store, Bridge: d.bridge, Flows: d.flows, Purge: d.purger.Sync,
		Recorder: events.NewRecorder(crdscheme.Scheme, corev1.EventSource{Component: "antrea-agent", Host: d.o.NodeName})})
	cf.Start(ctx.Done())
	pods.Start(ctx.Done())
	d.informers.Start(ctx.Done())
	return loop(func(ctx context.Context) {
		c.Run(ctx)
		cf.Shutdown()
		pods.Shutdown()
		events.Shutdown()
	}), nil
}
