package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func eligibleNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
}

// kubeProxyAnswer is kube-proxy's health answer as a client decodes it,
// the keys kept apart to see which are present.
type kubeProxyAnswer struct {
	status int
	keys   map[string]json.RawMessage
	health ProxyHealth
}

func askKubeProxyHealth(t *testing.T, h http.Handler, path string) kubeProxyAnswer {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return decodeAnswer(t, rec.Code, rec.Header(), rec.Body.Bytes())
}

func decodeAnswer(t *testing.T, status int, header http.Header, body []byte) kubeProxyAnswer {
	t.Helper()
	if ct := header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	a := kubeProxyAnswer{status: status}
	if err := json.Unmarshal(body, &a.keys); err != nil {
		t.Fatalf("answer %q is not a JSON object: %v", body, err)
	}
	if err := json.Unmarshal(body, &a.health); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return a
}

func TestProxyHealthFollowsTheQueueWithKubeProxysTimeout(t *testing.T) {
	const timeout = time.Minute
	type step struct {
		do          func(h *ProxyHealthServer, clock *fakeClock)
		wantHealthy bool
	}
	queued := func(h *ProxyHealthServer, _ *fakeClock) { h.QueuedUpdate() }
	after := func(d time.Duration) func(*ProxyHealthServer, *fakeClock) {
		return func(_ *ProxyHealthServer, c *fakeClock) { c.step(d) }
	}
	// drainedSeeingAll is a drain that found the queue empty after every
	// change so far was queued.
	drainedSeeingAll := func(h *ProxyHealthServer, _ *fakeClock) { h.drained(h.queuedCount()) }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a proxy that was told of no change is healthy, also long after start", []step{
			{after(10 * timeout), true},
		}},
		{"a change that waits less than the timeout leaves the proxy healthy", []step{
			{queued, true}, {after(timeout - time.Second), true},
		}},
		{"a change that waits the timeout makes the proxy unhealthy", []step{
			{queued, true}, {after(timeout), false},
		}},
		{"the timeout runs from the oldest change, not the latest", []step{
			{queued, true}, {after(timeout / 2), true}, {queued, true}, {after(timeout / 2), false},
		}},
		{"a drained queue makes a stuck proxy healthy again", []step{
			{queued, true}, {after(2 * timeout), false}, {drainedSeeingAll, true}, {after(2 * timeout), true},
		}},
		{"a change queued after the drain looked stays pending", []step{
			{queued, true},
			{func(h *ProxyHealthServer, c *fakeClock) {
				seen := h.queuedCount()
				h.QueuedUpdate() // between the look and the drain
				h.drained(seen)
			}, true},
			{after(timeout), false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			h := NewProxyHealthServer(timeout, eligibleNode, clock.now)
			for i, s := range tc.steps {
				s.do(h, clock)
				if got := h.Health(); got.Healthy != s.wantHealthy || got.Status[corev1.IPv4Protocol].Healthy != s.wantHealthy {
					t.Fatalf("after step %d: health %+v, want healthy %v", i, got, s.wantHealthy)
				}
			}
		})
	}
}

func TestHealthzAndLivezAnswerAsKubeProxy(t *testing.T) {
	const timeout = time.Minute
	deleted := eligibleNode()
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	tainted := eligibleNode()
	tainted.Spec.Taints = []corev1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: corev1.TaintEffectNoSchedule}}
	otherTaint := eligibleNode()
	otherTaint.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name                   string
		node                   *corev1.Node
		stuck                  bool
		wantHealthz, wantLivez int
		wantEligible           bool
	}{
		{name: "a synced proxy on an eligible node answers 200 on both", node: eligibleNode(),
			wantHealthz: 200, wantLivez: 200, wantEligible: true},
		{name: "a node with an unrelated taint is eligible", node: otherTaint,
			wantHealthz: 200, wantLivez: 200, wantEligible: true},
		{name: "a stuck proxy answers 503 on both", node: eligibleNode(), stuck: true,
			wantHealthz: 503, wantLivez: 503, wantEligible: true},
		{name: "a node being deleted fails healthz only", node: deleted,
			wantHealthz: 503, wantLivez: 200, wantEligible: false},
		{name: "a node the autoscaler will delete fails healthz only", node: tainted,
			wantHealthz: 503, wantLivez: 200, wantEligible: false},
		{name: "an unknown node fails healthz only", node: nil,
			wantHealthz: 503, wantLivez: 200, wantEligible: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			h := NewProxyHealthServer(timeout, func() *corev1.Node { return tc.node }, clock.now)
			h.QueuedUpdate()
			h.drained(h.queuedCount())
			synced := clock.now()
			clock.step(time.Second)
			if tc.stuck {
				h.QueuedUpdate()
				clock.step(timeout)
			}
			now := clock.now()
			handler := h.Handler()

			hz := askKubeProxyHealth(t, handler, "/healthz")
			if hz.status != tc.wantHealthz {
				t.Errorf("/healthz answered %d, want %d", hz.status, tc.wantHealthz)
			}
			for _, k := range []string{"lastUpdated", "currentTime", "nodeEligible", "healthy", "status"} {
				if _, ok := hz.keys[k]; !ok {
					t.Errorf("/healthz answer lacks %q: %v", k, hz.keys)
				}
			}
			if hz.health.NodeEligible == nil || *hz.health.NodeEligible != tc.wantEligible {
				t.Errorf("/healthz nodeEligible %v, want %v", hz.health.NodeEligible, tc.wantEligible)
			}
			if !hz.health.CurrentTime.Equal(now) {
				t.Errorf("/healthz currentTime %v, want the clock's %v", hz.health.CurrentTime, now)
			}
			// kube-proxy: a 200's lastUpdated is the current time; a 503's
			// the last sync's.
			wantLast := synced
			if tc.wantHealthz == 200 {
				wantLast = now
			}
			if !hz.health.LastUpdated.Equal(wantLast) {
				t.Errorf("/healthz lastUpdated %v, want %v", hz.health.LastUpdated, wantLast)
			}

			lz := askKubeProxyHealth(t, handler, "/livez")
			if lz.status != tc.wantLivez {
				t.Errorf("/livez answered %d, want %d", lz.status, tc.wantLivez)
			}
			if _, ok := lz.keys["nodeEligible"]; ok {
				t.Errorf("/livez answer has nodeEligible, which kube-proxy gives on /healthz only: %v", lz.keys)
			}
			if lz.health.Healthy != (tc.wantLivez == 200) {
				t.Errorf("/livez healthy %v with status %d", lz.health.Healthy, lz.status)
			}
		})
	}
}

