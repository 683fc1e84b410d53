package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"antrea.io/antrea/pkg/agent/apiserver/agentapitest"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/controller/app"
)

func value(fams map[string]*dto.MetricFamily, name string) (float64, bool) {
	f := fams[name]
	if f == nil || len(f.Metric) == 0 {
		return 0, false
	}
	m := f.Metric[0]
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true
	}
	return 0, false
}

// TestControllerMetricsThroughItsServer runs the whole antrea-controller
// against a real kube-apiserver, creates NetworkPolicies selecting pods,
// and scrapes /metrics of the controller's server as Prometheus would (a
// ServiceAccount bound to antrea-metrics-reader, authenticated and
// authorized through kube-apiserver), parsed with Prometheus' text parser:
// the computed-policy gauge is the policies created, each was processed,
// the sync-duration histograms count every sync, the queues drained. The
// non-API paths are authorized like the agent API's: anonymous 403, no
// RBAC 403, /debug/pprof for the antctl role only.
func TestControllerMetricsThroughItsServer(t *testing.T) {
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	cp.ApplyAntrea(t, ctx, port)
	opts := app.NewOptions()
	opts.Kubeconfig = cp.Kubeconfig
	opts.Workers = 2
	opts.APIServer.SecureServing.Listener = ln
	opts.APIServer.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	opts.APIServer.SecureServing.BindPort = port
	opts.APIServer.SecureServing.ServerCert.CertDirectory = filepath.Join(cp.Dir, "serving")
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("antrea-controller did not stop")
		}
	})
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, _ := agentapitest.Get(ctx, url, "", "/readyz")
		return code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("controller not ready: %v", err)
	}

	kube := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"web", "db", "cache"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
		created, err := kube.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip := fmt.Sprintf("10.10.1.%d", 2+i)
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
		if _, err := kube.CoreV1().Pods("ns").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "isolate-" + name},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}}}
		if _, err := kube.NetworkingV1().NetworkPolicies("ns").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	token := agentapitest.Token(t, ctx, kube, "prometheus", "antrea-metrics-reader")
	scrape := func() map[string]*dto.MetricFamily {
		body := agentapitest.GetOK(t, ctx, url, token, "/metrics")
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("parsing /metrics: %v", err)
		}
		return fams
	}
	var fams map[string]*dto.MetricFamily
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		fams = scrape()
		n, _ := value(fams, "antrea_controller_network_policy_count")
		q, _ := value(fams, "antrea_controller_length_network_policy_queue")
		return n == 3 && q == 0, nil
	})
	if err != nil {
		n, _ := value(fams, "antrea_controller_network_policy_count")
		t.Fatalf("antrea_controller_network_policy_count = %v, want the 3 policies created", n)
	}
	processed, _ := value(fams, "antrea_controller_network_policy_processed")
	if processed < 3 {
		t.Errorf("antrea_controller_network_policy_processed = %v, want >= 3 (one sync per policy created at least)", processed)
	}
	for _, kind := range []string{"network_policy", "address_group", "applied_to_group"} {
		p, _ := value(fams, "antrea_controller_"+kind+"_processed")
		h, ok := value(fams, "antrea_controller_"+kind+"_sync_duration_milliseconds")
		if !ok || h != p {
			t.Errorf("%s: sync duration histogram counts %v syncs, processed says %v", kind, h, p)
		}
		if fams["antrea_controller_"+kind+"_sync_duration_milliseconds"].GetType() != dto.MetricType_HISTOGRAM {
			t.Errorf("%s sync duration is not a histogram", kind)
		}
		if _, ok := value(fams, "antrea_controller_length_"+kind+"_queue"); !ok {
			t.Errorf("no antrea_controller_length_%s_queue", kind)
		}
	}
	// One AppliedToGroup per selected pod set (3), one AddressGroup (app=web).
	if v, _ := value(fams, "antrea_controller_applied_to_group_count"); v != 3 {
		t.Errorf("antrea_controller_applied_to_group_count = %v, want 3", v)
	}
	if v, _ := value(fams, "antrea_controller_address_group_count"); v != 1 {
		t.Errorf("antrea_controller_address_group_count = %v, want 1", v)
	}
	if _, ok := fams["workqueue_depth"]; !ok {
		t.Errorf("no workqueue_depth: client-go's queue metrics are not registered")
	}

	nobody := agentapitest.Token(t, ctx, kube, "nobody")
	antctl := agentapitest.Token(t, ctx, kube, "alice", "antctl")
	agentapitest.GetOK(t, ctx, url, antctl, "/debug/pprof/")
	for _, c := range []struct {
		name, token, path string
		want              int
	}{
		{"anonymous /metrics", "", "/metrics", 403},
		{"anonymous /debug/pprof/", "", "/debug/pprof/", 403},
		{"no RBAC /metrics", nobody, "/metrics", 403},
		{"metrics reader /debug/pprof/", token, "/debug/pprof/", 403},
		{"antctl /debug/pprof/", antctl, "/debug/pprof/", 200},
		{"a token kube-apiserver rejects", "not-a-token", "/metrics", 401},
	} {
		if code, body := agentapitest.Get(ctx, url, c.token, c.path); code != c.want {
			t.Errorf("%s: %d %.200s, want %d", c.name, code, body, c.want)
		}
	}
}
