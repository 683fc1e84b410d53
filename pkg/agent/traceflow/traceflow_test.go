package traceflow

import (
	"bytes"
	"net"
	"net/netip"
	"testing"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/packetreply"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

func TestMergeResultReplacesANodesResultAndKeepsTheSenderFirst(t *testing.T) {
	st := &crdv1beta1.TraceflowStatus{}
	recv := crdv1beta1.NodeResult{Node: "node-2", Role: crdv1beta1.RoleReceiver, Observations: []crdv1beta1.Observation{{Action: crdv1beta1.ActionReceived}}}
	MergeResult(st, recv)
	send := crdv1beta1.NodeResult{Node: "node-1", Role: crdv1beta1.RoleSender, Observations: []crdv1beta1.Observation{{Action: crdv1beta1.ActionForwarded}}}
	MergeResult(st, send)
	if len(st.Results) != 2 || st.Results[0].Node != "node-1" || st.Results[1].Node != "node-2" {
		t.Fatalf("results %+v, want node-1 (sender) then node-2", st.Results)
	}
	// A re-injected packet reports again: the node's result is replaced.
	again := recv
	again.Observations = append(again.Observations, crdv1beta1.Observation{Action: crdv1beta1.ActionDelivered})
	MergeResult(st, again)
	if len(st.Results) != 2 || len(st.Results[1].Observations) != 2 || len(st.Results[0].Observations) != 1 {
		t.Fatalf("after node-2 reported again: %+v", st.Results)
	}
}

func TestFrameBuildCarriesTheTagAndTheRequestedHeaders(t *testing.T) {
	dport, flags := int32(8080), int32(0x12)
	f := &Frame{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.10.0.2"), Dst: netip.MustParseAddr("10.10.1.3"), Tag: 33,
		Packet: crdv1beta1.Packet{IPHeader: &crdv1beta1.IPHeader{TTL: 9, Flags: 2},
			TransportHeader: crdv1beta1.TransportHeader{TCP: &crdv1beta1.TCPHeader{SrcPort: 1234, DstPort: dport, Flags: &flags}}}}
	data, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := packetreply.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if p.IP[1]>>2 != 33 || p.IP[8] != 9 || p.Proto != 6 || p.SrcPort != 1234 || p.DstPort != 8080 ||
		p.Src.String() != "10.10.0.2" || p.Dst.String() != "10.10.1.3" {
		t.Fatalf("frame: dscp %d ttl %d proto %d %s:%d -> %s:%d", p.IP[1]>>2, p.IP[8], p.Proto, p.Src, p.SrcPort, p.Dst, p.DstPort)
	}
	if packetreply.Checksum(nil, p.IP[:20]) != 0 {
		t.Fatal("bad IP header checksum")
	}
	if packetreply.Checksum(packetreply.PseudoHeader(p.Src, p.Dst, 6, 20), p.IP[20:40]) != 0 {
		t.Fatal("bad TCP checksum")
	}
	c, err := Captured(data)
	if err != nil {
		t.Fatal(err)
	}
	if c.IPHeader.Flags != 2 || c.TransportHeader.TCP == nil || *c.TransportHeader.TCP.Flags != 0x12 || c.Length != 40 {
		t.Fatalf("captured %+v %+v", c.IPHeader, c.TransportHeader.TCP)
	}
	// Defaults: ICMP echo request, TTL 64; a Service's port makes TCP.
	f2 := &Frame{SrcMAC: f.SrcMAC, DstMAC: f.DstMAC, Src: f.Src, Dst: netip.MustParseAddr("10.96.0.10"), Tag: 1}
	d2, _ := f2.Build()
	p2, _ := packetreply.Parse(d2)
	if p2.Proto != 1 || p2.IP[8] != 64 || p2.IP[20] != 8 {
		t.Fatalf("default packet: proto %d ttl %d icmp type %d", p2.Proto, p2.IP[8], p2.IP[20])
	}
	f2.ServicePort, f2.ServiceProto = 53, 17
	d3, _ := f2.Build()
	if p3, _ := packetreply.Parse(d3); p3.Proto != 17 || p3.DstPort != 53 {
		t.Fatalf("packet to a UDP Service port: proto %d port %d", p3.Proto, p3.DstPort)
	}
}

type names struct{}

func (names) Rule(id uint32) (string, string, bool) {
	return "AntreaClusterNetworkPolicy:allow-web", "allow-80", id == 3
}
func (names) L7Rule(id uint16) (string, string, bool) {
	return "AntreaNetworkPolicy:default/allow-http-only", "http-only", id == 9
}
func (names) Isolation(uint32, agentof.Direction) []string { return nil }
func (names) PodOfPort(p uint32) string {
	if p == 5 {
		return "demo/web-1"
	}
	return ""
}

func TestObserveAServicePacketAllowedAndDeliveredAndAReceivedOne(t *testing.T) {
	frame := packetreply.Frame(net.HardwareAddr{2, 0, 0, 0, 0, 5}, net.HardwareAddr{2, 0, 0, 0, 0, 9},
		netip.MustParseAddr("10.10.0.2"), netip.MustParseAddr("10.10.0.5"), 1, make([]byte, 8))
	pkt := &binding.PacketIn{Data: frame}
	ep := netip.MustParseAddr("10.10.0.5")
	pins := []*agentof.TraceflowPacketIn{
		{Point: agentof.TraceflowRule, Table: "AntreaPolicyIngressRule", Action: agentof.ActionAllow, RuleID: 3, Endpoint: ep, Packet: pkt},
		{Point: agentof.TraceflowOutput, Table: "Output", PortFound: true, OutPort: 5, Endpoint: ep, Packet: pkt},
	}
	obs := Observe(pins, true, Ports{Gateway: 2, Tunnel: 1}, names{})
	want := []crdv1beta1.Observation{
		{Component: crdv1beta1.ComponentSpoofGuard, ComponentInfo: "SpoofGuard", Action: crdv1beta1.ActionForwarded},
		{Component: crdv1beta1.ComponentLB, ComponentInfo: "EndpointDNAT", Action: crdv1beta1.ActionForwarded, TranslatedDstIP: "10.10.0.5"},
		{Component: crdv1beta1.ComponentNetworkPolicy, ComponentInfo: "AntreaPolicyIngressRule", Action: crdv1beta1.ActionForwarded,
			NetworkPolicy: "AntreaClusterNetworkPolicy:allow-web", NetworkPolicyRule: "allow-80"},
		{Component: crdv1beta1.ComponentForwarding, ComponentInfo: "Output", Action: crdv1beta1.ActionDelivered, Pod: "demo/web-1",
			DstMAC: "02:00:00:00:00:05", TTL: 64},
	}
	if len(obs) != len(want) {
		t.Fatalf("observations %+v", obs)
	}
	for i := range want {
		if obs[i] != want[i] {
			t.Errorf("observation %d: %+v, want %+v", i, obs[i], want[i])
		}
	}
	// The same packet arriving from the tunnel on the receiver.
	recv := Observe([]*agentof.TraceflowPacketIn{{Point: agentof.TraceflowOutput, Table: "Output", PortFound: true, OutPort: 5,
		Source: agentof.FromTunnel, Packet: pkt}}, false, Ports{Gateway: 2, Tunnel: 1}, names{})
	if len(recv) != 2 || recv[0].Action != crdv1beta1.ActionReceived || recv[0].ComponentInfo != "Classifier" ||
		recv[1].Action != crdv1beta1.ActionDelivered {
		t.Fatalf("receiver observations %+v", recv)
	}
}

// A packet a layer 7 rule steers is observed as sent to the engine by that
// rule (not terminal: the engine's packet goes on to Output); one that is
// not TCP as dropped by it (terminal).
func TestObserveAPacketSentToTheLayer7EngineAndOneItsRuleDrops(t *testing.T) {
	frame := packetreply.Frame(net.HardwareAddr{2, 0, 0, 0, 0, 5}, net.HardwareAddr{2, 0, 0, 0, 0, 9},
		netip.MustParseAddr("10.10.0.2"), netip.MustParseAddr("10.10.0.5"), 1, make([]byte, 8))
	pkt := &binding.PacketIn{Data: frame}
	steered := &agentof.TraceflowPacketIn{Point: agentof.TraceflowL7Engine, Table: "Output", Action: agentof.ActionAllow, L7VLAN: 9, Packet: pkt}
	if terminal(steered) {
		t.Error("the steering to the engine ends the packet's path; the engine sends it on")
	}
	obs := Observe([]*agentof.TraceflowPacketIn{steered,
		{Point: agentof.TraceflowOutput, Table: "Output", PortFound: true, OutPort: 5, Packet: pkt}}, true, Ports{Gateway: 2, Tunnel: 1}, names{})
	if len(obs) != 3 || obs[1] != (crdv1beta1.Observation{Component: crdv1beta1.ComponentNetworkPolicy, ComponentInfo: "L7Engine",
		Action: crdv1beta1.ActionForwarded, NetworkPolicy: "AntreaNetworkPolicy:default/allow-http-only", NetworkPolicyRule: "http-only"}) ||
		obs[2].Action != crdv1beta1.ActionDelivered {
		t.Fatalf("observations %+v", obs)
	}
	dropped := &agentof.TraceflowPacketIn{Point: agentof.TraceflowL7Engine, Table: "Output", Action: agentof.ActionDrop, L7VLAN: 9, Packet: pkt}
	if !terminal(dropped) {
		t.Error("the layer 7 rule's drop does not end the packet's path")
	}
	obs = Observe([]*agentof.TraceflowPacketIn{dropped}, true, Ports{}, names{})
	if len(obs) != 2 || obs[1].Action != crdv1beta1.ActionDropped || obs[1].NetworkPolicyRule != "http-only" {
		t.Fatalf("observations %+v", obs)
	}
}

// onesSum is the Internet checksum of the concatenated parts (RFC 1071),
// written here apart from packetreply's so that the test checks Build's
// checksums against a second reading of the RFC.
func onesSum(parts ...[]byte) uint16 {
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	if len(all)%2 == 1 {
		all = append(all, 0)
	}
	var sum uint64
	for i := 0; i < len(all); i += 2 {
		sum += uint64(all[i])<<8 | uint64(all[i+1])
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// ipv6Frame is an IPv6 frame read field by field (RFC 8200 3), not with
// packetreply.
type ipv6Frame struct {
	etherType           uint16
	version, dscp, ecn  byte
	flowLabel           uint32
	payloadLen          int
	nextHeader, hop     byte
	src, dst            netip.Addr
	payload, pseudoHead []byte
}

func readIPv6(t *testing.T, frame []byte) ipv6Frame {
	t.Helper()
	if len(frame) < 14+40 {
		t.Fatalf("frame of %d bytes: too short for IPv6", len(frame))
	}
	ip := frame[14:]
	tc := ip[0]<<4 | ip[1]>>4
	f := ipv6Frame{etherType: uint16(frame[12])<<8 | uint16(frame[13]), version: ip[0] >> 4, dscp: tc >> 2, ecn: tc & 3,
		flowLabel: uint32(ip[1]&0x0f)<<16 | uint32(ip[2])<<8 | uint32(ip[3]), payloadLen: int(ip[4])<<8 | int(ip[5]),
		nextHeader: ip[6], hop: ip[7], src: netip.AddrFrom16([16]byte(ip[8:24])), dst: netip.AddrFrom16([16]byte(ip[24:40])),
		payload: ip[40:]}
	// The pseudo-header of upper-layer checksums (RFC 8200 8.1).
	n := len(f.payload)
	f.pseudoHead = append(append(append([]byte{}, ip[8:40]...), byte(n>>24), byte(n>>16), byte(n>>8), byte(n)), 0, 0, 0, f.nextHeader)
	return f
}

func TestAnIPv6FrameCarriesTheTagInItsTrafficClassAndTheRequestedHeaders(t *testing.T) {
	src, dst := netip.MustParseAddr("fd00:10:244:1::2"), netip.MustParseAddr("fd00:10:244:2::3")
	mac1, mac2 := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	flags := int32(0x12)
	f := &Frame{SrcMAC: mac1, DstMAC: mac2, Src: src, Dst: dst, Tag: 33,
		Packet: crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{HopLimit: 9},
			TransportHeader: crdv1beta1.TransportHeader{TCP: &crdv1beta1.TCPHeader{SrcPort: 1234, DstPort: 8080, Flags: &flags}}}}
	data, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data[0:6], mac2) || !bytes.Equal(data[6:12], mac1) {
		t.Fatalf("MACs %x -> %x, want %s -> %s", data[6:12], data[0:6], mac1, mac2)
	}
	p := readIPv6(t, data)
	tcp := p.payload
	if p.etherType != 0x86dd || p.version != 6 || p.dscp != 33 || p.ecn != 0 || p.flowLabel != 0 || p.payloadLen != 20 ||
		p.nextHeader != 6 || p.hop != 9 || p.src != src || p.dst != dst || len(tcp) != 20 {
		t.Fatalf("IPv6 header %+v, want 0x86dd v6 DSCP 33 next header 6 hop limit 9 %s -> %s with 20 bytes of TCP", p, src, dst)
	}
	if sport, dport := int(tcp[0])<<8|int(tcp[1]), int(tcp[2])<<8|int(tcp[3]); sport != 1234 || dport != 8080 || tcp[13] != 0x12 || tcp[12]>>4 != 5 {
		t.Fatalf("TCP %d -> %d flags %#x offset %d", sport, dport, tcp[13], tcp[12]>>4)
	}
	if onesSum(p.pseudoHead, tcp) != 0 {
		t.Fatal("the TCP checksum does not cover the IPv6 pseudo-header")
	}
	c, err := Captured(data)
	if err != nil {
		t.Fatal(err)
	}
	if c.IPHeader != nil || c.IPv6Header == nil || c.IPv6Header.NextHeader == nil || *c.IPv6Header.NextHeader != 6 ||
		c.IPv6Header.HopLimit != 9 || c.Length != 60 || c.SrcIP != src.String() || c.DstIP != dst.String() ||
		c.TransportHeader.TCP == nil || c.TransportHeader.TCP.SrcPort != 1234 || c.TransportHeader.TCP.DstPort != 8080 ||
		*c.TransportHeader.TCP.Flags != 0x12 {
		t.Fatalf("captured %+v %+v %+v", c, c.IPv6Header, c.TransportHeader.TCP)
	}

	// Defaults: an ICMPv6 echo request (type 128, its checksum over the
	// pseudo-header too), hop limit 64; a UDP Service's port makes UDP.
	def := &Frame{SrcMAC: mac1, DstMAC: mac2, Src: src, Dst: dst, Tag: 1,
		Packet: crdv1beta1.Packet{TransportHeader: crdv1beta1.TransportHeader{ICMP: &crdv1beta1.ICMPEchoRequestHeader{ID: 77, Sequence: 5}}}}
	data, err = def.Build()
	if err != nil {
		t.Fatal(err)
	}
	p = readIPv6(t, data)
	icmp := p.payload
	if p.nextHeader != 58 || p.hop != 64 || p.dscp != 1 || len(icmp) != 8 || icmp[0] != 128 || icmp[1] != 0 ||
		int(icmp[4])<<8|int(icmp[5]) != 77 || int(icmp[6])<<8|int(icmp[7]) != 5 {
		t.Fatalf("default IPv6 packet: next header %d hop limit %d DSCP %d ICMPv6 % x", p.nextHeader, p.hop, p.dscp, icmp)
	}
	if onesSum(p.pseudoHead, icmp) != 0 {
		t.Fatal("the ICMPv6 checksum does not cover the IPv6 pseudo-header (RFC 4443 2.3)")
	}
	if c, err := Captured(data); err != nil || c.TransportHeader.ICMP == nil || c.TransportHeader.ICMP.ID != 77 || c.TransportHeader.ICMP.Sequence != 5 ||
		*c.IPv6Header.NextHeader != 58 {
		t.Fatalf("captured echo request %+v (%v)", c, err)
	}
	def.Packet, def.ServicePort, def.ServiceProto = crdv1beta1.Packet{}, 53, 17
	data, _ = def.Build()
	p = readIPv6(t, data)
	if udp := p.payload; p.nextHeader != 17 || len(udp) != 8 || int(udp[2])<<8|int(udp[3]) != 53 || int(udp[4])<<8|int(udp[5]) != 8 ||
		onesSum(p.pseudoHead, udp) != 0 {
		t.Fatalf("packet to a UDP Service port: next header %d UDP % x", p.nextHeader, p.payload)
	}
}

func TestAnIPv6FrameOfAnotherProtocolOrOfMixedFamiliesIsRefused(t *testing.T) {
	one := int32(1)
	for _, f := range []*Frame{
		{Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), Packet: crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{NextHeader: &one}}},
		{Src: netip.MustParseAddr("10.10.0.1"), Dst: netip.MustParseAddr("fd00::2")},
		{Src: netip.MustParseAddr("fd00::1")},
	} {
		if _, err := f.Build(); err == nil {
			t.Errorf("Build(%s -> %s, %+v) made a frame, want an error", f.Src, f.Dst, f.Packet.IPv6Header)
		}
	}
}

