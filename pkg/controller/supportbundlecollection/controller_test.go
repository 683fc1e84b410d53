package supportbundlecollection

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func collection(name string, nodes *crdv1alpha1.BundleNodes) *crdv1alpha1.SupportBundleCollection {
	return &crdv1alpha1.SupportBundleCollection{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0)},
		Spec: crdv1alpha1.SupportBundleCollectionSpec{Nodes: nodes, ExpirationMinutes: 10,
			FileServer: crdv1alpha1.BundleFileServer{URL: "sftp://files.example:22/upload"},
			Authentication: crdv1alpha1.BundleServerAuthConfiguration{AuthType: crdv1alpha1.BasicAuthentication,
				AuthSecret: &corev1.SecretReference{Name: "sftp", Namespace: "default"}}},
	}
}

func names(rs []crdv1alpha1.SupportBundleCollectionNodeResult) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name+"="+string(r.State))
	}
	return out
}

func conditionOf(st crdv1alpha1.SupportBundleCollectionStatus, t crdv1alpha1.SupportBundleCollectionConditionType) crdv1alpha1.SupportBundleCollectionCondition {
	if c := condition(&st, t); c != nil {
		return *c
	}
	return crdv1alpha1.SupportBundleCollectionCondition{}
}

var cluster = []*corev1.Node{
	node("worker1", nil),
	node("worker2", map[string]string{"role": "workers"}),
	node("worker3", map[string]string{"role": "workers"}),
	node("control-plane", map[string]string{"role": "control"}),
}

func TestNodesAreSelectedByNameOrLabelAndEveryNodeWhenNeitherIsGiven(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes *crdv1alpha1.BundleNodes
		want  string
	}{
		{"by name", &crdv1alpha1.BundleNodes{NodeNames: []string{"worker1"}}, "worker1=Pending"},
		{"by label", &crdv1alpha1.BundleNodes{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "workers"}}},
			"worker2=Pending worker3=Pending"},
		{"a name or a label", &crdv1alpha1.BundleNodes{NodeNames: []string{"worker1"},
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "workers"}}},
			"worker1=Pending worker2=Pending worker3=Pending"},
		{"upstream's guide's matchLabels", &crdv1alpha1.BundleNodes{NodeNames: []string{"worker1"}, MatchLabels: map[string]string{"role": "workers"}},
			"worker1=Pending worker2=Pending worker3=Pending"},
		{"every Node when neither", &crdv1alpha1.BundleNodes{},
			"control-plane=Pending worker1=Pending worker2=Pending worker3=Pending"},
		{"a named Node that does not exist fails", &crdv1alpha1.BundleNodes{NodeNames: []string{"worker1", "gone"}},
			"gone=Failed worker1=Pending"},
		{"only external Nodes: none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(names(SelectNodes(&crdv1alpha1.SupportBundleCollectionSpec{Nodes: tc.nodes}, cluster)), " ")
			if got != tc.want {
				t.Errorf("selected %q, want %q", got, tc.want)
			}
		})
	}
}

func TestACollectionStartsWithItsNodesPendingAndWaitsUntilExpiration(t *testing.T) {
	sbc := collection("sbc", &crdv1alpha1.BundleNodes{NodeNames: []string{"worker1", "worker2"}})
	now := t0.Add(time.Minute)
	st, left := Advance(sbc, cluster, now)
	if st.DesiredNodes != 2 || st.CollectedNodes != 0 || strings.Join(names(st.Nodes), " ") != "worker1=Pending worker2=Pending" {
		t.Fatalf("started status %+v, want 2 desired Nodes pending", st)
	}
	if c := conditionOf(st, crdv1alpha1.CollectionStarted); c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("Started %+v, want True at %v", c, now)
	}
	for _, ct := range []crdv1alpha1.SupportBundleCollectionConditionType{crdv1alpha1.BundleCollected, crdv1alpha1.CollectionFailure, crdv1alpha1.CollectionCompleted} {
		if c := conditionOf(st, ct); c.Status != metav1.ConditionFalse {
			t.Errorf("%s is %q, want False", ct, c.Status)
		}
	}
	// The expiration counts from the start, not from the creation.
	if left != 10*time.Minute {
		t.Errorf("look again in %v, want 10m (expirationMinutes from the start)", left)
	}
}

func TestNodeResultsAreCountedAndAFailureNamesTheNodeAndWhy(t *testing.T) {
	sbc := collection("sbc", &crdv1alpha1.BundleNodes{NodeNames: []string{"worker1", "worker2", "worker3"}})
	sbc.Status, _ = Advance(sbc, cluster, t0)
	sbc.Status.Nodes[0].State = crdv1alpha1.NodeCollected
	sbc.Status.Nodes[1].State, sbc.Status.Nodes[1].Message = crdv1alpha1.NodeFailed, "uploading: authentication failed"
	st, left := Advance(sbc, cluster, t0.Add(2*time.Minute))
	if st.CollectedNodes != 1 || st.DesiredNodes != 3 {
		t.Errorf("collected %d of %d, want 1 of 3", st.CollectedNodes, st.DesiredNodes)
	}
	if c := conditionOf(st, crdv1alpha1.BundleCollected); c.Status != metav1.ConditionTrue {
		t.Errorf("BundleCollected %+v, want True", c)
	}
	failure := conditionOf(st, crdv1alpha1.CollectionFailure)
	if failure.Status != metav1.ConditionTrue || failure.Message != "Node worker2: uploading: authentication failed" {
		t.Errorf("CollectionFailure %+v, want True naming worker2 and why", failure)
	}
	// A failed Node does not hold the others: worker3 still has time.
	if c := conditionOf(st, crdv1alpha1.CollectionCompleted); c.Status != metav1.ConditionFalse || left != 8*time.Minute {
		t.Errorf("Completed %+v, look again in %v; want False and 8m", c, left)
	}
}

