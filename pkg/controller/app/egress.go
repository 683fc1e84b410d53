package app

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"antrea.io/antrea/pkg/apiserver"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdscheme "antrea.io/antrea/pkg/client/clientset/versioned/scheme"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/controller/admission"
	"antrea.io/antrea/pkg/controller/egress"
	"antrea.io/antrea/pkg/controller/externalippool"
	"antrea.io/antrea/pkg/controller/serviceexternalip"
)

// setupExternalIPs builds the ExternalIPPool allocator and its consumers:
// the Egress controller (featureGates.Egress) and the LoadBalancer Service
// IP controller (featureGates.ServiceExternalIP), and returns what runs
// them (nil when both gates are off). The admission of Egresses and
// ExternalIPPools is served whether the gates are on or off (registered by
// the caller): the chart's webhook configuration names them either way.
func setupExternalIPs(ctx context.Context, o *Options, kubeClient kubernetes.Interface, crdClient versioned.Interface,
	kube informers.SharedInformerFactory, crd crdinformers.SharedInformerFactory, stores *apiserver.Stores) (func(context.Context), error) {
	if !o.EnableEgress && !o.EnableServiceExternalIP {
		return nil, nil
	}
	// Events go on Egresses, ExternalIPPools and Services: both schemes.
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, crdscheme.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("event scheme: %w", err)
		}
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kubeClient.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "antrea-controller"})

	pools, err := externalippool.NewController(crdClient, crd.Crd().V1beta1().ExternalIPPools(), recorder)
	if err != nil {
		return nil, fmt.Errorf("the ExternalIPPool controller: %w", err)
	}
	var egresses *egress.Controller
	if o.EnableEgress {
		egresses, err = egress.NewController(crdClient, crd.Crd().V1beta1().Egresses(), kube.Core().V1().Pods().Informer(),
			kube.Core().V1().Namespaces().Informer(), pools, stores.EgressGroups, recorder)
		if err != nil {
			return nil, fmt.Errorf("the Egress controller: %w", err)
		}
	}
	var services *serviceexternalip.Controller
	if o.EnableServiceExternalIP {
		services, err = serviceexternalip.NewController(kubeClient, kube.Core().V1().Services(), pools, recorder, o.DefaultExternalIPPool)
		if err != nil {
			return nil, fmt.Errorf("the ServiceExternalIP controller: %w", err)
		}
	}
	return func(ctx context.Context) {
		defer broadcaster.Shutdown()
		go pools.Run(ctx)
		if services != nil {
			go services.Run(ctx, o.Workers)
		}
		if egresses != nil {
			go egresses.Run(ctx, o.Workers)
		}
		<-ctx.Done()
	}, nil
}

// egressAdmission returns the webhooks of Egress and ExternalIPPool (a
// pool's IPs held by Egresses and by LoadBalancer Services count).
func egressAdmission(crdClient versioned.Interface, crd crdinformers.SharedInformerFactory, kube informers.SharedInformerFactory) (*admission.EgressValidator, error) {
	lookup, err := admission.NewInformerIPLookup(crdClient, crd.Crd().V1beta1().ExternalIPPools(), crd.Crd().V1beta1().Egresses(),
		kube.Core().V1().Services())
	if err != nil {
		return nil, err
	}
	return admission.NewEgressValidator(lookup), nil
}
