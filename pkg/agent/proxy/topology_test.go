package proxy

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

// hinted is an endpoint with topology hints (nil: none).
type hinted struct {
	ep
	zones, nodes []string
}

func hintedSlice(name, svc string, ports []discoveryv1.EndpointPort, eps ...hinted) *discoveryv1.EndpointSlice {
	var plain []ep
	for _, e := range eps {
		plain = append(plain, e.ep)
	}
	s := slice(name, svc, ports, plain...)
	for i, e := range eps {
		if e.zones == nil && e.nodes == nil {
			continue
		}
		h := &discoveryv1.EndpointHints{}
		for _, z := range e.zones {
			h.ForZones = append(h.ForZones, discoveryv1.ForZone{Name: z})
		}
		for _, n := range e.nodes {
			h.ForNodes = append(h.ForNodes, discoveryv1.ForNode{Name: n})
		}
		s.Endpoints[i].Hints = h
	}
	return s
}

// TestTopologyHints holds desiredState to kube-proxy's reading of the
// hints (pkg/proxy/topology.go, v1.37): the cluster endpoints are narrowed
// to those hinted for this node, or else for its zone, only when every
// ready endpoint carries such a hint and one is for this node (zone);
// otherwise every ready endpoint serves. Local endpoints (traffic policy
// Local) ignore hints, and so do the serving terminating ones used when
// nothing is ready.
func TestTopologyHints(t *testing.T) {
	ports := slicePorts(epPort("", corev1.ProtocolTCP, 8080))
	web := func(f func(*corev1.Service)) *corev1.Service {
		s := service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080))
		s.Spec.TrafficDistribution = ptr(corev1.ServiceTrafficDistributionPreferSameZone)
		if f != nil {
			f(s)
		}
		return s
	}
	a1 := hinted{ep{ip: "10.10.1.3", node: "node-1"}, []string{"zone-a"}, nil}
	a2 := hinted{ep{ip: "10.10.2.3", node: "node-2"}, []string{"zone-a"}, nil}
	b3 := hinted{ep{ip: "10.10.3.3", node: "node-3"}, []string{"zone-b"}, nil}
	eA1, eA2, eB3 := endpoint("10.10.1.3", 8080, true), endpoint("10.10.2.3", 8080, false), endpoint("10.10.3.3", 8080, false)
	clusterIP := vipPort("10.96.0.10", 6, 80)
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		node nodeView
		eps  []hinted
		want []agentof.Endpoint
	}{
		{
			name: "PreferSameZone: every endpoint hinted, some for this zone: only those",
			svc:  web(nil), node: nodeView{name: "node-1", zone: "zone-a"},
			eps:  []hinted{a1, a2, b3},
			want: []agentof.Endpoint{eA1, eA2},
		},
		{
			name: "the other zone's node gets the other zone's endpoints",
			svc:  web(nil), node: nodeView{name: "node-3", zone: "zone-b"},
			eps:  []hinted{a1, a2, b3},
			want: []agentof.Endpoint{endpoint("10.10.3.3", 8080, true)},
		},
		{
			name: "one ready endpoint without a hint: hints are ignored",
			svc:  web(nil), node: nodeView{name: "node-1", zone: "zone-a"},
			eps:  []hinted{a1, a2, {ep{ip: "10.10.3.3", node: "node-3"}, nil, nil}},
			want: []agentof.Endpoint{eA1, eA2, eB3},
		},
		{
			name: "a not-ready endpoint without a hint does not matter",
			svc:  web(nil), node: nodeView{name: "node-1", zone: "zone-a"},
			eps:  []hinted{a1, b3, {ep{ip: "10.10.4.3", node: "node-4", ready: ptr(false)}, nil, nil}},
			want: []agentof.Endpoint{eA1},
		},
		{
			name: "no endpoint hinted for this node's zone: every endpoint",
			svc:  web(nil), node: nodeView{name: "node-5", zone: "zone-c"},
			eps:  []hinted{a1, a2, b3},
			want: []agentof.Endpoint{endpoint("10.10.1.3", 8080, false), eA2, eB3},
		},
		{
			name: "a node without a zone label: every endpoint",
			svc:  web(nil), node: nodeView{name: "node-1"},
			eps:  []hinted{a1, a2, b3},
			want: []agentof.Endpoint{eA1, eA2, eB3},
		},
		{
			name: "PreferSameNode: node hints for this node win over zone hints",
			svc: web(func(s *corev1.Service) {
				s.Spec.TrafficDistribution = ptr(corev1.ServiceTrafficDistributionPreferSameNode)
			}),
			node: nodeView{name: "node-1", zone: "zone-a"},
			eps: []hinted{
				{a1.ep, []string{"zone-a"}, []string{"node-1"}},
				{a2.ep, []string{"zone-a"}, []string{"node-2"}},
				{b3.ep, []string{"zone-b"}, []string{"node-3"}},
			},
			want: []agentof.Endpoint{eA1},
		},
		{
			name: "node hints none of which is for this node: zone hints apply",
			svc: web(func(s *corev1.Service) {
				s.Spec.TrafficDistribution = ptr(corev1.ServiceTrafficDistributionPreferSameNode)
			}),
			node: nodeView{name: "node-9", zone: "zone-a"},
			eps: []hinted{
				{a1.ep, []string{"zone-a"}, []string{"node-1"}},
				{a2.ep, []string{"zone-a"}, []string{"node-2"}},
				{b3.ep, []string{"zone-b"}, []string{"node-3"}},
			},
			want: []agentof.Endpoint{endpoint("10.10.1.3", 8080, false), eA2},
		},
		{
			name: "nothing ready: the serving terminating endpoints, hints ignored",
			svc:  web(nil), node: nodeView{name: "node-1", zone: "zone-a"},
			eps: []hinted{
				{ep{ip: "10.10.1.3", node: "node-1", ready: ptr(false), serving: ptr(true), terminating: ptr(true)}, []string{"zone-a"}, nil},
				{ep{ip: "10.10.3.3", node: "node-3", ready: ptr(false), serving: ptr(true), terminating: ptr(true)}, []string{"zone-b"}, nil},
			},
			want: []agentof.Endpoint{eA1, eB3},
		},
		{
			name: "hints are read whatever the Service's field says (kube-proxy reads only the hints)",
			svc:  web(func(s *corev1.Service) { s.Spec.TrafficDistribution = nil }), node: nodeView{name: "node-1", zone: "zone-a"},
			eps:  []hinted{a1, a2, b3},
			want: []agentof.Endpoint{eA1, eA2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := desiredState(tc.svc, []*discoveryv1.EndpointSlice{hintedSlice("web-1", "web", ports, tc.eps...)}, tc.node)
			if !got[clusterIP].Equal(agentof.PortState{Endpoints: tc.want}) {
				t.Fatalf("endpoints %v, want %v", got[clusterIP].Endpoints, tc.want)
			}
		})
	}

	// Local endpoints ignore hints: internalTrafficPolicy Local on node-1
	// in zone-b keeps its local endpoint hinted for zone-a.
	svc := web(func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal) })
	got := desiredState(svc, []*discoveryv1.EndpointSlice{hintedSlice("web-1", "web", ports, a1, b3)}, nodeView{name: "node-1", zone: "zone-b"})
	if !got[clusterIP].Equal(agentof.PortState{Endpoints: []agentof.Endpoint{eA1}}) {
		t.Fatalf("internalTrafficPolicy Local should keep the local endpoint whatever its hints, got %v", got[clusterIP].Endpoints)
	}
}

