package openflow

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Traceflow (pkg/agent/traceflow): a traced packet carries its Traceflow's
// data-plane tag in the 6 bits of its IP DSCP field. For each running tag
// the client installs copies of the flows that decide a packet's fate,
// matching ip_dscp=<tag> one priority above the flow they copy, which send
// the agent a copy of the packet (a packet-in with PacketInTraceflow
// userdata) and then do what the original does:
//
//	Output            every output flow (pods, gateway, tunnel, hairpin),
//	                  and the miss (no port: dropped)       TraceflowOutput, TraceflowNoOutput
//	*Rule tables      every Allow, Drop and Reject rule's conj_id flow
//	                  (conj_id flows may match more fields; the conjunction
//	                  is found at the clauses' priority, then the highest
//	                  conj_id flow matching the packet acts)  TraceflowRule
//	*DefaultRule      every isolated port's drop            TraceflowIsolation
//	Output            every layer 7 steering flow (to the engine, or the
//	                  drop of what is not TCP)              TraceflowL7Engine
//	LoadBalancerSourceRanges  every drop of a source range  TraceflowTableMiss
//
// The packet-in's registers say the rest: where the packet entered
// (PktSourceField), where L3Forwarding sent it, the port in reg1, the
// endpoint a Service group chose (reg3, reg4[16]) and tun_dst. With live
// traffic a flow in ConntrackState sets the tag on the first packets that
// match the Traceflow (ip_dscp 0 only).
//
// The flows are a snapshot of the output and policy flows when the
// Traceflow starts (it lasts seconds), written under their own lock: a pod,
// policy or Service write never waits for a Traceflow; installing one
// reads the pods' and policies' records under their locks, one at a time.
// They carry a hard timeout so that an agent that never removes them
// (killed) leaves nothing behind for long.

// TraceflowPoint says which kind of flow sent a Traceflow packet-in.
type TraceflowPoint byte

// Points of the pipeline that report a traced packet.
const (
	// TraceflowOutput: Output sends the packet to the port in reg1 (or
	// back through IN_PORT, hairpin).
	TraceflowOutput TraceflowPoint = 1
	// TraceflowNoOutput: Output found no port: the packet is dropped.
	TraceflowNoOutput TraceflowPoint = 2
	// TraceflowRule: a policy rule decided (Allow, Drop or Reject).
	TraceflowRule TraceflowPoint = 3
	// TraceflowIsolation: a K8s NetworkPolicy's isolation dropped it (no
	// rule allowed it).
	TraceflowIsolation TraceflowPoint = 4
	// TraceflowTableMiss: a table dropped it for want of a flow (spoofed
	// source, unknown port, invalid connection), or LoadBalancerSourceRanges
	// dropped it (a source outside a LoadBalancer's ranges).
	TraceflowTableMiss TraceflowPoint = 5
	// TraceflowL7Engine: a layer 7 rule sent the packet to the layer 7
	// engine (Action Allow: the engine sends on what it lets through, and
	// a later packet-in says where it went) or dropped it (Action Drop:
	// not TCP); L7VLAN says which rule.
	TraceflowL7Engine TraceflowPoint = 6
)

// Priority offsets of the copies above the flows they copy.
const (
	traceflowOutputBoost = 20
	traceflowLivePrio    = 100
)

// TraceflowLive says which real packets a live Traceflow tags.
type TraceflowLive struct {
	Src, Dst netip.Addr // Dst invalid: any destination
	Proto    uint8      // 0: any
	SrcPort  uint16     // TCP and UDP only; 0: any
	DstPort  uint16
}

// TraceflowFlows is what InstallTraceflowFlows installs for one tag.
type TraceflowFlows struct {
	Tag uint8
	// Timeout is the hard timeout of the flows (0: none).
	Timeout time.Duration
	// DroppedOnly reports drops only: no Output or Allow copies.
	DroppedOnly bool
	// Live, when set, tags real traffic.
	Live *TraceflowLive
}

