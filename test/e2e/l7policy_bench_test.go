package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/test/labtest"
)

// TestL7NetworkPolicyCost (ANTREA_BENCH_L7=1, make bench): the layer 7
// engine's cost in one run: one client Pod sends the same kept-alive HTTP
// requests to a server Pod on the other Node under a plain Allow rule, then
// under a layer 7 rule allowing them (the server's Node inspects every
// request), and logs requests/s and latency p50/p99 of each. No assertion
// on the figures (they depend on the machine); the requests must all pass.
func TestL7NetworkPolicyCost(t *testing.T) {
	if os.Getenv("ANTREA_BENCH_L7") == "" {
		t.Skip("set ANTREA_BENCH_L7=1 (make bench)")
	}
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	crd, err := versioned.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("e2e-l7b-%d", time.Now().UnixNano()%1000000)
	if err := labtest.CreateNamespace(ctx, e.Client, ns, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	web := labtest.TestPodContainer("c", []int{80}, nil)
	web.Args = []string{"serve", "--http", "80"}
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: "node-2", Containers: []corev1.Container{web}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "client", Labels: map[string]string{"app": "client"}},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{labtest.TestPodContainer("c", []int{80}, nil)}}},
	} {
		if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := labtest.WaitPodsUsable(ctx, e.Client, ns, []string{"web", "client"})
	if err != nil {
		t.Fatal(err)
	}
	to := net.JoinHostPort(pods["web"].Status.PodIP, "80")
	allow := crdv1beta1.RuleActionAllow
	port := intstr.FromInt32(80)
	policy := func(l7 []crdv1beta1.L7Protocol) *crdv1beta1.NetworkPolicy {
		return &crdv1beta1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: crdv1beta1.NetworkPolicySpec{
			Tier: "application", Priority: 5,
			AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			Ingress: []crdv1beta1.Rule{{Action: &allow, Name: "allow-client", L7Protocols: l7,
				From:  []crdv1beta1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
				Ports: []crdv1beta1.NetworkPolicyPort{{Port: &port}}}}}}
	}
	const requests = 3000
	run := func(name string, l7 []crdv1beta1.L7Protocol, realized func() error) {
		p, err := crd.CrdV1beta1().NetworkPolicies(ns).Create(ctx, policy(l7), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = crd.CrdV1beta1().NetworkPolicies(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
		}()
		labtest.WaitFor(t, ctx, name+" realized", realized)
		out, err := e.Exec(ctx, ns, "client", "antrea-testpod", "http", "--to", to, "--repeat", fmt.Sprint(requests), "GET /api/v2/x")
		if err != nil {
			t.Fatalf("%s: %v: %s", name, err, out)
		}
		if !strings.Contains(out, fmt.Sprintf("ok %d ", requests)) {
			t.Errorf("%s: not every request was answered: %s", name, out)
		}
		t.Logf("%-22s %s", name, strings.TrimSpace(out))
	}
	ask := func(req string) string {
		out, _ := e.Exec(ctx, ns, "client", "antrea-testpod", "http", "--to", to, "--timeout", "2s", req)
		return out
	}
	run("L4 Allow rule", nil, func() error {
		if !strings.Contains(ask("GET /x"), ": 200 ") {
			return fmt.Errorf("not answered yet")
		}
		return nil
	})
	run("L7 rule (HTTP GET /*)", []crdv1beta1.L7Protocol{{HTTP: &crdv1beta1.HTTPProtocol{Method: "GET", Path: "/*"}}}, func() error {
		// Realized once a request outside the rule gets the engine's 403.
		if out := ask("POST /x"); !strings.Contains(out, ": 403 ") {
			return fmt.Errorf("POST answered %q", out)
		}
		return nil
	})
}
