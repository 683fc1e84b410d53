package registry

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	crdfake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
)

func report(node string, rtt int64) *statsv1alpha1.NodeLatencyStats {
	return &statsv1alpha1.NodeLatencyStats{ObjectMeta: metav1.ObjectMeta{Name: node},
		PeerNodeLatencyStats: []statsv1alpha1.PeerNodeLatencyStats{{NodeName: "peer",
			TargetIPLatencyStats: []statsv1alpha1.TargetIPLatencyStats{{TargetIP: "10.0.0.1", LastMeasuredRTTNanoseconds: rtt}}}}}
}

// eventually polls cond, bounded (informer events are asynchronous).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

func TestNodeLatencyStoreKeepsEachNodesLatestReportWhileTheMonitorExists(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := kubefake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}})
	crd := crdfake.NewSimpleClientset()
	kf, cf := informers.NewSharedInformerFactory(kube, 0), crdinformers.NewSharedInformerFactory(crd, 0)
	s := NewNodeLatencyStore()
	if err := s.Watch(kf.Core().V1().Nodes().Informer(), cf.Crd().V1alpha1().NodeLatencyMonitors().Informer()); err != nil {
		t.Fatal(err)
	}
	kf.Start(ctx.Done())
	cf.Start(ctx.Done())
	defer func() { cancel(); kf.Shutdown(); cf.Shutdown() }() // the informers stop when ctx ends
	kf.WaitForCacheSync(ctx.Done())
	cf.WaitForCacheSync(ctx.Done())

	if _, err := s.Create(ctx, report("a", 1), nil, nil); err == nil {
		t.Error("a report without a NodeLatencyMonitor should be refused")
	}
	nlms := crd.CrdV1alpha1().NodeLatencyMonitors()
	if _, err := nlms.Create(ctx, &crdv1alpha1.NodeLatencyMonitor{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: crdv1alpha1.NodeLatencyMonitorSpec{PingIntervalSeconds: 1}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the monitor is seen", s.monitor)
	for _, r := range []*statsv1alpha1.NodeLatencyStats{report("a", 1), report("b", 2), report("a", 3)} {
		if _, err := s.Create(ctx, r, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Get(ctx, "a", nil)
	if err != nil || got.(*statsv1alpha1.NodeLatencyStats).PeerNodeLatencyStats[0].TargetIPLatencyStats[0].LastMeasuredRTTNanoseconds != 3 {
		t.Errorf("a's report = %+v, %v; want its latest (RTT 3)", got, err)
	}
	count := func() int {
		l, _ := s.List(ctx, nil)
		return len(l.(*statsv1alpha1.NodeLatencyStatsList).Items)
	}
	if n := count(); n != 2 {
		t.Errorf("list has %d reports, want 2", n)
	}
	if err := kube.CoreV1().Nodes().Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's report dropped with its Node", func() bool { return count() == 1 })
	if err := nlms.Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every report dropped with the monitor", func() bool { return count() == 0 })
	if _, _, err := s.Delete(ctx, "a", nil, nil); err == nil {
		t.Error("deleting a dropped report should say not found")
	}
}