func TestProxyHealthServesOnlyKubeProxysPaths(t *testing.T) {
	h := NewProxyHealthServer(0, eligibleNode, nil)
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/proxyMode", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("/proxyMode (kube-proxy's metrics port, not this one) answered %d, want 404", rec.Code)
	}
}

// gatedFlows is fakeFlows whose installs wait until the gate opens: an
// OVS that does not answer.
type gatedFlows struct {
	*fakeFlows
	gate chan struct{}
}

func (g *gatedFlows) InstallService(ctx context.Context, name string, want agentof.ServiceState) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.fakeFlows.InstallService(ctx, name, want)
}

func (g *gatedFlows) InstallServices(ctx context.Context, changes []agentof.ServiceChange) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.fakeFlows.InstallServices(ctx, changes)
}

// getHealth asks a health server over HTTP.
func getHealth(t *testing.T, addr, path string) (kubeProxyAnswer, error) {
	t.Helper()
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s%s", addr, path))
	if err != nil {
		return kubeProxyAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return kubeProxyAnswer{}, err
	}
	return decodeAnswer(t, resp.StatusCode, resp.Header, b), nil
}

// TestKubeProxyHealthPortFollowsARunningProxy runs the proxy on fake
// informers with installs that hang (an OVS that does not answer), serves
// kube-proxy's health port on loopback, and checks it over HTTP: healthy
// while the change is young, 503 once it has waited kube-proxy's timeout,
// healthy again once the proxy installed it.
func TestKubeProxyHealthPortFollowsARunningProxy(t *testing.T) {
	clock := newFakeClock()
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	create(t, client, eligibleNode())
	f := informers.NewSharedInformerFactory(client, 0)
	nodes := f.Core().V1().Nodes().Lister()
	hs := NewProxyHealthServer(DefaultProxyHealthTimeout, func() *corev1.Node {
		n, _ := nodes.Get("node-1")
		return n
	}, clock.now)
	flows := &gatedFlows{fakeFlows: &fakeFlows{state: map[string]agentof.ServiceState{}}, gate: make(chan struct{})}
	p, err := NewWithConfig(Config{NodeName: "node-1", ProxyHealth: hs}, f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), flows)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	l, err := net.Listen("tcp", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0).String())
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- hs.serve(ctx, l) }()
	ran := make(chan struct{})
	go func() { _ = p.Run(ctx); close(ran) }()
	defer func() {
		cancel()
		<-ran
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	addr := l.Addr().String()
	waitFor := func(what, path string, status int) kubeProxyAnswer {
		t.Helper()
		var a kubeProxyAnswer
		var err error
		if werr := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			a, err = getHealth(t, addr, path)
			return err == nil && a.status == status, nil
		}); werr != nil {
			t.Fatalf("%s: %s should answer %d, got %d %+v (%v)", what, path, status, a.status, a.health, err)
		}
		return a
	}

	// The node's informer has synced when healthz sees it eligible.
	waitFor("at start, with nothing queued", "/healthz", http.StatusOK)
	create(t, client, service("web", "10.96.0.10", svcPort("http", corev1.ProtocolTCP, 80, 8080)))
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return hs.queuedCount() > 0, nil
	}); err != nil {
		t.Fatal("the proxy did not report the new Service as queued")
	}
	clock.step(DefaultProxyHealthTimeout - time.Second)
	waitFor("a change younger than the timeout", "/healthz", http.StatusOK)
	clock.step(time.Second)
	a := waitFor("a change as old as the timeout, the install hanging", "/healthz", http.StatusServiceUnavailable)
	if a.health.Healthy || a.health.NodeEligible == nil || !*a.health.NodeEligible {
		t.Errorf("a stuck proxy on an eligible node answered %+v", a.health)
	}
	waitFor("a change as old as the timeout, the install hanging", "/livez", http.StatusServiceUnavailable)

	close(flows.gate)
	eventually(t, flows.fakeFlows, "web installed", func(_ []string, st map[string]agentof.ServiceState) bool {
		return len(st["default/web"]) == 1
	})
	waitFor("the change installed", "/healthz", http.StatusOK)
	waitFor("the change installed", "/livez", http.StatusOK)
}