// traceflow is the Traceflow feature: no table of its own, the copies of
// other features' flows for each running tag (read from the pods' and the
// policy's records, each under its own lock), recorded in tf. It has no
// fixed flows and nothing to replay: a tag's flows are a snapshot of
// others' flows taken when its Traceflow starts and time out within
// seconds; after a switch restart the Traceflow times out too.
type traceflow struct {
	*datapath
	featureDefaults
	podSource    *podConnectivity
	policySource *networkPolicy
	// rangeSource has the drops of LoadBalancer source ranges.
	rangeSource *lbSourceRanges
	// l7Source has the layer 7 steering flows.
	l7Source *l7Policy
	tf       traceflowState
}

func newTraceflow(d *datapath, pods *podConnectivity, policy *networkPolicy, ranges *lbSourceRanges, l7 *l7Policy) *traceflow {
	return &traceflow{datapath: d, podSource: pods, policySource: policy, rangeSource: ranges, l7Source: l7}
}

// Name implements Feature.
func (*traceflow) Name() string { return "Traceflow" }

// Tables implements Feature: none, its flows sit in others' tables.
func (*traceflow) Tables() []*TableSpec { return nil }

// PacketInKinds implements Feature: the traced packets' reports.
func (*traceflow) PacketInKinds() []PacketInKind { return []PacketInKind{PacketInTraceflow} }

// traceflowState holds the flows installed per tag.
type traceflowState struct {
	mu    sync.Mutex
	flows map[uint8][]*binding.Flow
	live  map[uint8]*binding.Flow
}

func (c *traceflow) traceflowCookie(tag uint8) uint64 {
	return withRound(c.round, cookieTraceflow|Cookie(tag))
}

func traceflowUserData(tag uint8, p TraceflowPoint, extra ...byte) []byte {
	return PacketInTraceflow.userData(append([]byte{tag, byte(p)}, extra...)...)
}

func (c *traceflow) traceflowController(tag uint8, p TraceflowPoint, extra ...byte) *binding.Controller {
	return &binding.Controller{Reason: binding.ReasonAction, UserData: traceflowUserData(tag, p, extra...)}
}

// copyForTag copies f to match the tag (the DSCP of traced packets of
// either family) one step above it, with the packet-in first and f's
// actions after it: one copy for the family f matches, or one per family
// the node carries when f matches none.
func (c *traceflow) copyForTag(f *binding.Flow, tag uint8, boost uint16, hard uint16, pin *binding.Controller) []*binding.Flow {
	var out []*binding.Flow
	for _, fam := range c.flowFamilies(f) {
		g := &binding.Flow{Table: f.Table, Priority: f.Priority + boost, Cookie: c.traceflowCookie(tag), HardTimeout: hard,
			Match: f.Match.Clone()}
		g.Match.EthType(ethType(fam)).IPDSCP(tag)
		g.Actions = append([]binding.Action{pin}, f.Actions...)
		out = append(out, g)
	}
	return out
}

// flowFamilies are the IP families whose packets f can match: the one its
// eth_type names, else those of the node (those the pipeline realizes
// before Initialize).
func (c *traceflow) flowFamilies(f *binding.Flow) []types.IPFamily {
	if v, ok := f.Match.Get(binding.FieldEthType); ok {
		for _, fam := range types.IPFamilies {
			if uint64(ethType(fam)) == v.Value.Lo {
				return []types.IPFamily{fam}
			}
		}
		return nil
	}
	if n := c.node.Load(); n != nil {
		return n.families()
	}
	return realizedFamilies()
}

// ruleVerdict reads a conj_id flow's verdict from its actions: a goto to
// the table after the direction's policy tables allows, a goto elsewhere
// passes, a policy reject packet-in rejects, nothing drops.
func (c *traceflow) ruleVerdict(f *binding.Flow, d Direction) RuleAction {
	past := c.p.Table(ruleTable(d, TierBaseline)).Next().ID
	verdict := ActionDrop
	for _, a := range f.Actions {
		switch a := a.(type) {
		case *binding.GotoTable:
			if a.Table == past {
				return ActionAllow
			}
			return ActionPass
		case *binding.Controller:
			if len(a.UserData) >= 2 && PacketInKind(a.UserData[0]) == PacketInPolicy && a.UserData[1]&PolicyPacketInReject != 0 {
				verdict = ActionReject
			}
		}
	}
	return verdict
}

