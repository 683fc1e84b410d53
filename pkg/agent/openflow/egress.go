package openflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
//
// An Egress with a bandwidth (upstream's EgressTrafficShaping) is shaped
// where all of its traffic meets, on the node holding its IP: one OpenFlow
// meter per Egress (a drop band at the rate, with the burst), and one flow
// per member pod, above the flows above, sending the pod's packets leaving
// the pod networks through that meter and on as they would have gone (a
// local member's to the gateway; a remote member's, from the tunnel, handed
// to the gateway). The members' traffic shares the rate.

// Priorities of the Egress flows in L3Forwarding, below all the others.
const (
	egressSkipPriority    = priorityLow - 10
	egressShapePriority   = priorityLow - 15
	egressPodPriority     = priorityLow - 20
	egressHoldingPriority = priorityLow - 30
)

// EgressMeterIDBase is the first meter of the Egresses' rate limits; the
// meters below are the fixed ones of other features.
const EgressMeterIDBase uint32 = 0x100

// EgressFlows is the whole desired state of the Egress feature's dynamic
// flows on this node.
type EgressFlows struct {
	// Remote maps the IP of a local pod to the transport IP of the node
	// that holds its Egress IP, when that is another node.
	Remote map[netip.Addr]net.IP
	// Holding says this node holds at least one Egress IP: other nodes'
	// pods' traffic to the world comes here through the tunnel.
	Holding bool
	// Shaped are the rate limits of the Egresses this node holds that
	// have a bandwidth, by Egress name.
	Shaped map[string]EgressShaping
}

// EgressShaping is the rate limit of one Egress held by this node: the
// traffic of its members leaving the pod networks through this node
// shares one meter.
type EgressShaping struct {
	// RateKbps and BurstKb are the meter's drop band (kilobits).
	RateKbps, BurstKb uint32
	// Local are the members on this node; Remote those of other nodes,
	// whose traffic arrives from the tunnel.
	Local, Remote []netip.Addr
}

// Equal says whether two states have the same flows and meters.
func (a EgressFlows) Equal(b EgressFlows) bool {
	return a.Holding == b.Holding && maps.EqualFunc(a.Remote, b.Remote, func(x, y net.IP) bool { return x.Equal(y) }) &&
		maps.EqualFunc(a.Shaped, b.Shaped, func(x, y EgressShaping) bool {
			return x.RateKbps == y.RateKbps && x.BurstKb == y.BurstKb && slices.Equal(x.Local, y.Local) && slices.Equal(x.Remote, y.Remote)
		})
}

// egress is the Egress feature.
type egress struct {
	*datapath
	featureDefaults

	mu    sync.Mutex
	flows map[string][]*binding.Flow // one key: the dynamic flows
	// meters are the Egresses' meters in the switch, by Egress name.
	meters map[string]*binding.MeterMod
}

func newEgress(d *datapath) *egress {
	return &egress{datapath: d, flows: map[string][]*binding.Flow{}, meters: map[string]*binding.MeterMod{}}
}

// Meters implements Feature: the Egresses' meters, added again by a replay
// before their flows.
func (e *egress) Meters() []*binding.MeterMod {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*binding.MeterMod, 0, len(e.meters))
	for _, m := range e.meters {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *binding.MeterMod) int { return int(a.MeterID) - int(b.MeterID) })
	return out
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

// egressFlows builds the dynamic flows of want, metering the shaped
// Egresses' members through meters (by Egress name).
func (e *egress) egressFlows(n *NodeConfig, want EgressFlows, meters map[string]uint32) []*binding.Flow {
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
	for _, name := range slices.Sorted(maps.Keys(want.Shaped)) {
		sh, meter := want.Shaped[name], &binding.Meter{ID: meters[name]}
		for _, p := range sh.Local {
			if !Realizes(types.FamilyOf(p)) {
				continue
			}
			flows = append(flows, e.flow(egressShapePriority, func(m *binding.Match) {
				m.EthType(ethTypeOf(p)).IPSrc(p).EthDst(n.GatewayMAC)
				matchField(m, PktSourceField, FromLocal)
				matchField(m, PktDestinationField, 0)
			}, meter, e.b.next(L3ForwardingTable)))
		}
		for _, p := range sh.Remote {
			if !Realizes(types.FamilyOf(p)) || n.TunnelOFPort == 0 {
				continue
			}
			flows = append(flows, e.flow(egressShapePriority, func(m *binding.Match) {
				m.EthType(ethTypeOf(p)).IPSrc(p)
				matchField(m, PktSourceField, FromTunnel)
				matchField(m, PktDestinationField, 0)
			}, meter, setEthDst(n.GatewayMAC), load(PktDestinationField, ToGateway), e.b.next(L3ForwardingTable)))
		}
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

// SetEgressFlows makes the feature's dynamic flows and meters those of
// want: the meters wanted are added or modified first, then the flows are
// written in one bundle (deletes of the flows no longer wanted, adds of the
// others), then the meters no longer wanted are deleted.
func (e *egress) SetEgressFlows(ctx context.Context, want EgressFlows) error {
	n := e.node.Load()
	if n == nil {
		return fmt.Errorf("egress flows: pipeline not initialized")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := map[string]uint32{}
	used := map[uint32]bool{}
	for _, m := range e.meters {
		used[m.MeterID] = true
	}
	for _, name := range slices.Sorted(maps.Keys(want.Shaped)) {
		sh := want.Shaped[name]
		mod := &binding.MeterMod{Command: binding.MeterAdd, Flags: binding.MeterKbps | binding.MeterBurst | binding.MeterStats,
			Bands: []binding.MeterBand{{Rate: sh.RateKbps, BurstSize: sh.BurstKb}}}
		if old := e.meters[name]; old != nil {
			mod.MeterID = old.MeterID
			if old.Bands[0] == mod.Bands[0] {
				ids[name] = old.MeterID
				continue
			}
			mod.Command = binding.MeterModify
		} else {
			for id := EgressMeterIDBase; ; id++ {
				if !used[id] {
					mod.MeterID, used[id] = id, true
					break
				}
			}
		}
		if err := e.applyMeter(ctx, mod); err != nil {
			return fmt.Errorf("meter of Egress %s: %w", name, err)
		}
		add := *mod
		add.Command = binding.MeterAdd
		e.meters[name], ids[name] = &add, mod.MeterID
	}
	var b deltaBatch
	b.add(replaceDelta(e.flows, "egress", e.egressFlows(n, want, ids)))
	if err := b.commit(ctx, e, "egress"); err != nil {
		return err
	}
	for name, m := range e.meters {
		if _, ok := want.Shaped[name]; ok {
			continue
		}
		if err := e.applyMeter(ctx, &binding.MeterMod{Command: binding.MeterDelete, MeterID: m.MeterID}); err != nil {
			return fmt.Errorf("delete the meter of Egress %s: %w", name, err)
		}
		delete(e.meters, name)
	}
	return nil
}

// applyMeter sends a meter mod (meters do not go in bundles); an add of a
// meter the switch has (an agent restarted; the switch kept its meters) is
// sent again as a modify. A switch that cannot apply (a unit test's fake)
// takes none.
func (e *egress) applyMeter(ctx context.Context, m *binding.MeterMod) error {
	a, ok := e.bridge.(applier)
	if !ok {
		return nil
	}
	err := a.Apply(ctx, m)
	var ofErr *binding.Error
	if err != nil && m.Command == binding.MeterAdd && errors.As(err, &ofErr) {
		mod := *m
		mod.Command = binding.MeterModify
		err = a.Apply(ctx, &mod)
	}
	return err
}
