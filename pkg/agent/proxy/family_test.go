package proxy

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	agenttypes "antrea.io/antrea/pkg/agent/types"
)

// dualStackWeb is a dual-stack NodePort Service with an external IP of
// each family, and its IPv4 and IPv6 EndpointSlices.
func dualStackWeb() (*corev1.Service, []*discoveryv1.EndpointSlice) {
	http := svcPort("http", corev1.ProtocolTCP, 80, 8080)
	http.NodePort = 30080
	svc := withSpec(service("web", "10.96.0.10", http), func(s *corev1.Service) {
		s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:10:96::a"}
		s.Spec.ExternalIPs = []string{"192.168.100.10", "fd00:100::10"}
		s.Spec.Type = corev1.ServiceTypeNodePort
	})
	ports := slicePorts(epPort("http", corev1.ProtocolTCP, 8080))
	v4 := slice("web-v4", "web", ports, ep{ip: "10.10.1.3", node: "node-1"}, ep{ip: "10.10.2.3", node: "node-2"})
	v6 := slice("web-v6", "web", ports, ep{ip: "fd00:10:244:1::3", node: "node-1"})
	v6.AddressType = discoveryv1.AddressTypeIPv6
	return svc, []*discoveryv1.EndpointSlice{v4, v6}
}

func TestEachFamilyOfADualStackServiceIsComputedFromItsOwnAddressesAndSlices(t *testing.T) {
	svc, slices := dualStackWeb()
	node := nodeView{name: "node-1", proxyAll: true}
	v4eps := agentof.PortState{Endpoints: []agentof.Endpoint{endpoint("10.10.1.3", 8080, true), endpoint("10.10.2.3", 8080, false)}}
	v6eps := agentof.PortState{Endpoints: []agentof.Endpoint{endpoint("fd00:10:244:1::3", 8080, true)}}
	for _, tc := range []struct {
		family agenttypes.IPFamily
		want   agentof.ServiceState
	}{
		{agenttypes.IPv4, agentof.ServiceState{
			vipPort("10.96.0.10", 6, 80): v4eps, vipPort("192.168.100.10", 6, 80): v4eps,
			{IP: agenttypes.NodePortVirtualIP, Protocol: 6, Port: 30080}: v4eps,
		}},
		{agenttypes.IPv6, agentof.ServiceState{
			vipPort("fd00:10:96::a", 6, 80): v6eps, vipPort("fd00:100::10", 6, 80): v6eps,
			{IP: agenttypes.NodePortVirtualIPv6, Protocol: 6, Port: 30080}: v6eps,
		}},
	} {
		t.Run(tc.family.String(), func(t *testing.T) {
			if got := familyState(svc, slices, node, tc.family); !got.Equal(tc.want) {
				t.Errorf("familyState(%s) =\n%v\nwant\n%v", tc.family, got, tc.want)
			}
		})
	}
}

func TestADualStackServiceRealizesItsIPv4PartAndReportsItsIPv6PartUnrealized(t *testing.T) {
	svc, slices := dualStackWeb()
	node := nodeView{name: "node-1", proxyAll: true}
	if got, want := desiredState(svc, slices, node), familyState(svc, slices, node, agenttypes.IPv4); !got.Equal(want) {
		t.Errorf("desiredState of a dual-stack Service =\n%v\nwant its IPv4 part alone\n%v", got, want)
	}
	ws := unrealized(svc, "netdev", node.families())
	if len(ws) != 1 || ws[0].reason != ReasonIPv6NotSupported {
		t.Fatalf("unrealized = %+v, want one %s warning", ws, ReasonIPv6NotSupported)
	}
	for _, want := range []string{"ClusterIP fd00:10:96::a", "external IP fd00:100::10", "this node carries IPv4 only"} {
		if !strings.Contains(ws[0].message, want) {
			t.Errorf("warning %q does not say %q", ws[0].message, want)
		}
	}
	if needs := nodeNeeds(svc, node); len(needs.Addresses) != 2 || !needs.Addresses[0].Is4() || !needs.Addresses[1].Is4() {
		t.Errorf("nodeNeeds of a dual-stack Service = %v, want its two IPv4 addresses", needs.Addresses)
	}
}