// traceflowFlows builds a tag's flows from the records of the output and
// policy flows, reading each under its own lock.
func (c *traceflow) traceflowFlows(spec TraceflowFlows) []*binding.Flow {
	tag := spec.Tag
	hard := uint16(0)
	if spec.Timeout > 0 {
		hard = uint16(min(spec.Timeout/time.Second+5, 0xffff))
	}
	output := c.p.Table(OutputTable).ID
	var outs []*binding.Flow
	if !spec.DroppedOnly {
		for _, f := range c.fixedFlows() {
			if f.Table == output && f.Priority > priorityMiss {
				outs = append(outs, f)
			}
		}
		outs = append(outs, c.podSource.podOutputFlows(output)...)
	}
	var flows []*binding.Flow
	for _, f := range outs {
		flows = append(flows, c.copyForTag(f, tag, traceflowOutputBoost, hard, c.traceflowController(tag, TraceflowOutput))...)
	}
	// The layer 7 steering flows sit above the output flows: their copies
	// (same boost) too, so that a traced packet a layer 7 rule selects goes
	// to the engine as its connection's packets do, and says so.
	if c.l7Source != nil {
		for _, f := range c.l7Source.outputFlows(output) {
			action := ActionAllow
			if len(f.Actions) == 0 {
				action = ActionDrop
			} else if spec.DroppedOnly {
				continue
			}
			flows = append(flows, c.copyForTag(f, tag, traceflowOutputBoost, hard,
				c.traceflowController(tag, TraceflowL7Engine, 0, byte(action)))...)
		}
	}
	// Output's miss drops: report it.
	miss := &binding.Flow{Table: output, Priority: priorityMiss}
	flows = append(flows, c.copyForTag(miss, tag, 1, hard, c.traceflowController(tag, TraceflowNoOutput))...)
	// Drops for want of a flow before the policy tables.
	for _, t := range []*TableSpec{ClassifierTable, SpoofGuardTable} {
		m := &binding.Flow{Table: c.p.Table(t).ID, Priority: priorityMiss}
		flows = append(flows, c.copyForTag(m, tag, 1, hard, c.traceflowController(tag, TraceflowTableMiss))...)
	}
	// A LoadBalancer source range's drop (reported as a drop in its table).
	if c.rangeSource != nil {
		for _, f := range c.rangeSource.dropFlows() {
			flows = append(flows, c.copyForTag(f, tag, 1, hard, c.traceflowController(tag, TraceflowTableMiss))...)
		}
	}

	for _, f := range c.policySource.plainFlows() {
		t := c.tableOf(f.Table)
		if t == nil {
			continue
		}
		d, isRule, isDefault := policyTableKind(t.TableSpec)
		switch {
		case isRule:
			id, ok := f.Match.Get(binding.FieldConjID)
			if !ok {
				continue
			}
			verdict := c.ruleVerdict(f, d)
			if verdict == ActionPass || verdict == ActionAllow && spec.DroppedOnly {
				continue
			}
			extra := binary.BigEndian.AppendUint32([]byte{byte(d), byte(verdict)}, uint32(id.Value.Lo))
			flows = append(flows, c.copyForTag(f, tag, 1, hard, c.traceflowController(tag, TraceflowRule, extra...))...)
		case isDefault:
			flows = append(flows, c.copyForTag(f, tag, 1, hard, c.traceflowController(tag, TraceflowIsolation, byte(d), byte(ActionDrop)))...)
		}
	}
	return flows
}

// policyTableKind says whether t is a rule table or an isolation table,
// and of which direction.
func policyTableKind(t *TableSpec) (d Direction, rule, isolation bool) {
	for _, dir := range []Direction{DirectionIngress, DirectionEgress} {
		for _, tier := range []PolicyTier{TierK8s, TierAntrea, TierBaseline} {
			if ruleTable(dir, tier) == t {
				return dir, true, false
			}
		}
		if defaultRuleTable(dir) == t {
			return dir, false, true
		}
	}
	return 0, false, false
}

