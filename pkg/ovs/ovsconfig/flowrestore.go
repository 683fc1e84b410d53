package ovsconfig

import (
	"context"
	"fmt"

	"github.com/ovn-org/libovsdb/ovsdb"
)

// FlowRestoreWaitKey is the other_config key of the Open_vSwitch table that
// holds ovs-vswitchd back: while it is "true", ovs-vswitchd neither receives
// nor sends packets (vswitchd.conf.db(5)). The agent's image starts
// ovs-vswitchd with it set, so a restarted OVS forwards nothing until the
// agent has put back every flow, NetworkPolicy flows included.
const FlowRestoreWaitKey = "flow-restore-wait"

// FlowRestoreWait says whether ovs-vswitchd is held back by flow-restore-wait.
func (c *Connection) FlowRestoreWait(ctx context.Context) (bool, error) {
	c.sync(ctx)
	root, err := c.root()
	if err != nil {
		return false, err
	}
	return root.OtherConfig[FlowRestoreWaitKey] == "true", nil
}

// ClearFlowRestoreWait removes flow-restore-wait from the Open_vSwitch row's
// other_config: ovs-vswitchd starts forwarding with the flows it has.
func (c *Connection) ClearFlowRestoreWait(ctx context.Context) error {
	what := "remove other_config:" + FlowRestoreWaitKey + " of the Open_vSwitch table"
	return c.do(ctx, what, func(ctx context.Context, retry bool) error {
		root, err := c.root()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		op := opMutate(tableOpenVSwitch, root.UUID,
			ovsdb.Mutation{Column: "other_config", Mutator: ovsdb.MutateOperationDelete, Value: stringSet(FlowRestoreWaitKey)})
		if _, err := c.transact(ctx, what, []ovsdb.Operation{op}); err != nil {
			return err
		}
		return c.waitCache(ctx, func() (bool, error) {
			root, err := c.root()
			if err != nil {
				return false, err
			}
			_, held := root.OtherConfig[FlowRestoreWaitKey]
			return !held, nil
		})
	})
}
