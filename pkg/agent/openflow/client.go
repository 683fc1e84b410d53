// Package openflow is the agent's data plane: the OVS pipeline laid out as a
// grid of stage x pipeline (pipeline.go), the features that install flows in
// it (pod_connectivity.go, ...), and an intent-level client (InstallPodFlows,
// InstallNodeFlows, ...) that builds the flows of one change and writes them
// to OVS as one atomic bundle through the project's OpenFlow binding. The
// client remembers every flow it installed, so it can replay them when
// ovs-vswitchd restarts and remove exactly an object's flows.
//
// docs/design/ovs-pipeline.md describes every table; a test keeps its table
// list equal to this package's.
package openflow

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
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

// Client is the agent's intent-level OpenFlow client.
type Client struct {
	bridge Bridge
	p      *Pipeline
	round  uint32
	b      flowBuilder

	// node is set once by Initialize.
	node atomic.Pointer[NodeConfig]

	// Three independent writers, each serialized by its own lock held
	// across its bundles (so the record never disagrees with the switch):
	// mu for the fixed flows and Services, podMu for pods and peer nodes,
	// policyMu for NetworkPolicy. A pod ADD never waits behind a policy or
	// Service write: their flows are disjoint, and every bundle is atomic.
	// Flows and Replay take them one at a time, never nested.
	mu    sync.Mutex
	fixed []*binding.Flow // miss and node flows
	// svc holds the Services' groups and flows.
	svc serviceState

	podMu sync.Mutex
	pods  map[string][]*binding.Flow // by host interface name
	peers map[string][]*binding.Flow // by remote node name

	policyMu sync.Mutex
	// policy holds the NetworkPolicy flows, shared between rules.
	policy policyState

	// tf holds the Traceflow flows per tag, under its own lock.
	tf traceflowState
}

// NewClient lays out the pipeline and returns a client writing flows of the
// given round to bridge.
func NewClient(bridge Bridge, round uint32) (*Client, error) {
	p, err := buildPipeline(podConnectivity{}, networkPolicy{}, service{})
	if err != nil {
		return nil, err
	}
	return &Client{
		bridge: bridge,
		p:      p,
		round:  round,
		b:      flowBuilder{p: p, cookie: withRound(round, cookiePodConnectivity)},
		pods:   map[string][]*binding.Flow{},
		peers:  map[string][]*binding.Flow{},
		policy: newPolicyState(),
		svc:    newServiceState(),
	}, nil
}

// Pipeline is the table layout in use.
func (c *Client) Pipeline() *Pipeline { return c.p }

// Round is the cookie round of this client's flows.
func (c *Client) Round() uint32 { return c.round }

func addMods(flows []*binding.Flow) []binding.Message {
	msgs := make([]binding.Message, 0, len(flows))
	for _, f := range flows {
		msgs = append(msgs, binding.AddFlow(f))
	}
	return msgs
}

func (c *Client) write(ctx context.Context, what string, msgs []binding.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if err := c.bridge.Bundle(ctx, msgs...); err != nil {
		return fmt.Errorf("write flows of %s: %w", what, err)
	}
	return nil
}

func withTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// Initialize installs the table-miss flows and this node's fixed flows.
func (c *Client) Initialize(ctx context.Context, node *NodeConfig) error {
	flows := append(c.b.missFlows(), c.b.nodeFlows(node)...)
	flows = append(flows, c.b.policyFixedFlows(node)...)
	flows = append(flows, c.b.serviceFixedFlows(node)...)
	if err := ensureMeters(ctx, c.bridge); err != nil {
		return err
	}
	if err := ensurePolicyMeters(ctx, c.bridge); err != nil {
		return err
	}
	if err := c.write(ctx, "node", addMods(flows)); err != nil {
		return err
	}
	c.mu.Lock()
	c.fixed = flows
	c.mu.Unlock()
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

// replace writes the new flows of one pod or peer node and deletes the ones
// it had that are no longer wanted, in one bundle, and records them.
func (c *Client) replace(ctx context.Context, what string, cache map[string][]*binding.Flow, key string, flows []*binding.Flow) error {
	c.podMu.Lock()
	defer c.podMu.Unlock()
	var b deltaBatch
	b.add(replaceDelta(cache, key, flows))
	return b.commit(ctx, c, what)
}

// replaceDelta takes the flows recorded in cache under key to flows (nil:
// none): strict deletes of the old flows whose place (table, priority,
// match) no new flow takes, then adds of every new flow.
func replaceDelta(cache map[string][]*binding.Flow, key string, flows []*binding.Flow) delta {
	keep := make(map[string]bool, len(flows))
	for _, f := range flows {
		keep[f.MatchKey()] = true
	}
	var msgs []binding.Message
	for _, f := range cache[key] {
		if !keep[f.MatchKey()] {
			msgs = append(msgs, binding.DeleteFlowStrict(f))
		}
	}
	msgs = append(msgs, addMods(flows)...)
	return delta{msgs: msgs, apply: func() func() {
		e := editOf(cache)
		if flows == nil {
			e.del(key)
		} else {
			e.set(key, flows)
		}
		return e.revert
	}}
}

// InstallPodFlows installs the flows of one local pod port as one bundle.
func (c *Client) InstallPodFlows(ifName string, podIPs []net.IP, podMAC net.HardwareAddr, ofPort uint32) error {
	node := c.node.Load()
	if node == nil {
		return fmt.Errorf("pod %s: pipeline not initialized", ifName)
	}
	ctx, cancel := withTimeout()
	defer cancel()
	return c.replace(ctx, "pod "+ifName, c.pods, ifName, c.b.podFlows(node, ofPort, podIPs, podMAC))
}

// UninstallPodFlows removes the flows of a pod port; unknown ports are a no-op.
func (c *Client) UninstallPodFlows(ifName string) error {
	ctx, cancel := withTimeout()
	defer cancel()
	return c.replace(ctx, "pod "+ifName, c.pods, ifName, nil)
}

// PodFlowsInstalled reports whether the client installed flows for a pod port.
func (c *Client) PodFlowsInstalled(ifName string) bool {
	c.podMu.Lock()
	defer c.podMu.Unlock()
	return len(c.pods[ifName]) > 0
}

// InstallNodeFlows installs the flows towards one remote node's pod CIDR.
func (c *Client) InstallNodeFlows(nodeName string, peerPodCIDR *net.IPNet, peerGatewayIP, tunnelPeerIP net.IP) error {
	node := c.node.Load()
	if node == nil {
		return fmt.Errorf("node %s: pipeline not initialized", nodeName)
	}
	ctx, cancel := withTimeout()
	defer cancel()
	return c.replace(ctx, "node "+nodeName, c.peers, nodeName, c.b.peerFlows(node, peerPodCIDR, peerGatewayIP, tunnelPeerIP))
}

// UninstallNodeFlows removes the flows towards a remote node.
func (c *Client) UninstallNodeFlows(nodeName string) error {
	ctx, cancel := withTimeout()
	defer cancel()
	return c.replace(ctx, "node "+nodeName, c.peers, nodeName, nil)
}

// Flows returns every flow the client has installed, sorted by table and
// descending priority (as dump-flows shows them).
func (c *Client) Flows() []*binding.Flow {
	c.mu.Lock()
	all := append([]*binding.Flow(nil), c.fixed...)
	all = append(all, c.serviceFlows()...)
	c.mu.Unlock()
	c.podMu.Lock()
	for _, fs := range c.pods {
		all = append(all, fs...)
	}
	for _, fs := range c.peers {
		all = append(all, fs...)
	}
	c.podMu.Unlock()
	c.policyMu.Lock()
	all = append(all, c.policyFlows()...)
	c.policyMu.Unlock()
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

// Replay writes the meters, then every known group and flow again, in one bundle (and forgets
// what RecoverServices found of an earlier run, which the switch lost too): after
// ovs-vswitchd restarted (the switch lost its flows) or on a new connection.
// Groups go first (flows refer to them), after a delete of every group, as a
// group that still exists cannot be added again.
func (c *Client) Replay(ctx context.Context, bridge Bridge) error {
	c.mu.Lock()
	c.forgetRecoveredLocked()
	c.mu.Unlock()
	groups, flows := c.Groups(), c.Flows()
	if err := ensureMeters(ctx, bridge); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if err := ensurePolicyMeters(ctx, bridge); err != nil {
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
