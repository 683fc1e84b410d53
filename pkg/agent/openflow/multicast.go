package openflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Multicast (pkg/agent/multicast): IGMP snooping and forwarding of IPv4
// multicast. The feature has no table of its own, so enabling it moves no
// table number: its flows sit at the top of L3Forwarding, which a packet
// reaches after the egress policy tables, so Antrea-native egress rules to
// a group address (and any rule isolating the sender) apply to multicast
// as to unicast. Nothing is installed until the agent's multicast
// controller sets the flows (multicast.enable).
//
//   - IGMP a local pod sends (reports, leaves) goes to the agent
//     (PacketInIGMP), which keeps the groups' members
//     (mcastIGMPPriority);
//   - a local pod's other multicast packets are counted by a flow of the
//     sender's port (the pod's "outbound" counter), marked counted and
//     resubmitted to L3Forwarding (mcastCountPriority);
//   - a local pod's packet to a group with members goes to the group's
//     "all" group: one bucket chaining to its "local" group, one bucket
//     per other Node with members (tun_dst, output to the tunnel);
//     a packet to the group from the tunnel goes to the local group only,
//     so it never goes back to another Node (mcastGroupPriority);
//   - the local group has one bucket per local member port (bucket id:
//     the port), which hands the copy to the member's delivery flow
//     (reg1 = port, MulticastDeliverField, resubmit to L3Forwarding); that
//     flow outputs it, and its counter is the pod's "inbound" counter,
//     kept as long as the pod (a group's buckets come and go with its
//     members); a copy for the sender itself (a member too) is dropped
//     above it, so it never gets its own packet back nor counts it
//     (mcastDeliverPriority, mcastNoEchoPriority).
//
// Multicast packets skip IngressSecurity and conntrack commit, as
// upstream's multicast pipeline does. A group without members has no
// flow: its packets go on as before (to the gateway, where the node's
// kernel, which has no multicast routing, drops them).
const (
	// mcastNoEchoPriority: the copy for the sender itself is dropped before
	// its delivery flow counts it.
	mcastNoEchoPriority  = priorityHigh + 9
	mcastDeliverPriority = priorityHigh + 8
	mcastIGMPPriority    = priorityHigh + 7
	mcastCountPriority   = priorityHigh + 6
	mcastGroupPriority   = priorityHigh + 4
	// ipProtoIGMP is IGMP's IP protocol number (RFC 1112).
	ipProtoIGMP = 2
	// mcastGroupBit marks the ids of the multicast feature's OpenFlow
	// groups (Service groups count up from 1, their fragment groups have
	// bit 30); mcastLocalBit marks the local group of a pair.
	mcastGroupBit uint32 = 1 << 29
	mcastLocalBit uint32 = 1 << 28
)

// multicastRange is 224.0.0.0/4, the IPv4 multicast addresses.
var multicastRange = netip.MustParsePrefix("224.0.0.0/4")

// IsMulticastGroupID reports whether an OpenFlow group id is one of the
// multicast feature's (so that the Services' clean-up leaves it alone).
func IsMulticastGroupID(id uint32) bool { return id&mcastGroupBit != 0 && id&(1<<30) == 0 }

// MulticastGroup is one multicast group with members: the local member
// pods' ports and the other Nodes with members (their tunnel addresses).
type MulticastGroup struct {
	Group       netip.Addr
	LocalPorts  []uint32
	RemoteNodes []net.IP
}

// MulticastFlows is the whole desired state of the feature.
type MulticastFlows struct {
	Groups []MulticastGroup
	// PodPorts are the local pods' ports whose sent multicast is counted.
	PodPorts []uint32
}

// multicast is the multicast feature.
type multicast struct {
	*datapath
	featureDefaults

	mu     sync.Mutex
	flows  map[string][]*binding.Flow
	groups map[netip.Addr]*mcastInstalled
	// ids hands out group indexes; freed ones are reused.
	ids    map[netip.Addr]uint32
	nextID uint32
	// cleared is set once the groups an earlier agent run left on the
	// switch were deleted (the first write does it).
	cleared bool
}

// mcastInstalled is what the switch holds of one group.
type mcastInstalled struct {
	all, local *binding.GroupMod
}

func newMulticast(d *datapath) *multicast {
	return &multicast{datapath: d, flows: map[string][]*binding.Flow{}, groups: map[netip.Addr]*mcastInstalled{},
		ids: map[netip.Addr]uint32{}}
}

// Name implements Feature.
func (*multicast) Name() string { return "Multicast" }

// Tables implements Feature: none, its flows sit in L3Forwarding.
func (*multicast) Tables() []*TableSpec { return nil }

// PacketInKinds implements Feature.
func (*multicast) PacketInKinds() []PacketInKind { return []PacketInKind{PacketInIGMP} }

