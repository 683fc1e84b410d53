package antctl

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/antctl/query"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// Which flows realize a policy? The agent gives each rule a conjunction id
// it keeps in memory only, so until the agent serves its own API antctl
// recovers the ids from what it can read: the policy's rules and groups from
// the controller, the local pods' ports from OVSDB, and the flows. A rule is
// realized as conjunctive flows in its direction's rule table
// (pkg/agent/openflow/network_policy.go): one clause of flows matching the
// ports of the pods it applies to (in_port for egress, the output port
// register for ingress), one matching its peers' addresses, and one matching
// its services when it has any, each flow carrying conjunction(id, k/n), and
// a conj_id=id flow with the action. An id is the rule's when every flow of
// its clauses matches only the rule's own ports, peers and services. Two
// rules realized by the same flows are indistinguishable, and both shown.

// ruleMatch is one rule of the policy, resolved to what its flows match.
type ruleMatch struct {
	table    uint8
	portKey  openflow.FieldRange // the field of the applied-to clause
	peerKey  openflow.Field      // the field of the peer clause
	ports    map[uint64]bool     // local OpenFlow ports it applies to
	peers    []netip.Prefix      // member addresses (/32) and ipBlock CIDRs
	services []cpv1beta2.Service
}

// policyFlows selects the flows of one policy from a dump.
type policyFlows struct {
	rules []ruleMatch
	// isolation: the default-drop tables and the ports the policy isolates there.
	isolation map[uint8]ruleMatch
	// notes say why nothing may be shown (printed on stderr).
	notes []string
}

