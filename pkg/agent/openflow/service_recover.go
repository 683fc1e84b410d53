package openflow

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/klog/v2"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Agent restart. The groups and flows of Services outlive the agent: they
// carry no cookie round (cookieServiceTag), and each ServiceLB flow notes
// the digest of its group. At start the client reads them back
// (RecoverServices): one flow dump by cookie gives every port (address,
// protocol, port and whether it is for outside traffic, from the ServiceLB
// flow's match), its group id and digest, its SessionAffinity flows, and
// the endpoints' DNAT flows. The first InstallService of a Service adopts
// the ports it wants from that: it rewrites the group only when the digest
// differs, and writes only the flows that differ, so a Service unchanged
// while the agent was down costs no message and keeps its groups and flows
// (their counters and durations). Once every Service known at start was
// installed, FinishServiceRecovery deletes what no Service adopted (the
// Services deleted meanwhile), in one bundle. The switch is never flushed:
// connections, which need only conntrack, keep flowing, and new ones find
// every Service all along.

// recoveredServices is what an earlier run left and no Service adopted yet.
type recoveredServices struct {
	ports     map[ServicePort]*recoveredPort
	endpoints map[string]*binding.Flow // EndpointDNAT flows, by MatchKey
}

func newRecoveredServices() recoveredServices {
	return recoveredServices{ports: map[ServicePort]*recoveredPort{}, endpoints: map[string]*binding.Flow{}}
}

// recoveredPort is a port an earlier run left: its group and its flows.
type recoveredPort struct {
	groupID uint32
	digest  []byte
	flows   []*binding.Flow
}

// asInstalled is the port as the client records an installed one, with an
// unknown state (what is needed of it is read from its flows).
func (r *recoveredPort) asInstalled() *installedPort {
	return &installedPort{groupID: r.groupID, digest: r.digest, flows: r.flows}
}

// switchReader reads the switch's flows and groups (a *binding.Client).
type switchReader interface {
	flowDumper
	GroupStats(ctx context.Context, group uint32) ([]binding.GroupStats, error)
}

// RecoverServices reads the Service groups and flows the switch holds from
// an earlier agent run, for the following InstallService calls to adopt.
// Call it once, before the first InstallService. Without any (a fresh
// switch, or one an older agent programmed) every group is deleted, with
// the flows that use them, as nothing of this run refers to them. It
// returns how many ports it recovered.
func (c *services) RecoverServices(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.svc.ports) > 0 {
		return 0, fmt.Errorf("recover services: %d Service ports are installed already", len(c.svc.ports))
	}
	r, ok := c.bridge.(switchReader)
	if !ok {
		return 0, fmt.Errorf("recover services: the bridge cannot be read")
	}
	stats, err := r.DumpFlows(ctx, binding.TableAll, uint64(cookieServiceTag), uint64(cookieTagMask))
	if err != nil {
		return 0, fmt.Errorf("recover services: %w", err)
	}
	rec := newRecoveredServices()
	lb, dnat, sa := c.p.Table(ServiceLBTable).ID, c.p.Table(EndpointDNATTable).ID, c.p.Table(SessionAffinityTable).ID
	var others, fragFlows []*binding.Flow
	var lastGroup uint32
	for i := range stats {
		f := stats[i].Flow
		switch f.Table {
		case lb:
			if _, frag := fragGroupOf(&f); frag {
				fragFlows = append(fragFlows, &f)
				continue
			}
			p, groupID, digest, ok := c.parseLBFlow(&f)
			if !ok {
				others = append(others, &f)
				continue
			}
			rec.ports[p] = &recoveredPort{groupID: groupID, digest: digest, flows: []*binding.Flow{&f}}
			lastGroup = max(lastGroup, groupID)
		case dnat:
			rec.endpoints[f.MatchKey()] = &f
		case sa:
			others = append(others, &f)
		default:
			others = append(others, &f)
		}
	}
	// SessionAffinity flows belong to the port their match names.
	var stray []binding.Message
	for _, f := range others {
		p := c.flowPort(f)
		if port := rec.ports[p]; port != nil && f.Table == sa {
			port.flows = append(port.flows, f)
			continue
		}
		stray = append(stray, binding.DeleteFlowStrict(f))
	}
	// A fragment flow belongs to the port whose group's fragment group it
	// sends to.
	byGroup := make(map[uint32]*recoveredPort, len(rec.ports))
	for _, port := range rec.ports {
		byGroup[port.groupID] = port
	}
	for _, f := range fragFlows {
		g, _ := fragGroupOf(f)
		if port := byGroup[g]; port != nil {
			port.flows = append(port.flows, f)
			continue
		}
		stray = append(stray, binding.DeleteFlowStrict(f))
	}
	if len(rec.ports) == 0 {
		// Nothing of an earlier run to keep: its groups, if any, are stale.
		stray = append(stray, &binding.GroupMod{Command: binding.GroupDelete, GroupID: binding.GroupIDAll})
	}
	if err := c.write(ctx, "stray service flows", stray); err != nil {
		return 0, err
	}
	c.svc.recovered = rec
	c.svc.lastGroup = max(c.svc.lastGroup, lastGroup)
	klog.InfoS("Recovered Services of an earlier run", "ports", len(rec.ports), "endpointFlows", len(rec.endpoints), "strayFlows", len(stray))
	return len(rec.ports), nil
}

