package openflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Egress (pkg/agent/egress): a pod an Egress selects sends its traffic to
// the world through the node that holds the Egress IP, where the node's
// netfilter SNATs it to that IP (nodenet.SetEgressSNAT). The feature has no
// table of its own: its flows sit in L3Forwarding below every flow of the
// other features there (the routes of the pod networks, priority 200 and
// up, and the Services' flow at 100 that sends their connections' packets
// to the gateway), so they see only the packets nothing else took, the
// traffic leaving the pod networks (and adding them moves no table
// number).
//
//   - On a node whose local pod's Egress IP is held by another node, the
//     pod's packets addressed to the gateway (its way off the node) go to
//     the tunnel with tun_dst = that node's transport IP instead.
//   - On a node that holds an Egress IP, packets from the tunnel that no
//     route took (the ones other nodes send it) are handed to the gateway,
//     into the node's stack, which SNATs and routes them; their replies
//     come back through the gateway and go to the tunnel by the peer's pod
//     CIDR as any pod traffic does.
//
// Traffic to the gateway IP never takes an Egress, nor does Service
// traffic (AntreaProxy marks it for routing, and the Services' flow takes
// it first), as upstream.

// Priorities of the Egress flows in L3Forwarding, below all the others.
const (
	egressSkipPriority    = priorityLow - 10
	egressPodPriority     = priorityLow - 20
	egressHoldingPriority = priorityLow - 30
)

// EgressFlows is the whole desired state of the Egress feature's dynamic
// flows on this node.
type EgressFlows struct {
	// Remote maps the IP of a local pod to the transport IP of the node
	// that holds its Egress IP, when that is another node.
	Remote map[netip.Addr]net.IP
	// Holding says this node holds at least one Egress IP: other nodes'
	// pods' traffic to the world comes here through the tunnel.
	Holding bool
}

// egress is the Egress feature.
type egress struct {
	*datapath
	featureDefaults

	mu    sync.Mutex
	flows map[string][]*binding.Flow // one key: the dynamic flows
}

func newEgress(d *datapath) *egress {
	return &egress{datapath: d, flows: map[string][]*binding.Flow{}}
}

// Name implements Feature.
func (*egress) Name() string { return "Egress" }

// Tables implements Feature: none, its flows sit in L3Forwarding.
func (*egress) Tables() []*TableSpec { return nil }

func (e *egress) flow(priority uint16, match func(*binding.Match), actions ...binding.Action) *binding.Flow {
	f := e.b.flow(L3ForwardingTable, priority, match, actions...)
	f.Cookie = withRound(e.round, cookieEgress)
	return f
}

// FixedFlows implements Feature: what never takes an Egress.
func (e *egress) FixedFlows(n *NodeConfig) []*binding.Flow {
	var flows []*binding.Flow
	for _, f := range n.families() {
		ip := ethType(f)
		flows = append(flows,
			e.flow(egressSkipPriority, func(m *binding.Match) { m.EthType(ip).IPDst(n.gatewayIP(f)) }, e.b.next(L3ForwardingTable)))
	}
	return flows
}

// Installed implements Feature: the dynamic flows, replayed after a switch
// restart.
func (e *egress) Installed() ([]*binding.GroupMod, []*binding.Flow) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return nil, slices.Clone(e.flows["egress"])
}

// egressFlows builds the dynamic flows of want.
func (e *egress) egressFlows(n *NodeConfig, want EgressFlows) []*binding.Flow {
	pods := make([]netip.Addr, 0, len(want.Remote))
	for p := range want.Remote {
		pods = append(pods, p)
	}
	slices.SortFunc(pods, func(a, b netip.Addr) int { return a.Compare(b) })
	var flows []*binding.Flow
	for _, p := range pods {
		if !Realizes(types.FamilyOf(p)) || n.TunnelOFPort == 0 {
			continue
		}
		flows = append(flows, e.flow(egressPodPriority, func(m *binding.Match) {
			m.EthType(ethTypeOf(p)).IPSrc(p).EthDst(n.GatewayMAC)
			matchField(m, PktSourceField, FromLocal)
			matchField(m, PktDestinationField, 0)
		}, setEthSrc(n.GatewayMAC), setEthDst(GlobalVirtualMAC), setTunDst(want.Remote[p]),
			load(PktDestinationField, ToTunnel), load(RewriteMACField, on), e.b.next(L3ForwardingTable)))
	}
	if want.Holding && n.TunnelOFPort != 0 {
		for _, f := range n.families() {
			flows = append(flows, e.flow(egressHoldingPriority, func(m *binding.Match) {
				m.EthType(ethType(f))
				matchField(m, PktSourceField, FromTunnel)
				matchField(m, PktDestinationField, 0)
			}, setEthDst(n.GatewayMAC), load(PktDestinationField, ToGateway), e.b.next(L3ForwardingTable)))
		}
	}
	return flows
}

// SetEgressFlows makes the feature's dynamic flows those of want, in one
// bundle (deletes of the flows no longer wanted, adds of the others).
func (e *egress) SetEgressFlows(ctx context.Context, want EgressFlows) error {
	n := e.node.Load()
	if n == nil {
		return fmt.Errorf("egress flows: pipeline not initialized")
	}
	flows := e.egressFlows(n, want)
	e.mu.Lock()
	defer e.mu.Unlock()
	var b deltaBatch
	b.add(replaceDelta(e.flows, "egress", flows))
	return b.commit(ctx, e, "egress")
}
