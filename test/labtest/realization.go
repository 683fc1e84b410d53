package labtest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// A conformance step is probed only once the product says it enforces the step's
// policies: each K8s NetworkPolicy of the managed namespaces has its
// controlplane NetworkPolicy (named by the K8s policy's UID), at a
// generation computed after the step's change, and that generation is
// realized on every Node of its span (the REALIZED column of `kubectl get
// networkpolicies.controlplane.antrea.io`, which the controller fills from
// the agents' status reports); and no controlplane policy of a deleted K8s
// policy is left. Without this, a step whose expected matrix equals the
// previous one passed even if no agent ever applied the change.

// CPPolicy is one row of the controlplane networkpolicies table.
type CPPolicy struct {
	Name       string
	Source     string
	Generation int64
	// Realized of Desired Nodes of the span enforce Generation; Failed
	// reported a realization failure.
	Realized, Desired, Failed int
}

// CPLister reads the controlplane networkpolicies table.
type CPLister func(ctx context.Context) ([]CPPolicy, error)

// tableAccept asks the API server for the table rendering of a list.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// ControlplaneLister reads the table from the lab's API server (the
// aggregated controlplane API of antrea-controller).
func ControlplaneLister(client kubernetes.Interface) CPLister {
	return func(ctx context.Context) ([]CPPolicy, error) {
		body, err := client.CoreV1().RESTClient().Get().AbsPath("/apis/controlplane.antrea.io/v1beta2/networkpolicies").
			SetHeader("Accept", tableAccept).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the controlplane networkpolicies table: %w", err)
		}
		var t metav1.Table
		if err := json.Unmarshal(body, &t); err != nil {
			return nil, fmt.Errorf("read the controlplane networkpolicies table: %w", err)
		}
		return ParsePolicyTable(&t)
	}
}

// ParsePolicyTable picks the columns by name.
func ParsePolicyTable(t *metav1.Table) ([]CPPolicy, error) {
	col := map[string]int{}
	for i, c := range t.ColumnDefinitions {
		col[strings.ToLower(c.Name)] = i
	}
	for _, want := range []string{"name", "source", "generation", "realized", "failed"} {
		if _, ok := col[want]; !ok {
			return nil, fmt.Errorf("the controlplane networkpolicies table has no %s column", want)
		}
	}
	var out []CPPolicy
	for _, r := range t.Rows {
		cell := func(name string) string {
			if i := col[name]; i < len(r.Cells) {
				return fmt.Sprint(r.Cells[i])
			}
			return ""
		}
		p := CPPolicy{Name: cell("name"), Source: cell("source")}
		var err error
		if p.Generation, err = strconv.ParseInt(cell("generation"), 10, 64); err != nil {
			return nil, fmt.Errorf("policy %s: generation %q: %w", p.Name, cell("generation"), err)
		}
		if p.Failed, err = strconv.Atoi(cell("failed")); err != nil {
			return nil, fmt.Errorf("policy %s: failed %q: %w", p.Name, cell("failed"), err)
		}
		realized, desired, ok := strings.Cut(cell("realized"), "/")
		if !ok {
			return nil, fmt.Errorf("policy %s: realized %q is not N/M", p.Name, cell("realized"))
		}
		if p.Realized, err = strconv.Atoi(realized); err != nil {
			return nil, fmt.Errorf("policy %s: realized %q: %w", p.Name, cell("realized"), err)
		}
		if p.Desired, err = strconv.Atoi(desired); err != nil {
			return nil, fmt.Errorf("policy %s: realized %q: %w", p.Name, cell("realized"), err)
		}
		out = append(out, p)
	}
	return out, nil
}

// PolicySnapshot is what a step starts from: the K8s policies' specs and
// their controlplane generations, by UID.
type PolicySnapshot struct {
	specs       map[types.UID]networkingv1.NetworkPolicySpec
	generations map[string]int64
}

// SnapshotPolicies records the state before a step's actions.
func SnapshotPolicies(ctx context.Context, policies []*networkingv1.NetworkPolicy, list CPLister) (PolicySnapshot, error) {
	s := PolicySnapshot{specs: map[types.UID]networkingv1.NetworkPolicySpec{}, generations: map[string]int64{}}
	for _, p := range policies {
		s.specs[p.UID] = p.Spec
	}
	cps, err := list(ctx)
	if err != nil {
		return s, err
	}
	for _, cp := range cps {
		s.generations[cp.Name] = cp.Generation
	}
	return s, nil
}

