package app

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdscheme "antrea.io/antrea/pkg/client/clientset/versioned/scheme"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/controller/supportbundlecollection"
)

// setupSupportBundleCollection builds the SupportBundleCollection
// controller (featureGates.SupportBundleCollection) and returns what runs
// it (nil when the gate is off). Its admission is served either way (the
// chart's webhook configuration names it).
func setupSupportBundleCollection(ctx context.Context, o *Options, kubeClient kubernetes.Interface, crdClient versioned.Interface,
	kube informers.SharedInformerFactory, crd crdinformers.SharedInformerFactory) (func(context.Context), error) {
	if !o.EnableSupportBundleCollection {
		return nil, nil
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kubeClient.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(crdscheme.Scheme, corev1.EventSource{Component: "antrea-controller"})
	c, err := supportbundlecollection.NewController(crdClient, crd.Crd().V1alpha1().SupportBundleCollections(),
		kube.Core().V1().Nodes().Informer(), recorder)
	if err != nil {
		broadcaster.Shutdown()
		return nil, fmt.Errorf("the SupportBundleCollection controller: %w", err)
	}
	return func(ctx context.Context) {
		defer broadcaster.Shutdown()
		c.Run(ctx)
	}, nil
}
