package networkpolicy

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// A toFQDN rule's ports decide which of a Service's frontends its names
// reach: the port the pod dials is the Service's port; a named port is the
// name of the Service's targetPort; source ports stay a clause.
func TestAToFQDNRulesPortsPickTheServicesFrontends(t *testing.T) {
	tcp, udp := cpv1beta2.ProtocolTCP, cpv1beta2.ProtocolUDP
	num := func(p int32) *intstr.IntOrString { v := intstr.FromInt32(p); return &v }
	name := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	i32 := func(v int32) *int32 { return &v }
	fe := func(proto uint8, port uint16, target string) ServiceFrontend {
		return ServiceFrontend{ServicePort: agentof.ServicePort{IP: netip.MustParseAddr("10.96.0.10"), Protocol: proto, Port: port}, TargetPortName: target}
	}
	for _, tc := range []struct {
		name    string
		ports   []cpv1beta2.Service
		fe      ServiceFrontend
		ok      bool
		srcPort uint16 // the clause's source port when one remains
	}{
		{"no ports: every frontend", nil, fe(binding.IPProtoUDP, 53, ""), true, 0},
		{"the Service's port", []cpv1beta2.Service{{Protocol: &tcp, Port: num(80)}}, fe(binding.IPProtoTCP, 80, ""), true, 0},
		{"another port", []cpv1beta2.Service{{Protocol: &tcp, Port: num(80)}}, fe(binding.IPProtoTCP, 81, ""), false, 0},
		{"the targetPort number is not the port dialled", []cpv1beta2.Service{{Protocol: &tcp, Port: num(8080)}}, fe(binding.IPProtoTCP, 80, ""), false, 0},
		{"another protocol", []cpv1beta2.Service{{Protocol: &udp, Port: num(80)}}, fe(binding.IPProtoTCP, 80, ""), false, 0},
		{"protocol unset is TCP", []cpv1beta2.Service{{Port: num(80)}}, fe(binding.IPProtoTCP, 80, ""), true, 0},
		{"inside a range", []cpv1beta2.Service{{Protocol: &tcp, Port: num(70), EndPort: i32(90)}}, fe(binding.IPProtoTCP, 80, ""), true, 0},
		{"outside a range", []cpv1beta2.Service{{Protocol: &tcp, Port: num(81), EndPort: i32(90)}}, fe(binding.IPProtoTCP, 80, ""), false, 0},
		{"a protocol alone", []cpv1beta2.Service{{Protocol: &tcp}}, fe(binding.IPProtoTCP, 443, ""), true, 0},
		{"the targetPort's name", []cpv1beta2.Service{{Protocol: &tcp, Port: name("http")}}, fe(binding.IPProtoTCP, 80, "http"), true, 0},
		{"another name", []cpv1beta2.Service{{Protocol: &tcp, Port: name("http")}}, fe(binding.IPProtoTCP, 80, "metrics"), false, 0},
		{"a name and a numeric targetPort", []cpv1beta2.Service{{Protocol: &tcp, Port: name("http")}}, fe(binding.IPProtoTCP, 80, ""), false, 0},
		{"a source port stays", []cpv1beta2.Service{{Protocol: &tcp, Port: num(80), SrcPort: i32(1000)}}, fe(binding.IPProtoTCP, 80, ""), true, 1000},
		{"a port without source restriction wins", []cpv1beta2.Service{{Protocol: &tcp, Port: num(80), SrcPort: i32(1000)}, {Protocol: &tcp, Port: num(80)}},
			fe(binding.IPProtoTCP, 80, ""), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, ok := frontendPorts(tc.ports, tc.fe)
			if ok != tc.ok {
				t.Fatalf("admitted %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if tc.srcPort == 0 && src != nil {
				t.Fatalf("source clause %+v, want none", src)
			}
			if tc.srcPort != 0 && (len(src) != 1 || src[0].SrcPort != tc.srcPort || src[0].Port != 0 || src[0].Protocol != tc.fe.Protocol) {
				t.Fatalf("source clause %+v, want protocol %d source port %d and any destination", src, tc.fe.Protocol, tc.srcPort)
			}
		})
	}
}
