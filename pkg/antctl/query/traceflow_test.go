package query_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/antctl/query/querytest"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	antreafake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

// traceflowCluster is querytest's cluster with Service demo/web, whose fake
// controller ends each Traceflow as it is created, with phase.
func traceflowCluster(phase crdv1beta1.TraceflowPhase) *query.Clients {
	c := querytest.Default()
	c.Extra = []runtime.Object{&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}}
	cl := c.Clients()
	antrea := antreafake.NewSimpleClientset()
	antrea.PrependReactor("create", "traceflows", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*crdv1beta1.Traceflow).Status.Phase = phase
		return false, nil, nil
	})
	cl.Antrea = antrea
	return cl
}

func TestTraceflowIsAPlainCall(t *testing.T) {
	cl := traceflowCluster(crdv1beta1.TraceflowSucceeded)
	ctx := context.Background()
	req := query.TraceflowRequest{SourceNamespace: "demo", SourcePod: "client", DestinationNamespace: "demo", Destination: "web",
		Timeout: 10 * time.Second}
	tf, err := query.NewTraceflow(ctx, cl, req)
	if err != nil {
		t.Fatal(err)
	}
	if tf.Spec.Source.Pod != "client" || tf.Spec.Destination.Service != "web" || tf.Spec.Timeout != 10 ||
		!strings.HasPrefix(tf.Name, "client-to-web-") {
		t.Errorf("Traceflow %s %+v: want client to Service web, 10 s", tf.Name, tf.Spec)
	}
	got, err := query.RunTraceflow(ctx, cl, tf, time.Millisecond, false)
	if err != nil || got.Status.Phase != crdv1beta1.TraceflowSucceeded {
		t.Fatalf("RunTraceflow: %+v, %v", got, err)
	}
	if l, _ := cl.Antrea.CrdV1beta1().Traceflows().List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("%d Traceflows left, want the one run deleted", len(l.Items))
	}
	// A Pod of the destination's name wins over a Service; an address is one.
	for dest, want := range map[string]crdv1beta1.Destination{
		"web-0":     {Namespace: "demo", Pod: "web-0"},
		"10.10.9.9": {IP: "10.10.9.9"},
	} {
		req.Destination = dest
		if tf, err := query.NewTraceflow(ctx, cl, req); err != nil || tf.Spec.Destination != want {
			t.Errorf("destination %s: %+v (%v), want %+v", dest, tf, err, want)
		}
	}
	// Live traffic from an address to a Pod (the controller takes it); not to a Service.
	live := query.TraceflowRequest{SourcePod: "10.10.9.9", DestinationNamespace: "demo", Destination: "web-0", LiveTraffic: true, Timeout: 10 * time.Second}
	if tf, err := query.NewTraceflow(ctx, cl, live); err != nil || tf.Spec.Source != (crdv1beta1.Source{IP: "10.10.9.9"}) {
		t.Errorf("live traffic from 10.10.9.9 to web-0: %+v (%v)", tf, err)
	}
	live.Destination = "web"
	if _, err := query.NewTraceflow(ctx, cl, live); err == nil || !strings.Contains(err.Error(), "an address is a source only of live traffic to a Pod") {
		t.Errorf("live traffic from an address to a Service: %v", err)
	}
	req.Destination = "wbe"
	if _, err := query.NewTraceflow(ctx, cl, req); err == nil ||
		err.Error() != `destination demo/wbe: no Pod or Service of that name (did you mean "web"?)` {
		t.Errorf("a typo: %v", err)
	}
}

// A Traceflow the controller never ends is given up 5 s after its timeout;
// what it holds then is still returned.
func TestRunTraceflowGivesUpAfterItsTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 6 s")
	}
	cl := traceflowCluster(crdv1beta1.TraceflowRunning)
	tf := &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: "tf"}, Spec: crdv1beta1.TraceflowSpec{Timeout: 1}}
	got, err := query.RunTraceflow(context.Background(), cl, tf, 100*time.Millisecond, true)
	if err == nil || got == nil || got.Status.Phase != crdv1beta1.TraceflowRunning ||
		err.Error() != `traceflow tf did not finish within 1s (phase "Running")` {
		t.Fatalf("%+v, %v", got, err)
	}
}
