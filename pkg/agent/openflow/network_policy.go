package openflow

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Tables of the NetworkPolicy feature. A rule becomes conjunctive flows: one
// flow per peer address, one per applied-to port and one per service (each
// carrying conjunction(id, k/n)), plus one flow matching conj_id=id with the
// rule's action, so a rule with N sources and M destinations costs N+M flows,
// not N*M. Isolated pods' traffic that no rule allowed meets the default
// drop of the *DefaultRule tables.
var (
	EgressRuleTable = &TableSpec{Name: "EgressRule", Stage: EgressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Egress rules of NetworkPolicies as conjunctive flows (source port x destination address x service); established traffic passes; allowed packets skip EgressDefaultRule."}
	EgressDefaultRuleTable = &TableSpec{Name: "EgressDefaultRule", Stage: EgressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Drops new connections from pods isolated for egress that no egress rule allowed."}
	IngressRuleTable = &TableSpec{Name: "IngressRule", Stage: IngressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Ingress rules of NetworkPolicies as conjunctive flows (source address x destination port x service); established traffic and traffic from the local gateway pass; allowed packets skip IngressDefaultRule."}
	IngressDefaultRuleTable = &TableSpec{Name: "IngressDefaultRule", Stage: IngressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Drops new connections to pods isolated for ingress that no ingress rule allowed."}
)

type networkPolicy struct{}

func (networkPolicy) tables() []*TableSpec {
	return []*TableSpec{EgressRuleTable, EgressDefaultRuleTable, IngressRuleTable, IngressDefaultRuleTable}
}

// Direction of a policy rule.
type Direction int

// Directions.
const (
	DirectionIngress Direction = iota
	DirectionEgress
)

func (d Direction) String() string {
	if d == DirectionEgress {
		return "Egress"
	}
	return "Ingress"
}

// RuleAction is what a matching rule does.
type RuleAction int

// Rule actions.
const (
	ActionAllow RuleAction = iota
	ActionDrop
)

// Service is one protocol/port clause of a rule. Port 0 means every port;
// EndPort > Port makes a range.
type Service struct {
	Protocol uint8 // 6 TCP, 17 UDP, 132 SCTP
	Port     uint16
	EndPort  uint16
}

// PolicyRule is a rule resolved to this node: its peers as address prefixes
// (ipBlock excepts already subtracted) and the OpenFlow ports of the local
// pods it applies to.
type PolicyRule struct {
	// ID is the rule's conjunction id, unique on this node.
	ID        uint32
	Direction Direction
	// Peers are the sources (ingress) or destinations (egress); AnyPeer
	// means every address.
	Peers   []netip.Prefix
	AnyPeer bool
	// AppliedTo are the local pods' OpenFlow ports.
	AppliedTo []uint32
	// Services restrict protocol and ports; empty means all traffic.
	Services []Service
	Action   RuleAction
	// Priority of the rule's flows in its table (higher wins).
	Priority uint16
}

// Priorities in the rule tables.
const (
	// PolicyRulePriority is the default priority of K8s NetworkPolicy rules.
	PolicyRulePriority   uint16 = 200
	priorityPolicyBypass uint16 = 64990
	priorityDefaultDrop  uint16 = 200
)

// conjMatch is one flow shared by every rule clause with the same table,
// priority and match: its actions are the conjunctions of all of them.
type conjMatch struct {
	flow  *binding.Flow                   // actions unset
	conjs map[uint32]*binding.Conjunction // by conj id
}

// policyState is the client's view of installed policy flows.
type policyState struct {
	matches  map[string]*conjMatch
	rules    map[uint32]*installedRule
	isolated [2]map[uint32]bool // by Direction: isolated ports
}

type installedRule struct {
	rule    *PolicyRule
	keys    []string // conjMatch keys the rule contributes to
	actFlow *binding.Flow
}

func newPolicyState() policyState {
	return policyState{
		matches:  map[string]*conjMatch{},
		rules:    map[uint32]*installedRule{},
		isolated: [2]map[uint32]bool{{}, {}},
	}
}

func (b *flowBuilder) ruleTables(d Direction) (rule, dflt *TableSpec) {
	if d == DirectionEgress {
		return EgressRuleTable, EgressDefaultRuleTable
	}
	return IngressRuleTable, IngressDefaultRuleTable
}

// policyFixedFlows let established traffic through both rule tables and let
// the local gateway (kubelet probes, node traffic) reach pods.
func (b *flowBuilder) policyFixedFlows() []*binding.Flow {
	var out []*binding.Flow
	for _, d := range []Direction{DirectionIngress, DirectionEgress} {
		rt, dt := b.ruleTables(d)
		out = append(out, b.flow(rt, priorityPolicyBypass, func(m *binding.Match) {
			m.EthType(binding.EthTypeIPv4).CTState(binding.CTStateTrk, binding.CTStateNew|binding.CTStateTrk)
		}, b.next(dt)))
	}
	out = append(out, b.flow(IngressRuleTable, priorityPolicyBypass, func(m *binding.Match) {
		m.EthType(binding.EthTypeIPv4)
		matchField(m, PktSourceField, FromGateway)
	}, b.next(IngressDefaultRuleTable)))
	return out
}

// clauseMatches returns the matches of each clause of a rule, in clause order.
func clauseMatches(r *PolicyRule) [][]func(*binding.Match) {
	var clauses [][]func(*binding.Match)
	var peers, applied []func(*binding.Match)
	for _, p := range r.Peers {
		p := p
		if r.Direction == DirectionIngress {
			peers = append(peers, func(m *binding.Match) { m.EthType(binding.EthTypeIPv4).IPSrcPrefix(p) })
		} else {
			peers = append(peers, func(m *binding.Match) { m.EthType(binding.EthTypeIPv4).IPDstPrefix(p) })
		}
	}
	for _, port := range r.AppliedTo {
		port := port
		if r.Direction == DirectionIngress {
			applied = append(applied, func(m *binding.Match) {
				m.EthType(binding.EthTypeIPv4)
				matchField(m, TargetOFPortField, uint64(port))
			})
		} else {
			applied = append(applied, func(m *binding.Match) { m.EthType(binding.EthTypeIPv4).InPort(port) })
		}
	}
	if r.Direction == DirectionIngress {
		if !r.AnyPeer {
			clauses = append(clauses, peers)
		}
		clauses = append(clauses, applied)
	} else {
		clauses = append(clauses, applied)
		if !r.AnyPeer {
			clauses = append(clauses, peers)
		}
	}
	if len(r.Services) > 0 {
		var svcs []func(*binding.Match)
		for _, s := range r.Services {
			for _, pm := range portMasks(s.Port, s.EndPort) {
				s, pm := s, pm
				svcs = append(svcs, func(m *binding.Match) {
					m.EthType(binding.EthTypeIPv4).IPProto(s.Protocol)
					if s.Port == 0 {
						return
					}
					switch s.Protocol {
					case 6:
						m.TCPDstMasked(pm[0], pm[1])
					case 17:
						m.UDPDstMasked(pm[0], pm[1])
					case 132:
						m.SCTPDstMasked(pm[0], pm[1])
					}
				})
			}
		}
		clauses = append(clauses, svcs)
	}
	if len(clauses) == 1 {
		// A conjunction needs two clauses: the second matches every IP packet.
		clauses = append(clauses, []func(*binding.Match){func(m *binding.Match) { m.EthType(binding.EthTypeIPv4) }})
	}
	return clauses
}

// portMasks splits [port, end] into value/mask pairs (end 0 means port alone).
func portMasks(port, end uint16) [][2]uint16 {
	if end <= port {
		return [][2]uint16{{port, 0xffff}}
	}
	var out [][2]uint16
	lo, hi := uint32(port), uint32(end)
	for lo <= hi {
		size := uint32(1)
		for lo%(size*2) == 0 && lo+size*2-1 <= hi {
			size *= 2
		}
		out = append(out, [2]uint16{uint16(lo), uint16(^(size - 1))})
		lo += size
	}
	return out
}

// InstallPolicyRule installs a rule or changes it to the given version, as
// one bundle holding only the difference: flows the new version no longer
// needs are removed, shared flows get their conjunction actions updated, new
// ones are added. An empty AppliedTo removes the rule's flows. The client's
// record changes only once OVS accepted the bundle, so a failed write leaves
// both as they were and a retry starts from the truth.
func (c *Client) InstallPolicyRule(ctx context.Context, r *PolicyRule) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs, commit := c.policyRuleMsgs(r)
	if err := c.write(ctx, fmt.Sprintf("policy rule %d", r.ID), msgs); err != nil {
		return err
	}
	commit()
	return nil
}

// UninstallPolicyRule removes a rule's flows; unknown ids are a no-op.
func (c *Client) UninstallPolicyRule(ctx context.Context, id uint32) error {
	return c.InstallPolicyRule(ctx, &PolicyRule{ID: id})
}

// conjunctionsPerFlow bounds the conjunction actions one shared flow carries
// (each is 16 bytes; an OpenFlow message holds 64 KiB), and priorityBand is
// how many priorities below a rule's own its flows may be spread over.
// Rules whose ids fall in different blocks of conjunctionsPerFlow get
// different priorities, so a match shared by thousands of rules (every rule
// applied to one pod shares that pod's flow) becomes several flows. For
// allow rules this keeps the semantics: OVS tries lower priorities when no
// conjunction completes at a higher one.
const (
	conjunctionsPerFlow = 2000
	priorityBand        = 100
)

func rulePriority(r *PolicyRule) uint16 {
	return r.Priority - uint16((r.ID/conjunctionsPerFlow)%priorityBand)
}

// policyRuleMsgs computes the flow mods that take OVS from the rule's
// installed version to r, and the commit that records r once they are
// applied. c.mu is held.
func (c *Client) policyRuleMsgs(r *PolicyRule) ([]binding.Message, func()) {
	st := &c.policy
	old := st.rules[r.ID]
	// New conjunction sets of every touched shared flow (copies: the state
	// itself changes only in commit).
	touched := map[string]map[uint32]*binding.Conjunction{}
	templates := map[string]*binding.Flow{}
	touch := func(k string, f *binding.Flow) map[uint32]*binding.Conjunction {
		if m, ok := touched[k]; ok {
			return m
		}
		m := map[uint32]*binding.Conjunction{}
		if cm := st.matches[k]; cm != nil {
			for id, cj := range cm.conjs {
				m[id] = cj
			}
			f = cm.flow
		}
		touched[k], templates[k] = m, f
		return m
	}
	if old != nil {
		for _, k := range old.keys {
			if cm := st.matches[k]; cm != nil {
				delete(touch(k, cm.flow), r.ID)
			}
		}
	}
	var newRule *installedRule
	if len(r.AppliedTo) > 0 && (r.AnyPeer || len(r.Peers) > 0) {
		rt, dt := c.b.ruleTables(r.Direction)
		prio := rulePriority(r)
		clauses := clauseMatches(r)
		newRule = &installedRule{rule: r}
		for i, clause := range clauses {
			for _, mk := range clause {
				f := c.b.flow(rt, prio, mk)
				k := f.MatchKey()
				touch(k, f)[r.ID] = &binding.Conjunction{ID: r.ID, Clause: uint8(i + 1), NClauses: uint8(len(clauses))}
				newRule.keys = append(newRule.keys, k)
			}
		}
		var act []binding.Action
		if r.Action == ActionAllow {
			act = []binding.Action{c.b.next(dt)}
		}
		newRule.actFlow = c.b.flow(rt, prio, func(m *binding.Match) { m.EthType(binding.EthTypeIPv4).ConjID(r.ID) }, act...)
	}
	var msgs []binding.Message
	// The conj_id flow goes in first on add and last on delete, so that within
	// the bundle a completed conjunction always finds its action.
	if newRule != nil {
		msgs = append(msgs, binding.AddFlow(newRule.actFlow))
	}
	keys := make([]string, 0, len(touched))
	for k := range touched {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(touched[k]) == 0 {
			if st.matches[k] != nil {
				msgs = append(msgs, binding.DeleteFlowStrict(templates[k]))
			}
			continue
		}
		f := *templates[k]
		f.Actions = conjActions(touched[k])
		msgs = append(msgs, binding.AddFlow(&f))
	}
	if old != nil && (newRule == nil || old.actFlow.MatchKey() != newRule.actFlow.MatchKey()) {
		msgs = append(msgs, binding.DeleteFlowStrict(old.actFlow))
	}
	commit := func() {
		for _, k := range keys {
			if len(touched[k]) == 0 {
				delete(st.matches, k)
				continue
			}
			st.matches[k] = &conjMatch{flow: templates[k], conjs: touched[k]}
		}
		if newRule == nil {
			delete(st.rules, r.ID)
		} else {
			st.rules[r.ID] = newRule
		}
	}
	return msgs, commit
}

func conjActions(conjs map[uint32]*binding.Conjunction) []binding.Action {
	ids := make([]uint32, 0, len(conjs))
	for id := range conjs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	acts := make([]binding.Action, 0, len(ids))
	for _, id := range ids {
		acts = append(acts, conjs[id])
	}
	return acts
}

// SetIsolatedPorts makes exactly these local pod ports isolated for a
// direction: their new connections that no rule allows are dropped.
func (c *Client) SetIsolatedPorts(ctx context.Context, d Direction, ports []uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := map[uint32]bool{}
	for _, p := range ports {
		want[p] = true
	}
	have := c.policy.isolated[d]
	var msgs []binding.Message
	for p := range want {
		if !have[p] {
			msgs = append(msgs, binding.AddFlow(c.defaultDropFlow(d, p)))
		}
	}
	for p := range have {
		if !want[p] {
			msgs = append(msgs, binding.DeleteFlowStrict(c.defaultDropFlow(d, p)))
		}
	}
	if err := c.write(ctx, d.String()+" isolation", msgs); err != nil {
		return err
	}
	c.policy.isolated[d] = want
	return nil
}

func (c *Client) defaultDropFlow(d Direction, port uint32) *binding.Flow {
	if d == DirectionEgress {
		return c.b.flow(EgressDefaultRuleTable, priorityDefaultDrop, func(m *binding.Match) { m.EthType(binding.EthTypeIPv4).InPort(port) })
	}
	return c.b.flow(IngressDefaultRuleTable, priorityDefaultDrop, func(m *binding.Match) {
		m.EthType(binding.EthTypeIPv4)
		matchField(m, TargetOFPortField, uint64(port))
	})
}

// policyFlows lists the installed policy flows (for replay and Flows). c.mu is held.
func (c *Client) policyFlows() []*binding.Flow {
	var out []*binding.Flow
	for _, cm := range c.policy.matches {
		f := *cm.flow
		f.Actions = conjActions(cm.conjs)
		out = append(out, &f)
	}
	for _, r := range c.policy.rules {
		out = append(out, r.actFlow)
	}
	for d, ports := range c.policy.isolated {
		for p := range ports {
			out = append(out, c.defaultDropFlow(Direction(d), p))
		}
	}
	return out
}
