package app

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// initialPolicies is what finishRestore waits for: every NetworkPolicy that
// applied to the node when the agent's watchers first synced, realized.
type initialPolicies interface {
	InitialRealized() <-chan struct{}
}

// finishRestore ends a restart once this run's flows are complete: it waits
// until the NetworkPolicies known at start are realized, then deletes what
// the previous run installed and this one did not (its flow round), records
// this run's round, and only then lets ovs-vswitchd forward if it started
// held back by flow-restore-wait (a restarted OVS: the agent image's
// start_ovs sets it). Until then a restarted agent keeps the previous run's
// flows, policy flows included, and a restarted OVS forwards nothing: no
// packet ever crosses the node with pod flows but without their policies.
// Without the controller the wait lasts until it is back, and says so.
func finishRestore(ctx context.Context, ovsdb *ovsconfig.Connection, bridge *ovsconfig.OVSBridge, flows *agentof.Client,
	policies initialPolicies, ids map[string]string, prevRound uint64, round uint32) error {
	start := time.Now()
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return nil
		case <-policies.InitialRealized():
			waiting = false
		case <-time.After(15 * time.Second):
			klog.InfoS("Still waiting for the NetworkPolicies of this node to be realized before removing the previous run's flows "+
				"and letting OVS forward (is antrea-controller reachable?)", "waited", time.Since(start).Round(time.Second))
		}
	}
	if prevRound > 0 {
		if err := flows.DeleteRound(ctx, uint32(prevRound)); err != nil {
			return fmt.Errorf("delete the flows of round %d: %w", prevRound, err)
		}
	}
	if ids == nil {
		ids = map[string]string{}
	}
	ids[flowRoundKey] = strconv.FormatUint(uint64(round), 10)
	if err := bridge.SetExternalIDs(ctx, ids); err != nil {
		return err
	}
	held, err := ovsdb.FlowRestoreWait(ctx)
	if err != nil {
		return err
	}
	if held {
		if err := ovsdb.ClearFlowRestoreWait(ctx); err != nil {
			return err
		}
	}
	klog.InfoS("Flows restored: the previous run's removed, NetworkPolicies realized", "round", round,
		"previousRound", prevRound, "releasedFlowRestoreWait", held, "after", time.Since(start))
	return nil
}

// releaseAfterReplay clears flow-restore-wait once the agent replayed its
// flows into a restarted ovs-vswitchd; before finishRestore ran (restored
// false) the release is finishRestore's.
func releaseAfterReplay(ctx context.Context, ovsdb *ovsconfig.Connection, restored bool) error {
	if !restored {
		return nil
	}
	held, err := ovsdb.FlowRestoreWait(ctx)
	if err != nil || !held {
		return err
	}
	if err := ovsdb.ClearFlowRestoreWait(ctx); err != nil {
		return err
	}
	klog.InfoS("Flows replayed into the restarted ovs-vswitchd; released flow-restore-wait")
	return nil
}
