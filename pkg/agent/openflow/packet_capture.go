package openflow

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"k8s.io/klog/v2"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// PacketCapture (pkg/agent/packetcapture): for each running capture the
// client installs, in PipelineRootClassifier, one flow per alternative the
// capture matches (a direction, an ICMP message, a set of TCP flags), one
// step above the root's own IP flows. Each sends the agent a copy of the
// packet as it entered the bridge (a packet-in with PacketInCapture
// userdata: the kind and the capture's id), through the capture meter, and
// then does what the root classifier does with the packets of its family
// (the fixed flow's actions, copied): the captured traffic is forwarded as
// before. The packet is taken where it enters the bridge, before anything
// rewrites it, so the file holds what the sending port sent, as tcpdump on
// that port sees it.
//
// The meter bounds the packet-ins of every capture together
// (PacketCaptureRate a second after a burst as large): a capture of a
// flood loses packets above that rate instead of swamping the agent.
// A capture's flows carry a hard timeout a little longer than the
// capture's, so an agent killed mid-capture leaves nothing behind for long.

// The capture meter.
const (
	PacketCaptureMeterID uint32 = 4
	PacketCaptureRate    uint32 = 10000
	// packetCapturePriority is one step above the root classifier's IP flows.
	packetCapturePriority = priorityNormal + 1
)

// PacketCaptureMatch is one alternative of the packets a capture takes.
// Zero fields match anything.
type PacketCaptureMatch struct {
	// InPort is the port the packet entered by (0: any).
	InPort   uint32
	Src, Dst netip.Addr
	// IPv6 says the family when neither address is set.
	IPv6 bool
	// Proto is the IP protocol (0: any); the ports, flags and ICMP fields
	// need it.
	Proto            uint8
	SrcPort, DstPort uint16
	// TCPFlags and TCPFlagsMask (0: any) match tcp_flags & mask == flags.
	TCPFlags, TCPFlagsMask uint16
	// ICMPType and ICMPCode (nil: any).
	ICMPType, ICMPCode *uint8
}

// PacketCaptureFlows is what InstallPacketCaptureFlows installs for one
// capture.
type PacketCaptureFlows struct {
	// ID is the capture's number on this agent (1..255), in its cookie
	// and in its packet-ins.
	ID      uint8
	Matches []PacketCaptureMatch
	// Timeout is the capture's; the flows' hard timeout is a little longer.
	Timeout time.Duration
}

// packetCapture is the PacketCapture feature: no table of its own, the
// flows of each running capture in the root classifier, and the meter.
// After a switch restart its flows are replayed (a capture runs for up to
// minutes).
type packetCapture struct {
	*datapath
	featureDefaults

	mu    sync.Mutex
	flows map[uint8][]*binding.Flow
}

func newPacketCapture(d *datapath) *packetCapture {
	return &packetCapture{datapath: d, flows: map[uint8][]*binding.Flow{}}
}

// Name implements Feature.
func (*packetCapture) Name() string { return "PacketCapture" }

// Tables implements Feature: none, its flows sit in the root classifier.
func (*packetCapture) Tables() []*TableSpec { return nil }

// Meters implements Feature: the capture meter.
func (*packetCapture) Meters() []*binding.MeterMod {
	return []*binding.MeterMod{{Command: binding.MeterAdd, Flags: binding.MeterPktps | binding.MeterBurst | binding.MeterStats,
		MeterID: PacketCaptureMeterID, Bands: []binding.MeterBand{{Rate: PacketCaptureRate, BurstSize: PacketCaptureRate}}}}
}

// PacketInKinds implements Feature: the captured packets.
func (*packetCapture) PacketInKinds() []PacketInKind { return []PacketInKind{PacketInCapture} }

// Installed implements Feature: every running capture's flows, replayed
// after a switch restart.
func (c *packetCapture) Installed() ([]*binding.GroupMod, []*binding.Flow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]int, 0, len(c.flows))
	for id := range c.flows {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	var out []*binding.Flow
	for _, id := range ids {
		out = append(out, c.flows[uint8(id)]...)
	}
	return nil, out
}

func (c *packetCapture) captureCookie(id uint8) uint64 {
	return withRound(c.round, cookiePacketCapture|Cookie(id))
}

