package nodeportlocal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"antrea.io/antrea/pkg/agent/nodenet"
	"antrea.io/antrea/pkg/agent/types"
)

const node = "node-1"

var nodeIPv4 = netip.MustParseAddr("172.18.0.2")

// fakeRules records the rules written, and fails the next writes when told.
type fakeRules struct {
	mu     sync.Mutex
	rules  []nodenet.NodePortLocalRule
	writes int
	fail   int
}

func (f *fakeRules) SetNodePortLocal(_ context.Context, gateway string, rules []nodenet.NodePortLocalRule) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gateway != "antrea-gw0" {
		return fmt.Errorf("gateway %q", gateway)
	}
	if f.fail > 0 {
		f.fail--
		return errors.New("nft refused")
	}
	f.rules, f.writes = slices.Clone(rules), f.writes+1
	return nil
}

func (f *fakeRules) get() ([]nodenet.NodePortLocalRule, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.rules), f.writes
}

// fakeOpener holds ports in memory; busy ones are bound by "another
// process".
type fakeOpener struct {
	mu   sync.Mutex
	busy map[string]bool // fmt.Sprint(v6, protocol, port)
	open map[string]bool
}

type closer func()

func (c closer) Close() error { c(); return nil }

func (f *fakeOpener) Open(v6 bool, protocol uint8, port uint16) (io.Closer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fmt.Sprint(v6, protocol, port)
	if f.busy[k] || f.open[k] {
		return nil, errors.New("address already in use")
	}
	f.open[k] = true
	return closer(func() { f.mu.Lock(); delete(f.open, k); f.mu.Unlock() }), nil
}

func (f *fakeOpener) held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.open)
}

func pod(name, nodeName, ip string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP},
		}}}},
		Status: corev1.PodStatus{PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}}
	for _, m := range mods {
		m(p)
	}
	return p
}

func service(ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web",
		Annotations: map[string]string{EnabledAnnotation: "true"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: ports,
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
}

type env struct {
	client *fake.Clientset
	rules  *fakeRules
	opener *fakeOpener
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t *testing.T, rules *fakeRules, opener *fakeOpener, objs ...any) *env {
	t.Helper()
	var rt []runtimeObject
	for _, o := range objs {
		rt = append(rt, o.(runtimeObject))
	}
	client := fake.NewClientset(toObjects(rt)...)
	f := informers.NewSharedInformerFactory(client, 0)
	c := NewController(Config{NodeName: node, Client: client, Pods: f.Core().V1().Pods().Informer(),
		Services: f.Core().V1().Services().Informer(), Rules: rules, Gateway: "antrea-gw0",
		NodeIPs: []netip.Addr{nodeIPv4}, Range: PortRange{61000, 61009}, Opener: opener})
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	e := &env{client: client, rules: rules, opener: opener, cancel: cancel, done: make(chan struct{})}
	go func() { c.Run(ctx); close(e.done) }()
	t.Cleanup(func() { cancel(); <-e.done; f.Shutdown() })
	return e
}

// annotation waits until the Pod's annotation satisfies ok and returns it.
func (e *env) annotation(t *testing.T, name string, ok func(value string, has bool) bool) string {
	t.Helper()
	var value string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(ctx context.Context) (bool, error) {
			p, err := e.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			var has bool
			value, has = p.Annotations[PodAnnotation]
			return ok(value, has), nil
		})
	if err != nil {
		t.Fatalf("pod %s: annotation %q never became what the test waits for", name, value)
	}
	return value
}

func present(_ string, has bool) bool { return has }
func absent(_ string, has bool) bool  { return !has }

