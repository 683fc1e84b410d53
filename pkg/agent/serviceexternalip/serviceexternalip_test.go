package serviceexternalip

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"antrea.io/antrea/pkg/agent/egress"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
)

func indexer(objs ...any) cache.Indexer {
	i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		_ = i.Add(o)
	}
	return i
}

func lb(name, pool, ip string, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		Annotations: map[string]string{crdv1beta1.ServiceExternalIPPoolAnnotationKey: pool}},
		Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: ip}}}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// TestOwnedIPs: the IPs a node answers for are those of annotated
// LoadBalancer Services without a class, inside an existing pool, whose
// rendezvous owner among the pool's (and, under Local, the endpoints')
// nodes it is.
func TestOwnedIPs(t *testing.T) {
	node1 := "node-1"
	class := "other"
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: crdv1beta1.ExternalIPPoolSpec{IPRanges: []crdv1beta1.IPRange{{CIDR: "10.0.0.0/24"}}}}
	ready := true
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "local-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: "local"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.10.1.2"}, NodeName: &node1, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}}
	svcs := []any{
		lb("a", "p", "10.0.0.1"), lb("b", "p", "10.0.0.2"), lb("c", "p", "10.0.0.3"), lb("d", "p", "10.0.0.4"),
		lb("outside-the-pool", "p", "10.0.1.1"),
		lb("no-such-pool", "q", "10.0.0.9"),
		lb("with-class", "p", "10.0.0.10", func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class }),
		lb("not-lb", "p", "10.0.0.11", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }),
		lb("local", "p", "10.0.0.12", func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}),
	}
	nodes := corelisters.NewNodeLister(indexer(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}}))
	alive := []string{"node-1", "node-2"}
	owned := map[string][]netip.Addr{}
	for _, n := range alive {
		c := &Controller{cfg: Config{NodeName: n, Services: corelisters.NewServiceLister(indexer(svcs...)),
			EndpointSlices: discoverylisters.NewEndpointSliceLister(indexer(es)),
			Pools:          crdlisters.NewExternalIPPoolLister(indexer(pool)), Nodes: nodes}}
		ips, err := c.Owned(alive)
		if err != nil {
			t.Fatal(err)
		}
		owned[n] = ips
	}
	all := append(slices.Clone(owned["node-1"]), owned["node-2"]...)
	slices.SortFunc(all, func(a, b netip.Addr) int { return a.Compare(b) })
	want := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3"),
		netip.MustParseAddr("10.0.0.4"), netip.MustParseAddr("10.0.0.12")}
	if !slices.Equal(all, want) {
		t.Errorf("the nodes answer for %v together, want exactly %v (each once)", all, want)
	}
	for _, ip := range want[:4] {
		if o := egress.Owner(ip.String(), alive); !slices.Contains(owned[o], ip) {
			t.Errorf("%s is not answered by its rendezvous owner %s: %v", ip, o, owned)
		}
	}
	if !slices.Contains(owned["node-1"], netip.MustParseAddr("10.0.0.12")) {
		t.Errorf("the Local Service's IP is not answered by node-1, its only node with an endpoint: %v", owned)
	}
}

// TestLocalPrefersTheNodeWithTheMostEndpoints: under Local, the node with
// the most ready endpoints answers even where the hash alone would pick the
// other; not-ready endpoints do not count; equal counts leave the choice to
// the hash; no endpoint anywhere, no node.
func TestLocalPrefersTheNodeWithTheMostEndpoints(t *testing.T) {
	alive := []string{"node-1", "node-2"}
	// An IP of the pool whose rendezvous owner is node-1.
	var ip string
	for i := 1; i < 255 && ip == ""; i++ {
		if s := netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}).String(); egress.Owner(s, alive) == "node-1" {
			ip = s
		}
	}
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: crdv1beta1.ExternalIPPoolSpec{IPRanges: []crdv1beta1.IPRange{{CIDR: "10.0.0.0/24"}}}}
	nodes := corelisters.NewNodeLister(indexer(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}}))
	svc := lb("local", "p", ip, func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	ep := func(addr, node string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
	}
	holders := func(eps ...discoveryv1.Endpoint) []string {
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "local-x",
			Labels: map[string]string{discoveryv1.LabelServiceName: "local"}}, Endpoints: eps}
		var out []string
		for _, n := range alive {
			c := &Controller{cfg: Config{NodeName: n, Services: corelisters.NewServiceLister(indexer(svc)),
				EndpointSlices: discoverylisters.NewEndpointSliceLister(indexer(es)),
				Pools:          crdlisters.NewExternalIPPoolLister(indexer(pool)), Nodes: nodes}}
			ips, err := c.Owned(alive)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(ips, netip.MustParseAddr(ip)) {
				out = append(out, n)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		eps  []discoveryv1.Endpoint
		want []string
	}{
		{"two of three endpoints on node-2", []discoveryv1.Endpoint{ep("10.10.1.2", "node-1", true),
			ep("10.10.2.2", "node-2", true), ep("10.10.2.3", "node-2", true)}, []string{"node-2"}},
		{"node-2's second endpoint not ready", []discoveryv1.Endpoint{ep("10.10.1.2", "node-1", true),
			ep("10.10.2.2", "node-2", true), ep("10.10.2.3", "node-2", false)}, []string{"node-1"}},
		{"one each: the hash's owner", []discoveryv1.Endpoint{ep("10.10.1.2", "node-1", true),
			ep("10.10.2.2", "node-2", true)}, []string{"node-1"}},
		{"only node-2 has one", []discoveryv1.Endpoint{ep("10.10.2.2", "node-2", true)}, []string{"node-2"}},
		{"none ready", []discoveryv1.Endpoint{ep("10.10.2.2", "node-2", false)}, nil},
	} {
		if got := holders(tc.eps...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %s is answered by %v, want %v", tc.name, ip, got, tc.want)
		}
	}
}