// Installed implements Feature: the groups (local ones first: the "all"
// groups chain to them) and the flows, replayed after a switch restart.
func (m *multicast) Installed() ([]*binding.GroupMod, []*binding.Flow) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var gs []*binding.GroupMod
	for _, g := range m.groups {
		gs = append(gs, addGroup(g.local))
	}
	for _, g := range m.groups {
		gs = append(gs, addGroup(g.all))
	}
	var fs []*binding.Flow
	for _, k := range []string{"base", "count", "groups"} {
		fs = append(fs, m.flows[k]...)
	}
	return gs, fs
}

func addGroup(g *binding.GroupMod) *binding.GroupMod {
	c := *g
	c.Command = binding.GroupAdd
	return &c
}

func (m *multicast) flow(priority uint16, match func(*binding.Match), actions ...binding.Action) *binding.Flow {
	f := m.b.flow(L3ForwardingTable, priority, match, actions...)
	f.Cookie = withRound(m.round, cookieMulticast)
	return f
}

// groupIDs are the ids of the all and local groups of index i.
func groupIDs(i uint32) (all, local uint32) {
	return mcastGroupBit | i, mcastGroupBit | mcastLocalBit | i
}

// groupMods are the two groups of g with index i (command cmd).
func (m *multicast) groupMods(cmd binding.GroupModCommand, i uint32, g MulticastGroup, tunnel uint32) (all, local *binding.GroupMod) {
	allID, localID := groupIDs(i)
	local = &binding.GroupMod{Command: cmd, Type: binding.GroupAll, GroupID: localID}
	ports := slices.Clone(g.LocalPorts)
	slices.Sort(ports)
	l3 := m.p.Table(L3ForwardingTable).ID
	for _, p := range slices.Compact(ports) {
		local.Buckets = append(local.Buckets, binding.Bucket{ID: p, Actions: []binding.Action{
			load(MulticastDeliverField, on), load(TargetOFPortField, p), binding.ResubmitToTable(l3)}})
	}
	all = &binding.GroupMod{Command: cmd, Type: binding.GroupAll, GroupID: allID,
		Buckets: []binding.Bucket{{ID: 0, Actions: []binding.Action{&binding.Group{ID: localID}}}}}
	nodes := slices.Clone(g.RemoteNodes)
	slices.SortFunc(nodes, func(a, b net.IP) int { return addr(a).Compare(addr(b)) })
	if tunnel != 0 {
		for j, n := range nodes {
			all.Buckets = append(all.Buckets, binding.Bucket{ID: uint32(j + 1), Actions: []binding.Action{setTunDst(n), &binding.Output{Port: tunnel}}})
		}
	}
	if len(local.Buckets) > 0 && local.Buckets[0].ID == 0 {
		// Bucket ids must be set on all or none: port 0 is no pod's.
		local.Buckets = local.Buckets[1:]
	}
	return all, local
}

