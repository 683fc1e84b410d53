// Package app runs antrea-controller: Kubernetes informers, the NetworkPolicy
// computation writing into the controlplane stores, the aggregated API
// server that serves those stores to agents, and, on the same HTTPS server,
// the admission webhooks of the Antrea-native policy API (crd.antrea.io),
// whose static Tiers it keeps, and, behind the Egress gate, the Egress IP
// allocation from ExternalIPPools and the EgressGroups served to agents,
// behind the ServiceExternalIP gate the allocation of LoadBalancer Service
// IPs from the same pools.
package app

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"antrea.io/antrea/pkg/apiserver"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/config"
	"antrea.io/antrea/pkg/controller/admission"
	"antrea.io/antrea/pkg/controller/networkpolicy"
	"antrea.io/antrea/pkg/controller/stats"
	"antrea.io/antrea/pkg/controller/tier"
	"antrea.io/antrea/pkg/controller/traceflow"
)

// APIServiceName is the APIService the controller serves and keeps the CA bundle of.
const APIServiceName = "v1beta2.controlplane.antrea.io"

// StatsAPIServiceName is the APIService of stats.antrea.io, also served by
// the controller.
const StatsAPIServiceName = "v1alpha1.stats.antrea.io"

// The webhook configurations of build/charts/antrea whose caBundle the
// controller keeps.
const (
	ValidatingWebhookName = "crdvalidator.antrea.io"
	MutatingWebhookName   = "crdmutator.antrea.io"
)

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
	if !o.EnableEgress {
		stores.EgressGroups = nil
	}

	npController, err := networkpolicy.NewController(kubeClient, informerFactory,
		stores.AddressGroups, stores.AppliedToGroups, stores.NetworkPolicies)
	if err != nil {
		return fmt.Errorf("NetworkPolicy controller: %w", err)
	}

	server, err := apiserver.New(o.APIServer, o.Kubeconfig, stores, informerFactory)
	if err != nil {
		return err
	}
	registerMetrics(o, npController, stores)

	// The Antrea-native policy API: admission and the static Tiers.
	crdClient, err := versioned.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the crd.antrea.io client: %w", err)
	}
	crdInformerFactory := crdinformers.NewSharedInformerFactory(crdClient, 0)
	crd := crdInformerFactory.Crd().V1beta1()
	lookup, err := admission.NewInformerLookup(crdClient, admission.Informers{
		Tiers: crd.Tiers(), ClusterNetworkPolicies: crd.ClusterNetworkPolicies(), NetworkPolicies: crd.NetworkPolicies(),
		ClusterGroups: crd.ClusterGroups(), Groups: crd.Groups(),
	})
	if err != nil {
		return err
	}
	for path, h := range admission.Handlers(admission.NewValidator(lookup, admission.ControllerUser()).WithL7NetworkPolicy(o.EnableL7NetworkPolicy)) {
		server.Handle(path, h)
	}
	egressValidator, err := egressAdmission(crdClient, crdInformerFactory, informerFactory)
	if err != nil {
		return err
	}
	for path, h := range admission.EgressHandlers(egressValidator) {
		server.Handle(path, h)
	}
	// Egress and ServiceExternalIP: IPs from ExternalIPPools, and the
	// EgressGroups the agents watch.
	runExternalIPs, err := setupExternalIPs(ctx, o, kubeClient, crdClient, informerFactory, crdInformerFactory, stores)
	if err != nil {
		return err
	}
	if err := npController.EnableAntreaPolicies(networkpolicy.AntreaPolicyConfig{
		CRDClient: crdClient, CRDInformers: crdInformerFactory, Realizer: stores.Statuses,
	}); err != nil {
		return err
	}
	// The SIG network-policy-api kinds, where their CRDs are served.
	sigInformers, err := npController.EnableServedSIGPolicies(cfg, kubeClient.Discovery())
	if err != nil {
		return err
	}
	// Policy stats: the aggregator knows the policies from their informers.
	for kind, inf := range map[stats.Kind]cache.SharedIndexInformer{
		stats.KindK8s:  informerFactory.Networking().V1().NetworkPolicies().Informer(),
		stats.KindANNP: crd.NetworkPolicies().Informer(),
		stats.KindACNP: crd.ClusterNetworkPolicies().Informer(),
	} {
		if err := stores.Stats.WatchPolicies(kind, inf); err != nil {
			return fmt.Errorf("watching %s for stats: %w", kind, err)
		}
	}
	// Multicast groups: a deleted Node's members drop out.
	if err := stores.Stats.WatchNodes(informerFactory.Core().V1().Nodes().Informer()); err != nil {
		return fmt.Errorf("watching Nodes for multicast groups: %w", err)
	}
	if err := stores.NodeLatency.Watch(informerFactory.Core().V1().Nodes().Informer(),
		crdInformerFactory.Crd().V1alpha1().NodeLatencyMonitors().Informer()); err != nil {
		return err
	}
	runSupportBundles, err := setupSupportBundleCollection(ctx, o, kubeClient, crdClient, informerFactory, crdInformerFactory)
	if err != nil {
		return err
	}
	tierKeeper, err := tier.NewKeeper(crdClient, crd.Tiers())
	if err != nil {
		return err
	}

	// Traceflow: validation, data-plane tags, timeouts and the final phase.
	// Its own client (see traceflow.ClientQPS): status writes of Traceflows
	// do not queue behind the policy status writer's.
	tfConfig := rest.CopyConfig(cfg)
	tfConfig.QPS, tfConfig.Burst = traceflow.ClientQPS, traceflow.ClientBurst
	tfClient, err := versioned.NewForConfig(tfConfig)
	if err != nil {
		return err
	}
	tfController := traceflow.NewController(tfClient, crd.Traceflows(), informerFactory.Core().V1().Pods().Informer(),
		informerFactory.Core().V1().Namespaces().Informer(), informerFactory.Core().V1().Services().Informer())

	if _, err := o.caBundle(server); err != nil {
		return err
	}
	caBundle := func() ([]byte, error) { return o.caBundle(server) }
	// The agents verify the controller with the CA it publishes.
	go publishCA(ctx, kubeClient, caBundle)
	if o.SyncAPIServiceCA {
		aggClient, err := aggregatorclient.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("creating the aggregator client: %w", err)
		}
		go syncCABundles(ctx, aggClient, kubeClient, caBundle)
	}

	informerFactory.Start(ctx.Done())
	crdInformerFactory.Start(ctx.Done())
	if sigInformers != nil {
		sigInformers.Start(ctx.Done())
	}
	go npController.Run(ctx, o.Workers)
	go tierKeeper.Run(ctx)
	go runMonitor(ctx, o, crdClient, kubeClient, stores)
	go tfController.Run(ctx)
	if runExternalIPs != nil {
		go runExternalIPs(ctx)
	}
	if runSupportBundles != nil {
		go runSupportBundles(ctx)
	}
	klog.InfoS("Started antrea-controller", "workers", o.Workers)
	return server.Run(ctx)
}

