package openflow

import (
	"net/netip"
	"testing"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

func TestOnlyAServicesLoneUDPPortAtAnAddressGetsAFragmentFlow(t *testing.T) {
	vip, lb := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("192.168.100.10")
	udp := func(ip netip.Addr, port uint16, external bool) ServicePort {
		return ServicePort{IP: ip, Protocol: binding.IPProtoUDP, Port: port, External: external}
	}
	tcp := ServicePort{IP: vip, Protocol: binding.IPProtoTCP, Port: 53}
	for _, tc := range []struct {
		name  string
		ports []ServicePort
		want  []ServicePort
	}{
		{"DNS: 53/UDP beside 53/TCP", []ServicePort{udp(vip, 53, false), tcp}, []ServicePort{udp(vip, 53, false)}},
		{"two UDP ports at one address: a later fragment cannot tell which", []ServicePort{udp(vip, 53, false), udp(vip, 5353, false)}, nil},
		{"one UDP port at each of two addresses", []ServicePort{udp(vip, 53, false), udp(lb, 53, false)}, []ServicePort{udp(vip, 53, false), udp(lb, 53, false)}},
		{"a Local external port beside its Cluster twin", []ServicePort{udp(lb, 53, false), udp(lb, 53, true)}, []ServicePort{udp(lb, 53, false), udp(lb, 53, true)}},
		{"NodePorts share one address", []ServicePort{udp(NodePortVirtualIP, 30053, false)}, nil},
		{"TCP never", []ServicePort{tcp}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ServiceState{}
			for _, p := range tc.ports {
				s[p] = PortState{}
			}
			got := fragFlowPorts(s)
			if len(got) != len(tc.want) {
				t.Fatalf("fragment flows for %v, want %v", got, tc.want)
			}
			for _, p := range tc.want {
				if !got[p] {
					t.Fatalf("fragment flows for %v, want %v", got, tc.want)
				}
			}
		})
	}
}
