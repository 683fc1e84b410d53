package traceflow

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
)

func TestTagAllocatorGivesUniqueTagsUpTo59(t *testing.T) {
	a := NewTagAllocator()
	seen := map[int8]string{}
	for i := range 59 {
		name := string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		tag, ok := a.Allocate(name)
		if !ok {
			t.Fatalf("allocation %d failed with %d in use", i, a.InUse())
		}
		if tag < 1 || tag > 59 {
			t.Fatalf("tag %d outside 1..59", tag)
		}
		if other, dup := seen[tag]; dup {
			t.Fatalf("tag %d given to %s and %s", tag, other, name)
		}
		seen[tag] = name
		if again, _ := a.Allocate(name); again != tag {
			t.Fatalf("second Allocate of %s gave %d, want its tag %d", name, again, tag)
		}
	}
	if _, ok := a.Allocate("one-too-many"); ok {
		t.Fatal("a 60th running Traceflow got a tag: the DSCP range is 1..59")
	}
	freed := seen[7]
	a.Release(freed)
	tag, ok := a.Allocate("late")
	if !ok || tag != 7 {
		t.Fatalf("after freeing tag 7 the next allocation got %d, %v", tag, ok)
	}
}

func TestTagAllocatorReusesAFreedTagLast(t *testing.T) {
	a := NewTagAllocator()
	t1, _ := a.Allocate("a")
	a.Release("a")
	t2, _ := a.Allocate("b")
	if t1 == t2 {
		t.Fatalf("the tag just freed (%d) was handed out again at once", t1)
	}
	a.Reserve("restored", t2) // in use by b: ignored
	a.Reserve("restored", 30)
	if got, _ := a.Allocate("restored"); got != 30 {
		t.Fatalf("a reserved Traceflow got tag %d, want 30", got)
	}
}

func TestComplete(t *testing.T) {
	obs := func(actions ...crdv1beta1.TraceflowAction) *crdv1beta1.TraceflowStatus {
		var o []crdv1beta1.Observation
		for _, a := range actions {
			o = append(o, crdv1beta1.Observation{Action: a})
		}
		return &crdv1beta1.TraceflowStatus{Results: []crdv1beta1.NodeResult{{Node: "n", Role: crdv1beta1.RoleSender, Observations: o}}}
	}
	// The receiver's Delivered without the sender's result: not yet.
	receiverOnly := &crdv1beta1.TraceflowStatus{Results: []crdv1beta1.NodeResult{{Node: "n2", Role: crdv1beta1.RoleReceiver,
		Observations: []crdv1beta1.Observation{{Action: crdv1beta1.ActionReceived}, {Action: crdv1beta1.ActionDelivered}}}}}
	for _, tc := range []struct {
		st   *crdv1beta1.TraceflowStatus
		want bool
	}{
		{&crdv1beta1.TraceflowStatus{}, false},
		{receiverOnly, false},
		{obs(crdv1beta1.ActionForwarded, crdv1beta1.ActionForwarded), false}, // sent into the tunnel, receiver not heard yet
		{obs(crdv1beta1.ActionForwarded, crdv1beta1.ActionDelivered), true},
		{obs(crdv1beta1.ActionDropped), true},
		{obs(crdv1beta1.ActionRejected), true},
		{obs(crdv1beta1.ActionForwardedOutOfOverlay), true},
		{obs(crdv1beta1.ActionReceived), false},
	} {
		tf := podToPod("x")
		tf.Status = *tc.st
		if got := Complete(tf); got != tc.want {
			t.Errorf("Complete(%+v) = %v, want %v", tc.st.Results, got, tc.want)
		}
	}
}

type env struct {
	c      *Controller
	client *fake.Clientset
	now    time.Time
}

func newEnv(t *testing.T, objs ...any) *env {
	t.Helper()
	kube := k8sfake.NewClientset()
	ctx := t.Context()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Namespace:
			_, err = kube.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = kube.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = kube.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewSimpleClientset()
	kf := informers.NewSharedInformerFactory(kube, 0)
	cf := crdinformers.NewSharedInformerFactory(client, 0)
	c := NewController(client, cf.Crd().V1beta1().Traceflows(), kf.Core().V1().Pods().Informer(),
		kf.Core().V1().Namespaces().Informer(), kf.Core().V1().Services().Informer())
	e := &env{c: c, client: client, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.now = func() time.Time { return e.now }
	kf.Start(ctx.Done())
	cf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("informers did not sync")
	}
	return e
}

