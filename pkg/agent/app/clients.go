package app

import (
	"context"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

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
	d.kubeConfig, d.kube = cfg, client
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
