// Package openflow is the agent's data plane: the OVS pipeline laid out as a
// grid of stage x pipeline (pipeline.go), the features that install flows in
// it, each a plug-in (Feature, feature.go: pod_connectivity.go,
// network_policy.go, service.go, traceflow.go), and an intent-level client
// (InstallPodFlows, InstallServices, ApplyPolicyChange, ...: the features'
// calls) that builds the flows of one change and writes them to OVS as one
// atomic bundle (a delta, delta.go) through the project's OpenFlow binding.
// Each feature remembers every flow it installed, so the client can replay
// them when ovs-vswitchd restarts and remove exactly an object's flows; the
// client iterates the registered features and never names them. Cookies
// and packet-in kinds are declared once (cookies.go, packetin.go), as
// registers are (fields.go).
//
// docs/design/ovs-pipeline.md describes every table; a test keeps its table
// list equal to this package's.
package openflow

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/klog/v2"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Bridge is the OpenFlow channel the client writes to (a *binding.Client or
// *binding.Conn).
type Bridge interface {
	Bundle(ctx context.Context, msgs ...binding.Message) error
}

// opTimeout bounds one flow write for callers without a context (CNI paths).
const opTimeout = 10 * time.Second

// Client is the agent's intent-level OpenFlow client: the registered
// features over one bridge. The features with calls of their own are
// embedded, so their calls are the client's (c.InstallPodFlows, ...); each
// keeps its state under its own lock, so a pod ADD never waits behind a
// policy or Service write (their flows are disjoint, every bundle is
// atomic). Flows and Replay visit the features one at a time, never
// holding two of their locks.
type Client struct {
	*datapath
	features []Feature

	*podConnectivity
	*networkPolicy
	*services
	*traceflow
	*packetCapture
	*egress
	*lbSourceRanges
	*fqdn
	*trafficControl
	*multicast
	*l7Policy
}

// NewClient lays out the pipeline of the registered features and returns a
// client writing flows of the given round to bridge.
func NewClient(bridge Bridge, round uint32) (*Client, error) {
	return newClient(bridge, round, registeredFeatures)
}

// newClient is NewClient with the features register returns.
func newClient(bridge Bridge, round uint32, register func(*datapath) []Feature) (*Client, error) {
	d := &datapath{bridge: bridge, round: round}
	c := &Client{datapath: d, features: register(d)}
	p, err := buildPipeline(c.features...)
	if err != nil {
		return nil, err
	}
	d.p, d.b = p, flowBuilder{p: p, cookie: withRound(round, cookiePodConnectivity)}
	for _, f := range c.features {
		switch f := f.(type) {
		case *podConnectivity:
			c.podConnectivity = f
		case *networkPolicy:
			c.networkPolicy = f
		case *services:
			c.services = f
		case *traceflow:
			c.traceflow = f
		case *packetCapture:
			c.packetCapture = f
		case *egress:
			c.egress = f
		case *lbSourceRanges:
			c.lbSourceRanges = f
		case *fqdn:
			c.fqdn = f
		case *trafficControl:
			c.trafficControl = f
		case *multicast:
			c.multicast = f
		case *l7Policy:
			c.l7Policy = f
		}
	}
	return c, nil
}

// Pipeline is the table layout in use.
func (c *Client) Pipeline() *Pipeline { return c.p }

// Round is the cookie round of this client's flows.
func (c *Client) Round() uint32 { return c.round }

// Features are the registered features, in registration order.
func (c *Client) Features() []Feature { return append([]Feature(nil), c.features...) }

// PacketInKinds are the packet-in kinds the registered features' flows send.
func (c *Client) PacketInKinds() []PacketInKind {
	var out []PacketInKind
	for _, f := range c.features {
		out = append(out, f.PacketInKinds()...)
	}
	return out
}

func addMods(flows []*binding.Flow) []binding.Message {
	msgs := make([]binding.Message, 0, len(flows))
	for _, f := range flows {
		msgs = append(msgs, binding.AddFlow(f))
	}
	return msgs
}

func withTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// Initialize installs every feature's meters, then the table-miss flows
// and every feature's fixed flows for this node, in one bundle.
func (c *Client) Initialize(ctx context.Context, node *NodeConfig) error {
	c.b.fams = node.families()
	flows := c.b.missFlows()
	for _, f := range c.features {
		flows = append(flows, f.FixedFlows(node)...)
	}
	if err := ensureMeters(ctx, c.bridge, c.features); err != nil {
		return err
	}
	if err := c.write(ctx, "node", addMods(flows)); err != nil {
		return err
	}
	c.fixedMu.Lock()
	c.fixed = flows
	c.fixedMu.Unlock()
	c.node.Store(node)
	klog.InfoS("Installed pipeline", "tables", len(c.p.Tables()), "flows", len(flows), "round", c.round)
	return nil
}

// DeleteRound removes every flow whose cookie carries an earlier round (left
// by the previous agent run and not re-installed by this one).
func (c *Client) DeleteRound(ctx context.Context, round uint32) error {
	if round == c.round {
		return fmt.Errorf("refusing to delete the flows of the current round %d", round)
	}
	return c.write(ctx, fmt.Sprintf("round %d", round),
		[]binding.Message{binding.DeleteFlows(binding.TableAll, withRound(round, 0), uint64(cookieRoundMask))})
}

// Flows returns every flow the client has installed (the fixed flows and
// every feature's), sorted by table and descending priority (as dump-flows
// shows them).
func (c *Client) Flows() []*binding.Flow {
	all := c.fixedFlows()
	for _, f := range c.features {
		_, flows := f.Installed()
		all = append(all, flows...)
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Table != all[j].Table {
			return all[i].Table < all[j].Table
		}
		if all[i].Priority != all[j].Priority {
			return all[i].Priority > all[j].Priority
		}
		return all[i].String() < all[j].String()
	})
	return all
}

// Groups returns every feature's installed groups as group-add messages,
// by group id.
func (c *Client) Groups() []*binding.GroupMod {
	var out []*binding.GroupMod
	for _, f := range c.features {
		groups, _ := f.Installed()
		out = append(out, groups...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GroupID < out[j].GroupID })
	return out
}

// Replay writes the meters, then every known group and flow again, in one
// bundle (after telling every feature that the switch lost what it had read
// back of an earlier run): after ovs-vswitchd restarted (the switch lost its
// flows) or on a new connection. Groups go first (flows refer to them),
// after a delete of every group, as a group that still exists cannot be
// added again.
func (c *Client) Replay(ctx context.Context, bridge Bridge) error {
	for _, f := range c.features {
		f.SwitchLost()
	}
	groups, flows := c.Groups(), c.Flows()
	if err := ensureMeters(ctx, bridge, c.features); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	var msgs []binding.Message
	if len(groups) > 0 {
		msgs = append(msgs, &binding.GroupMod{Command: binding.GroupDelete, GroupID: binding.GroupIDAll})
		for _, g := range groups {
			parts, err := groupMsgs(g)
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			msgs = append(msgs, parts...)
		}
	}
	msgs = append(msgs, addMods(flows)...)
	if err := bridge.Bundle(ctx, msgs...); err != nil {
		return fmt.Errorf("replay %d groups and %d flows: %w", len(groups), len(flows), err)
	}
	klog.InfoS("Replayed flows", "groups", len(groups), "flows", len(flows))
	return nil
}
