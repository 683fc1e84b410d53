package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

func ptr[T any](v T) *T { return &v }

func service(name, clusterIP string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       corev1.ServiceSpec{ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}, Ports: ports},
	}
}

func svcPort(name string, proto corev1.Protocol, port int32, target int) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt(target)}
}

type ep struct {
	ip          string
	node        string
	ready       *bool
	serving     *bool
	terminating *bool
}

func slice(name, svc string, ports []discoveryv1.EndpointPort, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{e.ip},
			NodeName:   ptr(e.node),
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating},
		})
	}
	return s
}

func slicePorts(ps ...discoveryv1.EndpointPort) []discoveryv1.EndpointPort { return ps }

func epPort(name string, proto corev1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr(name), Protocol: ptr(proto), Port: ptr(port)}
}

func vipPort(ip string, proto uint8, port uint16) agentof.ServicePort {
	return agentof.ServicePort{IP: netip.MustParseAddr(ip), Protocol: proto, Port: port}
}

func endpoint(ip string, port uint16, local bool) agentof.Endpoint {
	return agentof.Endpoint{IP: netip.MustParseAddr(ip), Port: port, Local: local}
}

func TestDesiredState(t *testing.T) {
	web := service("web", "10.96.0.10", svcPort("http", corev1.ProtocolTCP, 80, 8080), svcPort("dns", corev1.ProtocolUDP, 53, 5353))
	webPorts := slicePorts(epPort("http", corev1.ProtocolTCP, 8080), epPort("dns", corev1.ProtocolUDP, 5353))
	for _, tc := range []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   agentof.ServiceState
	}{
		{
			name:   "each port gets the ready endpoints at the slice's port of the same name",
			svc:    web,
			slices: []*discoveryv1.EndpointSlice{slice("web-1", "web", webPorts, ep{ip: "10.10.1.3", node: "node-1"}, ep{ip: "10.10.2.3", node: "node-2", ready: ptr(true)})},
			want: agentof.ServiceState{
				vipPort("10.96.0.10", 6, 80):  {Endpoints: []agentof.Endpoint{endpoint("10.10.1.3", 8080, true), endpoint("10.10.2.3", 8080, false)}},
				vipPort("10.96.0.10", 17, 53): {Endpoints: []agentof.Endpoint{endpoint("10.10.1.3", 5353, true), endpoint("10.10.2.3", 5353, false)}},
			},
		},
		{
			name: "endpoints of several slices are merged and de-duplicated",
			svc:  web,
			slices: []*discoveryv1.EndpointSlice{
				slice("web-1", "web", webPorts, ep{ip: "10.10.2.3", node: "node-2"}),
				slice("web-2", "web", webPorts, ep{ip: "10.10.1.3", node: "node-1"}, ep{ip: "10.10.2.3", node: "node-2"}),
			},
			want: agentof.ServiceState{
				vipPort("10.96.0.10", 6, 80):  {Endpoints: []agentof.Endpoint{endpoint("10.10.1.3", 8080, true), endpoint("10.10.2.3", 8080, false)}},
				vipPort("10.96.0.10", 17, 53): {Endpoints: []agentof.Endpoint{endpoint("10.10.1.3", 5353, true), endpoint("10.10.2.3", 5353, false)}},
			},
		},
		{
			name:   "not-ready endpoints are left out; a port without endpoints stays, empty",
			svc:    web,
			slices: []*discoveryv1.EndpointSlice{slice("web-1", "web", webPorts, ep{ip: "10.10.1.3", node: "node-1", ready: ptr(false)})},
			want: agentof.ServiceState{
				vipPort("10.96.0.10", 6, 80):  {},
				vipPort("10.96.0.10", 17, 53): {},
			},
		},
		{
			name: "serving terminating endpoints are used only when none is ready",
			svc:  service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080)),
			slices: []*discoveryv1.EndpointSlice{slice("web-1", "web", slicePorts(epPort("", corev1.ProtocolTCP, 8080)),
				ep{ip: "10.10.1.3", node: "node-1", ready: ptr(false), serving: ptr(true), terminating: ptr(true)},
				ep{ip: "10.10.1.4", node: "node-1", ready: ptr(false), serving: ptr(false), terminating: ptr(true)})},
			want: agentof.ServiceState{vipPort("10.96.0.10", 6, 80): {Endpoints: []agentof.Endpoint{endpoint("10.10.1.3", 8080, true)}}},
		},
		{
			name: "conditions left unset mean ready; a ready terminating endpoint (publishNotReadyAddresses) is ready; not ready but serving and not terminating is left out",
			svc:  service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080)),
			slices: []*discoveryv1.EndpointSlice{slice("web-1", "web", slicePorts(epPort("", corev1.ProtocolTCP, 8080)),
				ep{ip: "10.10.1.3", node: "node-1"},
				ep{ip: "10.10.1.4", node: "node-1", ready: ptr(true), serving: ptr(true), terminating: ptr(true)},
				ep{ip: "10.10.1.5", node: "node-1", ready: ptr(false), serving: ptr(true), terminating: ptr(false)},
				ep{ip: "10.10.1.6", node: "node-1", ready: ptr(false), serving: ptr(true), terminating: ptr(true)})},
			want: agentof.ServiceState{vipPort("10.96.0.10", 6, 80): {Endpoints: []agentof.Endpoint{endpoint("10.10.1.3", 8080, true), endpoint("10.10.1.4", 8080, true)}}},
		},
		{
			name: "one ready endpoint in any slice excludes the terminating ones of every slice",
			svc:  service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080)),
			slices: []*discoveryv1.EndpointSlice{
				slice("web-1", "web", slicePorts(epPort("", corev1.ProtocolTCP, 8080)),
					ep{ip: "10.10.1.3", node: "node-1", ready: ptr(false), serving: ptr(true), terminating: ptr(true)}),
				slice("web-2", "web", slicePorts(epPort("", corev1.ProtocolTCP, 8080)),
					ep{ip: "10.10.2.3", node: "node-2", ready: ptr(true)}),
			},
			want: agentof.ServiceState{vipPort("10.96.0.10", 6, 80): {Endpoints: []agentof.Endpoint{endpoint("10.10.2.3", 8080, false)}}},
		},
		{
			name: "the fallback is per port: a port whose slice port has a ready endpoint does not fall back",
			svc:  service("web", "10.96.0.10", svcPort("a", corev1.ProtocolTCP, 80, 8080), svcPort("b", corev1.ProtocolTCP, 81, 8081)),
			slices: []*discoveryv1.EndpointSlice{
				slice("web-a", "web", slicePorts(epPort("a", corev1.ProtocolTCP, 8080)),
					ep{ip: "10.10.1.3", node: "node-1", ready: ptr(true)},
					ep{ip: "10.10.1.4", node: "node-1", ready: ptr(false), serving: ptr(true), terminating: ptr(true)}),
				slice("web-b", "web", slicePorts(epPort("b", corev1.ProtocolTCP, 8081)),
					ep{ip: "10.10.1.4", node: "node-1", ready: ptr(false), serving: ptr(true), terminating: ptr(true)}),
			},
			want: agentof.ServiceState{
				vipPort("10.96.0.10", 6, 80): {Endpoints: []agentof.Endpoint{endpoint("10.10.1.3", 8080, true)}},
				vipPort("10.96.0.10", 6, 81): {Endpoints: []agentof.Endpoint{endpoint("10.10.1.4", 8081, true)}},
			},
		},
		{
			name: "a slice port of another protocol or name does not serve the Service port",
			svc:  service("web", "10.96.0.10", svcPort("http", corev1.ProtocolTCP, 80, 8080)),
			slices: []*discoveryv1.EndpointSlice{slice("web-1", "web", slicePorts(epPort("http", corev1.ProtocolUDP, 8080), epPort("other", corev1.ProtocolTCP, 9090)),
				ep{ip: "10.10.1.3", node: "node-1"})},
			want: agentof.ServiceState{vipPort("10.96.0.10", 6, 80): {}},
		},
		{
			name: "IPv6 slices and SCTP ports are not realized",
			svc:  service("web", "10.96.0.10", svcPort("http", corev1.ProtocolTCP, 80, 8080), svcPort("s", corev1.ProtocolSCTP, 9, 9)),
			slices: []*discoveryv1.EndpointSlice{func() *discoveryv1.EndpointSlice {
				s := slice("web-v6", "web", slicePorts(epPort("http", corev1.ProtocolTCP, 8080)), ep{ip: "fd00::3", node: "node-1"})
				s.AddressType = discoveryv1.AddressTypeIPv6
				return s
			}()},
			want: agentof.ServiceState{vipPort("10.96.0.10", 6, 80): {}},
		},
		{
			name:   "a headless Service has no state",
			svc:    service("web", corev1.ClusterIPNone, svcPort("http", corev1.ProtocolTCP, 80, 8080)),
			slices: []*discoveryv1.EndpointSlice{slice("web-1", "web", slicePorts(epPort("http", corev1.ProtocolTCP, 8080)), ep{ip: "10.10.1.3", node: "node-1"})},
		},
		{
			name: "a Service without ClusterIP (ExternalName) has no state",
			svc:  &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := desiredState(tc.svc, tc.slices, nodeView{name: "node-1"}); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

// fakeFlows records InstallService calls (and each Service of an
// InstallServices batch as one); failNext makes the next one fail, and
// failBatches every batch of more than one Service.
type fakeFlows struct {
	mu          sync.Mutex
	calls       []string
	batches     int // InstallServices calls that went in
	refused     int // batches failBatches refused
	failBatches bool
	state       map[string]agentof.ServiceState
	failNext    bool
	recovers    int
	finished    []string // the calls installed when FinishServiceRecovery ran
	ranges      map[string]agentof.SourceRanges
}

func (f *fakeFlows) InstallService(_ context.Context, name string, want agentof.ServiceState) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext {
		f.failNext = false
		return fmt.Errorf("bundle refused")
	}
	f.calls = append(f.calls, name)
	if len(want) == 0 {
		delete(f.state, name)
	} else {
		f.state[name] = want
	}
	return nil
}

