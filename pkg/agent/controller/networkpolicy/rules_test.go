package networkpolicy

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

func TestResolvedServicesKeepSourcePortsAndICMPTypeAndCode(t *testing.T) {
	icmp, udp := cpv1beta2.ProtocolICMP, cpv1beta2.ProtocolUDP
	port53 := intstr.FromInt32(53)
	got, ok := resolveServices([]cpv1beta2.Service{
		// sourcePort without port: every destination port, those sources.
		{Protocol: tcp(), SrcPort: ptr[int32](32768), SrcEndPort: ptr[int32](60999)},
		{Protocol: &udp, Port: &port53, SrcPort: ptr[int32](1000)},
		{Protocol: &icmp, ICMPType: ptr[int32](8), ICMPCode: ptr[int32](0)},
		{Protocol: &icmp},
	}, nil)
	want := []agentof.PolicyPort{
		{Protocol: binding.IPProtoTCP, SrcPort: 32768, SrcEndPort: 60999},
		{Protocol: binding.IPProtoUDP, Port: 53, SrcPort: 1000},
		{Protocol: binding.IPProtoICMP, HasICMPType: true, ICMPType: 8, HasICMPCode: true},
		{Protocol: binding.IPProtoICMP},
	}
	if !ok || len(got) != len(want) {
		t.Fatalf("resolveServices = %+v, %v; want %+v", got, ok, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("service %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if servicesKey(got[2:3]) == servicesKey(got[3:4]) {
		t.Error("an ICMP echo request clause and an any-ICMP clause must not share a key")
	}
}