// RealizationWait is how WaitRealized polls.
type RealizationWait struct {
	// Timeout bounds the whole wait; Poll spaces the reads.
	Timeout, Poll time.Duration
	// SameContentGrace is how long a changed K8s policy may keep its
	// controlplane generation before the change is taken to compute to the
	// same rules (then nothing new is there to realize; it is logged).
	SameContentGrace time.Duration
}

// DefaultRealizationWait is what the conformance suite uses.
func DefaultRealizationWait() RealizationWait {
	return RealizationWait{Timeout: 30 * time.Second, Poll: 100 * time.Millisecond, SameContentGrace: 3 * time.Second}
}

// WaitRealized waits until the policies of the managed namespaces (after a
// step) are realized, as described above. namespaces says which Sources
// are the suite's. It returns notes worth logging, and an error naming what
// is not realized when the wait timed out.
func WaitRealized(ctx context.Context, w RealizationWait, list CPLister, before PolicySnapshot,
	after []*networkingv1.NetworkPolicy, namespaces map[string]bool) (notes []string, err error) {
	start := time.Now()
	deadline := start.Add(w.Timeout)
	var pending []string
	for {
		cps, err := list(ctx)
		if err != nil {
			pending = []string{err.Error()}
		} else {
			pending, notes = Unrealized(cps, before, after, namespaces, time.Since(start) >= w.SameContentGrace)
		}
		if len(pending) == 0 {
			return notes, nil
		}
		if time.Now().After(deadline) {
			return notes, fmt.Errorf("not realized after %s: %s", w.Timeout, strings.Join(pending, "; "))
		}
		select {
		case <-ctx.Done():
			return notes, fmt.Errorf("not realized (%w): %s", ctx.Err(), strings.Join(pending, "; "))
		case <-time.After(w.Poll):
		}
	}
}

// Unrealized lists what keeps the policies from being realized; a pure
// function of one read of the table.
func Unrealized(cps []CPPolicy, before PolicySnapshot, after []*networkingv1.NetworkPolicy, namespaces map[string]bool, graceOver bool) (pending, notes []string) {
	byName := map[string]CPPolicy{}
	for _, cp := range cps {
		byName[cp.Name] = cp
	}
	want := map[string]bool{}
	for _, p := range after {
		uid := string(p.UID)
		want[uid] = true
		what := p.Namespace + "/" + p.Name
		cp, ok := byName[uid]
		if !ok {
			pending = append(pending, fmt.Sprintf("policy %s: no controlplane NetworkPolicy %s yet", what, uid))
			continue
		}
		old, existed := before.generations[uid]
		oldSpec, hadSpec := before.specs[p.UID]
		changed := hadSpec && !reflect.DeepEqual(oldSpec, p.Spec)
		if existed && changed && cp.Generation == old {
			if !graceOver {
				pending = append(pending, fmt.Sprintf("policy %s: changed, its controlplane generation still %d", what, cp.Generation))
				continue
			}
			notes = append(notes, fmt.Sprintf("policy %s changed but its controlplane generation stayed %d: the change computes to the same rules", what, cp.Generation))
		}
		if cp.Failed > 0 {
			pending = append(pending, fmt.Sprintf("policy %s: generation %d failed on %d Node(s)", what, cp.Generation, cp.Failed))
			continue
		}
		if cp.Realized != cp.Desired {
			pending = append(pending, fmt.Sprintf("policy %s: generation %d realized on %d of %d Nodes", what, cp.Generation, cp.Realized, cp.Desired))
		}
	}
	for _, cp := range cps {
		ns, _, ok := strings.Cut(strings.TrimPrefix(cp.Source, "K8sNetworkPolicy:"), "/")
		if !strings.HasPrefix(cp.Source, "K8sNetworkPolicy:") || !ok || !namespaces[ns] || want[cp.Name] {
			continue
		}
		pending = append(pending, fmt.Sprintf("controlplane NetworkPolicy %s of deleted policy %s still there", cp.Name, strings.TrimPrefix(cp.Source, "K8sNetworkPolicy:")))
	}
	sort.Strings(pending)
	return pending, notes
}
