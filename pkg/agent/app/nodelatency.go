package app

import (
	"context"

	"antrea.io/antrea/pkg/agent/nodelatency"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// setupNodeLatencyMonitor runs the latency probes (pkg/agent/nodelatency)
// when the NodeLatencyMonitor gate is on: while the NodeLatencyMonitor
// exists, this Node pings the others' gateway IPs and reports
// NodeLatencyStats to antrea-controller.
func setupNodeLatencyMonitor(ctx context.Context, d *deps) (component, error) {
	if !d.o.FeatureGates[agentconfig.NodeLatencyMonitor] {
		return nil, nil
	}
	crd, err := versioned.NewForConfig(d.kubeConfig)
	if err != nil {
		return nil, err
	}
	f := crdinformers.NewSharedInformerFactory(crd, 0)
	monitors := f.Crd().V1alpha1().NodeLatencyMonitors()
	nodes := d.informers.Core().V1().Nodes() // registered by "node routes", started by "informers"
	m := nodelatency.NewMonitor(nodelatency.Config{NodeName: d.o.NodeName,
		Nodes: nodes.Lister(), NodesSynced: nodes.Informer().HasSynced,
		Monitors: monitors.Lister(), MonitorsSynced: monitors.Informer().HasSynced,
		Reporter: d.controlplane.StatsV1alpha1().NodeLatencyStatses()}) // antrea-controller, directly
	f.Start(ctx.Done())
	return loop(func(ctx context.Context) {
		m.Run(ctx)
		f.Shutdown()
	}), nil
}