// policyFlows reads policy ns/name (ns "" matches any) from the controller,
// as this node's agent receives it, and resolves its rules on this node.
func (o *options) policyFlows(ctx context.Context, p *agentof.Pipeline, store interfacestore.InterfaceStore, ns, name string, typ cpv1beta2.NetworkPolicyType) (*policyFlows, error) {
	c, err := o.getClients()
	if err != nil {
		return nil, err
	}
	node := o.env.NodeName
	cp := c.Antrea.ControlplaneV1beta2()
	list, err := cp.NetworkPolicies().List(ctx, query.ListOptions(""))
	if err != nil {
		return nil, fmt.Errorf("-N: listing networkpolicies: %w", err)
	}
	var found []*cpv1beta2.NetworkPolicy
	var sources []string
	for i := range list.Items {
		np := &list.Items[i]
		ref := np.SourceRef
		if ref == nil {
			continue
		}
		src := ref.Name
		if ref.Namespace != "" {
			src = ref.Namespace + "/" + ref.Name
		}
		sources = append(sources, src)
		if ref.Name == name && (ns == "" || ref.Namespace == ns) && (typ == "" || ref.Type == typ) {
			found = append(found, np)
		}
	}
	want := name
	if ns != "" {
		want = ns + "/" + name
	}
	if len(found) == 0 {
		sort.Strings(sources)
		return nil, fmt.Errorf("networkpolicy %q not found%s", want, didYouMean(want, sources))
	}
	atgs, err := cp.AppliedToGroups().List(ctx, query.ListOptions(node))
	if err != nil {
		return nil, fmt.Errorf("-N: listing appliedtogroups: %w", err)
	}
	ags, err := cp.AddressGroups().List(ctx, query.ListOptions(node))
	if err != nil {
		return nil, fmt.Errorf("-N: listing addressgroups: %w", err)
	}
	applied := map[string][]cpv1beta2.GroupMember{}
	for _, g := range atgs.Items {
		applied[g.Name] = g.GroupMembers
	}
	addresses := map[string][]cpv1beta2.GroupMember{}
	for _, g := range ags.Items {
		addresses[g.Name] = g.GroupMembers
	}
	pf := &policyFlows{isolation: map[uint8]ruleMatch{}}
	for _, np := range found {
		for i := range np.Rules {
			r := &np.Rules[i]
			rm := ruleMatch{ports: map[uint64]bool{}, services: r.Services}
			peer := r.From
			ruleT, dropT := agentof.IngressRuleTable, agentof.IngressDefaultRuleTable
			rm.portKey, rm.peerKey = agentof.TargetOFPortField, openflow.FieldIPv4Src
			if r.Direction == cpv1beta2.DirectionOut {
				peer = r.To
				ruleT, dropT = agentof.EgressRuleTable, agentof.EgressDefaultRuleTable
				rm.portKey, rm.peerKey = openflow.FieldInPort.All(), openflow.FieldIPv4Dst
			}
			rm.table = p.Table(ruleT).ID
			groups := np.AppliedToGroups
			if len(r.AppliedToGroups) > 0 {
				groups = r.AppliedToGroups
			}
			for _, g := range groups {
				for _, m := range applied[g] {
					if m.Pod == nil {
						continue
					}
					for _, i := range store.GetContainerInterfacesByPod(m.Pod.Name, m.Pod.Namespace) {
						if i.OVSPortConfig != nil && i.OFPort > 0 {
							rm.ports[uint64(i.OFPort)] = true
						}
					}
				}
			}
			for _, g := range peer.AddressGroups {
				for _, m := range addresses[g] {
					for _, ip := range m.IPs {
						if a, ok := netip.AddrFromSlice(ip); ok && a.Unmap().Is4() {
							rm.peers = append(rm.peers, netip.PrefixFrom(a.Unmap(), 32))
						}
					}
				}
			}
			for _, b := range peer.IPBlocks {
				if a, ok := netip.AddrFromSlice(b.CIDR.IP); ok {
					if pfx, err := a.Unmap().Prefix(int(b.CIDR.PrefixLength)); err == nil {
						rm.peers = append(rm.peers, pfx)
					}
				}
			}
			if len(rm.ports) == 0 {
				continue
			}
			pf.rules = append(pf.rules, rm)
			iso := pf.isolation[p.Table(dropT).ID]
			if iso.ports == nil {
				iso = ruleMatch{table: p.Table(dropT).ID, portKey: rm.portKey, ports: map[uint64]bool{}}
			}
			for port := range rm.ports {
				iso.ports[port] = true
			}
			pf.isolation[iso.table] = iso
		}
	}
	if len(pf.rules) == 0 {
		where := "this node"
		if node != "" {
			where = "node " + node
		}
		pf.notes = append(pf.notes, fmt.Sprintf("networkpolicy %s applies to no pod on %s: it has no flows here.", want, where))
	}
	return pf, nil
}

// clause is one flow's part in a conjunction.
type clause struct {
	flow int // index in the dump
	kind clauseKind
}

type clauseKind int

const (
	clausePorts clauseKind = iota
	clausePeers
	clauseServices
	clauseAnyIP
)

// selectFlows returns the indexes of the policy's flows in a dump.
func (pf *policyFlows) selectFlows(flows []openflow.FlowStats) map[int]bool {
	out := map[int]bool{}
	for _, rm := range pf.rules {
		byID := map[uint32][]clause{}
		for i := range flows {
			f := &flows[i].Flow
			if f.Table != rm.table {
				continue
			}
			for _, a := range f.Actions {
				if cj, ok := a.(*openflow.Conjunction); ok {
					byID[cj.ID] = append(byID[cj.ID], clause{flow: i, kind: rm.kindOf(f)})
				}
			}
		}
		for id, clauses := range byID {
			if !rm.owns(flows, clauses) {
				continue
			}
			for _, c := range clauses {
				out[c.flow] = true
			}
			for i := range flows {
				f := &flows[i].Flow
				if mf, ok := f.Match.Get(openflow.FieldConjID); ok && f.Table == rm.table && uint32(mf.Value.Lo) == id {
					out[i] = true
				}
			}
		}
	}
	for _, iso := range pf.isolation {
		for i := range flows {
			f := &flows[i].Flow
			if f.Table != iso.table {
				continue
			}
			if v, ok := fieldRangeValue(&f.Match, iso.portKey); ok && iso.ports[v] {
				out[i] = true
			}
		}
	}
	return out
}