func (f *fakeFlows) InstallServices(ctx context.Context, changes []agentof.ServiceChange) error {
	f.mu.Lock()
	if len(changes) > 1 && f.failBatches {
		f.refused++
		f.mu.Unlock()
		return fmt.Errorf("bundle of %d Services refused", len(changes))
	}
	if f.failNext {
		f.failNext = false
		f.mu.Unlock()
		return fmt.Errorf("bundle refused")
	}
	f.batches++
	f.mu.Unlock()
	for _, ch := range changes {
		if err := f.InstallService(ctx, ch.Name, ch.Want); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeFlows) SetLoadBalancerSourceRanges(_ context.Context, name string, want agentof.SourceRanges) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ranges == nil {
		f.ranges = map[string]agentof.SourceRanges{}
	}
	if len(want) == 0 {
		delete(f.ranges, name)
	} else {
		f.ranges[name] = want
	}
	return nil
}

func (f *fakeFlows) FinishSourceRangesRecovery(context.Context) error { return nil }

func (f *fakeFlows) RecoverServices(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) > 0 {
		return 0, fmt.Errorf("recovery after a Service was installed")
	}
	f.recovers++
	return 0, nil
}

func (f *fakeFlows) FinishServiceRecovery(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.finished != nil {
		return fmt.Errorf("recovery finished twice")
	}
	f.finished = append([]string{}, f.calls...)
	return nil
}