// syncCABundles keeps the caBundle of the APIService and of the webhook
// configurations equal to the serving CA: they may be created after the
// controller starts (and a self-signed CA changes whenever the cert dir is
// fresh), so it retries.
func syncCABundles(ctx context.Context, agg aggregatorclient.Interface, kube kubernetes.Interface, caBundle func() ([]byte, error)) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		ca, err := caBundle()
		if err != nil {
			klog.ErrorS(err, "Could not read the serving CA")
			return
		}
		for _, name := range []string{APIServiceName, StatsAPIServiceName} {
			if err := SetAPIServiceCABundle(ctx, agg, name, ca); err != nil {
				klog.ErrorS(err, "Could not set the APIService CA bundle", "apiservice", name)
			}
		}
		if err := SetWebhookCABundles(ctx, kube, ValidatingWebhookName, MutatingWebhookName, ca); err != nil {
			klog.ErrorS(err, "Could not set the admission webhooks' CA bundle",
				"validating", ValidatingWebhookName, "mutating", MutatingWebhookName)
		}
	}, 30*time.Second)
}

// SetWebhookCABundles writes ca into the caBundle of every webhook of the
// named ValidatingWebhookConfiguration and MutatingWebhookConfiguration where
// it differs. A missing configuration is not an error.
func SetWebhookCABundles(ctx context.Context, client kubernetes.Interface, validating, mutating string, ca []byte) error {
	regs := client.AdmissionregistrationV1()
	err := setCABundles(ctx, "ValidatingWebhookConfiguration", validating, ca,
		func() (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
			return regs.ValidatingWebhookConfigurations().Get(ctx, validating, metav1.GetOptions{})
		},
		func(c *admissionregistrationv1.ValidatingWebhookConfiguration) []*admissionregistrationv1.WebhookClientConfig {
			configs := make([]*admissionregistrationv1.WebhookClientConfig, len(c.Webhooks))
			for i := range c.Webhooks {
				configs[i] = &c.Webhooks[i].ClientConfig
			}
			return configs
		},
		func(c *admissionregistrationv1.ValidatingWebhookConfiguration) error {
			_, err := regs.ValidatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{})
			return err
		})
	if err != nil {
		return err
	}
	return setCABundles(ctx, "MutatingWebhookConfiguration", mutating, ca,
		func() (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
			return regs.MutatingWebhookConfigurations().Get(ctx, mutating, metav1.GetOptions{})
		},
		func(c *admissionregistrationv1.MutatingWebhookConfiguration) []*admissionregistrationv1.WebhookClientConfig {
			configs := make([]*admissionregistrationv1.WebhookClientConfig, len(c.Webhooks))
			for i := range c.Webhooks {
				configs[i] = &c.Webhooks[i].ClientConfig
			}
			return configs
		},
		func(c *admissionregistrationv1.MutatingWebhookConfiguration) error {
			_, err := regs.MutatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{})
			return err
		})
}

// setCABundles gets a webhook configuration (kind, name), sets the caBundle
// of each of its webhooks' client configs to ca, and updates it if any
// differed, retrying on conflict.
func setCABundles[T interface{ DeepCopyObject() runtime.Object }](ctx context.Context, kind, name string, ca []byte,
	get func() (T, error), clientConfigs func(T) []*admissionregistrationv1.WebhookClientConfig, update func(T) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := get()
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("getting %s %s: %w", kind, name, err)
		}
		c = c.DeepCopyObject().(T)
		changed := false
		for _, cc := range clientConfigs(c) {
			if string(cc.CABundle) != string(ca) {
				cc.CABundle, changed = ca, true
			}
		}
		if !changed {
			return nil
		}
		if err := update(c); err != nil {
			return fmt.Errorf("updating the caBundle of %s %s: %w", kind, name, err)
		}
		klog.InfoS("Set the admission webhook CA bundle", "kind", kind, "name", name)
		return nil
	})
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
