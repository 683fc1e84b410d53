package app

import (
	"context"
	"os"

	"k8s.io/client-go/kubernetes"
	// client-go's workqueue metrics (depth, adds, latency of every
	// computation queue) in the registry /metrics serves.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	"antrea.io/antrea/pkg/apiserver"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/controller/metrics"
	"antrea.io/antrea/pkg/controller/monitor"
	"antrea.io/antrea/pkg/controller/networkpolicy"
)

// registerMetrics adds the controller's metrics to /metrics of its server
// when enablePrometheusMetrics is on.
func registerMetrics(o *Options, np *networkpolicy.Controller, stores *apiserver.Stores) {
	if !o.EnablePrometheusMetrics {
		return
	}
	metrics.Register(func() metrics.Counts {
		return metrics.Counts{
			Queues:          np.QueueLengths(),
			NetworkPolicies: len(stores.NetworkPolicies.List()),
			AddressGroups:   len(stores.AddressGroups.List()),
			AppliedToGroups: len(stores.AppliedToGroups.List()),
		}
	})
}

// runMonitor keeps the AntreaControllerInfo (pkg/controller/monitor) until
// ctx ends.
func runMonitor(ctx context.Context, o *Options, crd versioned.Interface, kube kubernetes.Interface, stores *apiserver.Stores) {
	m := monitor.New(crd, kube, monitor.Config{PodName: os.Getenv("POD_NAME"), PodNamespace: os.Getenv("POD_NAMESPACE"),
		NodeName: os.Getenv("NODE_NAME"), ServiceNamespace: "kube-system", ServiceName: "antrea",
		APIPort: o.APIServer.SecureServing.BindPort}, func() monitor.Counts {
		return monitor.Counts{
			NetworkPolicies: len(stores.NetworkPolicies.List()),
			AddressGroups:   len(stores.AddressGroups.List()),
			AppliedToGroups: len(stores.AppliedToGroups.List()),
			// Every agent watches its slice of the NetworkPolicies.
			ConnectedAgents: stores.NetworkPolicies.GetWatchersNum(),
		}
	})
	m.Run(ctx)
}
