package app

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"antrea.io/antrea/pkg/apiserver"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdscheme "antrea.io/antrea/pkg/client/clientset/versioned/scheme"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/controller/admission"
	"antrea.io/antrea/pkg/controller/egress"
	"antrea.io/antrea/pkg/controller/externalippool"
)

// setupEgress builds the ExternalIPPool allocator and the Egress controller
// (featureGates.Egress) and returns what runs them. The admission of Egresses
// and ExternalIPPools is served whether the gate is on or off (registered by
// the caller): the chart's webhook configuration names them either way.
func setupEgress(ctx context.Context, kubeClient kubernetes.Interface, crdClient versioned.Interface,
	kube informers.SharedInformerFactory, crd crdinformers.SharedInformerFactory, stores *apiserver.Stores, workers int) (func(context.Context), error) {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kubeClient.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(crdscheme.Scheme, corev1.EventSource{Component: "antrea-controller"})

	pools, err := externalippool.NewController(crdClient, crd.Crd().V1beta1().ExternalIPPools(), recorder)
	if err != nil {
		return nil, fmt.Errorf("the ExternalIPPool controller: %w", err)
	}
	egresses, err := egress.NewController(crdClient, crd.Crd().V1beta1().Egresses(), kube.Core().V1().Pods().Informer(),
		kube.Core().V1().Namespaces().Informer(), pools, stores.EgressGroups, recorder)
	if err != nil {
		return nil, fmt.Errorf("the Egress controller: %w", err)
	}
	return func(ctx context.Context) {
		defer broadcaster.Shutdown()
		go pools.Run(ctx)
		egresses.Run(ctx, workers)
	}, nil
}

// egressAdmission returns the webhooks of Egress and ExternalIPPool.
func egressAdmission(crdClient versioned.Interface, crd crdinformers.SharedInformerFactory) (*admission.EgressValidator, error) {
	lookup, err := admission.NewInformerIPLookup(crdClient, crd.Crd().V1beta1().ExternalIPPools(), crd.Crd().V1beta1().Egresses())
	if err != nil {
		return nil, err
	}
	return admission.NewEgressValidator(lookup), nil
}