func (f *fakeFlows) snapshot() ([]string, map[string]agentof.ServiceState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := map[string]agentof.ServiceState{}
	for k, v := range f.state {
		st[k] = v
	}
	return append([]string(nil), f.calls...), st
}

func startProxy(t *testing.T, objs ...any) (*fake.Clientset, *fakeFlows) {
	t.Helper()
	return startProxyWith(t, Config{NodeName: "node-1"}, false, objs...)
}

// startProxyWith runs a proxy with cfg (its informers on a fake API server
// holding objs, a Node informer too with followNodes) on fake flows until
// the test ends.
func startProxyWith(t *testing.T, cfg Config, followNodes bool, objs ...any) (*fake.Clientset, *fakeFlows) {
	t.Helper()
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, o := range objs {
		create(t, client, o)
	}
	f := informers.NewSharedInformerFactory(client, 0)
	flows := &fakeFlows{state: map[string]agentof.ServiceState{}}
	if followNodes {
		cfg.Nodes = f.Core().V1().Nodes()
	}
	p, err := NewWithConfig(cfg, f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), flows)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; f.Shutdown() })
	return client, flows
}

func create(t *testing.T, client *fake.Clientset, o any) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch o := o.(type) {
	case *corev1.Service:
		_, err = client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		_, err = client.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Node:
		_, err = client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("create: unexpected %T", o)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// eventually waits until cond holds on the fake's record.
func eventually(t *testing.T, flows *fakeFlows, what string, cond func(calls []string, st map[string]agentof.ServiceState) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return cond(flows.snapshot()), nil
	})
	if err != nil {
		calls, st := flows.snapshot()
		t.Fatalf("%s: calls %v, state %v", what, calls, st)
	}
}

