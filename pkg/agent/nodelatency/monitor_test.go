package nodelatency

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1alpha1"
)

type fakeReporter struct {
	mu      sync.Mutex
	reports []*statsv1alpha1.NodeLatencyStats
}

func (r *fakeReporter) Create(_ context.Context, s *statsv1alpha1.NodeLatencyStats, _ metav1.CreateOptions) (*statsv1alpha1.NodeLatencyStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, s.DeepCopy())
	return s, nil
}

func (r *fakeReporter) last() *statsv1alpha1.NodeLatencyStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reports) == 0 {
		return nil
	}
	return r.reports[len(r.reports)-1]
}

func TestGatewayTargetsAreTheFirstAddressOfEachPodCIDR(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{PodCIDRs: []string{"10.10.1.0/24", "fd00:10:1::/64"}}}
	got := GatewayTargets(n)
	if len(got) != 2 || got[0].IP.String() != "10.10.1.1" || got[1].IP.String() != "fd00:10:1::1" || got[0].Node != "n1" {
		t.Errorf("targets = %v, want 10.10.1.1 and fd00:10:1::1 of n1", got)
	}
}

// The monitor, in netns a, probes node b's gateway IPs (routed through b)
// while the CR exists and reports both families.
func TestMonitorReportsThePeersGatewayRTTsWhileTheCRExists(t *testing.T) {
	a, b := twoNodes(t)
	for _, c := range [][]string{
		{"ip", "-n", b, "addr", "add", "10.79.0.1/32", "dev", "vb"},
		{"ip", "-n", b, "addr", "add", "fd79::1/128", "dev", "vb", "nodad"},
		{"ip", "-n", a, "route", "add", "10.79.0.0/24", "via", "10.77.0.2"},
		{"ip", "-n", a, "route", "add", "fd79::/64", "via", "fd77::2"},
	} {
		run(t, c...)
	}
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.77.0.0/24"}}})
	_ = nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.79.0.0/24", "fd79::/64"}}})
	monitors := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = monitors.Add(&crdv1alpha1.NodeLatencyMonitor{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: crdv1alpha1.NodeLatencyMonitorSpec{PingIntervalSeconds: 1}})
	r := &fakeReporter{}
	synced := func() bool { return true }
	m := NewMonitor(Config{NodeName: "a", Nodes: corelisters.NewNodeLister(nodes), NodesSynced: synced,
		Monitors: crdlisters.NewNodeLatencyMonitorLister(monitors), MonitorsSynced: synced, Reporter: r, Listen: listenIn(a)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	answered := func(s *statsv1alpha1.NodeLatencyStats) bool {
		if s == nil || s.Name != "a" || len(s.PeerNodeLatencyStats) != 1 || s.PeerNodeLatencyStats[0].NodeName != "b" {
			return false
		}
		ts := s.PeerNodeLatencyStats[0].TargetIPLatencyStats
		return len(ts) == 2 && ts[0].TargetIP == "10.79.0.1" && ts[1].TargetIP == "fd79::1" &&
			!ts[0].LastRecvTime.IsZero() && !ts[1].LastRecvTime.IsZero() &&
			ts[0].LastMeasuredRTTNanoseconds > 0 && ts[1].LastMeasuredRTTNanoseconds > 0
	}
	for i := 0; i < 100 && !answered(r.last()); i++ { // bounded: at most 10 s
		time.Sleep(100 * time.Millisecond)
	}
	if !answered(r.last()) {
		t.Fatalf("no report with both of b's gateway IPs answered; last: %+v", r.last())
	}
}
