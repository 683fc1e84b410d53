package openflow

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Tables of the NetworkPolicy feature, in the order a packet meets them in
// each direction (ingress and egress alike):
//
//	AntreaPolicy*Rule  Antrea-native rules of every tier above baseline
//	*Rule              K8s NetworkPolicy rules
//	*DefaultRule       the isolation drop of pods K8s NetworkPolicies select
//	*BaselineRule      Antrea-native rules of the baseline tier
//	*Metric            counts the packets of each rule's connections
//
// A rule becomes conjunctive flows: one flow per peer address, one per
// applied-to port and one per service (each carrying conjunction(id, k/n)),
// plus one flow matching conj_id=id with the rule's action, so a rule with N
// sources and M destinations costs N+M flows, not N*M. An Allow is final: it
// goes past every later policy table, whichever table it is in (upstream: an
// Allow in an Antrea-native tier skips K8s NetworkPolicy and baseline). A
// Pass goes on to the K8s NetworkPolicy table. Drop drops; Reject drops and
// sends the packet to the agent, which answers it (see PacketInPolicy). The
// order of Antrea-native rules is their flows' priority, which the policy
// reconciler assigns (tier, then policy priority, then rule order).
//
// The client keeps only the flows it wrote (for replay, Flows and diffs);
// which rules exist, their conjunction ids and priorities and which ports
// are isolated is the policy reconciler's (pkg/agent/controller/networkpolicy),
// which hands over each step as a PolicyChange. A change becomes one bundle
// holding only the flows whose content differs, so a change that changes
// nothing writes nothing.
var (
	AntreaPolicyEgressRuleTable = &TableSpec{Name: "AntreaPolicyEgressRule", Stage: EgressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Egress rules of Antrea-native policies in tiers above baseline, ordered by priority (tier, policy priority, rule order); established traffic skips every egress policy table; Allow skips them too, Pass goes on to EgressRule."}
	EgressRuleTable = &TableSpec{Name: "EgressRule", Stage: EgressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Egress rules of K8s NetworkPolicies as conjunctive flows (source port x destination address x service); allowed packets skip EgressDefaultRule and EgressBaselineRule."}
	EgressDefaultRuleTable = &TableSpec{Name: "EgressDefaultRule", Stage: EgressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Drops new connections from pods isolated for egress (by K8s NetworkPolicies) that no egress rule allowed."}
	EgressBaselineRuleTable = &TableSpec{Name: "EgressBaselineRule", Stage: EgressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Egress rules of Antrea-native policies in the baseline tier, for pods no K8s NetworkPolicy isolates for egress."}
	AntreaPolicyIngressRuleTable = &TableSpec{Name: "AntreaPolicyIngressRule", Stage: IngressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Ingress rules of Antrea-native policies in tiers above baseline, ordered by priority; established traffic and the node's own traffic (from the gateway with the gateway IP as source) skip every ingress policy table; Allow skips them too, Pass goes on to IngressRule."}
	IngressRuleTable = &TableSpec{Name: "IngressRule", Stage: IngressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Ingress rules of K8s NetworkPolicies as conjunctive flows (source address x destination port x service); allowed packets skip IngressDefaultRule and IngressBaselineRule."}
	IngressDefaultRuleTable = &TableSpec{Name: "IngressDefaultRule", Stage: IngressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Drops new connections to pods isolated for ingress (by K8s NetworkPolicies) that no ingress rule allowed."}
	IngressBaselineRuleTable = &TableSpec{Name: "IngressBaselineRule", Stage: IngressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Ingress rules of Antrea-native policies in the baseline tier, for pods no K8s NetworkPolicy isolates for ingress."}
	// The metric tables follow the rule tables of their direction: every
	// packet goes through them (an Allow and established traffic jump
	// here), and each Allow rule has two flows in them: its connections'
	// first packets (ct_state=+new, the rule's id in EgressRuleIDField or
	// IngressRuleIDField, which its conj_id flow loaded) are its sessions;
	// every later packet of those connections, either direction, matches
	// the id ConntrackCommit stored in ct_label. Drop, Reject and Pass
	// rules are counted at their conj_id flow, which decides every packet
	// they see (new connections only).
	EgressMetricTable = &TableSpec{Name: "EgressMetric", Stage: EgressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Counts, per egress Allow rule, its connections' first packets (ct_state=+new, rule id in reg6) and every later packet of them in either direction (ct_state=-new, rule id in ct_label[32..63])."}
	IngressMetricTable = &TableSpec{Name: "IngressMetric", Stage: IngressSecurityStage, Pipeline: PipelineIP, Miss: MissNext,
		Doc: "Counts, per ingress Allow rule, its connections' first packets (ct_state=+new, rule id in reg7) and every later packet of them in either direction (ct_state=-new, rule id in ct_label[0..31])."}
)

// networkPolicy is the NetworkPolicy feature: the fixed flows that let
// established and trusted traffic through, and the flows of the rules and
// isolation the policy reconciler hands over, recorded in policy under
// policyMu.
type networkPolicy struct {
	*datapath
	featureDefaults
	policyMu sync.Mutex
	// policy holds the NetworkPolicy flows, shared between rules.
	policy policyState
	// denyTracking: the flows that drop (Drop and Reject rules, the
	// isolation drops) also send the agent a metered copy of the packets
	// they drop, for the FlowExporter's denied connections.
	denyTracking bool
}

// SetDenyTracking makes the flows that drop (Drop and Reject rules, K8s
// NetworkPolicy isolation) send the agent a copy of each packet they drop,
// flagged PolicyPacketInDeny and metered by PolicyDenyMeterID (or by the
// reject or log meter when the flow sends one anyway): the FlowExporter
// keeps them as denied connections. Allowed traffic meets no extra action.
// Call it before the first ApplyPolicyChange; flows an earlier run wrote
// with the other setting are rewritten when the reconciler claims them
// (their actions differ).
func (c *networkPolicy) SetDenyTracking(on bool) {
	c.policyMu.Lock()
	defer c.policyMu.Unlock()
	c.denyTracking = on
}

func newNetworkPolicy(d *datapath) *networkPolicy {
	return &networkPolicy{datapath: d, policy: newPolicyState()}
}

// Name implements Feature.
func (*networkPolicy) Name() string { return "NetworkPolicy" }

// FixedFlows implements Feature.
func (c *networkPolicy) FixedFlows(node *NodeConfig) []*binding.Flow {
	return c.b.policyFixedFlows(node)
}

// Meters implements Feature: the meters of the reject, log and deny
// packet-ins.
func (*networkPolicy) Meters() []*binding.MeterMod {
	return []*binding.MeterMod{policyMeter(binding.MeterAdd, PolicyRejectMeterID, PolicyRejectRate),
		policyMeter(binding.MeterAdd, PolicyLogMeterID, PolicyLogRate),
		policyMeter(binding.MeterAdd, PolicyDenyMeterID, PolicyDenyRate)}
}

// Installed implements Feature: the rules' and isolation's flows (those
// RecoverPolicy read back included: a replay writes them as they are).
func (c *networkPolicy) Installed() ([]*binding.GroupMod, []*binding.Flow) {
	c.policyMu.Lock()
	defer c.policyMu.Unlock()
	return nil, c.policyFlows()
}

// PacketInKinds implements Feature: rejects, audit logging and denied
// connections.
func (*networkPolicy) PacketInKinds() []PacketInKind { return []PacketInKind{PacketInPolicy} }

// plainFlows is a copy of the record's plain flows (conj_id, isolation and
// metric flows), for Traceflow's copies.
func (c *networkPolicy) plainFlows() []*binding.Flow {
	c.policyMu.Lock()
	defer c.policyMu.Unlock()
	out := make([]*binding.Flow, 0, len(c.policy.flows))
	for _, f := range c.policy.flows {
		out = append(out, f)
	}
	return out
}

// Tables implements Feature.
func (*networkPolicy) Tables() []*TableSpec {
	return []*TableSpec{
		AntreaPolicyEgressRuleTable, EgressRuleTable, EgressDefaultRuleTable, EgressBaselineRuleTable, EgressMetricTable,
		AntreaPolicyIngressRuleTable, IngressRuleTable, IngressDefaultRuleTable, IngressBaselineRuleTable, IngressMetricTable,
	}
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

// Rule actions (controlplane's Allow, Drop, Reject, Pass).
const (
	ActionAllow RuleAction = iota
	ActionDrop
	// ActionReject drops the packet and has the agent answer it: a TCP
	// reset, or an ICMP "host administratively prohibited" otherwise.
	ActionReject
	// ActionPass leaves the decision to K8s NetworkPolicy, then baseline.
	ActionPass
)

var actionNames = [...]string{"Allow", "Drop", "Reject", "Pass"}

func (a RuleAction) String() string { return actionNames[a] }

// PolicyTier says which rule table a rule goes in.
type PolicyTier int

// Rule tables by tier.
const (
	// TierK8s is the K8s NetworkPolicy table (EgressRule, IngressRule).
	TierK8s PolicyTier = iota
	// TierAntrea is the Antrea-native table of the tiers above baseline
	// (AntreaPolicyEgressRule, AntreaPolicyIngressRule).
	TierAntrea
	// TierBaseline is the baseline tier's table, after the K8s isolation
	// drop (EgressBaselineRule, IngressBaselineRule).
	TierBaseline
)

// PolicyPort is one protocol/port clause of a policy rule (controlplane's
// Rule.Services entry resolved to numbers); not a Kubernetes Service (those
// are ServicePort and ServiceState). Port 0 means every
// destination port; EndPort > Port makes a range. SrcPort and SrcEndPort
// restrict the source port the same way. An ICMP clause matches its ICMP
// type and code when HasICMPType and HasICMPCode say so.
type PolicyPort struct {
	Protocol            uint8 // binding.IPProtoTCP, IPProtoUDP, IPProtoSCTP or IPProtoICMP
	Port                uint16
	EndPort             uint16
	SrcPort, SrcEndPort uint16

	HasICMPType, HasICMPCode bool
	ICMPType, ICMPCode       uint8
}

// PolicyRule is a rule resolved to this node: its peers as address prefixes
// (ipBlock excepts already subtracted) and the OpenFlow ports of the local
// pods it applies to.
type PolicyRule struct {
	// ID is the rule's conjunction id, unique on this node (the reconciler
	// allocates it).
	ID uint32
	// Key names the rule stably (policy and rule); it is noted on the rule's
	// conj_id flow, so a restarted agent finds the id its rule had.
	Key       string
	Direction Direction
	// Peers are the sources (ingress) or destinations (egress); AnyPeer
	// means every address.
	Peers   []netip.Prefix
	AnyPeer bool
	// AppliedTo are the local pods' OpenFlow ports.
	AppliedTo []uint32
	// NodePorts (ingress) are the NodePorts of the Services a policy applies
	// to: the rule meets the connections that entered the node through one
	// of them, whichever endpoint AntreaProxy chose (see nodePortMatch).
	NodePorts []NodePort
	// ToServices (egress) are the ClusterIPs and ports of the Services an
	// egress rule's toServices names: the rule meets the connections the
	// pod opened to one of them, whichever endpoint AntreaProxy chose (see
	// serviceFrontendMatch). They are peers beside Peers.
	ToServices []ServicePort
	// Services restrict protocol and ports; empty means all traffic.
	Services []PolicyPort
	Action   RuleAction
	// Tier is the table the rule goes in.
	Tier PolicyTier
	// Priority of the rule's flows in its table (higher wins); the
	// reconciler maps tier, policy and rule order to it.
	Priority uint16
	// Log sends a copy of each packet the rule decides on (new connections
	// only) to the agent for its audit log, metered.
	Log bool
	// L7VLAN, for an Allow rule with l7Protocols, is the rule's layer 7 id
	// (1 to 4094): the connections it allows are steered through the layer
	// 7 engine tagged with it (l7_policy.go). 0: a plain rule.
	L7VLAN uint16
}

// Equal reports whether two versions of a rule install the same flows.
func (r *PolicyRule) Equal(o *PolicyRule) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.ID == o.ID && r.Key == o.Key && r.Direction == o.Direction && r.AnyPeer == o.AnyPeer &&
		r.Action == o.Action && r.Tier == o.Tier && r.Priority == o.Priority && r.Log == o.Log && slices.Equal(r.Peers, o.Peers) &&
		slices.Equal(r.AppliedTo, o.AppliedTo) && slices.Equal(r.NodePorts, o.NodePorts) && slices.Equal(r.Services, o.Services) &&
		slices.Equal(r.ToServices, o.ToServices) && r.L7VLAN == o.L7VLAN
}

// installs reports whether the rule has flows: a rule without applied-to
// port or peer matches nothing.
func (r *PolicyRule) installs() bool {
	return r != nil && (len(r.AppliedTo) > 0 || len(r.NodePorts) > 0 && r.Direction == DirectionIngress) && (r.AnyPeer || len(r.Peers) > 0 || len(r.ToServices) > 0 && r.Direction == DirectionEgress)
}

// RuleChange takes one rule (one conjunction id) from Old to New: Old nil
// adds it, New nil removes it.
type RuleChange struct{ Old, New *PolicyRule }

// PolicyChange is one step of the policy reconciler, written as one bundle.
type PolicyChange struct {
	Rules []RuleChange
	// Isolate lists the local ports that become isolated, Release the ones
	// that stop being isolated, per Direction. A port already isolated is
	// listed again when the logging of its drop changes.
	Isolate, Release [2][]uint32
	// Logged are the ports of Isolate (sorted) whose isolation drop sends
	// a copy of the packets it drops to the agent's audit log (a K8s
	// NetworkPolicy of a Namespace with logging enabled isolates them).
	Logged [2][]uint32
}

// PolicyWrite says what ApplyPolicyChange wrote.
type PolicyWrite struct {
	// Messages is the number of flow mods in the bundle (0: nothing written).
	Messages int
	// Narrowed is set when the change may forbid traffic that was allowed
	// (an allow clause removed, a port isolated, a drop clause added):
	// only then may cached datapath flows have to be revalidated at once.
	Narrowed bool
}

// Priorities in the rule tables.
const (
	// PolicyRulePriority is the priority of K8s NetworkPolicy rules.
	PolicyRulePriority uint16 = 200
	// PolicyTopPriority and PolicyBottomPriority bound the priorities the
	// reconciler gives Antrea-native rules in their tables; the bypass of
	// established and trusted traffic sits above them.
	PolicyTopPriority    uint16 = 64000
	PolicyBottomPriority uint16 = 100
	priorityPolicyBypass uint16 = 64990
	priorityDefaultDrop  uint16 = 200
)

// conjMatch is one flow shared by every rule clause with the same table,
// priority and match: its actions are the conjunctions of all of them.
type conjMatch struct {
	flow  *binding.Flow                   // actions unset
	conjs map[uint32]*binding.Conjunction // by conj id
}

// policyState is what the client wrote to the policy tables: shared
// clause flows, and plain flows (each rule's conj_id flow, the isolated
// ports' default drops), by match key.
type policyState struct {
	matches map[string]*conjMatch
	flows   map[string]*binding.Flow
	// recovery, between RecoverPolicy and FinishPolicyRecovery: what this
	// run claimed of the flows an earlier run left.
	recovery *policyClaims
}

type policyClaims struct {
	conjs map[string]map[uint32]bool
	flows map[string]bool
}

func newPolicyState() policyState {
	return policyState{matches: map[string]*conjMatch{}, flows: map[string]*binding.Flow{}}
}

// ruleTable is the table of a direction and tier.
func ruleTable(d Direction, t PolicyTier) *TableSpec {
	tables := [2][3]*TableSpec{
		DirectionIngress: {TierK8s: IngressRuleTable, TierAntrea: AntreaPolicyIngressRuleTable, TierBaseline: IngressBaselineRuleTable},
		DirectionEgress:  {TierK8s: EgressRuleTable, TierAntrea: AntreaPolicyEgressRuleTable, TierBaseline: EgressBaselineRuleTable},
	}
	return tables[d][t]
}

func defaultRuleTable(d Direction) *TableSpec {
	if d == DirectionEgress {
		return EgressDefaultRuleTable
	}
	return IngressDefaultRuleTable
}

// pastPolicy continues after the last rule table of a direction, in its
// metric table: where an Allow, established traffic and trusted traffic go.
func (b *flowBuilder) pastPolicy(d Direction) binding.Action {
	return b.next(ruleTable(d, TierBaseline))
}

func metricTable(d Direction) *TableSpec {
	if d == DirectionEgress {
		return EgressMetricTable
	}
	return IngressMetricTable
}

// ruleIDField is the register an Allow rule's conj_id flow loads its id
// into, ruleCTLabel the ct_label bits ConntrackCommit moves it to.
func ruleIDField(d Direction) binding.FieldRange {
	if d == DirectionEgress {
		return EgressRuleIDField
	}
	return IngressRuleIDField
}

func ruleCTLabel(d Direction) binding.FieldRange {
	if d == DirectionEgress {
		return EgressRuleCTLabel
	}
	return IngressRuleCTLabel
}

// ruleLabels are the exec actions of ConntrackCommit's ct(commit): they
// store the ids of the rules that allowed the connection in its ct_label,
// where the metric tables find them on its later packets, and whether a
// layer 7 rule allowed it (and which) in its ct_mark, where the layer 7
// steering flows find it (l7_policy.go). The commit comes
// after both directions' policy: a connection a later table drops is not
// committed, so its next packet meets the rules again.
func ruleLabels() []binding.Action {
	return []binding.Action{move(EgressRuleIDField, EgressRuleCTLabel), move(IngressRuleIDField, IngressRuleCTLabel),
		move(L7RedirectField, L7RedirectCTMark), move(L7RuleVLANField, L7RuleVLANCTMark)}
}

func (b *flowBuilder) policyFlow(t *TableSpec, priority uint16, match func(*binding.Match), actions ...binding.Action) *binding.Flow {
	f := b.flow(t, priority, match, actions...)
	f.Cookie = uint64(cookiePolicyTag)
	return f
}

// policyFixedFlows let established traffic through both rule tables, and
// the node itself reach its pods: packets from the gateway whose source is
// the gateway IP (kubelet probes, the node's processes, and the pods'
// traffic to NodePorts, which the node path masquerades to it). Other
// traffic from the gateway comes from outside the node (FromOutsideField)
// and meets the ingress rules like any other: an ipBlock peer matches the
// client's address. Upstream trusts the gateway IP alone too.
func (b *flowBuilder) policyFixedFlows(n *NodeConfig) []*binding.Flow {
	var out []*binding.Flow
	for _, f := range n.families() {
		ip := ethType(f)
		for _, d := range []Direction{DirectionIngress, DirectionEgress} {
			out = append(out, b.flow(ruleTable(d, TierAntrea), priorityPolicyBypass, func(m *binding.Match) {
				m.EthType(ip).CTState(binding.CTStateTrk, binding.CTStateNew|binding.CTStateTrk)
			}, b.pastPolicy(d)))
		}
		out = append(out, b.flow(AntreaPolicyIngressRuleTable, priorityPolicyBypass, func(m *binding.Match) {
			m.EthType(ip).IPSrc(n.gatewayIP(f))
			matchField(m, PktSourceField, FromGateway)
		}, b.pastPolicy(DirectionIngress)))
	}
	return out
}

// clauseMatches returns the matches of each clause of a rule, in clause order.
// A peer's clause matches its prefix's family; the clauses without an
// address (applied-to ports, services, the catch-all) have a flow per
// family the node carries, so a rule serves both families of a
// dual-stack pod.
func clauseMatches(r *PolicyRule, fams []types.IPFamily) [][]func(*binding.Match) {
	var clauses [][]func(*binding.Match)
	var peers, applied []func(*binding.Match)
	// perFamily is one match per family of the node, each starting with its
	// family's eth_type.
	perFamily := func(match func(m *binding.Match, f types.IPFamily)) []func(*binding.Match) {
		var out []func(*binding.Match)
		for _, f := range fams {
			out = append(out, func(m *binding.Match) { match(m.EthType(ethType(f)), f) })
		}
		return out
	}
	for _, p := range r.Peers {
		ip := ethTypeOf(p.Addr())
		if r.Direction == DirectionIngress {
			peers = append(peers, func(m *binding.Match) { m.EthType(ip).IPSrcPrefix(p) })
		} else {
			peers = append(peers, func(m *binding.Match) { m.EthType(ip).IPDstPrefix(p) })
		}
	}
	for _, port := range r.AppliedTo {
		if r.Direction == DirectionIngress {
			applied = append(applied, perFamily(func(m *binding.Match, _ types.IPFamily) { matchField(m, TargetOFPortField, port) })...)
		} else {
			applied = append(applied, perFamily(func(m *binding.Match, _ types.IPFamily) { m.InPort(port) })...)
		}
	}
	if r.Direction == DirectionIngress {
		for _, np := range r.NodePorts {
			applied = append(applied, perFamily(func(m *binding.Match, f types.IPFamily) { nodePortMatch(m, f, np) })...)
		}
		if !r.AnyPeer {
			clauses = append(clauses, peers)
		}
		clauses = append(clauses, applied)
	} else {
		for _, sp := range r.ToServices {
			if slices.Contains(fams, types.FamilyOf(sp.IP)) {
				peers = append(peers, func(m *binding.Match) { serviceFrontendMatch(m, sp) })
			}
		}
		clauses = append(clauses, applied)
		if !r.AnyPeer {
			clauses = append(clauses, peers)
		}
	}
	if len(r.Services) > 0 {
		var svcs []func(*binding.Match)
		for _, s := range r.Services {
			// One flow per destination mask and source mask: a range is a
			// union of masked matches.
			for _, dst := range portMasks(s.Port, s.EndPort) {
				for _, src := range portMasks(s.SrcPort, s.SrcEndPort) {
					svcs = append(svcs, perFamily(func(m *binding.Match, f types.IPFamily) { portClauseMatch(m, f, s, dst, src) })...)
				}
			}
		}
		clauses = append(clauses, svcs)
	}
	if len(clauses) == 1 {
		// A conjunction needs two clauses: the second matches every IP packet.
		clauses = append(clauses, perFamily(func(*binding.Match, types.IPFamily) {}))
	}
	return clauses
}

// NodePort is a Service's NodePort (declared in pkg/agent/types).
type NodePort = types.NodePort

// nodePortMatch matches the connections that entered the node through a
// NodePort: the node's netfilter DNATed them to NodePortVirtualIP, keeping
// the port, and AntreaProxy (ServiceLB, EndpointDNAT) to the endpoint it
// chose, so that conntrack's original direction, which the packet carries
// from EndpointDNAT's ct(commit,nat) on, still says NodePortVirtualIP and the
// NodePort. The rule tables see new connections only, right after that
// commit; the source is still the client's (ServiceSNAT comes later).
// Upstream matches the Service group id AntreaProxy loads instead; this
// needs no register and covers every endpoint, session affinity included.
func nodePortMatch(m *binding.Match, f types.IPFamily, np NodePort) {
	vip := types.NodePortVirtualIPOf(f)
	m.CTState(binding.CTStateTrk, binding.CTStateTrk|binding.CTStateInv).
		CTNwProto(np.Protocol).CTNwDst(netip.PrefixFrom(vip, vip.BitLen())).CTTpDst(np.Port)
}

// serviceFrontendMatch matches the connections a pod opened to a Service's
// frontend, as nodePortMatch does for NodePorts: EndpointDNAT committed
// them with the endpoint AntreaProxy chose, and conntrack's original
// direction still says the ClusterIP and port. Egress rules see new
// connections only, right after that commit. Upstream matches the Service
// group id AntreaProxy loads in a register instead.
func serviceFrontendMatch(m *binding.Match, s ServicePort) {
	m.EthType(ethTypeOf(s.IP)).CTState(binding.CTStateTrk, binding.CTStateTrk|binding.CTStateInv).
		CTNwProto(s.Protocol).CTNwDst(netip.PrefixFrom(s.IP, s.IP.BitLen())).CTTpDst(s.Port)
}

// portClauseMatch matches a PolicyPort clause's protocol and, for one value/mask pair of
// each of its port ranges (a zero mask: any port), its destination and
// source ports; for ICMP, its type and code (ICMPv6's in family IPv6).
func portClauseMatch(m *binding.Match, f types.IPFamily, s PolicyPort, dst, src [2]uint16) {
	if s.Protocol == binding.IPProtoICMP && f == types.IPv6 {
		m.IPProto(binding.IPProtoICMPv6)
		if s.HasICMPType {
			m.ICMPv6Type(s.ICMPType)
		}
		if s.HasICMPCode {
			m.ICMPv6Code(s.ICMPCode)
		}
		return
	}
	m.IPProto(s.Protocol)
	switch s.Protocol {
	case binding.IPProtoTCP:
		if dst[1] != 0 {
			m.TCPDstMasked(dst[0], dst[1])
		}
		if src[1] != 0 {
			m.TCPSrcMasked(src[0], src[1])
		}
	case binding.IPProtoUDP:
		if dst[1] != 0 {
			m.UDPDstMasked(dst[0], dst[1])
		}
		if src[1] != 0 {
			m.UDPSrcMasked(src[0], src[1])
		}
	case binding.IPProtoSCTP:
		if dst[1] != 0 {
			m.SCTPDstMasked(dst[0], dst[1])
		}
		if src[1] != 0 {
			m.SCTPSrcMasked(src[0], src[1])
		}
	case binding.IPProtoICMP:
		if s.HasICMPType {
			m.ICMPType(s.ICMPType)
		}
		if s.HasICMPCode {
			m.ICMPCode(s.ICMPCode)
		}
	}
}

// portMasks splits [port, end] into value/mask pairs (end 0 means port
// alone; port 0 means any port: one pair with a zero mask).
func portMasks(port, end uint16) [][2]uint16 {
	if port == 0 {
		return [][2]uint16{{0, 0}}
	}
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

// rulePriority is the priority of a rule's flows. Only K8s rules, which all
// allow, are spread; an Antrea-native rule's priority is its place in the
// evaluation order and stays exact (rules sharing it are rules of policies
// with the same tier, priority and rule index, whose order is undefined
// upstream too).
func rulePriority(r *PolicyRule) uint16 {
	if r.Tier != TierK8s {
		return r.Priority
	}
	return r.Priority - uint16((r.ID/conjunctionsPerFlow)%priorityBand)
}

// ruleFlows are a rule's clause flows (actions unset) with their
// conjunctions, and its plain flows: its conj_id flow first, then, with
// metrics, an Allow rule's metric flows; nothing for a rule that installs
// none. deny: a Drop or Reject rule reports what it drops (SetDenyTracking).
func (b *flowBuilder) ruleFlows(r *PolicyRule, metrics, deny bool) (clauses []*binding.Flow, conjs []*binding.Conjunction, plain []*binding.Flow) {
	if !r.installs() {
		return nil, nil, nil
	}
	rt := ruleTable(r.Direction, r.Tier)
	prio := rulePriority(r)
	cms := clauseMatches(r, b.families())
	for i, clause := range cms {
		for _, mk := range clause {
			clauses = append(clauses, b.policyFlow(rt, prio, mk))
			conjs = append(conjs, &binding.Conjunction{ID: r.ID, Clause: uint8(i + 1), NClauses: uint8(len(cms))})
		}
	}
	var acts []*binding.Flow
	for _, f := range b.families() {
		act := b.policyFlow(rt, prio, func(m *binding.Match) { m.EthType(ethType(f)).ConjID(r.ID) }, b.ruleActions(r, deny)...)
		if r.Action != ActionAllow {
			act.Cookie |= uint64(cookiePolicyStatsFlag)
		}
		acts = append(acts, act)
	}
	if r.Action != ActionAllow || !metrics {
		return clauses, conjs, acts
	}
	return clauses, conjs, append(acts, b.metricFlows(r)...)
}

// metricFlows are an Allow rule's two flows in its direction's metric
// table: the first packet of each connection it allows (its id in the
// register its conj_id flow loaded) and every later packet of those
// connections, both directions (its id in the ct_label ConntrackCommit
// wrote). They depend on the id and direction only, so a rule that changes
// keeps them, and their counters, as they are.
func (b *flowBuilder) metricFlows(r *PolicyRule) []*binding.Flow {
	mt := metricTable(r.Direction)
	var out []*binding.Flow
	for _, f := range b.families() {
		ip := ethType(f)
		newFlow := b.policyFlow(mt, priorityNormal, func(m *binding.Match) {
			m.EthType(ip).CTState(binding.CTStateNew|binding.CTStateTrk, binding.CTStateNew|binding.CTStateTrk)
			matchField(m, ruleIDField(r.Direction), r.ID)
		}, b.next(mt))
		estFlow := b.policyFlow(mt, priorityNormal, func(m *binding.Match) {
			m.EthType(ip).CTState(binding.CTStateTrk, binding.CTStateNew|binding.CTStateTrk)
			matchField(m, ruleCTLabel(r.Direction), r.ID)
		}, b.next(mt))
		newFlow.Cookie |= uint64(cookiePolicyStatsFlag)
		estFlow.Cookie |= uint64(cookiePolicyStatsFlag)
		out = append(out, newFlow, estFlow)
	}
	return out
}

// ruleActions are the actions of a rule's conj_id flow: its key noted (for
// recovery), a packet-in for the agent when the rule rejects, logs, or (deny)
// drops a packet the FlowExporter is to see (the rule's id in
// PolicyRuleIDField says which rule it was), then its verdict. One packet-in
// serves every purpose (its flags say which), metered by the reject meter
// for a Reject, else the log meter for a logged rule, else the deny meter.
func (b *flowBuilder) ruleActions(r *PolicyRule, deny bool) []binding.Action {
	var acts []binding.Action
	if r.Key != "" {
		acts = append(acts, &binding.Note{Data: []byte(r.Key)})
	}
	deny = deny && (r.Action == ActionDrop || r.Action == ActionReject)
	if r.Action == ActionReject || r.Log || deny {
		var flags byte
		meter := PolicyDenyMeterID
		if r.Log {
			flags |= PolicyPacketInLog
			meter = PolicyLogMeterID
		}
		if deny {
			flags |= PolicyPacketInDeny
		}
		if r.Action == ActionReject {
			flags |= PolicyPacketInReject
			meter = PolicyRejectMeterID
		}
		acts = append(acts, load(PolicyRuleIDField, r.ID), &binding.Controller{MaxLen: policyPacketInMaxLen,
			Reason: binding.ReasonAction, UserData: PacketInPolicy.userData(flags, byte(r.Direction), byte(r.Action)), MeterID: meter})
	}
	switch r.Action {
	case ActionAllow:
		if r.L7VLAN != 0 {
			acts = append(acts, load(L7RedirectField, on), load(L7RuleVLANField, r.L7VLAN))
		}
		acts = append(acts, load(ruleIDField(r.Direction), r.ID), b.pastPolicy(r.Direction))
	case ActionPass:
		acts = append(acts, b.next(ruleTable(r.Direction, TierAntrea)))
	}
	return acts
}

// defaultDropFlows drop what no rule allowed to or from an isolated port
// (a flow per realized family);
// a logged one, or with deny (SetDenyTracking), first sends the packet to
// the agent (rule id 0: no rule, the K8s isolation itself), metered like the
// rules' log packet-ins, or by the deny meter when it is not logged.
func (b *flowBuilder) defaultDropFlows(d Direction, port uint32, logged, deny bool) []*binding.Flow {
	var acts []binding.Action
	if logged || deny {
		var flags byte
		meter := PolicyDenyMeterID
		if logged {
			flags |= PolicyPacketInLog
			meter = PolicyLogMeterID
		}
		if deny {
			flags |= PolicyPacketInDeny
		}
		acts = append(acts, load(PolicyRuleIDField, 0), &binding.Controller{MaxLen: policyPacketInMaxLen, Reason: binding.ReasonAction,
			UserData: PacketInPolicy.userData(flags, byte(d), byte(ActionDrop)), MeterID: meter})
	}
	var out []*binding.Flow
	for _, f := range b.families() {
		ip := ethType(f)
		out = append(out, b.policyFlow(defaultRuleTable(d), priorityDefaultDrop, func(m *binding.Match) {
			if d == DirectionEgress {
				m.EthType(ip).InPort(port)
			} else {
				matchField(m.EthType(ip), TargetOFPortField, port)
			}
		}, acts...))
	}
	return out
}

// ApplyPolicyChange writes one step of the policy reconciler as one bundle
// holding only the difference: shared clause flows whose conjunctions
// changed, conj_id and default-drop flows added or removed. A step that
// changes nothing writes nothing. The record changes only once OVS accepted
// the bundle, so a failed write leaves both as they were and a retry starts
// from the truth. c.policyMu is held across the write; pod and Service
// writes do not wait for it.
func (c *networkPolicy) ApplyPolicyChange(ctx context.Context, ch PolicyChange) (PolicyWrite, error) {
	c.policyMu.Lock()
	defer c.policyMu.Unlock()
	d, narrowed := c.policyDelta(ch)
	var b deltaBatch
	b.add(d)
	if err := b.commit(ctx, c, "policy"); err != nil {
		return PolicyWrite{}, err
	}
	return PolicyWrite{Messages: len(d.msgs), Narrowed: narrowed && len(d.msgs) > 0}, nil
}

// policyDelta computes the delta of a change, and whether it may forbid
// traffic that was allowed. c.policyMu is held.
func (c *networkPolicy) policyDelta(ch PolicyChange) (delta, bool) {
	pl := newPolicyPlan(&c.policy, &c.b)
	pl.deny = c.denyTracking
	pl.removeRules(ch.Rules)
	pl.addRules(ch.Rules)
	pl.isolation(ch)
	// The conj_id flows go in first on add and last on delete, so that
	// within the bundle a completed conjunction always finds its action.
	adds, dels := pl.plainMsgs()
	conjMsgs, changed := pl.conjMsgs()
	msgs := append(append(adds, conjMsgs...), dels...)
	return delta{msgs: msgs, apply: func() func() { return pl.apply(changed) }}, pl.narrowed
}

// policyPlan is a PolicyChange being computed against the record, which
// it does not change until apply: the new conjunction sets of the shared
// flows it touches, the plain flows it wants (nil: removed), and what it
// claims of an earlier run's flows during recovery.
type policyPlan struct {
	st *policyState
	b  *flowBuilder
	// touched holds copies of the conjunction sets of the shared flows
	// the change touches, templates their flows, by match key.
	touched    map[string]map[uint32]*binding.Conjunction
	templates  map[string]*binding.Flow
	plain      map[string]*binding.Flow
	plainOrder []string
	claims     []policyClaim
	narrowed   bool
	// deny: the drops report what they drop (SetDenyTracking).
	deny bool
}

// policyClaim is a conjunction (id != 0) or a plain flow (id 0) of an
// earlier run that the change claims, by match key.
type policyClaim struct {
	key string
	id  uint32
}

func newPolicyPlan(st *policyState, b *flowBuilder) *policyPlan {
	return &policyPlan{st: st, b: b, touched: map[string]map[uint32]*binding.Conjunction{},
		templates: map[string]*binding.Flow{}, plain: map[string]*binding.Flow{}}
}

// touch returns the new conjunction set of f's shared flow.
func (pl *policyPlan) touch(f *binding.Flow) map[uint32]*binding.Conjunction {
	k := f.MatchKey()
	if m, ok := pl.touched[k]; ok {
		return m
	}
	m := map[uint32]*binding.Conjunction{}
	if cm := pl.st.matches[k]; cm != nil {
		maps.Copy(m, cm.conjs)
		f = cm.flow
	}
	pl.touched[k], pl.templates[k] = m, f
	return m
}

// setPlain wants f (or, want false, no flow at its place).
func (pl *policyPlan) setPlain(f *binding.Flow, want bool) {
	k := f.MatchKey()
	if _, ok := pl.plain[k]; !ok {
		pl.plainOrder = append(pl.plainOrder, k)
	}
	if want {
		pl.plain[k] = f
	} else {
		pl.plain[k] = nil
	}
}

// keepsMetrics: an Allow rule that stays an Allow with the same id and
// direction keeps its metric flows as they are: they are not even built.
func keepsMetrics(rc RuleChange) bool {
	return rc.Old.installs() && rc.New.installs() && rc.Old.ID == rc.New.ID && rc.Old.Direction == rc.New.Direction &&
		rc.Old.Action == ActionAllow && rc.New.Action == ActionAllow
}

// removeRules takes the old versions out first, so a rule's new version
// (same id) adds back what it keeps.
func (pl *policyPlan) removeRules(rules []RuleChange) {
	for _, rc := range rules {
		if rc.Old == nil {
			continue
		}
		clauses, _, plainFlows := pl.b.ruleFlows(rc.Old, !keepsMetrics(rc), pl.deny)
		for _, f := range clauses {
			delete(pl.touch(f), rc.Old.ID)
		}
		for _, f := range plainFlows {
			pl.setPlain(f, false)
		}
	}
}

func (pl *policyPlan) addRules(rules []RuleChange) {
	for _, rc := range rules {
		if rc.New == nil {
			continue
		}
		clauses, conjs, plainFlows := pl.b.ruleFlows(rc.New, !keepsMetrics(rc), pl.deny)
		for i, f := range clauses {
			pl.touch(f)[rc.New.ID] = conjs[i]
			if pl.st.recovery != nil {
				pl.claims = append(pl.claims, policyClaim{f.MatchKey(), rc.New.ID})
			}
		}
		for _, f := range plainFlows {
			pl.setPlain(f, true)
		}
		if (rc.New.Action != ActionAllow || rc.Old != nil && rc.Old.Priority != rc.New.Priority) && !rc.Old.Equal(rc.New) {
			pl.narrowed = true
		}
	}
}

// isolation wants the default drops of the ports isolated and removes
// those of the ports released.
func (pl *policyPlan) isolation(ch PolicyChange) {
	for d := range ch.Release {
		for _, p := range ch.Release[d] {
			for _, f := range pl.b.defaultDropFlows(Direction(d), p, false, pl.deny) {
				pl.setPlain(f, false)
			}
		}
	}
	for d := range ch.Isolate {
		for _, p := range ch.Isolate[d] {
			_, logged := slices.BinarySearch(ch.Logged[d], p)
			for _, f := range pl.b.defaultDropFlows(Direction(d), p, logged, pl.deny) {
				pl.setPlain(f, true)
			}
			pl.narrowed = true
		}
	}
}

// plainMsgs are the adds of the plain flows wanted in another form than
// the record's, and the deletes of those removed.
func (pl *policyPlan) plainMsgs() (adds, dels []binding.Message) {
	for _, k := range pl.plainOrder {
		want, have := pl.plain[k], pl.st.flows[k]
		if pl.st.recovery != nil && want != nil {
			pl.claims = append(pl.claims, policyClaim{key: k})
		}
		switch {
		case want != nil && (have == nil || !sameActions(have, want)):
			adds = append(adds, binding.AddFlow(want))
		case want == nil && have != nil:
			dels = append(dels, binding.DeleteFlowStrict(have))
			if allows(have) {
				pl.narrowed = true
			}
		}
	}
	return adds, dels
}

// conjMsgs rewrite (or delete) the shared flows whose conjunctions
// changed, in match key order; changed lists their keys.
func (pl *policyPlan) conjMsgs() (msgs []binding.Message, changed []string) {
	for _, k := range slices.Sorted(maps.Keys(pl.touched)) {
		want := pl.touched[k]
		var have map[uint32]*binding.Conjunction
		if cm := pl.st.matches[k]; cm != nil {
			have = cm.conjs
		}
		if sameConjs(have, want) {
			continue
		}
		changed = append(changed, k)
		for id := range have {
			if _, ok := want[id]; !ok {
				pl.narrowed = true // a clause of a rule lost a match
			}
		}
		if len(want) == 0 {
			msgs = append(msgs, binding.DeleteFlowStrict(pl.templates[k]))
			continue
		}
		f := *pl.templates[k]
		f.Actions = conjActions(want)
		msgs = append(msgs, binding.AddFlow(&f))
	}
	return msgs, changed
}

// apply records the plan (the shared flows of changed, every plain flow,
// the claims) and returns what puts the record back.
func (pl *policyPlan) apply(changed []string) (revert func()) {
	matches, flows := editOf(pl.st.matches), editOf(pl.st.flows)
	for _, k := range changed {
		if len(pl.touched[k]) == 0 {
			matches.del(k)
			continue
		}
		matches.set(k, &conjMatch{flow: pl.templates[k], conjs: pl.touched[k]})
	}
	for _, k := range pl.plainOrder {
		if f := pl.plain[k]; f != nil {
			flows.set(k, f)
		} else {
			flows.del(k)
		}
	}
	unclaim := pl.st.recovery.claim(pl.claims)
	return func() {
		unclaim()
		flows.revert()
		matches.revert()
	}
}

// claim marks what a change claims of an earlier run's flows, and returns
// what takes back the claims that were new.
func (r *policyClaims) claim(claims []policyClaim) (unclaim func()) {
	if r == nil || len(claims) == 0 {
		return func() {}
	}
	var fresh []policyClaim
	for _, c := range claims {
		if c.id == 0 {
			if !r.flows[c.key] {
				r.flows[c.key] = true
				fresh = append(fresh, c)
			}
			continue
		}
		if r.conjs[c.key] == nil {
			r.conjs[c.key] = map[uint32]bool{}
		}
		if !r.conjs[c.key][c.id] {
			r.conjs[c.key][c.id] = true
			fresh = append(fresh, c)
		}
	}
	return func() {
		for _, c := range fresh {
			if c.id == 0 {
				delete(r.flows, c.key)
			} else {
				delete(r.conjs[c.key], c.id)
			}
		}
	}
}

// allows reports whether a plain policy flow lets packets on (a conj_id
// flow of an allow rule; metric flows only count).
func allows(f *binding.Flow) bool {
	if _, ok := f.Match.Get(binding.FieldConjID); !ok {
		return false
	}
	for _, a := range f.Actions {
		if _, ok := a.(*binding.GotoTable); ok {
			return true
		}
	}
	return false
}

// sameActions compares two flows of one match key by their text (which
// pads notes as the switch reports them).
func sameActions(a, b *binding.Flow) bool { return a.String() == b.String() }

func sameConjs(a, b map[uint32]*binding.Conjunction) bool {
	if len(a) != len(b) {
		return false
	}
	for id, x := range a {
		y, ok := b[id]
		if !ok || x.Clause != y.Clause || x.NClauses != y.NClauses {
			return false
		}
	}
	return true
}

func conjActions(conjs map[uint32]*binding.Conjunction) []binding.Action {
	acts := make([]binding.Action, 0, len(conjs))
	for _, id := range slices.Sorted(maps.Keys(conjs)) {
		acts = append(acts, conjs[id])
	}
	return acts
}

// RecoverPolicy reads the policy flows an earlier agent run left in the
// switch (cookiePolicyTag) into the client's record, and returns the
// conjunction id of each rule key noted on them: the reconciler gives the
// same rules the same ids, so ApplyPolicyChange finds their flows in place
// and writes nothing for them. FinishPolicyRecovery removes what this run
// did not claim. Call it once, before the first ApplyPolicyChange.
func (c *networkPolicy) RecoverPolicy(ctx context.Context) (map[string]uint32, error) {
	c.policyMu.Lock()
	defer c.policyMu.Unlock()
	if len(c.policy.matches) > 0 || len(c.policy.flows) > 0 {
		return nil, fmt.Errorf("recover policy: policy flows are installed already")
	}
	d, ok := c.bridge.(flowDumper)
	if !ok {
		return nil, fmt.Errorf("recover policy: the bridge cannot be read")
	}
	stats, err := d.DumpFlows(ctx, binding.TableAll, uint64(cookiePolicyTag), uint64(cookieTagMask))
	if err != nil {
		return nil, fmt.Errorf("recover policy: %w", err)
	}
	ids := map[string]uint32{}
	st := &c.policy
	for i := range stats {
		f := stats[i].Flow
		f.Cookie = uint64(cookiePolicyTag) | f.Cookie&uint64(cookiePolicyStatsFlag)
		conjs := map[uint32]*binding.Conjunction{}
		for _, a := range f.Actions {
			switch a := a.(type) {
			case *binding.Conjunction:
				conjs[a.ID] = a
			case *binding.Note:
				if id, ok := f.Match.Get(binding.FieldConjID); ok {
					ids[string(bytes.TrimRight(a.Data, "\x00"))] = uint32(id.Value.Lo)
				}
			}
		}
		if len(conjs) > 0 {
			tmpl := f
			tmpl.Actions = nil
			st.matches[f.MatchKey()] = &conjMatch{flow: &tmpl, conjs: conjs}
			continue
		}
		st.flows[f.MatchKey()] = &f
	}
	st.recovery = &policyClaims{conjs: map[string]map[uint32]bool{}, flows: map[string]bool{}}
	klog.InfoS("Recovered policy flows of an earlier run", "rules", len(ids), "sharedFlows", len(st.matches), "flows", len(st.flows))
	return ids, nil
}

// FinishPolicyRecovery removes, in one bundle, the recovered policy flows
// (and conjunctions of shared flows) that no ApplyPolicyChange since
// RecoverPolicy claimed: rules and isolation that went away while the agent
// was down. It returns the number of flow mods written.
func (c *networkPolicy) FinishPolicyRecovery(ctx context.Context) (int, error) {
	c.policyMu.Lock()
	defer c.policyMu.Unlock()
	st := &c.policy
	r := st.recovery
	if r == nil {
		return 0, nil
	}
	var msgs []binding.Message
	newMatches := map[string]*conjMatch{}
	for _, k := range slices.Sorted(maps.Keys(st.matches)) {
		cm := st.matches[k]
		keep := map[uint32]*binding.Conjunction{}
		for id, cj := range cm.conjs {
			if r.conjs[k][id] {
				keep[id] = cj
			}
		}
		switch {
		case len(keep) == len(cm.conjs):
		case len(keep) == 0:
			msgs = append(msgs, binding.DeleteFlowStrict(cm.flow))
		default:
			f := *cm.flow
			f.Actions = conjActions(keep)
			msgs = append(msgs, binding.AddFlow(&f))
		}
		if len(keep) > 0 {
			newMatches[k] = &conjMatch{flow: cm.flow, conjs: keep}
		}
	}
	var stale []string
	for _, k := range slices.Sorted(maps.Keys(st.flows)) {
		if !r.flows[k] {
			stale = append(stale, k)
			msgs = append(msgs, binding.DeleteFlowStrict(st.flows[k]))
		}
	}
	if err := c.write(ctx, "stale policy flows", msgs); err != nil {
		return 0, err
	}
	st.matches = newMatches
	for _, k := range stale {
		delete(st.flows, k)
	}
	st.recovery = nil
	klog.InfoS("Policy recovery finished", "staleFlowMods", len(msgs))
	return len(msgs), nil
}

// policyFlows lists the installed policy flows (for replay and Flows).
// c.policyMu is held.
func (c *networkPolicy) policyFlows() []*binding.Flow {
	out := make([]*binding.Flow, 0, len(c.policy.matches)+len(c.policy.flows))
	for _, cm := range c.policy.matches {
		f := *cm.flow
		f.Actions = conjActions(cm.conjs)
		out = append(out, &f)
	}
	for _, f := range c.policy.flows {
		out = append(out, f)
	}
	return out
}

// RuleCounters are a rule's statistics, read from its flows' counters, as
// upstream Antrea defines them. For an Allow rule: Sessions are the
// connections it allowed (their first packets, at its +new metric flow),
// Packets and Bytes every packet of those connections in both directions
// (its +new and -new metric flows). For a Drop or Reject rule: the packets
// it dropped, each one a connection attempt (Sessions = Packets). For a
// Pass rule: the new connections' packets it passed on (likewise).
type RuleCounters struct {
	Sessions, Packets, Bytes uint64
}

// PolicyRuleStats reads the counters of every installed rule, by
// conjunction id, in one flow-stats request that selects the flows whose
// counters are statistics by cookie (cookiePolicyStatsFlag). A flow that
// was rewritten (OFPFC_ADD of a changed flow) starts again from zero.
func (c *networkPolicy) PolicyRuleStats(ctx context.Context) (map[uint32]RuleCounters, error) {
	d, ok := c.bridge.(flowDumper)
	if !ok {
		return nil, fmt.Errorf("policy rule stats: the bridge cannot be read")
	}
	stats, err := d.DumpFlows(ctx, binding.TableAll, uint64(cookiePolicyTag|cookiePolicyStatsFlag), uint64(cookieTagMask|cookiePolicyStatsFlag))
	if err != nil {
		return nil, fmt.Errorf("policy rule stats: %w", err)
	}
	out := make(map[uint32]RuleCounters, len(stats))
	for i := range stats {
		id, session, ok := statsFlowRule(&stats[i].Flow)
		if !ok {
			continue
		}
		rc := out[id]
		if session {
			rc.Sessions += stats[i].PacketCount
		}
		rc.Packets += stats[i].PacketCount
		rc.Bytes += stats[i].ByteCount
		out[id] = rc
	}
	return out, nil
}

// statsFlowRule says which rule a statistics flow counts for, and whether
// each packet it counts opens a session: a conj_id flow (every packet it
// decides is a new connection's), a +new metric flow (the rule's id in a
// register), or a -new metric flow (the id in ct_label).
func statsFlowRule(f *binding.Flow) (id uint32, session, ok bool) {
	if v, ok := f.Match.Get(binding.FieldConjID); ok {
		return uint32(v.Value.Lo), true, true
	}
	for _, r := range []binding.FieldRange{EgressRuleIDField, IngressRuleIDField} {
		if v, ok := f.Match.Get(r.Field); ok {
			return uint32(v.Value.Lo >> r.Start), true, true
		}
	}
	if v, ok := f.Match.Get(binding.FieldCTLabel); ok {
		for _, r := range []binding.FieldRange{EgressRuleCTLabel, IngressRuleCTLabel} {
			mask := (uint64(1)<<r.Bits() - 1) << r.Start
			if v.Mask.Hi == 0 && v.Mask.Lo == mask {
				return uint32(v.Value.Lo >> r.Start), false, true
			}
		}
	}
	return 0, false, false
}
