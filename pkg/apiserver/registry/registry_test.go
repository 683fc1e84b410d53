package registry

import (
	"context"
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apiserver/storage"
	"antrea.io/antrea/pkg/controller/types"
)

func policyStore(t *testing.T) storage.Interface {
	t.Helper()
	s := storage.NewNetworkPolicyStore()
	for _, p := range []*types.NetworkPolicy{
		{Name: "p1", UID: "p1", Generation: 2, SpanMeta: types.SpanMeta{NodeNames: sets.New("n1", "n2", "n3")},
			SourceRef: &controlplane.NetworkPolicyReference{Type: controlplane.K8sNetworkPolicy, Namespace: "ns", Name: "a"}},
		{Name: "p2", UID: "p2", Generation: 1, SpanMeta: types.SpanMeta{NodeNames: sets.New("n2")}},
	} {
		if err := s.Create(p); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestListAppliesNodeNameAndRejectsOtherSelectors(t *testing.T) {
	s := policyStore(t)
	r := NewNetworkPolicyREST(s, NewStatusStore(s))
	tests := []struct {
		name      string
		opts      *metainternalversion.ListOptions
		wantItems int
		wantBad   bool
	}{
		{"no options lists every policy", nil, 2, false},
		{"nodeName=n1 lists the policies spanning n1", &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("nodeName", "n1")}, 1, false},
		{"metadata.name selects one policy", &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "p2")}, 1, false},
		{"an unknown field is a bad request", &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.x", "y")}, 0, true},
		{"an inequality is a bad request", &metainternalversion.ListOptions{FieldSelector: fields.OneTermNotEqualSelector("nodeName", "n1")}, 0, true},
		{"a label selector is a bad request", &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"a": "b"})}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := r.List(context.Background(), tt.opts)
			if tt.wantBad {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("err = %v, want BadRequest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := obj.(*controlplane.NetworkPolicyList)
			if len(l.Items) != tt.wantItems {
				t.Fatalf("listed %d, want %d", len(l.Items), tt.wantItems)
			}
			if want := strconv.FormatUint(s.ResourceVersion(), 10); l.ResourceVersion != want {
				t.Errorf("list resourceVersion = %q, want the store's %s", l.ResourceVersion, want)
			}
		})
	}
	if _, err := r.Get(context.Background(), "missing", &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get(missing) = %v, want NotFound", err)
	}
}

func TestRealizationCountsNodesOfTheSpanAtTheCurrentGeneration(t *testing.T) {
	s := policyStore(t)
	statuses := NewStatusStore(s)
	rest := NewStatusREST(statuses)
	post := func(name string, st ...controlplane.NetworkPolicyNodeStatus) error {
		_, err := rest.Create(context.Background(), name, &controlplane.NetworkPolicyStatus{Nodes: st}, nil, &metav1.CreateOptions{})
		return err
	}
	steps := []struct {
		name                            string
		post                            []controlplane.NetworkPolicyNodeStatus
		wantRealized, wantFailed, wantN int
	}{
		{"nothing reported yet", nil, 0, 0, 3},
		{"a node at the current generation counts", []controlplane.NetworkPolicyNodeStatus{{NodeName: "n1", Generation: 2}}, 1, 0, 3},
		{"a node at an older generation does not", []controlplane.NetworkPolicyNodeStatus{{NodeName: "n2", Generation: 1}}, 1, 0, 3},
		{"a node outside the span does not", []controlplane.NetworkPolicyNodeStatus{{NodeName: "n9", Generation: 2}}, 1, 0, 3},
		{"a failure is counted apart", []controlplane.NetworkPolicyNodeStatus{{NodeName: "n3", Generation: 2, RealizationFailure: true}}, 1, 1, 3},
		{"a later report replaces an earlier one", []controlplane.NetworkPolicyNodeStatus{{NodeName: "n2", Generation: 2}, {NodeName: "n3", Generation: 2}}, 3, 0, 3},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.post != nil {
				if err := post("p1", st.post...); err != nil {
					t.Fatal(err)
				}
			}
			r, f, n := statuses.Realization("p1")
			if r != st.wantRealized || f != st.wantFailed || n != st.wantN {
				t.Fatalf("Realization = %d realized, %d failed, %d desired; want %d, %d, %d", r, f, n, st.wantRealized, st.wantFailed, st.wantN)
			}
		})
	}

	bad := []struct {
		name  string
		err   error
		check func(error) bool
	}{
		{"a status for a missing policy is not found", post("missing", controlplane.NetworkPolicyNodeStatus{NodeName: "n1"}), apierrors.IsNotFound},
		{"a node status without a node name is refused", post("p1", controlplane.NetworkPolicyNodeStatus{Generation: 2}), apierrors.IsBadRequest},
	}
	_, mismatch := rest.Create(context.Background(), "p1", &controlplane.NetworkPolicyStatus{ObjectMeta: metav1.ObjectMeta{Name: "p2"}}, nil, &metav1.CreateOptions{})
	bad = append(bad, struct {
		name  string
		err   error
		check func(error) bool
	}{"a body naming another policy than the path is refused", mismatch, apierrors.IsBadRequest})
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			if !b.check(b.err) {
				t.Fatalf("err = %v", b.err)
			}
		})
	}
}