func TestEachLocalBackendGetsANodePortPerTargetPortAndTheUpstreamAnnotation(t *testing.T) {
	rules, opener := &fakeRules{}, &fakeOpener{busy: map[string]bool{fmt.Sprint(false, types.ProtocolTCP, 61000): true}, open: map[string]bool{}}
	e := start(t, rules, opener,
		pod("a", node, "10.10.0.5"),
		pod("other-node", "node-2", "10.10.1.5"),
		pod("host", node, "172.18.0.2", func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
		pod("hp", node, "10.10.0.7", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 8888 }),
		service(corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
			corev1.ServicePort{Name: "dns", Port: 53, TargetPort: intstr.FromString("dns"), Protocol: corev1.ProtocolUDP},
			corev1.ServicePort{Name: "missing", Port: 54, TargetPort: intstr.FromString("nope"), Protocol: corev1.ProtocolTCP},
			corev1.ServicePort{Name: "sctp", Port: 55, TargetPort: intstr.FromInt32(55), Protocol: corev1.ProtocolSCTP}),
	)
	// TCP 61000 is bound by another process: skipped. Pod a gets TCP
	// 61001 and UDP 61000 (ports are per protocol, as upstream's).
	got := e.annotation(t, "a", present)
	want := `[{"podPort":8080,"nodeIP":"172.18.0.2","nodePort":61001,"protocol":"tcp","protocols":["tcp"],"ipFamily":"IPv4"},` +
		`{"podPort":5353,"nodeIP":"172.18.0.2","nodePort":61000,"protocol":"udp","protocols":["udp"],"ipFamily":"IPv4"}]`
	if got != want {
		t.Errorf("pod a's annotation is\n%s\nwant\n%s", got, want)
	}
	// A container's hostPort is the node port: no extra port, no rule.
	got = e.annotation(t, "hp", func(v string, has bool) bool { return has && len(mustParse(t, v)) == 2 })
	ms := mustParse(t, got)
	if ms[0].NodePort != 8888 || ms[0].PodPort != 8080 {
		t.Errorf("pod hp's TCP mapping is %+v, want its hostPort 8888", ms[0])
	}
	_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { r, _ := rules.get(); return len(r) == 3, nil })
	r, _ := rules.get()
	wantRules := []nodenet.NodePortLocalRule{
		{Protocol: types.ProtocolTCP, NodePort: 61001, Pod: netip.MustParseAddrPort("10.10.0.5:8080")},
		{Protocol: types.ProtocolUDP, NodePort: 61000, Pod: netip.MustParseAddrPort("10.10.0.5:5353")},
		{Protocol: types.ProtocolUDP, NodePort: 61001, Pod: netip.MustParseAddrPort("10.10.0.7:5353")},
	}
	if !slices.Equal(r, wantRules) {
		t.Errorf("rules are %v, want %v", r, wantRules)
	}
	for _, name := range []string{"other-node", "host"} {
		p, _ := e.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if _, has := p.Annotations[PodAnnotation]; has {
			t.Errorf("pod %s (another node's, or hostNetwork) was annotated", name)
		}
	}

	// The Service loses the annotation: mappings, rules and annotations go,
	// and the ports are released.
	svc, _ := e.client.CoreV1().Services("default").Get(context.Background(), "web", metav1.GetOptions{})
	delete(svc.Annotations, EnabledAnnotation)
	if _, err := e.client.CoreV1().Services("default").Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.annotation(t, "a", absent)
	e.annotation(t, "hp", absent)
	if r, _ := rules.get(); len(r) != 0 {
		t.Errorf("after the annotation went, rules are %v", r)
	}
	if n := opener.held(); n != 0 {
		t.Errorf("after the annotation went, %d node ports are still held", n)
	}
}

func mustParse(t *testing.T, s string) []Mapping {
	t.Helper()
	ms, err := ParseAnnotation(s)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestARestartedAgentKeepsTheNodePortsOfThePodsAnnotations(t *testing.T) {
	old := `[{"podPort":8080,"nodeIP":"172.18.0.2","nodePort":61007,"protocol":"tcp","protocols":["tcp"],"ipFamily":"IPv4"}]`
	annotated := func(p *corev1.Pod) { p.Annotations = map[string]string{PodAnnotation: old} }
	rules, opener := &fakeRules{}, &fakeOpener{open: map[string]bool{}}
	e := start(t, rules, opener,
		pod("a", node, "10.10.0.5", annotated),
		// Unreadable, or without an address: removed.
		pod("garbled", node, "10.10.0.6", func(p *corev1.Pod) {
			p.Annotations = map[string]string{PodAnnotation: "[{"}
			p.Labels = map[string]string{"app": "not-a-backend"}
		}),
		// A new pod gets a port other than the restored one.
		pod("b", node, "10.10.0.8"),
		service(corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}))
	e.annotation(t, "garbled", absent)
	b := mustParse(t, e.annotation(t, "b", present))
	if len(b) != 1 || b[0].NodePort == 61007 {
		t.Errorf("the new pod got %+v, want one mapping on a port other than the restored 61007", b)
	}
	r, _ := rules.get()
	if !slices.Contains(r, nodenet.NodePortLocalRule{Protocol: types.ProtocolTCP, NodePort: 61007,
		Pod: netip.MustParseAddrPort("10.10.0.5:8080")}) {
		t.Errorf("rules %v miss the restored mapping", r)
	}
	for _, a := range e.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetName() == "a" {
			t.Errorf("pod a's annotation, already right, was patched: %s", p.GetPatch())
		}
	}
}

func TestAFailedRuleWriteIsRetriedWithoutLeakingPorts(t *testing.T) {
	rules, opener := &fakeRules{fail: 2}, &fakeOpener{open: map[string]bool{}}
	e := start(t, rules, opener, pod("a", node, "10.10.0.5"),
		service(corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}))
	ms := mustParse(t, e.annotation(t, "a", present))
	if len(ms) != 1 || ms[0].NodePort < 61000 || ms[0].NodePort > 61009 {
		t.Errorf("annotation %+v, want one mapping in the range", ms)
	}
	if n := opener.held(); n != 1 {
		t.Errorf("%d node ports held after the retries, want 1", n)
	}
}