// parseLBFlow reads a ServiceLB flow of a port: the port, its group and
// the digest of the group's content.
func (c *services) parseLBFlow(f *binding.Flow) (p ServicePort, groupID uint32, digest []byte, ok bool) {
	for _, a := range f.Actions {
		switch a := a.(type) {
		case *binding.Group:
			groupID = a.ID
		case *binding.Note:
			digest = append([]byte(nil), a.Data...)
			if len(digest) > digestLen {
				digest = digest[:digestLen]
			}
		}
	}
	if groupID == 0 {
		return p, 0, nil, false
	}
	return c.flowPort(f), groupID, digest, true
}

// flowPort is the Service port a port's flow matches.
func (c *services) flowPort(f *binding.Flow) ServicePort {
	p := learnedPort(&f.Match)
	if v, ok := f.Match.Get(FromOutsideField.Field); ok {
		// reg0[11] (FromOutsideField), or reg0[0..3] = FromGateway, which
		// selected outside traffic before the node path marked it apart.
		if v.Mask.Lo>>FromOutsideField.Start&1 == 1 && v.Value.Lo>>FromOutsideField.Start&1 == 1 ||
			v.Mask.Lo>>PktSourceField.Start&0xf == 0xf && PktSource(v.Value.Lo>>PktSourceField.Start&0xf) == FromGateway {
			p.External = true
		}
	}
	return p
}

// FinishServiceRecovery deletes, in one bundle, what RecoverServices found
// and no Service adopted (Services deleted while the agent was down): their
// flows, the flows their clients learned, their groups and the endpoints'
// DNAT flows; then any group no port uses (best effort: Open vSwitch cannot
// report a group with more than 4093 buckets). Call it once every Service
// known at start was installed.
func (c *services) FinishServiceRecovery(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.svc.recovered
	var flowDels, learnDels, groupDels, epDels []binding.Message
	ports := make([]ServicePort, 0, len(rec.ports))
	for p := range rec.ports {
		ports = append(ports, p)
	}
	sort.Slice(ports, func(i, j int) bool { return comparePorts(ports[i], ports[j]) < 0 })
	for _, p := range ports {
		rp := rec.ports[p]
		for _, f := range rp.flows {
			flowDels = append(flowDels, binding.DeleteFlowStrict(f))
		}
		if on, _, _ := c.affinityOf(rp.flows); on {
			learnDels = append(learnDels, c.b.deleteLearned(p, nil))
		}
		groupDels = append(groupDels, &binding.GroupMod{Command: binding.GroupDelete, Type: binding.GroupSelect, GroupID: rp.groupID})
		if fragmentsApart(p) { // deleting a group that is not there (left by a run without fragment groups) is no error
			groupDels = append(groupDels, &binding.GroupMod{Command: binding.GroupDelete, Type: binding.GroupSelect, GroupID: fragGroupID(rp.groupID)})
		}
	}
	for _, f := range rec.endpoints {
		epDels = append(epDels, binding.DeleteFlowStrict(f))
	}
	var msgs []binding.Message
	for _, part := range [][]binding.Message{flowDels, groupDels, learnDels, epDels} {
		msgs = append(msgs, part...)
	}
	if err := c.write(ctx, "services deleted while the agent was down", msgs); err != nil {
		return err
	}
	c.svc.recovered = newRecoveredServices()
	klog.InfoS("Finished recovering Services", "deletedPorts", len(ports), "deletedEndpointFlows", len(epDels))

	// Groups no port uses: every group is written in one bundle with the
	// flow that uses it, and deleting a group deletes its flows, so only a
	// flow deleted by hand can leave one.
	r, ok := c.bridge.(switchReader)
	if !ok {
		return nil
	}
	groups, err := r.GroupStats(ctx, binding.GroupIDAll)
	if err != nil {
		klog.InfoS("Cannot list groups to delete the unused ones", "err", err)
		return nil
	}
	used := map[uint32]bool{}
	for _, ip := range c.svc.ports {
		used[ip.groupID], used[fragGroupID(ip.groupID)] = true, true
	}
	var unused []binding.Message
	for _, g := range groups {
		if !used[g.GroupID] && !IsMulticastGroupID(g.GroupID) {
			unused = append(unused, &binding.GroupMod{Command: binding.GroupDelete, Type: binding.GroupSelect, GroupID: g.GroupID})
		}
	}
	if err := c.write(ctx, "unused groups", unused); err != nil {
		return err
	}
	if len(unused) > 0 {
		klog.InfoS("Deleted unused groups", "groups", len(unused))
	}
	return nil
}
