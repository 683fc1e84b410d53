package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/nodeinit"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// initialPolicies is what finishRestore waits for: every NetworkPolicy that
// applied to the node when the agent's watchers first synced, realized.
type initialPolicies interface {
	InitialRealized() <-chan struct{}
}

// restore tracks the end of a restart. Until finish has run, br-int may be
// held (HoldTraffic): because ovs-vswitchd had restarted when the agent
// started, or restarted again before the agent's flows were complete.
type restore struct {
	ovsdb *ovsconfig.Connection
	flows *agentof.Client
	// underlay puts the node's addresses back on br-phy (netdev).
	underlay func(ctx context.Context) error
	// released is called after the hold is lifted: datapath flows cached
	// while every packet was dropped must not outlive the hold (the
	// userspace datapath of OVS 3.1 was seen keeping such stale megaflows).
	released func()

	mu       sync.Mutex
	holding  bool
	finished bool
}

// holdIfRestarted is called when the agent connects to a (possibly new)
// ovs-vswitchd, after its flows were installed or replayed. A restarted
// ovs-vswitchd starts held back by flow-restore-wait (the image's
// start_ovs), which holds every bridge: with the userspace datapath also
// br-phy, through which the node reaches the API server. The agent releases
// that at once, holding br-int alone with one flow if its own flows are not
// complete yet (before finish); after finish the flows just replayed are
// complete, policies included, and nothing needs holding.
func (r *restore) holdIfRestarted(ctx context.Context) error {
	held, err := r.ovsdb.FlowRestoreWait(ctx)
	if err != nil || !held {
		return err
	}
	if r.underlay != nil {
		if err := r.underlay(ctx); err != nil {
			return fmt.Errorf("restore the underlay after ovs-vswitchd restarted: %w", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.finished {
		if err := r.flows.HoldTraffic(ctx); err != nil {
			return err
		}
		r.holding = true
	}
	if err := r.ovsdb.ClearFlowRestoreWait(ctx); err != nil {
		return err
	}
	klog.InfoS("ovs-vswitchd (re)started: released flow-restore-wait", "holdingBrInt", r.holding)
	return nil
}

// finish ends a restart once this run's flows are complete: it waits until
// the NetworkPolicies known at start are realized, then deletes what the
// previous run installed and this one did not (its flow round), records
// this run's round, and only then releases br-int if it is held. Until then
// a restarted agent keeps the previous run's flows, policy flows included,
// and a restarted OVS forwards nothing through br-int: no packet ever
// crosses the node with pod flows but without their policies. Without the
// controller the wait lasts until it is back, and says so.
func (r *restore) finish(ctx context.Context, bridge *ovsconfig.OVSBridge, policies initialPolicies,
	ids map[string]string, prevRound uint64, round uint32) error {
	start := time.Now()
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return nil
		case <-policies.InitialRealized():
			waiting = false
		case <-time.After(15 * time.Second):
			klog.InfoS("Still waiting for the NetworkPolicies of this node to be realized before removing the previous run's flows "+
				"and releasing the bridge (is antrea-controller reachable?)", "waited", time.Since(start).Round(time.Second))
		}
	}
	if prevRound > 0 {
		if err := r.flows.DeleteRound(ctx, uint32(prevRound)); err != nil {
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
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holding {
		if err := r.flows.ReleaseTraffic(ctx); err != nil {
			return err
		}
		if r.released != nil {
			r.released()
		}
	}
	klog.InfoS("Flows restored: the previous run's removed, NetworkPolicies realized", "round", round,
		"previousRound", prevRound, "releasedHold", r.holding, "after", time.Since(start))
	r.holding, r.finished = false, true
	return nil
}

// setupFlowRestore ends the restart (restore.finish) once the NetworkPolicies
// known at start are realized; its component returns when that is done.
func setupFlowRestore(_ context.Context, d *deps) (component, error) {
	return runFunc(func(ctx context.Context) error {
		return d.restore.finish(ctx, d.bridge, d.policies, d.bridgeIDs, d.prevRound, d.round)
	}), nil
}

// connectOVSDB connects to ovsdb-server, waiting for it: in a pod the
// antrea-ovs container starts it at the same time as the agent starts.
func connectOVSDB(ctx context.Context, endpoint string) (*ovsconfig.Connection, error) {
	start := time.Now()
	for {
		conn, err := ovsconfig.Connect(ctx, endpoint)
		if err == nil {
			return conn, nil
		}
		if time.Since(start) > 2*time.Minute || ctx.Err() != nil {
			return nil, err
		}
		klog.V(2).InfoS("Waiting for ovsdb-server", "endpoint", endpoint, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// prepareNodeNetwork runs before the agent needs the API server. It waits
// for ovs-vswitchd (in a pod it starts beside the agent), releases OVS's
// flow-restore-wait at once — br-int is in secure fail mode, so a restarted
// ovs-vswitchd still forwards nothing through it until the agent's flows are
// back (holdIfEmpty), while the node's own traffic through br-phy (netdev)
// flows again — and puts the node's addresses back on br-phy where a
// restarted ovs-vswitchd lost them.
func prepareNodeNetwork(ctx context.Context, ovsdb *ovsconfig.Connection, runDir, uplinkBridge string) error {
	ctl := filepath.Join(runDir, "ovs-vswitchd.ctl")
	start := time.Now()
	for {
		if _, err := os.Stat(ctl); err == nil {
			break
		}
		if time.Since(start) > 2*time.Minute {
			break // an OVS without the fixed control socket name: go on
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	held, err := ovsdb.FlowRestoreWait(ctx)
	if err != nil {
		return err
	}
	if held {
		if err := ovsdb.ClearFlowRestoreWait(ctx); err != nil {
			return err
		}
		klog.InfoS("ovs-vswitchd started held back by flow-restore-wait; released it (br-int forwards nothing until the agent's flows are back)")
	}
	ports, err := ovsconfig.NewOVSBridge(ovsdb, ovsconfig.BridgeConfig{Name: uplinkBridge}).GetPortList(ctx)
	if err != nil || len(ports) == 0 {
		return nil // no underlay bridge yet (first run, or the kernel datapath)
	}
	if uplink := recordedUplink(ports); uplink != "" {
		if err := nodeinit.EnsureUnderlayAddresses(ctx, ovsdb, uplinkBridge, uplink); err != nil {
			return fmt.Errorf("restore the node's addresses on %s: %w", uplinkBridge, err)
		}
	}
	return nil
}

// holdIfEmpty holds br-int (HoldTraffic) when its flow table is empty: a new
// or restarted ovs-vswitchd, whose pod flows are about to be installed before
// their NetworkPolicies are. finish releases it.
func (r *restore) holdIfEmpty(ctx context.Context, ofc *binding.Client) error {
	existing, err := ofc.DumpFlows(ctx, binding.TableAll, 0, 0)
	if err != nil {
		return err
	}
	if len(existing) > 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.flows.HoldTraffic(ctx); err != nil {
		return err
	}
	r.holding = true
	klog.InfoS("br-int has no flows (a new or restarted ovs-vswitchd): holding its traffic until the flows, NetworkPolicies included, are in")
	return nil
}
