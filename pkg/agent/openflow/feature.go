package openflow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Feature is one part of the data plane (pod connectivity, Services,
// NetworkPolicy, Traceflow, ...): everything the client needs to know of it
// to lay out the pipeline, start it, show it and rebuild it. A feature's
// intent-level calls (InstallPodFlows, InstallServices, ApplyPolicyChange,
// ...) are its own methods, promoted through the Client; its state and its
// lock are its own. Each write is a delta (delta.go) committed in one
// bundle.
//
// Adding a feature: declare its tables and write its type in its own
// file(s), implementing Feature (embed featureDefaults for the parts it
// does not have); add one line to registeredFeatures (and,
// if its calls are to be reached through the Client, embed it there).
// Its cookie and packet-in kind, if any, are declared in cookies.go and
// packetin.go. docs/design/ovs-pipeline.md ("Features") says more.
type Feature interface {
	// Name names the feature in logs, docs and antctl.
	Name() string
	// Tables are the tables it declares; buildPipeline places each once,
	// in registration order within a stage.
	Tables() []*TableSpec
	// FixedFlows are the flows it installs at Initialize for this node.
	FixedFlows(node *NodeConfig) []*binding.Flow
	// Meters are the meters its flows use (MeterAdd messages), added or
	// modified before any flow is written, at start and at every replay.
	Meters() []*binding.MeterMod
	// Installed returns the groups and flows it installed besides its fixed
	// flows: what Flows and Groups show and Replay writes again.
	Installed() ([]*binding.GroupMod, []*binding.Flow)
	// SwitchLost tells it the switch lost every group and flow
	// (ovs-vswitchd restarted) just before Installed is replayed: it
	// forgets what it had read back of an earlier run.
	SwitchLost()
	// PacketInKinds are the packet-in kinds its flows send to the agent;
	// their consumers register a handler with the PacketInDispatcher.
	PacketInKinds() []PacketInKind
}

// featureDefaults answers the Feature methods a feature has nothing for:
// no fixed flows, meters, installed flows or packet-ins, nothing to forget.
// A feature embeds it and defines Name, Tables and what it does have.
type featureDefaults struct{}

// FixedFlows implements Feature: none.
func (featureDefaults) FixedFlows(*NodeConfig) []*binding.Flow { return nil }

// Meters implements Feature: none.
func (featureDefaults) Meters() []*binding.MeterMod { return nil }

// Installed implements Feature: nothing.
func (featureDefaults) Installed() ([]*binding.GroupMod, []*binding.Flow) { return nil, nil }

// SwitchLost implements Feature: nothing is read back.
func (featureDefaults) SwitchLost() {}

// PacketInKinds implements Feature: none.
func (featureDefaults) PacketInKinds() []PacketInKind { return nil }

// registeredFeatures are the features the client runs, in the order their
// tables are laid out within a stage (which keeps table numbers stable):
// the one place a feature is registered.
func registeredFeatures(d *datapath) []Feature {
	pods := newPodConnectivity(d)
	policy := newNetworkPolicy(d)
	sourceRanges := newLBSourceRanges(d)
	l7 := newL7Policy(d)
	return []Feature{
		pods,
		policy,
		// Before the Services: its table comes first in PreRouting.
		sourceRanges,
		newServices(d),
		newTraceflow(d, pods, policy, sourceRanges, l7),
		newPacketCapture(d),
		newEgress(d),
		newFQDN(d),
		newTrafficControl(d),
		newMulticast(d),
		l7,
	}
}

// datapath is what every feature shares: the bridge it writes to, the
// pipeline and the flow builder (set once the tables of every feature are
// laid out), the cookie round, this node's config, and the fixed flows.
type datapath struct {
	bridge Bridge
	p      *Pipeline
	round  uint32
	b      flowBuilder

	// node is set once by Initialize.
	node atomic.Pointer[NodeConfig]

	fixedMu sync.Mutex
	fixed   []*binding.Flow // miss flows and every feature's fixed flows
}

// write writes msgs in one bundle (nothing when msgs is empty).
func (d *datapath) write(ctx context.Context, what string, msgs []binding.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := d.bridge.Bundle(ctx, msgs...); err != nil {
		return fmt.Errorf("write flows of %s: %w", what, err)
	}
	return nil
}

// tableOf is the table of an OpenFlow table number.
func (d *datapath) tableOf(id uint8) *Table {
	for _, t := range d.p.Tables() {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// fixedFlows is a copy of the fixed flows.
func (d *datapath) fixedFlows() []*binding.Flow {
	d.fixedMu.Lock()
	defer d.fixedMu.Unlock()
	return append([]*binding.Flow(nil), d.fixed...)
}

// applier sends messages that cannot go in a bundle (meter mods: Open
// vSwitch does not bundle them), one by one, reporting the rejected ones.
type applier interface {
	Apply(ctx context.Context, msgs ...binding.Message) error
}

// ensureMeters installs the meters of every feature before their flows:
// added, or modified when they exist (a meter is never deleted, as that
// would delete the flows using it). A bridge that cannot apply (a unit
// test's fake) gets none.
func ensureMeters(ctx context.Context, bridge Bridge, features []Feature) error {
	a, ok := bridge.(applier)
	if !ok {
		return nil
	}
	for _, f := range features {
		for _, m := range f.Meters() {
			if err := a.Apply(ctx, m); err != nil {
				var ofErr *binding.Error
				if !errors.As(err, &ofErr) {
					return fmt.Errorf("%s: add meter %d: %w", f.Name(), m.MeterID, err)
				}
				mod := *m
				mod.Command = binding.MeterModify
				if err := a.Apply(ctx, &mod); err != nil {
					return fmt.Errorf("%s: add or modify meter %d: %w", f.Name(), m.MeterID, err)
				}
			}
		}
	}
	return nil
}