func TestProxyInstallsOnlyWhatChanged(t *testing.T) {
	ports := slicePorts(epPort("http", corev1.ProtocolTCP, 8080))
	client, flows := startProxy(t,
		service("web", "10.96.0.10", svcPort("http", corev1.ProtocolTCP, 80, 8080)),
		slice("web-1", "web", ports, ep{ip: "10.10.1.3", node: "node-1"}, ep{ip: "10.10.2.3", node: "node-2"}),
		service("headless", corev1.ClusterIPNone, svcPort("http", corev1.ProtocolTCP, 80, 8080)),
		slice("headless-1", "headless", ports, ep{ip: "10.10.1.4", node: "node-1"}),
	)
	vip := vipPort("10.96.0.10", 6, 80)
	eventually(t, flows, "the Service should be installed with both endpoints, the headless one not at all", func(calls []string, st map[string]agentof.ServiceState) bool {
		return len(calls) == 1 && calls[0] == "default/web" && len(st["default/web"][vip].Endpoints) == 2
	})
	flows.mu.Lock()
	recovers, finished := flows.recovers, flows.finished
	flows.mu.Unlock()
	if recovers != 1 {
		t.Fatalf("the earlier run's state should be recovered once, before the first install; was %d times", recovers)
	}
	// web is the only Service known at start that has a state (headless has
	// none: its sync writes nothing), so the recovery finishes after web.
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		flows.mu.Lock()
		defer flows.mu.Unlock()
		finished = flows.finished
		return finished != nil, nil
	}); err != nil || len(finished) != 1 || finished[0] != "default/web" {
		t.Fatalf("the recovery should finish once every Service known at start was synced, after web; finished after %v", finished)
	}
	ctx := context.Background()

	// A change that does not touch the desired state writes nothing.
	svc, _ := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	svc.Labels = map[string]string{"touched": "yes"}
	if _, err := client.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An endpoint becomes not ready: one install with one endpoint left. A
	// failing first attempt is retried.
	flows.mu.Lock()
	flows.failNext = true
	flows.mu.Unlock()
	s, _ := client.DiscoveryV1().EndpointSlices("default").Get(ctx, "web-1", metav1.GetOptions{})
	s.Endpoints[1].Conditions.Ready = ptr(false)
	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, flows, "one more install with the remaining endpoint", func(calls []string, st map[string]agentof.ServiceState) bool {
		return len(calls) == 2 && reflect.DeepEqual(st["default/web"][vip].Endpoints, []agentof.Endpoint{endpoint("10.10.1.3", 8080, true)})
	})

	// The Service goes: one uninstall; its slice going later writes nothing.
	if err := client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, flows, "the Service should be uninstalled", func(calls []string, st map[string]agentof.ServiceState) bool {
		return len(calls) == 3 && len(st) == 0
	})
	if err := client.DiscoveryV1().EndpointSlices("default").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A new Service is a marker: once it is installed, every earlier event was processed.
	create(t, client, service("marker", "10.96.0.11", svcPort("", corev1.ProtocolUDP, 53, 53)))
	eventually(t, flows, "the marker Service should be installed", func(calls []string, st map[string]agentof.ServiceState) bool {
		return len(st) == 1 && st["default/marker"] != nil
	})
	if calls, _ := flows.snapshot(); len(calls) != 4 {
		t.Fatalf("the label change and the late slice delete should have written nothing; calls %v", calls)
	}
}