func TestPolicyTableShowsSourceAndRealization(t *testing.T) {
	s := policyStore(t)
	statuses := NewStatusStore(s)
	if err := statuses.Update(&controlplane.NetworkPolicyStatus{ObjectMeta: metav1.ObjectMeta{Name: "p1"},
		Nodes: []controlplane.NetworkPolicyNodeStatus{{NodeName: "n1", Generation: 2}}}); err != nil {
		t.Fatal(err)
	}
	r := NewNetworkPolicyREST(s, statuses)
	list, err := r.List(context.Background(), &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "p1")})
	if err != nil {
		t.Fatal(err)
	}
	table, err := r.ConvertToTable(context.Background(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(table.Rows))
	}
	cells := table.Rows[0].Cells
	if cells[0] != "p1" || cells[1] != "K8sNetworkPolicy:ns/a" || cells[4] != "1/3" {
		t.Fatalf("row = %v, want p1, K8sNetworkPolicy:ns/a, ..., 1/3", cells)
	}
	if len(table.ColumnDefinitions) != len(cells) {
		t.Errorf("%d columns for %d cells", len(table.ColumnDefinitions), len(cells))
	}
}

// TestStatusesOfDeletedPoliciesDoNotAccumulate: agents report on every
// policy, and policies come and go (a policy is named by its UID, so a
// re-created one has a new name); the statuses of deleted ones are dropped
// once they could outnumber the live policies, and those of live policies
// are kept.
func TestStatusesOfDeletedPoliciesDoNotAccumulate(t *testing.T) {
	s := policyStore(t)
	statuses := NewStatusStore(s)
	report := func(name string, gen int64) {
		t.Helper()
		if err := statuses.Update(&controlplane.NetworkPolicyStatus{ObjectMeta: metav1.ObjectMeta{Name: name},
			Nodes: []controlplane.NetworkPolicyNodeStatus{{NodeName: "n2", Generation: gen}}}); err != nil {
			t.Fatal(err)
		}
	}
	report("p2", 1)
	live := len(s.List())
	for i := 0; i < 1000; i++ {
		name := "churn-" + strconv.Itoa(i)
		if err := s.Create(&types.NetworkPolicy{Name: name, UID: k8stypes.UID(name), Generation: 1,
			SpanMeta: types.SpanMeta{NodeNames: sets.New("n2")}}); err != nil {
			t.Fatal(err)
		}
		report(name, 1)
		if err := s.Delete(name); err != nil {
			t.Fatal(err)
		}
		statuses.mu.RLock()
		n := len(statuses.byPolicy)
		statuses.mu.RUnlock()
		if n > 2*(live+1)+100+1 {
			t.Fatalf("cycle %d: statuses of %d policies kept with %d live", i, n, live)
		}
	}
	if r, _, _ := statuses.Realization("p2"); r != 1 {
		t.Fatalf("the live policy p2 lost its status: %d Nodes realized, want 1", r)
	}
}

// GET networkpolicies/NAME/status lists every Node of the span with what its
// agent last reported (Generation 0: not reported; outside the span: not
// listed), and the policy's current generation.
func TestGetStatusListsEveryNodeOfTheSpanWithItsReport(t *testing.T) {
	s := policyStore(t)
	rest := NewStatusREST(NewStatusStore(s))
	ctx := context.Background()
	reports := []controlplane.NetworkPolicyNodeStatus{{NodeName: "n1", Generation: 2}, {NodeName: "n2", Generation: 1},
		{NodeName: "n9", Generation: 2}, {NodeName: "n3", Generation: 2, RealizationFailure: true, Message: "no port"}}
	if _, err := rest.Create(ctx, "p1", &controlplane.NetworkPolicyStatus{Nodes: reports}, nil, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	obj, err := rest.Get(ctx, "p1", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*controlplane.NetworkPolicyStatus)
	want := []controlplane.NetworkPolicyNodeStatus{reports[0], reports[1], reports[3]}
	if got.Name != "p1" || got.Generation != 2 || len(got.Nodes) != len(want) {
		t.Fatalf("status %+v: want p1 at generation 2 with n1, n2, n3", got)
	}
	for i := range want {
		if got.Nodes[i] != want[i] {
			t.Errorf("node %d: %+v, want %+v", i, got.Nodes[i], want[i])
		}
	}
	obj, err = rest.Get(ctx, "p2", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*controlplane.NetworkPolicyStatus); len(got.Nodes) != 1 || got.Nodes[0] != (controlplane.NetworkPolicyNodeStatus{NodeName: "n2"}) {
		t.Errorf("p2 with no report: %+v, want n2 at generation 0", got.Nodes)
	}
	if _, err := rest.Get(ctx, "missing", &metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a missing policy: %v, want not found", err)
	}
}
