// Package app runs antrea-controller: Kubernetes informers, the NetworkPolicy
// computation writing into the controlplane stores, and the aggregated API
// server that serves those stores to agents.
package app

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"antrea.io/antrea/pkg/apiserver"
	"antrea.io/antrea/pkg/config"
	"antrea.io/antrea/pkg/controller/networkpolicy"
)

// APIServiceName is the APIService the controller serves and keeps the CA bundle of.
const APIServiceName = "v1beta2.controlplane.antrea.io"

// Run starts everything and blocks until ctx ends or the API server fails.
func Run(ctx context.Context, o *Options) error {
	cfg, err := config.KubeRESTConfig(o.Kubeconfig, o.KubeAPIServerOverride, "antrea-controller")
	if err != nil {
		return err
	}
	if err := o.completeServing(); err != nil {
		return err
	}
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	informerFactory := informers.NewSharedInformerFactory(kubeClient, 0)
	stores := apiserver.NewStores()

	npController := networkpolicy.NewController(kubeClient, informerFactory,
		stores.AddressGroups, stores.AppliedToGroups, stores.NetworkPolicies)

	server, err := apiserver.New(o.APIServer, o.Kubeconfig, stores, informerFactory)
	if err != nil {
		return err
	}
	if o.SyncAPIServiceCA {
		aggClient, err := aggregatorclient.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("creating the aggregator client: %w", err)
		}
		ca, err := o.caBundle(server)
		if err != nil {
			return err
		}
		go syncAPIServiceCA(ctx, aggClient, ca)
	}

	informerFactory.Start(ctx.Done())
	go npController.Run(ctx, o.Workers)
	klog.InfoS("Started antrea-controller", "workers", o.Workers)
	return server.Run(ctx)
}

// syncAPIServiceCA keeps the APIService's caBundle equal to the serving CA:
// the APIService may be created after the controller starts (and a
// self-signed CA changes whenever the cert dir is fresh), so it retries.
func syncAPIServiceCA(ctx context.Context, client aggregatorclient.Interface, ca []byte) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := SetAPIServiceCABundle(ctx, client, APIServiceName, ca); err != nil {
			klog.ErrorS(err, "Could not set the APIService CA bundle", "apiservice", APIServiceName)
		}
	}, 30*time.Second)
}

// SetAPIServiceCABundle writes ca into an APIService's caBundle if it differs.
// A missing APIService is not an error: there is nothing to update yet.
func SetAPIServiceCABundle(ctx context.Context, client aggregatorclient.Interface, name string, ca []byte) error {
	// kube-apiserver updates the APIService's status concurrently: retry on conflict.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := client.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("getting APIService %s: %w", name, err)
		}
		if string(svc.Spec.CABundle) == string(ca) && !svc.Spec.InsecureSkipTLSVerify {
			return nil
		}
		svc = svc.DeepCopy()
		svc.Spec.CABundle = ca
		svc.Spec.InsecureSkipTLSVerify = false
		if _, err := client.ApiregistrationV1().APIServices().Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating the caBundle of APIService %s: %w", name, err)
		}
		klog.InfoS("Set the APIService CA bundle", "apiservice", name)
		return nil
	})
}
