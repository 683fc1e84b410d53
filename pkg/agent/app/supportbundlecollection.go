package app

import (
	"context"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"antrea.io/antrea/pkg/agent/supportbundlecollection"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdscheme "antrea.io/antrea/pkg/client/clientset/versioned/scheme"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/supportbundle"
)

// setupSupportBundleCollection runs SupportBundleCollection
// (pkg/agent/supportbundlecollection) when its feature gate is on: the
// collections that antrea-controller lists this Node in, each collected
// with the agent API's /supportbundle collector and uploaded.
func setupSupportBundleCollection(ctx context.Context, d *deps) (component, error) {
	if !d.o.FeatureGates[agentconfig.SupportBundleCollection] {
		return nil, nil
	}
	crd, err := versioned.NewForConfig(d.kubeConfig)
	if err != nil {
		return nil, err
	}
	f := crdinformers.NewSharedInformerFactory(crd, 0)
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.kube.CoreV1().Events("")})
	c, err := supportbundlecollection.NewController(supportbundlecollection.Config{NodeName: d.o.NodeName, Client: crd, Kube: d.kube,
		Informer: f.Crd().V1alpha1().SupportBundleCollections(),
		Recorder: events.NewRecorder(crdscheme.Scheme, corev1.EventSource{Component: "antrea-agent", Host: d.o.NodeName}),
		Collect: func(ctx context.Context, since time.Time, w io.Writer) error {
			collector := supportBundleCollector(d.o, supportbundle.DefaultTailBytes)
			collector.LogsSince = since
			_, err := collector.Collect(ctx, w)
			return err
		}})
	if err != nil {
		events.Shutdown()
		return nil, err
	}
	f.Start(ctx.Done())
	return loop(func(ctx context.Context) {
		c.Run(ctx)
		f.Shutdown()
		events.Shutdown()
	}), nil
}
