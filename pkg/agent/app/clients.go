package app

import (
	"context"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/controllerclient"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/config"
)

// setupClients makes the Kubernetes client and its informer factory.
func setupClients(_ context.Context, d *deps) (component, error) {
	cfg, err := config.KubeRESTConfig(d.o.Kubeconfig, d.o.KubeAPIServerOverride, "antrea-agent")
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	crd, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	d.kubeConfig, d.kube, d.crd = cfg, client, crd
	d.informers = informers.NewSharedInformerFactory(client, 0)
	return nil, nil
}

// setupInformers starts the informers the parts before it registered
// (node routes, AntreaProxy, its health port). They stop, and are waited
// for, before those parts stop.
func setupInformers(ctx context.Context, d *deps) (component, error) {
	d.informers.Start(ctx.Done())
	return onStop(d.informers.Shutdown), nil
}

// setupControllerClient makes the client of antrea-controller's
// controlplane API: it dials the controller's endpoint directly (not
// through kube-apiserver's aggregation), verifies it with the CA the
// controller publishes, and authenticates with the agent's own
// credentials (its ServiceAccount token file in a Pod). It follows the
// controller's address and CA until the agent stops.
func setupControllerClient(_ context.Context, d *deps) (component, error) {
	if d.o.ControlplaneThroughKubeAPIServer {
		klog.InfoS("Reaching antrea-controller through kube-apiserver's aggregation layer", "flag", "--controlplane-through-kube-apiserver")
		d.controlplane = d.crd
		return nil, nil
	}
	src := controllerclient.NewSource(d.kube)
	controlplane, err := src.Clientset(d.kubeConfig)
	if err != nil {
		return nil, err
	}
	d.controlplane = controlplane
	return loop(src.Run), nil
}
