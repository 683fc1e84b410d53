package app

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"antrea.io/antrea/pkg/agent/traceflow"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
)

// setupTraceflow runs Traceflow (pkg/agent/traceflow): the flows of running
// Traceflows' tags, the injected packet of those whose source Pod is here,
// and this node's observations.
func setupTraceflow(ctx context.Context, d *deps) (component, error) {
	// Its own clients: a Traceflow makes a few requests per Node in a
	// burst, which client-go's default limit (5/s, burst 10), shared with
	// the policy status reports, spread over most of a second on the lab.
	cfg := rest.CopyConfig(d.kubeConfig)
	cfg.QPS, cfg.Burst = traceflow.ClientQPS, traceflow.ClientBurst
	crd, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	nc := d.nc
	f := crdinformers.NewSharedInformerFactory(crd, 0)
	tracer := traceflow.NewController(traceflow.Config{NodeName: d.o.NodeName, Client: crd, Kube: kube,
		Informer: f.Crd().V1beta1().Traceflows(), Flows: d.flows, IO: d.packets, Interfaces: d.store,
		Rules: d.policies, Ports: traceflow.Ports{Gateway: uint32(nc.Gateway.OFPort), Tunnel: uint32(nc.TunnelOFPort)},
		GatewayMAC: nc.Gateway.MAC})
	f.Start(ctx.Done())
	return loop(func(ctx context.Context) {
		tracer.Run(ctx)
		f.Shutdown()
	}), nil
}