// create adds a Traceflow and waits until the controller's lister has it.
func (e *env) create(t *testing.T, tf *crdv1beta1.Traceflow) {
	t.Helper()
	if _, err := e.client.CrdV1beta1().Traceflows().Create(t.Context(), tf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitLister(t, tf.Name, func(*crdv1beta1.Traceflow) bool { return true })
}

func (e *env) waitLister(t *testing.T, name string, ok func(*crdv1beta1.Traceflow) bool) {
	t.Helper()
	for range 500 {
		if tf, err := e.c.tfLister.Get(name); err == nil && ok(tf) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the lister never saw the expected %s", name)
}

func (e *env) get(t *testing.T, name string) *crdv1beta1.Traceflow {
	t.Helper()
	tf, err := e.client.CrdV1beta1().Traceflows().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tf
}

func ns(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func pod(ns, name, node, ip string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{PodIP: ip}}
}

func podToPod(name string) *crdv1beta1.Traceflow {
	return &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.TraceflowSpec{
		Source:      crdv1beta1.Source{Namespace: "demo", Pod: "client"},
		Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "web"},
	}}
}

func TestATraceflowRunsWithATagThenSucceedsWhenDeliveredAndFreesItsTag(t *testing.T) {
	e := newEnv(t, ns("demo"), pod("demo", "client", "node-1", "10.10.0.2"), pod("demo", "web", "node-2", "10.10.1.2"))
	ctx := context.Background()
	e.create(t, podToPod("tf1"))
	if _, err := e.c.sync(ctx, "tf1"); err != nil {
		t.Fatal(err)
	}
	tf := e.get(t, "tf1")
	if tf.Status.Phase != crdv1beta1.TraceflowRunning || tf.Status.DataplaneTag < 1 || tf.Status.DataplaneTag > 59 || tf.Status.StartTime == nil {
		t.Fatalf("a valid Traceflow got status %+v, want Running with a tag in 1..59 and a start time", tf.Status)
	}
	if e.c.tags.InUse() != 1 {
		t.Fatalf("%d tags in use, want 1", e.c.tags.InUse())
	}
	// The source Node's agent: forwarded into the tunnel; not complete.
	tf.Status.Results = []crdv1beta1.NodeResult{{Node: "node-1", Role: crdv1beta1.RoleSender, Observations: []crdv1beta1.Observation{
		{Component: crdv1beta1.ComponentForwarding, Action: crdv1beta1.ActionForwarded, TunnelDstIP: "172.30.0.12"}}}}
	if _, err := e.client.CrdV1beta1().Traceflows().UpdateStatus(ctx, tf, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitLister(t, "tf1", func(tf *crdv1beta1.Traceflow) bool { return len(tf.Status.Results) == 1 })
	if _, err := e.c.sync(ctx, "tf1"); err != nil {
		t.Fatal(err)
	}
	if p := e.get(t, "tf1").Status.Phase; p != crdv1beta1.TraceflowRunning {
		t.Fatalf("after the sender's Forwarded the phase is %s, want still Running", p)
	}
	tf = e.get(t, "tf1")
	tf.Status.Results = append(tf.Status.Results, crdv1beta1.NodeResult{Node: "node-2", Role: crdv1beta1.RoleReceiver,
		Observations: []crdv1beta1.Observation{{Component: crdv1beta1.ComponentForwarding, Action: crdv1beta1.ActionReceived},
			{Component: crdv1beta1.ComponentForwarding, Action: crdv1beta1.ActionDelivered}}})
	if _, err := e.client.CrdV1beta1().Traceflows().UpdateStatus(ctx, tf, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitLister(t, "tf1", func(tf *crdv1beta1.Traceflow) bool { return len(tf.Status.Results) == 2 })
	if _, err := e.c.sync(ctx, "tf1"); err != nil {
		t.Fatal(err)
	}
	tf = e.get(t, "tf1")
	if tf.Status.Phase != crdv1beta1.TraceflowSucceeded || len(tf.Status.Results) != 2 {
		t.Fatalf("after Delivered: status %+v, want Succeeded with both Nodes' results kept", tf.Status)
	}
	if e.c.tags.InUse() != 0 {
		t.Fatalf("the tag of a finished Traceflow is still in use")
	}
}

func TestATraceflowThatTimesOutFailsAndSaysWhereThePacketWasLastSeen(t *testing.T) {
	e := newEnv(t, ns("demo"), pod("demo", "client", "node-1", "10.10.0.2"), pod("demo", "web", "node-2", "10.10.1.2"))
	ctx := context.Background()
	tf := podToPod("tf2")
	tf.Spec.Timeout = 5
	e.create(t, tf)
	if _, err := e.c.sync(ctx, "tf2"); err != nil {
		t.Fatal(err)
	}
	e.waitLister(t, "tf2", func(tf *crdv1beta1.Traceflow) bool { return tf.Status.Phase == crdv1beta1.TraceflowRunning })
	e.now = e.now.Add(3 * time.Second)
	left, err := e.c.sync(ctx, "tf2")
	if err != nil || left != 2*time.Second {
		t.Fatalf("3 s into a 5 s Traceflow: requeue in %v (%v), want 2s", left, err)
	}
	e.now = e.now.Add(2 * time.Second)
	if _, err := e.c.sync(ctx, "tf2"); err != nil {
		t.Fatal(err)
	}
	got := e.get(t, "tf2").Status
	if got.Phase != crdv1beta1.TraceflowFailed || !strings.Contains(got.Reason, "timed out after 5s") ||
		!strings.Contains(got.Reason, "no Node reported the packet") {
		t.Fatalf("timed-out Traceflow: %+v", got)
	}
	if e.c.tags.InUse() != 0 {
		t.Fatal("the tag of a timed-out Traceflow is still in use")
	}
}

func TestInvalidTraceflowsFailNamingWhatIsWrong(t *testing.T) {
	e := newEnv(t, ns("demo"), pod("demo", "client", "node-1", "10.10.0.2"), pod("demo", "web", "node-2", "10.10.1.2"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-svc"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20"}})
	ctx := context.Background()
	for i, tc := range []struct {
		spec crdv1beta1.TraceflowSpec
		want string
	}{
		{crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "demo", Pod: "clinet"}, Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "web"}},
			`source Pod demo/clinet not found (did you mean "client"?)`},
		{crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "dmeo", Pod: "client"}, Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "web"}},
			`source Namespace dmeo not found (did you mean "demo"?)`},
		{crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "demo", Pod: "client"}, Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "nothing-like-it"}},
			`destination Pod demo/nothing-like-it not found`},
		{crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "demo", Pod: "client"}, Destination: crdv1beta1.Destination{Namespace: "demo", Service: "web-scv"}},
			`destination Service demo/web-scv not found (did you mean "web-svc"?)`},
		{crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "demo", Pod: "client"}, Destination: crdv1beta1.Destination{IP: "10.0.0"}},
			`spec.destination.ip "10.0.0" is not an IP address`},
		{crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{Namespace: "demo", Pod: "client"}, Destination: crdv1beta1.Destination{IP: "10.0.0.1", Namespace: "demo", Pod: "web"}},
			`exactly one of pod, service, ip`},
	} {
		name := "bad" + string(rune('a'+i))
		e.create(t, &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: tc.spec})
		if _, err := e.c.sync(ctx, name); err != nil {
			t.Fatal(err)
		}
		st := e.get(t, name).Status
		if st.Phase != crdv1beta1.TraceflowFailed || !strings.Contains(st.Reason, tc.want) {
			t.Errorf("%+v: status %+v, want Failed with a reason containing %q", tc.spec, st, tc.want)
		}
	}
	if e.c.tags.InUse() != 0 {
		t.Fatal("an invalid Traceflow holds a tag")
	}
}