// ipv4Node is the families of an IPv4 node.
var ipv4Node = nodeView{}.families()

// TestADualStackNodeWarnsNothingOfADualStackService: the Warning Event an
// IPv4 node posts about a Service's IPv6 part is not posted where the node
// carries IPv6 (dual-stack or IPv6-only), and an IPv6-only Service is
// realized there too.
func TestADualStackNodeWarnsNothingOfADualStackService(t *testing.T) {
	svc, _ := dualStackWeb()
	dual := nodeView{name: "node-1", ipv6: true}.families()
	if ws := unrealized(svc, "netdev", dual); len(ws) != 0 {
		t.Fatalf("a dual-stack node warned of a dual-stack Service: %+v", ws)
	}
	v6 := withSpec(service("v6", "fd00:10:96::b", svcPort("http", corev1.ProtocolTCP, 80, 8080)), func(s *corev1.Service) {})
	if ws := unrealized(v6, "netdev", dual); len(ws) != 0 {
		t.Fatalf("a dual-stack node warned of an IPv6 Service: %+v", ws)
	}
	if ws := unrealized(v6, "netdev", ipv4Node); len(ws) != 1 || !strings.Contains(ws[0].message, "its ClusterIPs (fd00:10:96::b) are not IPv4") {
		t.Fatalf("an IPv4 node should warn once that an IPv6 Service is not realized, got %+v", ws)
	}
}

func TestOnADualStackNodeADualStackServiceRealizesBothFamilies(t *testing.T) {
	svc, slices := dualStackWeb()
	node := nodeView{name: "node-1", ipv6: true}
	want := familyState(svc, slices, node, agenttypes.IPv4)
	for p, ps := range familyState(svc, slices, node, agenttypes.IPv6) {
		want[p] = ps
	}
	got := desiredState(svc, slices, node)
	if !got.Equal(want) {
		t.Errorf("desiredState on a dual-stack node =\n%v\nwant both families' parts\n%v", got, want)
	}
	if _, ok := got[vipPort("fd00:10:96::a", 6, 80)]; !ok {
		t.Errorf("desiredState on a dual-stack node lacks the IPv6 ClusterIP's port: %v", got)
	}
	// The node path of a dual-stack node serves IPv6 too: both families'
	// ClusterIPs and external IPs are routed to the gateway.
	wantAddrs := "[10.96.0.10 fd00:10:96::a 192.168.100.10 fd00:100::10]"
	if needs := nodeNeeds(svc, node); fmt.Sprint(needs.Addresses) != wantAddrs {
		t.Errorf("nodeNeeds of a dual-stack Service on a dual-stack node = %v, want %s", needs.Addresses, wantAddrs)
	}
}

func TestAnIPv6OnlyServiceHasNoState(t *testing.T) {
	svc, slices := dualStackWeb()
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "fd00:10:96::a", []string{"fd00:10:96::a"}
	if got := desiredState(svc, slices, nodeView{name: "node-1", proxyAll: true}); got != nil {
		t.Errorf("desiredState of an IPv6-only Service = %v, want none", got)
	}
	if got := familyState(svc, slices, nodeView{name: "node-1"}, agenttypes.IPv4); got != nil {
		t.Errorf("its IPv4 part = %v, want none (it has no IPv4 ClusterIP)", got)
	}
}

func TestAFamilyIgnoresTheOtherFamilysSlicesAndFQDNSlices(t *testing.T) {
	svc, slices := dualStackWeb()
	fqdn := slice("web-fqdn", "web", slicePorts(epPort("http", corev1.ProtocolTCP, 8080)), ep{ip: "10.10.3.3", node: "node-1"})
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	// An IPv6 address in an IPv4 slice is no IPv4 endpoint.
	slices[0].Endpoints = append(slices[0].Endpoints, discoveryv1.Endpoint{Addresses: []string{"fd00::9"}})
	got := portCandidates(svc.Spec.Ports[0], append(slices, fqdn), "node-1", agenttypes.IPv4)
	if len(got) != 2 {
		t.Errorf("IPv4 candidates = %+v, want the two of the IPv4 slice", got)
	}
}
