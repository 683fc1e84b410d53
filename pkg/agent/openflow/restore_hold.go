package openflow

import (
	"context"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// priorityHold is above every flow of the root classifier.
const priorityHold = 65535

// holdFlow drops every packet that enters br-int, whatever its port.
func (b *flowBuilder) holdFlow() *binding.Flow {
	return b.flow(PipelineRootClassifierTable, priorityHold, nil)
}

// HoldTraffic stops all forwarding through the bridge with one flow at the
// top of the root classifier, while the rest of the pipeline is rebuilt:
// after ovs-vswitchd restarted with an empty flow table, the agent installs
// pod flows before NetworkPolicy flows, and no packet may pass in between.
// It replaces OVS's own flow-restore-wait on this bridge, which holds every
// bridge of ovs-vswitchd — with the userspace datapath also br-phy, through
// which the node reaches the API server the agent needs for its policies.
// The flow carries this run's round: an agent that dies while holding leaves
// it for the next run, which removes it with the round (DeleteRound).
func (c *Client) HoldTraffic(ctx context.Context) error {
	return c.write(ctx, "traffic hold", []binding.Message{binding.AddFlow(c.b.holdFlow())})
}

// ReleaseTraffic removes the flow HoldTraffic installed.
func (c *Client) ReleaseTraffic(ctx context.Context) error {
	return c.write(ctx, "traffic hold", []binding.Message{binding.DeleteFlowStrict(c.b.holdFlow())})
}