func TestADeletedTraceflowFreesItsTag(t *testing.T) {
	e := newEnv(t, ns("demo"), pod("demo", "client", "node-1", "10.10.0.2"), pod("demo", "web", "node-2", "10.10.1.2"))
	ctx := context.Background()
	e.create(t, podToPod("tf3"))
	if _, err := e.c.sync(ctx, "tf3"); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CrdV1beta1().Traceflows().Delete(ctx, "tf3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 500 {
		if _, err := e.c.tfLister.Get("tf3"); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := e.c.sync(ctx, "tf3"); err != nil {
		t.Fatal(err)
	}
	if e.c.tags.InUse() != 0 {
		t.Fatal("a deleted Traceflow's tag is still in use")
	}
}

func dualPod(ns, name, node string, ips ...string) *corev1.Pod {
	p := pod(ns, name, node, ips[0])
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func TestIPv6TraceflowsRunBetweenDualStackAndIPv6OnlyEnds(t *testing.T) {
	e := newEnv(t, ns("demo"), dualPod("demo", "client", "node-1", "10.10.0.2", "fd00:10:244::2"),
		dualPod("demo", "web", "node-2", "10.10.1.2", "fd00:10:244:1::2"),
		dualPod("demo", "v6client", "node-1", "fd00:10:244::3"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-svc"}, Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20", "fd00:10:96::20"}}})
	ctx := context.Background()
	nh := int32(6)
	client := crdv1beta1.Source{Namespace: "demo", Pod: "client"}
	for i, spec := range []crdv1beta1.TraceflowSpec{
		{Source: client, Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "web"}, Packet: crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{}}},
		{Source: client, Destination: crdv1beta1.Destination{Namespace: "demo", Service: "web-svc"},
			Packet: crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{NextHeader: &nh, HopLimit: 3}}},
		{Source: client, Destination: crdv1beta1.Destination{IP: "fd00:10:244:1::9"}},
		{Source: crdv1beta1.Source{Namespace: "demo", Pod: "v6client"}, Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "web"}},
		{Source: crdv1beta1.Source{IP: "fd00::7"}, Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "web"}, LiveTraffic: true},
	} {
		name := "v6-" + string(rune('a'+i))
		e.create(t, &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
		if _, err := e.c.sync(ctx, name); err != nil {
			t.Fatal(err)
		}
		if st := e.get(t, name).Status; st.Phase != crdv1beta1.TraceflowRunning {
			t.Errorf("%+v: status %+v, want Running", spec, st)
		}
	}
}

