package app

import (
	"context"
	"net"

	"k8s.io/klog/v2"
	// client-go's workqueue metrics (depth, adds, latency of the policy
	// queue) in the registry /metrics serves.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	npcontroller "antrea.io/antrea/pkg/agent/controller/networkpolicy"
	"antrea.io/antrea/pkg/agent/interfacestore"
	agentmetrics "antrea.io/antrea/pkg/agent/metrics"
	"antrea.io/antrea/pkg/config"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/supportbundle"
)

// apiDeps are what the agent API and monitoring read.
type apiDeps struct {
	nodeIP     net.IP
	interfaces interfacestore.InterfaceStore
	ofc        *binding.Client
	policies   *npcontroller.Controller
	// agentInfo, if set, answers /agentinfo.
	agentInfo func(ctx context.Context) (any, error)
}

// serveAPI starts the agent API (pkg/agent/apiserver) on o.APIPort; its
// error (or nil when ctx ends) arrives on the channel. No API when APIPort
// is 0: the channel never fires.
func serveAPI(ctx context.Context, o Options, d apiDeps) (<-chan error, error) {
	errs := make(chan error, 1)
	if o.APIPort == 0 {
		klog.InfoS("Agent API disabled (apiPort 0)")
		return errs, nil
	}
	if o.EnablePrometheusMetrics {
		agentmetrics.Register(metricSources(d))
	}
	opts := agentapi.NewOptions(o.APIPort)
	wrap, err := config.HostOverride(o.KubeAPIServerOverride)
	if err != nil {
		return nil, err
	}
	opts.WithKubeAPIServer(o.Kubeconfig, wrap)
	gates := map[string]bool{}
	for k, v := range o.FeatureGates {
		gates[k] = v
	}
	server, err := agentapi.New(opts, &agentapi.Querier{
		NodeName:     o.NodeName,
		NodeIP:       d.nodeIP,
		Interfaces:   d.interfaces,
		FeatureGates: gates,
		DumpFlows: func(ctx context.Context, table uint8) ([]binding.FlowStats, error) {
			return d.ofc.DumpFlows(ctx, table, 0, 0)
		},
		AgentInfo: d.agentInfo,
	})
	if err != nil {
		return nil, err
	}
	server.Handle("/supportbundle", supportbundle.Handler(func(tail int64) *supportbundle.Collector {
		return supportBundleCollector(o, tail)
	}))
	go func() { errs <- server.Run(ctx) }()
	return errs, nil
}

// metricSources are the agent state its scrape-time metrics read.
func metricSources(d apiDeps) agentmetrics.Sources {
	return agentmetrics.Sources{
		LocalPods: d.interfaces.GetContainerInterfaceNum,
		Policies: func() agentmetrics.PolicyCounts {
			c := d.policies.Counts()
			return agentmetrics.PolicyCounts{NetworkPolicies: c.NetworkPolicies, IngressRules: c.IngressRules,
				EgressRules: c.EgressRules, AddressGroups: c.AddressGroups, AppliedToGroups: c.AppliedToGroups}
		},
		TableStats: func(ctx context.Context) ([]binding.TableStats, error) {
			conn, err := d.ofc.Conn(ctx)
			if err != nil {
				return nil, err
			}
			return conn.TableStats(ctx)
		},
	}
}