func TestCapturedReadsAnIPv6PacketPastItsExtensionHeaders(t *testing.T) {
	src, dst := netip.MustParseAddr("fd00:10:244:1::2"), netip.MustParseAddr("fd00:10:244:1::3")
	udp := []byte{0x30, 0x39, 0x00, 0x35, 0, 8, 0, 0} // 12345 -> 53
	hopByHop := []byte{17, 0, 1, 4, 0, 0, 0, 0}       // next header UDP, PadN
	payload := append(append([]byte{}, hopByHop...), udp...)
	frame := make([]byte, 14+40)
	frame[12], frame[13] = 0x86, 0xdd
	ip := frame[14:]
	ip[0], ip[1] = 0x63, 0x80 // traffic class 0x38: DSCP 14, as a tagged live packet carries
	ip[4], ip[5], ip[6], ip[7] = 0, byte(len(payload)), 0, 61
	copy(ip[8:24], src.AsSlice())
	copy(ip[24:40], dst.AsSlice())
	frame = append(frame, payload...)
	c, err := Captured(frame)
	if err != nil {
		t.Fatal(err)
	}
	if c.IPv6Header == nil || *c.IPv6Header.NextHeader != 17 || c.IPv6Header.HopLimit != 61 || c.Length != 40+16 ||
		c.TransportHeader.UDP == nil || c.TransportHeader.UDP.SrcPort != 12345 || c.TransportHeader.UDP.DstPort != 53 {
		t.Fatalf("captured %+v %+v %+v", c, c.IPv6Header, c.TransportHeader.UDP)
	}
}