func TestIPv6TraceflowsOfTheWrongFamilyFailNamingTheFields(t *testing.T) {
	e := newEnv(t, ns("demo"), dualPod("demo", "client", "node-1", "10.10.0.2", "fd00:10:244::2"),
		pod("demo", "v4web", "node-2", "10.10.1.3"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "v4svc"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.21"}})
	ctx := context.Background()
	client := crdv1beta1.Source{Namespace: "demo", Pod: "client"}
	v6 := crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{}}
	one := int32(1)
	for i, tc := range []struct {
		spec crdv1beta1.TraceflowSpec
		want string
	}{
		{crdv1beta1.TraceflowSpec{Source: client, Destination: crdv1beta1.Destination{IP: "10.0.0.1"},
			Packet: crdv1beta1.Packet{IPHeader: &crdv1beta1.IPHeader{Protocol: 6}, IPv6Header: &crdv1beta1.IPv6Header{}}},
			"spec.packet.ipHeader and spec.packet.ipv6Header are exclusive"},
		{crdv1beta1.TraceflowSpec{Source: client, Destination: crdv1beta1.Destination{IP: "10.0.0.1"}, Packet: v6},
			"spec.destination.ip 10.0.0.1 is IPv4, but spec.packet.ipv6Header makes the packet IPv6"},
		{crdv1beta1.TraceflowSpec{Source: client, Destination: crdv1beta1.Destination{IP: "fd00::1"},
			Packet: crdv1beta1.Packet{IPHeader: &crdv1beta1.IPHeader{Protocol: 6}}},
			"spec.destination.ip fd00::1 is IPv6, but spec.packet.ipHeader makes the packet IPv4"},
		{crdv1beta1.TraceflowSpec{Source: crdv1beta1.Source{IP: "10.0.0.9"}, Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "client"},
			LiveTraffic: true, Packet: v6}, "spec.source.ip 10.0.0.9 is IPv4, but spec.packet.ipv6Header makes the packet IPv6"},
		{crdv1beta1.TraceflowSpec{Source: client, Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "v4web"}, Packet: v6},
			"destination Pod demo/v4web has no IPv6 address (it has 10.10.1.3), but spec.packet.ipv6Header makes the packet IPv6"},
		{crdv1beta1.TraceflowSpec{Source: client, Destination: crdv1beta1.Destination{Namespace: "demo", Service: "v4svc"}, Packet: v6},
			"destination Service demo/v4svc has no IPv6 address"},
		{crdv1beta1.TraceflowSpec{Source: client, Destination: crdv1beta1.Destination{IP: "fd00::1"},
			Packet: crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{NextHeader: &one}}}, "spec.packet.ipv6Header.nextHeader 1"},
		{crdv1beta1.TraceflowSpec{Source: client, Destination: crdv1beta1.Destination{IP: "fd00::1"},
			Packet: crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{HopLimit: 256}}}, "spec.packet.ipv6Header.hopLimit 256"},
	} {
		name := "v6bad-" + string(rune('a'+i))
		e.create(t, &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: tc.spec})
		if _, err := e.c.sync(ctx, name); err != nil {
			t.Fatal(err)
		}
		st := e.get(t, name).Status
		if st.Phase != crdv1beta1.TraceflowFailed || !strings.Contains(st.Reason, tc.want) {
			t.Errorf("%+v: status %+v, want Failed with a reason containing %q", tc.spec, st, tc.want)
		}
	}
	if e.c.tags.InUse() != 0 {
		t.Fatal("an invalid Traceflow holds a tag")
	}
}
