package app

import (
	// client-go's workqueue metrics (depth, adds, latency of every
	// computation queue) in the registry /metrics serves.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	"antrea.io/antrea/pkg/apiserver"
	"antrea.io/antrea/pkg/controller/metrics"
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