// TestTheNodesZoneLabelIsFollowed: the proxy reads its zone from its Node
// object, and a change of the label re-syncs the Services.
func TestTheNodesZoneLabelIsFollowed(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}
	ports := slicePorts(epPort("", corev1.ProtocolTCP, 8080))
	client, flows := startProxyWith(t, Config{NodeName: "node-1"}, true, node,
		service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080)),
		hintedSlice("web-1", "web", ports,
			hinted{ep{ip: "10.10.1.3", node: "node-1"}, []string{"zone-a"}, nil},
			hinted{ep{ip: "10.10.3.3", node: "node-3"}, []string{"zone-b"}, nil}))
	clusterIP := vipPort("10.96.0.10", 6, 80)
	only := func(ip string) func([]string, map[string]agentof.ServiceState) bool {
		return func(_ []string, st map[string]agentof.ServiceState) bool {
			eps := st["default/web"][clusterIP].Endpoints
			return len(eps) == 1 && eps[0].IP.String() == ip
		}
	}
	eventually(t, flows, "in zone-a, web should have zone-a's endpoint only", only("10.10.1.3"))
	node.Labels[corev1.LabelTopologyZone] = "zone-b"
	if _, err := client.CoreV1().Nodes().Update(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, flows, "moved to zone-b, web should have zone-b's endpoint only", only("10.10.3.3"))
}