// liveFlow tags the first packets of real traffic that match.
func (c *traceflow) liveFlow(spec TraceflowFlows) *binding.Flow {
	l := spec.Live
	f := &binding.Flow{Table: c.p.Table(ConntrackStateTable).ID, Priority: traceflowLivePrio, Cookie: c.traceflowCookie(spec.Tag)}
	if spec.Timeout > 0 {
		f.HardTimeout = uint16(min(spec.Timeout/time.Second+5, 0xffff))
	}
	m := &f.Match
	family := l.Src
	if !family.IsValid() {
		family = l.Dst
	}
	m.EthType(ethTypeOf(family)).IPDSCP(0)
	if l.Src.IsValid() {
		m.IPSrc(l.Src)
	}
	if l.Dst.IsValid() {
		m.IPDst(l.Dst)
	}
	matchTransport(m, l.Proto, l.SrcPort, l.DstPort)
	f.Actions = []binding.Action{&binding.SetField{Field: binding.FieldIPDSCP, Value: binding.U64(uint64(spec.Tag))},
		c.b.next(ConntrackStateTable)}
	return f
}

// InstallTraceflowFlows installs (or replaces) the flows of one tag as one
// bundle.
func (c *traceflow) InstallTraceflowFlows(ctx context.Context, spec TraceflowFlows) error {
	if spec.Tag == 0 || spec.Tag > 63 {
		return fmt.Errorf("traceflow tag %d is not a DSCP value in 1..63", spec.Tag)
	}
	flows := c.traceflowFlows(spec)
	var live *binding.Flow
	if spec.Live != nil {
		live = c.liveFlow(spec)
		flows = append(flows, live)
	}
	c.tf.mu.Lock()
	defer c.tf.mu.Unlock()
	msgs := []binding.Message{binding.DeleteFlows(binding.TableAll, c.traceflowCookie(spec.Tag), ^uint64(0))}
	msgs = append(msgs, addMods(flows)...)
	if err := c.write(ctx, fmt.Sprintf("traceflow tag %d", spec.Tag), msgs); err != nil {
		return err
	}
	if c.tf.flows == nil {
		c.tf.flows, c.tf.live = map[uint8][]*binding.Flow{}, map[uint8]*binding.Flow{}
	}
	c.tf.flows[spec.Tag] = flows
	if live != nil {
		c.tf.live[spec.Tag] = live
	}
	klog.V(2).InfoS("Installed Traceflow flows", "tag", spec.Tag, "flows", len(flows), "live", live != nil)
	return nil
}

// StopTraceflowLive removes a live Traceflow's tagging flow (its first
// packet was seen); the other flows stay to report the packets in flight.
func (c *traceflow) StopTraceflowLive(ctx context.Context, tag uint8) error {
	c.tf.mu.Lock()
	defer c.tf.mu.Unlock()
	f, ok := c.tf.live[tag]
	if !ok {
		return nil
	}
	if err := c.write(ctx, fmt.Sprintf("traceflow tag %d live flow", tag), []binding.Message{binding.DeleteFlowStrict(f)}); err != nil {
		return err
	}
	delete(c.tf.live, tag)
	return nil
}

// UninstallTraceflowFlows removes every flow of a tag.
func (c *traceflow) UninstallTraceflowFlows(ctx context.Context, tag uint8) error {
	c.tf.mu.Lock()
	defer c.tf.mu.Unlock()
	if err := c.write(ctx, fmt.Sprintf("traceflow tag %d", tag),
		[]binding.Message{binding.DeleteFlows(binding.TableAll, c.traceflowCookie(tag), ^uint64(0))}); err != nil {
		return err
	}
	delete(c.tf.flows, tag)
	delete(c.tf.live, tag)
	return nil
}

// TraceflowFlowsOf returns the flows installed for a tag (for tests and antctl).
func (c *traceflow) TraceflowFlowsOf(tag uint8) []*binding.Flow {
	c.tf.mu.Lock()
	defer c.tf.mu.Unlock()
	return append([]*binding.Flow(nil), c.tf.flows[tag]...)
}