func TestAffinityTimeoutFollowsTheService(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  func(*corev1.Service)
		want uint32
	}{
		{"no affinity", func(*corev1.Service) {}, 0},
		{"ClientIP without a config gets Kubernetes' default", func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }, 10800},
		{"ClientIP with a short timeout", clientIPAffinity(10), 10},
		{"ClientIP with a day, beyond OpenFlow's 65535 s", clientIPAffinity(86400), 86400},
		{"None with a leftover config", func(s *corev1.Service) {
			clientIPAffinity(10)(s)
			s.Spec.SessionAffinity = corev1.ServiceAffinityNone
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080))
			tc.svc(svc)
			got := desiredState(svc, nil, nodeView{name: "node-1"})
			if ps := got[vipPort("10.96.0.10", 6, 80)]; ps.AffinityTimeout != tc.want {
				t.Fatalf("affinity timeout %d, want %d", ps.AffinityTimeout, tc.want)
			}
		})
	}
}

func withSpec(svc *corev1.Service, f func(*corev1.Service)) *corev1.Service {
	f(svc)
	return svc
}

func TestDesiredStateOfExternalAddressesAndTrafficPolicies(t *testing.T) {
	ports := slicePorts(epPort("", corev1.ProtocolTCP, 8080))
	both := []*discoveryv1.EndpointSlice{slice("web-1", "web", ports, ep{ip: "10.10.1.3", node: "node-1"}, ep{ip: "10.10.2.3", node: "node-2"})}
	remoteOnly := []*discoveryv1.EndpointSlice{slice("web-1", "web", ports, ep{ip: "10.10.2.3", node: "node-2"})}
	local, remote := endpoint("10.10.1.3", 8080, true), endpoint("10.10.2.3", 8080, false)
	web := func(f func(*corev1.Service)) *corev1.Service {
		return withSpec(service("web", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080)), f)
	}
	cip := vipPort("10.96.0.10", 6, 80)
	ext := vipPort("192.168.100.10", 6, 80)
	extOutside := ext
	extOutside.External = true
	lb := vipPort("192.168.100.11", 6, 80)
	itpLocal := func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal) }
	etpLocal := func(s *corev1.Service) {
		s.Spec.ExternalIPs = []string{"192.168.100.10"}
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	for _, tc := range []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   agentof.ServiceState
	}{
		{
			name:   "internalTrafficPolicy Local: the ClusterIP gets the local endpoints only",
			svc:    web(itpLocal),
			slices: both,
			want:   agentof.ServiceState{cip: {Endpoints: []agentof.Endpoint{local}}},
		},
		{
			name:   "internalTrafficPolicy Local without a local endpoint drops (there are endpoints elsewhere)",
			svc:    web(itpLocal),
			slices: remoteOnly,
			want:   agentof.ServiceState{cip: {NoEndpoints: agentof.Drop}},
		},
		{
			name: "internalTrafficPolicy Local without any endpoint rejects",
			svc:  web(itpLocal),
			want: agentof.ServiceState{cip: {}},
		},
		{
			name:   "an external IP is realized like the ClusterIP, with every endpoint",
			svc:    web(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.168.100.10", "fd00::10"} }),
			slices: both,
			want: agentof.ServiceState{
				cip: {Endpoints: []agentof.Endpoint{local, remote}},
				ext: {Endpoints: []agentof.Endpoint{local, remote}},
			},
		},
		{
			name:   "externalTrafficPolicy Local: traffic from outside to an external IP gets the local endpoints, pods still every endpoint",
			svc:    web(etpLocal),
			slices: both,
			want: agentof.ServiceState{
				cip:        {Endpoints: []agentof.Endpoint{local, remote}},
				ext:        {Endpoints: []agentof.Endpoint{local, remote}},
				extOutside: {Endpoints: []agentof.Endpoint{local}},
			},
		},
		{
			name:   "externalTrafficPolicy Local without a local endpoint drops traffic from outside",
			svc:    web(etpLocal),
			slices: remoteOnly,
			want: agentof.ServiceState{
				cip:        {Endpoints: []agentof.Endpoint{remote}},
				ext:        {Endpoints: []agentof.Endpoint{remote}},
				extOutside: {NoEndpoints: agentof.Drop},
			},
		},
		{
			name: "externalTrafficPolicy Local falls back to the local serving terminating endpoints",
			svc:  web(etpLocal),
			slices: []*discoveryv1.EndpointSlice{slice("web-1", "web", ports,
				ep{ip: "10.10.1.3", node: "node-1", ready: ptr(false), serving: ptr(true), terminating: ptr(true)},
				ep{ip: "10.10.2.3", node: "node-2"})},
			want: agentof.ServiceState{
				cip:        {Endpoints: []agentof.Endpoint{remote}},
				ext:        {Endpoints: []agentof.Endpoint{remote}},
				extOutside: {Endpoints: []agentof.Endpoint{local}},
			},
		},
		{
			name: "a LoadBalancer's ingress IPs are realized, except those whose load balancer proxies",
			svc: web(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.168.100.11"}, {IP: "192.168.100.12", IPMode: ptr(corev1.LoadBalancerIPModeProxy)},
					{Hostname: "lb.example.com"}, {IP: "192.168.100.13", IPMode: ptr(corev1.LoadBalancerIPModeVIP)}}
			}),
			slices: both,
			want: agentof.ServiceState{
				cip:                              {Endpoints: []agentof.Endpoint{local, remote}},
				lb:                               {Endpoints: []agentof.Endpoint{local, remote}},
				vipPort("192.168.100.13", 6, 80): {Endpoints: []agentof.Endpoint{local, remote}},
			},
		},
		{
			name: "ingress IPs in the status of a Service that is no LoadBalancer are not realized",
			svc: web(func(s *corev1.Service) {
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.168.100.11"}}
			}),
			slices: both,
			want:   agentof.ServiceState{cip: {Endpoints: []agentof.Endpoint{local, remote}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := desiredState(tc.svc, tc.slices, nodeView{name: "node-1"}); !got.Equal(tc.want) {
				t.Fatalf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestTwoServicesOnOneExternalPortTakeTurns(t *testing.T) {
	first := withSpec(service("first", "10.96.0.10", svcPort("", corev1.ProtocolTCP, 80, 8080)), func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.168.100.10"} })
	client, flows := startProxy(t, first)
	ext := vipPort("192.168.100.10", 6, 80)
	eventually(t, flows, "first should hold the external port", func(_ []string, st map[string]agentof.ServiceState) bool {
		_, ok := st["default/first"][ext]
		return ok
	})
	create(t, client, withSpec(service("second", "10.96.0.11", svcPort("", corev1.ProtocolTCP, 80, 8080)), func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.168.100.10"} }))
	eventually(t, flows, "second should be installed without the port first holds", func(_ []string, st map[string]agentof.ServiceState) bool {
		_, clusterIP := st["default/second"][vipPort("10.96.0.11", 6, 80)]
		_, taken := st["default/second"][ext]
		return clusterIP && !taken
	})
	if err := client.CoreV1().Services("default").Delete(context.Background(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, flows, "second should get the external port once first is gone", func(_ []string, st map[string]agentof.ServiceState) bool {
		_, ok := st["default/second"][ext]
		return ok && st["default/first"] == nil
	})
}

// TestServicesLabelledForAnotherProxyOrNoneAreLeftAlone follows upstream's
// e2e "Services should implement service.kubernetes.io/service-proxy-name"
// and "… service.kubernetes.io/headless": a Service that gains one of the
// labels goes down (its state is removed), and comes back when the label
// goes; a proxy given a name serves only Services labelled with it.
func TestServicesLabelledForAnotherProxyOrNoneAreLeftAlone(t *testing.T) {
	ports := slicePorts(epPort("http", corev1.ProtocolTCP, 8080))
	objs := func() []interface{} {
		return []interface{}{
			service("web", "10.96.0.10", svcPort("http", corev1.ProtocolTCP, 80, 8080)),
			slice("web-1", "web", ports, ep{ip: "10.10.1.3", node: "node-1"}),
		}
	}
	relabel := func(t *testing.T, client *fake.Clientset, labels map[string]string) {
		t.Helper()
		updateService(t, client, "web", func(s *corev1.Service) { s.Labels = labels })
	}
	installed := func(st map[string]agentof.ServiceState) bool { return len(st["default/web"]) == 1 }
	for _, tc := range []struct {
		name   string
		proxy  string
		labels map[string]string
		served bool
	}{
		{"no label", "", nil, true},
		{"service-proxy-name for another proxy", "", map[string]string{LabelServiceProxyName: "foo-bar"}, false},
		{"headless", "", map[string]string{LabelHeadless: ""}, false},
		{"a named proxy, the Service without the label", "antrea", nil, false},
		{"a named proxy, the Service labelled with its name", "antrea", map[string]string{LabelServiceProxyName: "antrea"}, true},
		{"a named proxy, the Service labelled with another", "antrea", map[string]string{LabelServiceProxyName: "kube-proxy"}, false},
		{"a named proxy and headless", "antrea", map[string]string{LabelServiceProxyName: "antrea", LabelHeadless: ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := service("web", "10.96.0.10")
			svc.Labels = tc.labels
			if got := servedBy(svc.Labels, tc.proxy); got != tc.served {
				t.Fatalf("servedBy %v, want %v", got, tc.served)
			}
		})
	}
	t.Run("a Service gains the label and goes down, loses it and comes back", func(t *testing.T) {
		client, flows := startProxy(t, objs()...)
		eventually(t, flows, "web should be installed", func(_ []string, st map[string]agentof.ServiceState) bool { return installed(st) })
		relabel(t, client, map[string]string{LabelServiceProxyName: "foo-bar"})
		eventually(t, flows, "web should go down", func(_ []string, st map[string]agentof.ServiceState) bool { return len(st["default/web"]) == 0 })
		relabel(t, client, nil)
		eventually(t, flows, "web should come back", func(_ []string, st map[string]agentof.ServiceState) bool { return installed(st) })
		relabel(t, client, map[string]string{LabelHeadless: ""})
		eventually(t, flows, "web should go down again", func(_ []string, st map[string]agentof.ServiceState) bool { return len(st["default/web"]) == 0 })
	})
	t.Run("an EndpointSlice labelled headless is left out, as upstream's headless spec labels it", func(t *testing.T) {
		client, flows := startProxy(t, objs()...)
		eventually(t, flows, "web should be installed", func(_ []string, st map[string]agentof.ServiceState) bool { return installed(st) })
		s, err := client.DiscoveryV1().EndpointSlices("default").Get(context.Background(), "web-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Labels[LabelHeadless] = ""
		if _, err := client.DiscoveryV1().EndpointSlices("default").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, flows, "web should lose its endpoint", func(_ []string, st map[string]agentof.ServiceState) bool {
			ps, ok := st["default/web"][vipPort("10.96.0.10", 6, 80)]
			return ok && len(ps.Endpoints) == 0
		})
	})
	t.Run("a named proxy serves a Service once it carries the name", func(t *testing.T) {
		client, flows := startProxyWith(t, Config{NodeName: "node-1", ServiceProxyName: "antrea"}, false, objs()...)
		relabel(t, client, map[string]string{LabelServiceProxyName: "antrea"})
		eventually(t, flows, "web should be installed", func(_ []string, st map[string]agentof.ServiceState) bool { return installed(st) })
	})
}