func (rm *ruleMatch) kindOf(f *openflow.Flow) clauseKind {
	switch {
	case hasField(f, rm.portKey.Field):
		return clausePorts
	case hasField(f, rm.peerKey):
		return clausePeers
	case hasField(f, openflow.FieldIPProto):
		return clauseServices
	}
	return clauseAnyIP
}

func hasField(f *openflow.Flow, fld openflow.Field) bool {
	_, ok := f.Match.Get(fld)
	return ok
}

// owns says whether the clauses of one conjunction id are exactly this
// rule's: its ports, its peers and (only when it has some) its services.
func (rm *ruleMatch) owns(flows []openflow.FlowStats, clauses []clause) bool {
	var ports, peers, services int
	for _, c := range clauses {
		f := &flows[c.flow].Flow
		switch c.kind {
		case clausePorts:
			v, ok := fieldRangeValue(&f.Match, rm.portKey)
			if !ok || !rm.ports[v] {
				return false
			}
			ports++
		case clausePeers:
			if !rm.holdsPeer(f) {
				return false
			}
			peers++
		case clauseServices:
			if !rm.holdsService(f) {
				return false
			}
			services++
		}
	}
	return ports > 0 && peers > 0 && (services > 0) == (len(rm.services) > 0)
}

// holdsPeer says whether the flow's address (or prefix) lies in a peer.
func (rm *ruleMatch) holdsPeer(f *openflow.Flow) bool {
	mf, _ := f.Match.Get(rm.peerKey)
	bits := 0
	for m := uint32(mf.Mask.Lo); m != 0; m <<= 1 {
		bits++
	}
	var b [4]byte
	v := uint32(mf.Value.Lo)
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	pfx := netip.PrefixFrom(netip.AddrFrom4(b), bits)
	for _, p := range rm.peers {
		if p.Bits() <= pfx.Bits() && p.Contains(pfx.Addr()) {
			return true
		}
	}
	return false
}

// holdsService says whether the flow's protocol and port fit a service of
// the rule (a named port fits any port of its protocol: its number is the
// destination member's).
func (rm *ruleMatch) holdsService(f *openflow.Flow) bool {
	mf, _ := f.Match.Get(openflow.FieldIPProto)
	proto := uint8(mf.Value.Lo)
	var portField openflow.Field
	switch proto {
	case 6:
		portField = openflow.FieldTCPDst
	case 17:
		portField = openflow.FieldUDPDst
	case 132:
		portField = openflow.FieldSCTPDst
	}
	port, hasPort := f.Match.Get(portField)
	for _, s := range rm.services {
		want := cpv1beta2.ProtocolTCP
		if s.Protocol != nil {
			want = *s.Protocol
		}
		if protocolNumbers[want] != proto {
			continue
		}
		if s.Port == nil {
			if !hasPort {
				return true
			}
			continue
		}
		if !hasPort {
			continue
		}
		if s.Port.Type == intstr.String {
			return true
		}
		lo, hi := uint64(s.Port.IntVal), uint64(s.Port.IntVal)
		if s.EndPort != nil && int32(hi) < *s.EndPort {
			hi = uint64(*s.EndPort)
		}
		// The flow matches port/mask: the range [value, value|^mask].
		first := port.Value.Lo
		last := port.Value.Lo | (^port.Mask.Lo & 0xffff)
		if first >= lo && last <= hi {
			return true
		}
	}
	return false
}

// protocolNumbers are the IP protocol numbers of the API's protocols.
var protocolNumbers = map[cpv1beta2.Protocol]uint8{
	cpv1beta2.ProtocolTCP: 6, cpv1beta2.ProtocolUDP: 17, cpv1beta2.ProtocolSCTP: 132, cpv1beta2.ProtocolICMP: 1,
}
