package lab

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/lab/simnodes"
)

// MaxSimNodes bounds --sim-nodes: /24s of simnodes.DefaultCIDR (a /9) would
// allow 32768; the machine's memory is the real limit (docs/scale.md).
const MaxSimNodes = 10000

// simNodeHeartbeat is how often each simulated Node's Lease is renewed:
// well inside kube-controller-manager's node monitor grace period.
const simNodeHeartbeat = 15 * time.Second

// simClient is an admin client for the simulated Nodes' writes, without
// client-go's default 5 requests/s (thousands of leases are renewed).
func (s *supervisor) simClient() (kubernetes.Interface, error) {
	cfg := s.restConfig(s.creds)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.UserAgent = "antrea-lab/simnodes"
	return kubernetes.NewForConfig(cfg)
}

// addSimNodes creates the simulated Nodes (part of `up`, before the lab is
// reported ready).
func (s *supervisor) addSimNodes(ctx context.Context) error {
	client, err := s.simClient()
	if err != nil {
		return err
	}
	if err := simnodes.EnsureNodes(ctx, client, simnodes.DefaultCIDR, s.opts.SimNodes); err != nil {
		return fmt.Errorf("simulated nodes: %w", err)
	}
	return nil
}

// runSimNodes is the simulated Nodes' fake kubelet and heartbeat, for as
// long as the lab runs.
func (s *supervisor) runSimNodes(ctx context.Context) {
	client, err := s.simClient()
	if err != nil {
		klog.ErrorS(err, "No fake kubelet for the simulated Nodes")
		return
	}
	go simnodes.Heartbeat(ctx, client, s.opts.SimNodes, simNodeHeartbeat)
	if err := simnodes.NewKubelet(client).Run(ctx, 8); err != nil && ctx.Err() == nil {
		klog.ErrorS(err, "The simulated Nodes' fake kubelet stopped")
	}
}
