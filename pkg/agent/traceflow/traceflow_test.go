package traceflow

import (
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