func TestNodesThatHaveNotReportedByExpirationFailAndTheCollectionCompletes(t *testing.T) {
	sbc := collection("sbc", &crdv1alpha1.BundleNodes{NodeNames: []string{"worker1", "worker2"}})
	sbc.Status, _ = Advance(sbc, cluster, t0)
	sbc.Status.Nodes[0].State = crdv1alpha1.NodeCollected
	st, left := Advance(sbc, cluster, t0.Add(10*time.Minute))
	if left != 0 || strings.Join(names(st.Nodes), " ") != "worker1=Collected worker2=Failed" {
		t.Fatalf("at expiration: nodes %v, look again in %v; want worker2 Failed and no more looks", names(st.Nodes), left)
	}
	failure := conditionOf(st, crdv1alpha1.CollectionFailure)
	if failure.Status != metav1.ConditionTrue || !strings.Contains(failure.Message, "Node worker2: did not upload its bundle within expirationMinutes (10)") {
		t.Errorf("CollectionFailure %+v, want worker2 named with the expiration", failure)
	}
	if c := conditionOf(st, crdv1alpha1.CollectionCompleted); c.Status != metav1.ConditionTrue {
		t.Errorf("Completed %+v, want True", c)
	}
	if st.CollectedNodes != 1 {
		t.Errorf("collected %d, want 1", st.CollectedNodes)
	}
	// A completed collection stays as it is (a late agent report does not
	// reopen it; nothing is selected again).
	sbc.Status = st
	again, _ := Advance(sbc, append(cluster, node("worker4", nil)), t0.Add(time.Hour))
	if len(again.Nodes) != 2 || !IsCompleted(&again) {
		t.Errorf("a completed collection changed: %+v", again)
	}
}

func TestExternalNodesAndEmptySelectionsFailSayingWhy(t *testing.T) {
	sbc := collection("vms", nil)
	sbc.Spec.ExternalNodes = &crdv1alpha1.BundleExternalNodes{Namespace: "vm-ns", NodeNames: []string{"vm1"}}
	st, _ := Advance(sbc, cluster, t0)
	failure := conditionOf(st, crdv1alpha1.CollectionFailure)
	if !IsCompleted(&st) || failure.Status != metav1.ConditionTrue || !strings.Contains(failure.Message, "this Antrea has no ExternalNodes") {
		t.Errorf("ExternalNodes: status %+v, want Completed with a failure saying there are no ExternalNodes", st)
	}
	none := collection("none", &crdv1alpha1.BundleNodes{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "db"}}})
	st, _ = Advance(none, cluster, t0)
	failure = conditionOf(st, crdv1alpha1.CollectionFailure)
	if !IsCompleted(&st) || st.DesiredNodes != 0 || !strings.Contains(failure.Message, "no Node matches spec.nodes") {
		t.Errorf("no Node selected: status %+v, want Completed, 0 desired, a failure saying so", st)
	}
}

// TestSyncWritesTheStatusAndRecordsAnEventWhenComplete runs sync on a fake
// API: it writes what Advance says, once, and a Warning Event naming the
// failed Node when the collection completes.
func TestSyncWritesTheStatusAndRecordsAnEventWhenComplete(t *testing.T) {
	ctx := t.Context()
	kube := k8sfake.NewClientset(node("worker1", nil), node("worker2", nil))
	client := fake.NewSimpleClientset(collection("sbc", &crdv1alpha1.BundleNodes{}))
	kf := informers.NewSharedInformerFactory(kube, 0)
	cf := crdinformers.NewSharedInformerFactory(client, 0)
	events := record.NewFakeRecorder(10)
	c, err := NewController(client, cf.Crd().V1alpha1().SupportBundleCollections(), kf.Core().V1().Nodes().Informer(), events)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	c.now = func() time.Time { return now }
	kf.Start(ctx.Done())
	cf.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		t.Fatal("informers did not sync")
	}
	if left, err := c.sync(ctx, "sbc"); err != nil || left != 10*time.Minute {
		t.Fatalf("sync: look again in %v (%v), want 10m", left, err)
	}
	sbc, _ := client.CrdV1alpha1().SupportBundleCollections().Get(ctx, "sbc", metav1.GetOptions{})
	if sbc.Status.DesiredNodes != 2 {
		t.Fatalf("status after the start %+v, want 2 desired", sbc.Status)
	}
	// worker1's agent reports; worker2's never does.
	sbc.Status.Nodes[0].State = crdv1alpha1.NodeCollected
	if _, err := client.CrdV1alpha1().SupportBundleCollections().UpdateStatus(ctx, sbc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(11 * time.Minute)
	if _, err := c.sync(ctx, "sbc"); err != nil {
		t.Fatal(err)
	}
	sbc, _ = client.CrdV1alpha1().SupportBundleCollections().Get(ctx, "sbc", metav1.GetOptions{})
	if !IsCompleted(&sbc.Status) || sbc.Status.CollectedNodes != 1 {
		t.Fatalf("status after expiration %+v, want Completed with 1 collected", sbc.Status)
	}
	select {
	case e := <-events.Events:
		if !strings.HasPrefix(e, "Warning CollectionFailure") || !strings.Contains(e, "Node worker2") {
			t.Errorf("Event %q, want a Warning CollectionFailure naming worker2", e)
		}
	default:
		t.Error("no Event when the collection completed")
	}
	// Nothing more to write, nor to record.
	if _, err := c.sync(ctx, "sbc"); err != nil {
		t.Fatal(err)
	}
	if len(events.Events) != 0 {
		t.Errorf("a second sync of a completed collection recorded %q", <-events.Events)
	}
}
