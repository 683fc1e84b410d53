package proxy

import (
	"context"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/route"
)

func nodePort(proto uint8, port uint16) agentof.ServicePort {
	return agentof.ServicePort{IP: agentof.NodePortVirtualIP, Protocol: proto, Port: port}
}

// Kubernetes' semantics (kube-proxy's): a NodePort serves the Service on
// every node address with the cluster endpoints; under
// externalTrafficPolicy Local traffic from outside the node gets the local
// endpoints only and is dropped by a node without one, while the node's own
// traffic (and its pods') still reaches every endpoint.
func TestDesiredStateOfNodePorts(t *testing.T) {
	ports := slicePorts(epPort("http", corev1.ProtocolTCP, 8080), epPort("dns", corev1.ProtocolUDP, 5353))
	both := []*discoveryv1.EndpointSlice{slice("web-1", "web", ports, ep{ip: "10.10.1.3", node: "node-1"}, ep{ip: "10.10.2.3", node: "node-2"})}
	remoteOnly := []*discoveryv1.EndpointSlice{slice("web-1", "web", ports, ep{ip: "10.10.2.3", node: "node-2"})}
	local, remote := endpoint("10.10.1.3", 8080, true), endpoint("10.10.2.3", 8080, false)
	localDNS, remoteDNS := endpoint("10.10.1.3", 5353, true), endpoint("10.10.2.3", 5353, false)
	web := func(typ corev1.ServiceType, f func(*corev1.Service)) *corev1.Service {
		http, dns := svcPort("http", corev1.ProtocolTCP, 80, 8080), svcPort("dns", corev1.ProtocolUDP, 53, 5353)
		http.NodePort, dns.NodePort = 30080, 30053
		s := service("web", "10.96.0.10", http, dns)
		s.Spec.Type = typ
		if f != nil {
			f(s)
		}
		return s
	}
	etpLocal := func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }
	outside := func(p agentof.ServicePort) agentof.ServicePort { p.External = true; return p }
	cipHTTP, cipDNS := vipPort("10.96.0.10", 6, 80), vipPort("10.96.0.10", 17, 53)
	npHTTP, npDNS := nodePort(6, 30080), nodePort(17, 30053)
	for _, tc := range []struct {
		name     string
		svc      *corev1.Service
		slices   []*discoveryv1.EndpointSlice
		proxyAll bool
		want     agentof.ServiceState
	}{
		{
			name: "without proxyAll NodePorts are left to kube-proxy", svc: web(corev1.ServiceTypeNodePort, nil), slices: both,
			want: agentof.ServiceState{cipHTTP: {Endpoints: []agentof.Endpoint{local, remote}}, cipDNS: {Endpoints: []agentof.Endpoint{localDNS, remoteDNS}}},
		},
		{
			name: "with proxyAll each NodePort is a port on the virtual IP with every endpoint", svc: web(corev1.ServiceTypeNodePort, nil), slices: both, proxyAll: true,
			want: agentof.ServiceState{
				cipHTTP: {Endpoints: []agentof.Endpoint{local, remote}}, cipDNS: {Endpoints: []agentof.Endpoint{localDNS, remoteDNS}},
				npHTTP: {Endpoints: []agentof.Endpoint{local, remote}}, npDNS: {Endpoints: []agentof.Endpoint{localDNS, remoteDNS}},
			},
		},
		{
			name: "a LoadBalancer's NodePorts too", svc: web(corev1.ServiceTypeLoadBalancer, nil), slices: both, proxyAll: true,
			want: agentof.ServiceState{
				cipHTTP: {Endpoints: []agentof.Endpoint{local, remote}}, cipDNS: {Endpoints: []agentof.Endpoint{localDNS, remoteDNS}},
				npHTTP: {Endpoints: []agentof.Endpoint{local, remote}}, npDNS: {Endpoints: []agentof.Endpoint{localDNS, remoteDNS}},
			},
		},
		{
			name: "a ClusterIP Service has no NodePort, whatever its ports say", svc: web(corev1.ServiceTypeClusterIP, nil), slices: both, proxyAll: true,
			want: agentof.ServiceState{cipHTTP: {Endpoints: []agentof.Endpoint{local, remote}}, cipDNS: {Endpoints: []agentof.Endpoint{localDNS, remoteDNS}}},
		},
		{
			name: "externalTrafficPolicy Local: traffic from outside gets the local endpoints, the node and pods every one",
			svc:  web(corev1.ServiceTypeNodePort, etpLocal), slices: both, proxyAll: true,
			want: agentof.ServiceState{
				cipHTTP: {Endpoints: []agentof.Endpoint{local, remote}}, cipDNS: {Endpoints: []agentof.Endpoint{localDNS, remoteDNS}},
				npHTTP: {Endpoints: []agentof.Endpoint{local, remote}}, npDNS: {Endpoints: []agentof.Endpoint{localDNS, remoteDNS}},
				outside(npHTTP): {Endpoints: []agentof.Endpoint{local}}, outside(npDNS): {Endpoints: []agentof.Endpoint{localDNS}},
			},
		},
		{
			name: "externalTrafficPolicy Local on a node without a local endpoint drops traffic from outside",
			svc:  web(corev1.ServiceTypeNodePort, etpLocal), slices: remoteOnly, proxyAll: true,
			want: agentof.ServiceState{
				cipHTTP: {Endpoints: []agentof.Endpoint{remote}}, cipDNS: {Endpoints: []agentof.Endpoint{remoteDNS}},
				npHTTP: {Endpoints: []agentof.Endpoint{remote}}, npDNS: {Endpoints: []agentof.Endpoint{remoteDNS}},
				outside(npHTTP): {NoEndpoints: agentof.Drop}, outside(npDNS): {NoEndpoints: agentof.Drop},
			},
		},
		{
			name: "a NodePort without any endpoint rejects, from outside too",
			svc:  web(corev1.ServiceTypeNodePort, etpLocal), proxyAll: true,
			want: agentof.ServiceState{cipHTTP: {}, cipDNS: {}, npHTTP: {}, npDNS: {}, outside(npHTTP): {}, outside(npDNS): {}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := desiredState(tc.svc, tc.slices, nodeView{name: "node-1", proxyAll: tc.proxyAll}); !got.Equal(tc.want) {
				t.Fatalf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestNodeNeedsAreNodePortsAndEveryServiceAddress(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	http := svcPort("http", corev1.ProtocolTCP, 80, 8080)
	http.NodePort = 30080
	sctp := svcPort("sctp", corev1.ProtocolSCTP, 90, 9090)
	sctp.NodePort = 30090
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want route.ServiceNeeds
	}{
		{name: "a ClusterIP Service: its ClusterIP routed", svc: service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080)),
			want: route.ServiceNeeds{Addresses: addrs("10.96.0.10")}},
		{name: "a headless Service: nothing", svc: service("web", corev1.ClusterIPNone, svcPort("", corev1.ProtocolTCP, 80, 8080))},
		{name: "a LoadBalancer: its NodePorts (those the data path realizes), ClusterIP, external and ingress IPs (not ipMode Proxy)",
			svc: withSpec(service("web", "10.96.0.10", http, sctp), func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.ExternalIPs = []string{"192.168.100.10", "fd00::1"}
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.168.100.11"}, {IP: "192.168.100.12", IPMode: ptr(corev1.LoadBalancerIPModeProxy)}}
			}),
			want: route.ServiceNeeds{NodePorts: []route.NodePort{{Protocol: 6, Port: 30080}}, Addresses: addrs("10.96.0.10", "192.168.100.10", "192.168.100.11")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodeNeeds(tc.svc, nodeView{name: "node-1", proxyAll: true}); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// fakeNodePath records what the proxy asks of the node.
type fakeNodePath struct {
	mu     sync.Mutex
	needs  map[string]route.ServiceNeeds
	synced bool
}

func (f *fakeNodePath) SetService(key string, n route.ServiceNeeds) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(n.NodePorts) == 0 && len(n.Addresses) == 0 {
		delete(f.needs, key)
		return
	}
	f.needs[key] = n
}

func (f *fakeNodePath) Synced() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = true
}

func (f *fakeNodePath) snapshot() (map[string]route.ServiceNeeds, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]route.ServiceNeeds{}
	for k, v := range f.needs {
		out[k] = v
	}
	return out, f.synced
}

func TestTheProxyTellsTheNodePathWhatEachServiceNeeds(t *testing.T) {
	http := svcPort("", corev1.ProtocolTCP, 80, 8080)
	http.NodePort = 30080
	web := withSpec(service("web", "10.96.0.10", http), func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	client := fake.NewClientset(web)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := informers.NewSharedInformerFactory(client, 0)
	flows := &fakeFlows{state: map[string]agentof.ServiceState{}}
	np := &fakeNodePath{needs: map[string]route.ServiceNeeds{}}
	if _, err := NewWithConfig(Config{NodeName: "node-1", ProxyAll: true}, f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), flows); err == nil {
		t.Fatal("proxyAll without a node path should be refused")
	}
	p, err := NewWithConfig(Config{NodeName: "node-1", ProxyAll: true, NodePath: np}, f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), flows)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	go func() { _ = p.Run(ctx) }()
	want := route.ServiceNeeds{NodePorts: []route.NodePort{{Protocol: 6, Port: 30080}}, Addresses: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	waitNodePath(t, np, "web's NodePort and ClusterIP, and the end of the initial sync", func(n map[string]route.ServiceNeeds, synced bool) bool {
		return synced && reflect.DeepEqual(n["default/web"], want)
	})
	if _, st := flows.snapshot(); len(st["default/web"]) != 2 {
		t.Fatalf("web's ClusterIP and NodePort should be in OVS, got %v", st["default/web"])
	}
	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNodePath(t, np, "nothing once web is deleted", func(n map[string]route.ServiceNeeds, _ bool) bool { return len(n) == 0 })
}

func waitNodePath(t *testing.T, np *fakeNodePath, what string, cond func(map[string]route.ServiceNeeds, bool) bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return cond(np.snapshot()), nil
	}); err != nil {
		n, s := np.snapshot()
		t.Fatalf("the node path should get %s; has %+v (synced %v)", what, n, s)
	}
}