// rootActions are the actions of the root classifier's fixed flow for the
// packets of EtherType et (nil: the root drops them).
func (c *packetCapture) rootActions(et uint16) []binding.Action {
	root := c.p.Table(PipelineRootClassifierTable).ID
	for _, f := range c.fixedFlows() {
		if f.Table != root || f.Priority != priorityNormal {
			continue
		}
		if v, ok := f.Match.Get(binding.FieldEthType); ok && v.Value.Lo == uint64(et) {
			return f.Actions
		}
	}
	return nil
}

// captureFlow is the flow of one alternative.
func (c *packetCapture) captureFlow(spec PacketCaptureFlows, pm PacketCaptureMatch) *binding.Flow {
	et := binding.EthTypeIPv4
	if pm.IPv6 || pm.Src.Is6() || pm.Dst.Is6() {
		et = binding.EthTypeIPv6
	}
	f := &binding.Flow{Table: c.p.Table(PipelineRootClassifierTable).ID, Priority: packetCapturePriority, Cookie: c.captureCookie(spec.ID)}
	if spec.Timeout > 0 {
		f.HardTimeout = uint16(min(spec.Timeout/time.Second+10, 0xffff))
	}
	m := &f.Match
	if pm.InPort != 0 {
		m.InPort(pm.InPort)
	}
	m.EthType(et)
	if pm.Src.IsValid() {
		m.IPSrc(pm.Src)
	}
	if pm.Dst.IsValid() {
		m.IPDst(pm.Dst)
	}
	matchTransport(m, pm.Proto, pm.SrcPort, pm.DstPort)
	switch pm.Proto {
	case binding.IPProtoTCP:
		if pm.TCPFlagsMask != 0 {
			m.TCPFlags(pm.TCPFlags, pm.TCPFlagsMask)
		}
	case binding.IPProtoICMP, binding.IPProtoICMPv6:
		icmpType, icmpCode := m.ICMPType, m.ICMPCode
		if et == binding.EthTypeIPv6 {
			icmpType, icmpCode = m.ICMPv6Type, m.ICMPv6Code
		}
		if pm.ICMPType != nil {
			icmpType(*pm.ICMPType)
		}
		if pm.ICMPCode != nil {
			icmpCode(*pm.ICMPCode)
		}
	}
	pin := &binding.Controller{Reason: binding.ReasonAction, UserData: PacketInCapture.userData(spec.ID), MeterID: PacketCaptureMeterID}
	f.Actions = append([]binding.Action{pin}, c.rootActions(et)...)
	return f
}

// InstallPacketCaptureFlows installs (or replaces) the flows of one capture
// as one bundle.
func (c *packetCapture) InstallPacketCaptureFlows(ctx context.Context, spec PacketCaptureFlows) error {
	if spec.ID == 0 {
		return fmt.Errorf("packet capture id 0 is not an id")
	}
	if len(spec.Matches) == 0 {
		return fmt.Errorf("packet capture %d matches nothing", spec.ID)
	}
	flows := make([]*binding.Flow, 0, len(spec.Matches))
	for _, pm := range spec.Matches {
		flows = append(flows, c.captureFlow(spec, pm))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs := []binding.Message{binding.DeleteFlows(binding.TableAll, c.captureCookie(spec.ID), ^uint64(0))}
	msgs = append(msgs, addMods(flows)...)
	if err := c.write(ctx, fmt.Sprintf("packet capture %d", spec.ID), msgs); err != nil {
		return err
	}
	c.flows[spec.ID] = flows
	klog.V(2).InfoS("Installed packet capture flows", "id", spec.ID, "flows", len(flows))
	return nil
}

// UninstallPacketCaptureFlows removes every flow of a capture.
func (c *packetCapture) UninstallPacketCaptureFlows(ctx context.Context, id uint8) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(ctx, fmt.Sprintf("packet capture %d", id),
		[]binding.Message{binding.DeleteFlows(binding.TableAll, c.captureCookie(id), ^uint64(0))}); err != nil {
		return err
	}
	delete(c.flows, id)
	return nil
}

// PacketCaptureFlowsOf returns the flows installed for a capture (tests, antctl).
func (c *packetCapture) PacketCaptureFlowsOf(id uint8) []*binding.Flow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*binding.Flow(nil), c.flows[id]...)
}

// PacketCaptureID is the capture a PacketInCapture packet-in belongs to;
// ok is false for the packet-ins of other features.
func PacketCaptureID(pi *binding.PacketIn) (id uint8, ok bool) {
	if len(pi.UserData) < 2 || PacketInKind(pi.UserData[0]) != PacketInCapture {
		return 0, false
	}
	return pi.UserData[1], true
}
