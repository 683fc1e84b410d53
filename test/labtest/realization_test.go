package labtest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// scriptedTable answers each read with the next table of a script (the last
// one again when the script runs out), as an agent that realizes late
// would make the controller's table change.
type scriptedTable struct {
	mu     sync.Mutex
	tables [][]CPPolicy
	reads  int
}

func (s *scriptedTable) list(context.Context) ([]CPPolicy, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.reads, len(s.tables)-1)
	s.reads++
	return s.tables[i], nil
}

func k8sPolicy(ns, name, uid string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

func row(uid, source string, gen int64, realized, desired int) CPPolicy {
	return CPPolicy{Name: uid, Source: "K8sNetworkPolicy:" + source, Generation: gen, Realized: realized, Desired: desired}
}

// quick keeps the unit tests short; no time is asserted.
var quick = RealizationWait{Timeout: 500 * time.Millisecond, Poll: time.Millisecond, SameContentGrace: 100 * time.Millisecond}

func TestWaitRealized(t *testing.T) {
	managed := map[string]bool{"x": true, "y": true}
	np := k8sPolicy("x", "deny", "u1")
	changed := np.DeepCopy()
	changed.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
	cases := []struct {
		name   string
		before PolicySnapshot
		after  []*networkingv1.NetworkPolicy
		tables [][]CPPolicy
		// wantReads is the least number of reads before the wait may end.
		wantReads int
		wantErr   string
		wantNote  string
	}{
		{
			name:   "a new policy is awaited until the agent that realizes it late has reported",
			before: PolicySnapshot{},
			after:  []*networkingv1.NetworkPolicy{np},
			tables: [][]CPPolicy{
				{},
				{row("u1", "x/deny", 1, 0, 2)},
				{row("u1", "x/deny", 1, 1, 2)},
				{row("u1", "x/deny", 1, 1, 2)},
				{row("u1", "x/deny", 1, 2, 2)},
			},
			wantReads: 5,
		},
		{
			name:    "a policy never realized on one Node of its span fails the step",
			after:   []*networkingv1.NetworkPolicy{np},
			tables:  [][]CPPolicy{{row("u1", "x/deny", 1, 1, 2)}},
			wantErr: "policy x/deny: generation 1 realized on 1 of 2 Nodes",
		},
		{
			name:    "a realization failure reported by an agent fails the step",
			after:   []*networkingv1.NetworkPolicy{np},
			tables:  [][]CPPolicy{{{Name: "u1", Source: "K8sNetworkPolicy:x/deny", Generation: 1, Realized: 1, Desired: 2, Failed: 1}}},
			wantErr: "failed on 1 Node(s)",
		},
		{
			name: "a changed policy's old generation, realized everywhere, is not taken for the new one",
			before: PolicySnapshot{specs: map[types.UID]networkingv1.NetworkPolicySpec{"u1": np.Spec},
				generations: map[string]int64{"u1": 3}},
			after: []*networkingv1.NetworkPolicy{changed},
			tables: [][]CPPolicy{
				{row("u1", "x/deny", 3, 2, 2)},
				{row("u1", "x/deny", 3, 2, 2)},
				{row("u1", "x/deny", 4, 0, 2)},
				{row("u1", "x/deny", 4, 2, 2)},
			},
			wantReads: 4,
		},
		{
			name: "a change that computes to the same rules is accepted after the grace, and said",
			before: PolicySnapshot{specs: map[types.UID]networkingv1.NetworkPolicySpec{"u1": np.Spec},
				generations: map[string]int64{"u1": 3}},
			after:     []*networkingv1.NetworkPolicy{changed},
			tables:    [][]CPPolicy{{row("u1", "x/deny", 3, 2, 2)}},
			wantReads: 2,
			wantNote:  "generation stayed 3",
		},
		{
			name: "a deleted policy is awaited until its controlplane policy is gone",
			before: PolicySnapshot{specs: map[types.UID]networkingv1.NetworkPolicySpec{"u1": np.Spec},
				generations: map[string]int64{"u1": 1}},
			tables: [][]CPPolicy{
				{row("u1", "x/deny", 1, 2, 2)},
				{row("u1", "x/deny", 1, 2, 2)},
				{},
			},
			wantReads: 3,
		},
		{
			name:    "a policy deleted in a managed namespace but still computed fails the step",
			tables:  [][]CPPolicy{{row("u1", "y/old", 1, 2, 2)}},
			wantErr: "controlplane NetworkPolicy u1 of deleted policy y/old still there",
		},
		{
			name:   "policies of namespaces the suite does not manage are not its business",
			tables: [][]CPPolicy{{row("u9", "kube-system/other", 1, 0, 2), {Name: "u8", Source: "AntreaClusterNetworkPolicy:acnp", Generation: 1, Desired: 2}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &scriptedTable{tables: tc.tables}
			notes, err := WaitRealized(context.Background(), quick, s.list, tc.before, tc.after, managed)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("WaitRealized: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("WaitRealized returned %v, want an error with %q", err, tc.wantErr)
			}
			if tc.wantErr == "" && s.reads < tc.wantReads {
				t.Fatalf("WaitRealized returned after %d reads of the table, before the policies were realized (read %d)", s.reads, tc.wantReads)
			}
			if tc.wantNote != "" && !strings.Contains(strings.Join(notes, "\n"), tc.wantNote) {
				t.Fatalf("notes %q, want one with %q", notes, tc.wantNote)
			}
		})
	}
}

func TestParsePolicyTableReadsTheControllersColumns(t *testing.T) {
	// As pkg/apiserver/registry/table.go renders it (JSON numbers decode as float64).
	tbl := &metav1.Table{
		ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name"}, {Name: "Source"}, {Name: "Rules"}, {Name: "Generation"},
			{Name: "Realized"}, {Name: "Failed"}, {Name: "Tier-Priority"}, {Name: "Priority"}},
		Rows: []metav1.TableRow{{Cells: []any{"u1", "K8sNetworkPolicy:x/deny", float64(1), float64(7), "1/2", float64(0), "<none>", "<none>"}}},
	}
	got, err := ParsePolicyTable(tbl)
	if err != nil {
		t.Fatal(err)
	}
	want := CPPolicy{Name: "u1", Source: "K8sNetworkPolicy:x/deny", Generation: 7, Realized: 1, Desired: 2}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v, want [%+v]", got, want)
	}
	tbl.ColumnDefinitions[4].Name = "Status"
	if _, err := ParsePolicyTable(tbl); err == nil {
		t.Fatal("a table without a Realized column was read")
	}
}
