package app

import (
	"context"
	"net"

	"k8s.io/klog/v2"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/config"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// apiDeps are what the agent API and monitoring read.
type apiDeps struct {
	nodeIP     net.IP
	interfaces interfacestore.InterfaceStore
	ofc        *binding.Client
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
	go func() { errs <- server.Run(ctx) }()
	return errs, nil
}
