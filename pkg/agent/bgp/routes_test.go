package bgp

import (
	"maps"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

func svc(name string, typ corev1.ServiceType, clusterIP string, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{Type: typ, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func lbIP(ip string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
}

func etpLocal(s *corev1.Service) {
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
}

func endpointOn(node string, ready *bool) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.10.1.5"}, NodeName: ptr.To(node),
		Conditions: discoveryv1.EndpointConditions{Ready: ready}}}}
}

func TestDesired(t *testing.T) {
	allTypes := &crdv1alpha1.ServiceAdvertisement{IPTypes: []crdv1alpha1.ServiceIPType{
		crdv1alpha1.ServiceIPTypeClusterIP, crdv1alpha1.ServiceIPTypeExternalIP, crdv1alpha1.ServiceIPTypeLoadBalancerIP}}
	podCIDRs := []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("fd00:10:1::/64")}
	lb := svc("lb", corev1.ServiceTypeLoadBalancer, "10.96.0.10", lbIP("172.30.0.200"), func(s *corev1.Service) {
		s.Spec.ExternalIPs = []string{"192.0.2.1"}
	})
	lbLocal := svc("lb-local", corev1.ServiceTypeLoadBalancer, "10.96.0.11", lbIP("172.30.0.201"), etpLocal)
	headless := svc("headless", corev1.ServiceTypeClusterIP, "None")
	itpLocal := svc("itp-local", corev1.ServiceTypeClusterIP, "10.96.0.12", func(s *corev1.Service) {
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	})
	dual := svc("dual", corev1.ServiceTypeClusterIP, "10.96.0.13", func(s *corev1.Service) {
		s.Spec.ClusterIPs = []string{"10.96.0.13", "fd00:96::13"}
	})
	for _, tc := range []struct {
		name   string
		adv    crdv1alpha1.Advertisements
		svcs   []*corev1.Service
		slices map[string][]*discoveryv1.EndpointSlice
		egress []netip.Addr
		want   []string
	}{
		{name: "nothing advertised without advertisements", svcs: []*corev1.Service{lb}, egress: []netip.Addr{netip.MustParseAddr("172.30.0.210")}},
		{name: "pod advertises the Node's Pod CIDRs", adv: crdv1alpha1.Advertisements{Pod: &crdv1alpha1.PodAdvertisement{}},
			want: []string{"10.10.1.0/24", "fd00:10:1::/64"}},
		{name: "egress advertises the held Egress IPs as host routes", adv: crdv1alpha1.Advertisements{Egress: &crdv1alpha1.EgressAdvertisement{}},
			egress: []netip.Addr{netip.MustParseAddr("172.30.0.210")}, want: []string{"172.30.0.210/32"}},
		{name: "service advertises only the listed IP types",
			adv:  crdv1alpha1.Advertisements{Service: &crdv1alpha1.ServiceAdvertisement{IPTypes: []crdv1alpha1.ServiceIPType{crdv1alpha1.ServiceIPTypeLoadBalancerIP}}},
			svcs: []*corev1.Service{lb}, want: []string{"172.30.0.200/32"}},
		{name: "every type: ClusterIP, external IPs and LoadBalancer IPs; a headless Service has none",
			adv: crdv1alpha1.Advertisements{Service: allTypes}, svcs: []*corev1.Service{lb, headless},
			want: []string{"10.96.0.10/32", "172.30.0.200/32", "192.0.2.1/32"}},
		{name: "a dual-stack Service's ClusterIPs are a /32 and a /128",
			adv: crdv1alpha1.Advertisements{Service: allTypes}, svcs: []*corev1.Service{dual},
			want: []string{"10.96.0.13/32", "fd00:96::13/128"}},
		{name: "externalTrafficPolicy Local without a local endpoint: its ClusterIP only",
			adv: crdv1alpha1.Advertisements{Service: allTypes}, svcs: []*corev1.Service{lbLocal},
			slices: map[string][]*discoveryv1.EndpointSlice{"ns/lb-local": {endpointOn("n2", nil)}},
			want:   []string{"10.96.0.11/32"}},
		{name: "externalTrafficPolicy Local with a ready local endpoint: its LoadBalancer IP too",
			adv: crdv1alpha1.Advertisements{Service: allTypes}, svcs: []*corev1.Service{lbLocal},
			slices: map[string][]*discoveryv1.EndpointSlice{"ns/lb-local": {endpointOn("n2", nil), endpointOn("n1", ptr.To(true))}},
			want:   []string{"10.96.0.11/32", "172.30.0.201/32"}},
		{name: "externalTrafficPolicy Local with a local endpoint not ready: not its LoadBalancer IP",
			adv: crdv1alpha1.Advertisements{Service: allTypes}, svcs: []*corev1.Service{lbLocal},
			slices: map[string][]*discoveryv1.EndpointSlice{"ns/lb-local": {endpointOn("n1", ptr.To(false))}},
			want:   []string{"10.96.0.11/32"}},
		{name: "internalTrafficPolicy Local: its ClusterIP only with a local endpoint",
			adv: crdv1alpha1.Advertisements{Service: allTypes}, svcs: []*corev1.Service{itpLocal},
			slices: map[string][]*discoveryv1.EndpointSlice{"ns/itp-local": {endpointOn("n2", nil)}}},
		{name: "a LoadBalancer IP of a Service no longer of type LoadBalancer is not advertised",
			adv:  crdv1alpha1.Advertisements{Service: &crdv1alpha1.ServiceAdvertisement{IPTypes: []crdv1alpha1.ServiceIPType{crdv1alpha1.ServiceIPTypeLoadBalancerIP}}},
			svcs: []*corev1.Service{svc("was-lb", corev1.ServiceTypeClusterIP, "10.96.0.14", lbIP("172.30.0.202"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Desired(Inputs{NodeName: "n1", Advertisements: tc.adv, PodCIDRs: podCIDRs, Services: tc.svcs, Slices: tc.slices, EgressIPs: tc.egress})
			var gotS []string
			for _, p := range slices.SortedFunc(maps.Keys(got), netip.Prefix.Compare) {
				gotS = append(gotS, p.String())
			}
			slices.Sort(gotS)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(gotS, want) {
				t.Errorf("got %v, want %v", gotS, want)
			}
		})
	}
	got := Desired(Inputs{NodeName: "n1", Advertisements: crdv1alpha1.Advertisements{Service: allTypes}, Services: []*corev1.Service{lb}})
	if src := got[netip.MustParsePrefix("172.30.0.200/32")]; src != (RouteSource{Type: RouteServiceLoadBalancerIP, Object: "ns/lb"}) {
		t.Errorf("the LoadBalancer IP's source is %+v", src)
	}
}