// SetMulticastFlows makes the feature's groups and flows those of want,
// in one bundle: new groups before the flows using them, groups gone
// after their flows.
func (m *multicast) SetMulticastFlows(ctx context.Context, want MulticastFlows) error {
	node := m.node.Load()
	if node == nil {
		return fmt.Errorf("multicast flows: pipeline not initialized")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	wanted := map[netip.Addr]MulticastGroup{}
	for _, g := range want.Groups {
		if !multicastRange.Contains(g.Group) || (len(g.LocalPorts) == 0 && len(g.RemoteNodes) == 0) {
			continue
		}
		wanted[g.Group] = g
	}
	var pre, post []binding.Message
	if !m.cleared {
		stale, err := m.staleGroups(ctx)
		if err != nil {
			return err
		}
		pre = append(pre, stale...)
	}
	newGroups := map[netip.Addr]*mcastInstalled{}
	newIDs := map[netip.Addr]uint32{}
	nextID := m.nextID
	var groupFlows []*binding.Flow
	addrs := make([]netip.Addr, 0, len(wanted))
	for a := range wanted {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	for _, a := range addrs {
		g := wanted[a]
		i, had := m.ids[a]
		if !had {
			nextID++
			i = nextID
		}
		newIDs[a] = i
		cmd := binding.GroupModify
		if _, installed := m.groups[a]; !installed {
			cmd = binding.GroupAdd
		}
		all, local := m.groupMods(cmd, i, g, node.TunnelOFPort)
		pre = append(pre, local, all)
		newGroups[a] = &mcastInstalled{all: all, local: local}
		allID, localID := groupIDs(i)
		groupFlows = append(groupFlows,
			m.flow(mcastGroupPriority, func(mt *binding.Match) {
				mt.EthType(binding.EthTypeIPv4).IPDst(a)
				matchField(mt, PktSourceField, FromLocal)
			}, &binding.Group{ID: allID}),
			m.flow(mcastGroupPriority, func(mt *binding.Match) {
				mt.EthType(binding.EthTypeIPv4).IPDst(a)
				matchField(mt, PktSourceField, FromTunnel)
			}, &binding.Group{ID: localID}))
	}
	for a, g := range m.groups {
		if _, keep := newGroups[a]; !keep {
			post = append(post, &binding.GroupMod{Command: binding.GroupDelete, Type: binding.GroupAll, GroupID: g.all.GroupID},
				&binding.GroupMod{Command: binding.GroupDelete, Type: binding.GroupAll, GroupID: g.local.GroupID})
		}
	}
	base := []*binding.Flow{m.flow(mcastIGMPPriority, func(mt *binding.Match) {
		mt.EthType(binding.EthTypeIPv4).IPProto(ipProtoIGMP)
		matchField(mt, PktSourceField, FromLocal)
	}, binding.SendToController(PacketInIGMP.userData(), false))}
	var count []*binding.Flow
	ports := slices.Clone(want.PodPorts)
	slices.Sort(ports)
	for _, p := range slices.Compact(ports) {
		count = append(count,
			m.flow(mcastCountPriority, func(mt *binding.Match) {
				mt.InPort(p).EthType(binding.EthTypeIPv4).IPDstPrefix(multicastRange)
				matchField(mt, MulticastCountedField, off)
			}, load(MulticastCountedField, on), binding.ResubmitToTable(m.p.Table(L3ForwardingTable).ID)),
			m.flow(mcastDeliverPriority, func(mt *binding.Match) {
				mt.EthType(binding.EthTypeIPv4)
				matchField(mt, MulticastDeliverField, on)
				matchField(mt, TargetOFPortField, p)
			}, &binding.Output{Port: p}),
			m.flow(mcastNoEchoPriority, func(mt *binding.Match) {
				mt.InPort(p).EthType(binding.EthTypeIPv4)
				matchField(mt, MulticastDeliverField, on)
				matchField(mt, TargetOFPortField, p)
			}))
	}

	var b deltaBatch
	b.add(delta{msgs: pre})
	b.add(replaceDelta(m.flows, "base", base))
	b.add(replaceDelta(m.flows, "count", count))
	b.add(replaceDelta(m.flows, "groups", groupFlows))
	b.add(delta{msgs: post, apply: func() func() {
		oldGroups, oldIDs, oldNext := m.groups, m.ids, m.nextID
		oldCleared := m.cleared
		m.groups, m.ids, m.nextID, m.cleared = newGroups, newIDs, nextID, true
		if len(newIDs) == 0 {
			m.nextID = 0
		}
		return func() { m.groups, m.ids, m.nextID, m.cleared = oldGroups, oldIDs, oldNext, oldCleared }
	}})
	return b.commit(ctx, m, "multicast")
}

// staleGroups deletes the multicast groups an earlier agent run left on
// the switch (its flows, of an earlier round, go with them or with the
// round): all groups first, then the local groups they chain to. A bridge
// that cannot be read (a unit test's fake) has none.
func (m *multicast) staleGroups(ctx context.Context) ([]binding.Message, error) {
	r, ok := m.bridge.(switchReader)
	if !ok {
		return nil, nil
	}
	groups, err := r.GroupStats(ctx, binding.GroupIDAll)
	if err != nil {
		return nil, fmt.Errorf("multicast: list the switch's groups: %w", err)
	}
	var all, local []binding.Message
	for _, g := range groups {
		if !IsMulticastGroupID(g.GroupID) {
			continue
		}
		del := &binding.GroupMod{Command: binding.GroupDelete, Type: binding.GroupAll, GroupID: g.GroupID}
		if g.GroupID&mcastLocalBit != 0 {
			local = append(local, del)
		} else {
			all = append(all, del)
		}
	}
	return append(all, local...), nil
}

// SwitchLost implements Feature: a new switch holds no group of an
// earlier run (Replay writes this run's).
func (m *multicast) SwitchLost() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cleared = true
}

// MulticastCounters are one local pod's multicast packets: received
// (inbound, its buckets in the groups' local groups) and sent (outbound,
// its counter flow).
type MulticastCounters struct {
	Inbound, Outbound uint64
}

// MulticastPodStats reads the counters of every local pod port from the
// switch, by port: its counter flow's (sent) and its delivery flow's
// (received).
func (m *multicast) MulticastPodStats(ctx context.Context) (map[uint32]MulticastCounters, error) {
	r, ok := m.bridge.(flowDumper)
	if !ok {
		return nil, fmt.Errorf("multicast stats: the bridge cannot be read")
	}
	flows, err := r.DumpFlows(ctx, m.p.Table(L3ForwardingTable).ID, withRound(m.round, cookieMulticast), ^uint64(0))
	if err != nil {
		return nil, fmt.Errorf("multicast stats: %w", err)
	}
	out := map[uint32]MulticastCounters{}
	for i := range flows {
		f := &flows[i]
		switch f.Priority {
		case mcastCountPriority:
			if v, ok := f.Match.Get(binding.FieldInPort); ok {
				c := out[uint32(v.Value.Lo)]
				c.Outbound += f.PacketCount
				out[uint32(v.Value.Lo)] = c
			}
		case mcastDeliverPriority:
			if v, ok := f.Match.Get(TargetOFPortField.Field); ok {
				port := uint32(v.Value.Lo & 0xffffffff)
				c := out[port]
				c.Inbound += f.PacketCount
				out[port] = c
			}
		}
	}
	return out, nil
}