// TraceflowPacketIn is what a Traceflow packet-in says.
type TraceflowPacketIn struct {
	Tag   uint8
	Point TraceflowPoint
	// Table is the name of the table whose flow sent it.
	Table string
	// Rule decisions (TraceflowRule, TraceflowIsolation).
	Direction Direction
	Action    RuleAction
	RuleID    uint32
	// InPort is the port the packet entered the bridge by; Source says
	// what it is (FromTunnel: the packet came from another node).
	InPort uint32
	Source PktSource
	// Destination is where L3Forwarding sent it; OutPort (when PortFound)
	// the port Output sends it to; Hairpin: back through IN_PORT.
	Destination PktDestination
	OutPort     uint32
	PortFound   bool
	Hairpin     bool
	// Endpoint is the endpoint a Service's group chose (invalid if none).
	Endpoint netip.Addr
	// TunnelDst is the node the packet is tunnelled to (invalid if none).
	TunnelDst netip.Addr
	// L7VLAN is the layer 7 id of the rule that steered the packet
	// (TraceflowL7Engine): from the register the rule's conj_id flow set
	// (a connection's first packet) or from the connection's ct_mark.
	L7VLAN uint16
	Packet *binding.PacketIn
}

func fieldValue(pi *binding.PacketIn, r binding.FieldRange) (uint64, bool) {
	v, ok := pi.Match.Get(r.Field)
	if !ok {
		return 0, false
	}
	width := uint(r.End) - uint(r.Start) + 1
	return v.Value.Lo >> r.Start & (uint64(1)<<width - 1), true
}

// ParseTraceflowPacketIn reads a Traceflow packet-in; ok is false for
// packet-ins of other features.
func (c *traceflow) ParseTraceflowPacketIn(pi *binding.PacketIn) (TraceflowPacketIn, bool) {
	u := pi.UserData
	if len(u) < 3 || PacketInKind(u[0]) != PacketInTraceflow {
		return TraceflowPacketIn{}, false
	}
	out := TraceflowPacketIn{Tag: u[1], Point: TraceflowPoint(u[2]), Packet: pi}
	if len(u) >= 5 {
		out.Direction, out.Action = Direction(u[3]), RuleAction(u[4])
	}
	if len(u) >= 9 {
		out.RuleID = binary.BigEndian.Uint32(u[5:9])
	}
	if t := c.tableOf(pi.TableID); t != nil {
		out.Table = t.Name
	}
	if v, ok := pi.Match.Get(binding.FieldInPort); ok {
		out.InPort = uint32(v.Value.Lo)
	}
	if v, ok := fieldValue(pi, PktSourceField); ok {
		out.Source = PktSource(v)
	}
	if v, ok := fieldValue(pi, PktDestinationField); ok {
		out.Destination = PktDestination(v)
	}
	if v, ok := fieldValue(pi, OFPortFoundField); ok && v == 1 {
		out.PortFound = true
		if p, ok := fieldValue(pi, TargetOFPortField); ok {
			out.OutPort = uint32(p)
		}
	}
	if v, ok := fieldValue(pi, HairpinField); ok && v == 1 {
		out.Hairpin = true
	}
	if v, ok := fieldValue(pi, EndpointSelectedField); ok && v == 1 {
		if ip, ok := endpointIPOf(&pi.Match); ok {
			out.Endpoint = ip
		}
	}
	if out.Point == TraceflowL7Engine {
		if v, ok := fieldValue(pi, L7RedirectField); ok && v == 1 {
			id, _ := fieldValue(pi, L7RuleVLANField)
			out.L7VLAN = uint16(id)
		} else if id, ok := fieldValue(pi, L7RuleVLANCTMark); ok {
			out.L7VLAN = uint16(id)
		}
	}
	for _, f := range types.IPFamilies {
		if v, ok := pi.Match.Get(types.ByFamily(f, binding.FieldTunDst, binding.FieldTunIPv6Dst)); ok && !v.Value.IsZero() {
			out.TunnelDst = valueAddr(f, v.Value)
		}
	}
	return out, true
}

// TraceflowPacketOut injects frame at a pod's port: it goes through the
// whole pipeline as if the pod had sent it.
func TraceflowPacketOut(inPort uint32, frame []byte) *binding.PacketOut {
	return &binding.PacketOut{InPort: inPort, Actions: []binding.Action{&binding.Output{Port: binding.PortTable}}, Data: frame}
}
