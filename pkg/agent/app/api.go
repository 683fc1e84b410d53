package app

import (
	"context"
	"net/http"

	"k8s.io/klog/v2"
	// client-go's workqueue metrics (depth, adds, latency of the policy
	// queue) in the registry /metrics serves.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	agentmetrics "antrea.io/antrea/pkg/agent/metrics"
	"antrea.io/antrea/pkg/config"
)

// agentAPI is what the parts serve on the agent API (pkg/agent/apiserver)
// and at its /metrics: each part fills in what it owns before the part
// "agent API" serves it.
type agentAPI struct {
	// querier answers the API's own endpoints; the part "agent API" adds
	// the node's name and IP and the feature gates.
	querier agentapi.Querier
	// handlers are more endpoints, by path.
	handlers map[string]http.Handler
	// metrics are the sources of the scrape-time gauges
	// (pkg/agent/metrics); the flow-ops counters need none.
	metrics agentmetrics.Sources
}

// handle serves h at path on the agent API.
func (a *agentAPI) handle(path string, h http.Handler) {
	if a.handlers == nil {
		a.handlers = map[string]http.Handler{}
	}
	a.handlers[path] = h
}

// setupAgentAPI serves the agent API on apiPort (none when it is 0), with
// the agent's metrics at /metrics when enablePrometheusMetrics is set.
func setupAgentAPI(_ context.Context, d *deps) (component, error) {
	o := d.o
	if o.APIPort == 0 {
		klog.InfoS("Agent API disabled (apiPort 0)")
		return nil, nil
	}
	if o.EnablePrometheusMetrics {
		agentmetrics.Register(d.api.metrics)
	}
	opts := agentapi.NewOptions(o.APIPort)
	wrap, err := config.HostOverride(o.KubeAPIServerOverride)
	if err != nil {
		return nil, err
	}
	opts.WithKubeAPIServer(o.Kubeconfig, wrap)
	q := d.api.querier
	q.NodeName, q.NodeIP = o.NodeName, d.nodeIP
	q.FeatureGates = map[string]bool{}
	for k, v := range o.FeatureGates {
		q.FeatureGates[k] = v
	}
	server, err := agentapi.New(opts, &q)
	if err != nil {
		return nil, err
	}
	for path, h := range d.api.handlers {
		server.Handle(path, h)
	}
	return runFunc(server.Run), nil
}