func TestThePoolGoesRoundTheRangeAndSkipsPortsInUse(t *testing.T) {
	p := newPool(PortRange{100, 102})
	opened := map[uint16]bool{}
	open := func(busy ...uint16) func(uint16) (io.Closer, error) {
		return func(port uint16) (io.Closer, error) {
			if slices.Contains(busy, port) {
				return nil, errors.New("in use")
			}
			opened[port] = true
			return closer(func() { delete(opened, port) }), nil
		}
	}
	var got []uint16
	for range 2 {
		port, err := p.allocate(open(100))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, port)
	}
	if !slices.Equal(got, []uint16{101, 102}) {
		t.Errorf("allocated %v, want 101 102 (100 is bound elsewhere)", got)
	}
	if _, err := p.allocate(open(100)); !errors.Is(err, errNoPort) {
		t.Errorf("a full range gave %v, want errNoPort", err)
	}
	p.release(101)
	if opened[101] {
		t.Error("a released port's socket is still open")
	}
	if port, err := p.allocate(open()); err != nil || port != 100 {
		t.Errorf("after 102 the search goes round to %d (%v), want 100", port, err)
	}
	if err := p.reserve(102, open()); err == nil {
		t.Error("reserving a port in use succeeded")
	}
	if err := p.reserve(99, open()); err == nil {
		t.Error("reserving a port outside the range succeeded")
	}
	if p.free() != 1 {
		t.Errorf("free() = %d, want 1", p.free())
	}
}

func TestADeletedPodReleasesItsPortsAndADeletedServiceItsPodsAnnotations(t *testing.T) {
	rules, opener := &fakeRules{}, &fakeOpener{open: map[string]bool{}}
	e := start(t, rules, opener, pod("a", node, "10.10.0.5"), pod("b", node, "10.10.0.6"),
		service(corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}))
	e.annotation(t, "a", present)
	e.annotation(t, "b", present)
	ctx := context.Background()
	if err := e.client.CoreV1().Pods("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		r, _ := rules.get()
		return len(r) == 1 && r[0].Pod == netip.MustParseAddrPort("10.10.0.6:8080") && opener.held() == 1, nil
	})
	if err != nil {
		r, _ := rules.get()
		t.Fatalf("after pod a went, rules %v and %d ports held, want b's rule alone", r, opener.held())
	}
	if err := e.client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.annotation(t, "b", absent)
	if r, _ := rules.get(); len(r) != 0 || opener.held() != 0 {
		t.Errorf("after the Service went, rules %v and %d ports held", r, opener.held())
	}
}

func TestADualStackServiceGetsOneMappingPerFamily(t *testing.T) {
	rules, opener := &fakeRules{}, &fakeOpener{open: map[string]bool{}}
	dual := service(corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP})
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	client := fake.NewClientset(pod("a", node, "10.10.0.5", func(p *corev1.Pod) {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: "fd00:10::5"})
	}), dual)
	f := informers.NewSharedInformerFactory(client, 0)
	c := NewController(Config{NodeName: node, Client: client, Pods: f.Core().V1().Pods().Informer(),
		Services: f.Core().V1().Services().Informer(), Rules: rules, Gateway: "antrea-gw0",
		NodeIPs: []netip.Addr{nodeIPv4, netip.MustParseAddr("fd00:18::2")}, Range: PortRange{61000, 61009}, Opener: opener})
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; f.Shutdown() }()
	e := &env{client: client}
	got := e.annotation(t, "a", present)
	want := `[{"podPort":8080,"nodeIP":"172.18.0.2","nodePort":61000,"protocol":"tcp","protocols":["tcp"],"ipFamily":"IPv4"},` +
		`{"podPort":8080,"nodeIP":"fd00:18::2","nodePort":61000,"protocol":"tcp","protocols":["tcp"],"ipFamily":"IPv6"}]`
	if got != want {
		t.Errorf("annotation\n%s\nwant\n%s", got, want)
	}
	r, _ := rules.get()
	wantRules := []nodenet.NodePortLocalRule{
		{Protocol: types.ProtocolTCP, NodePort: 61000, Pod: netip.MustParseAddrPort("10.10.0.5:8080")},
		{Protocol: types.ProtocolTCP, NodePort: 61000, Pod: netip.MustParseAddrPort("[fd00:10::5]:8080")},
	}
	if !slices.Equal(r, wantRules) {
		t.Errorf("rules %v, want %v", r, wantRules)
	}
}

func TestNodePortsAndHostPortsInTheRangeAreNotHandedOut(t *testing.T) {
	rules, opener := &fakeRules{}, &fakeOpener{open: map[string]bool{}}
	nodePortSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "np"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 61000, Protocol: corev1.ProtocolTCP}}}}
	e := start(t, rules, opener,
		pod("hp", node, "10.10.0.7", func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "other"}
			p.Spec.Containers[0].Ports[0].HostPort = 61001
		}),
		pod("a", node, "10.10.0.5"), nodePortSvc,
		service(corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}))
	ms := mustParse(t, e.annotation(t, "a", present))
	if len(ms) != 1 || ms[0].NodePort != 61002 {
		t.Errorf("pod a got %+v, want TCP 61002 (61000 is a NodePort, 61001 a hostPort)", ms)
	}
}
