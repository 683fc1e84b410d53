package networkpolicy

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/controller/types"
)

// snapshot renders the three stores canonically: what agents could observe.
// Group names are hashes of selectors, so two controllers agree on them.
func (e *env) snapshot() string {
	var lines []string
	for _, o := range e.nps.List() {
		p := o.(*types.NetworkPolicy)
		lines = append(lines, fmt.Sprintf("policy %s/%s atg=%v span=%v rules=%q", p.SourceRef.Namespace, p.SourceRef.Name,
			p.AppliedToGroups, p.SortedNodeNames(), renderRules(p.Rules, nil)))
	}
	for _, o := range e.atgs.List() {
		g := o.(*types.AppliedToGroup)
		lines = append(lines, fmt.Sprintf("atg %s span=%v members=%v", g.Name, g.SortedNodeNames(), byNodeNames(g)))
	}
	for _, o := range e.ags.List() {
		g := o.(*types.AddressGroup)
		lines = append(lines, fmt.Sprintf("ag %s span=%v members=%v", g.Name, g.SortedNodeNames(), memberNames(g.GroupMembers)))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestRandomChangesEndWhereAFreshComputationStarts applies random changes to
// pods, namespaces and policies and checks that the incrementally maintained
// stores equal what a new controller computes from the final objects alone.
func TestRandomChangesEndWhereAFreshComputationStarts(t *testing.T) {
	for _, seed := range []int64{11, 12, 13} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) { randomChangesAgainstFreshComputation(t, seed, 1) })
	}
}

// TestConcurrentSyncsEndWhereAFreshComputationStarts is the same with four
// workers syncing at once (drainConcurrently, as Run does): syncs of
// different policies compute and prepare their groups outside the
// controller's lock, and groups shared between them must still end as a
// fresh computation has them. Run it with -race too.
func TestConcurrentSyncsEndWhereAFreshComputationStarts(t *testing.T) {
	for _, seed := range []int64{21, 22, 23} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) { randomChangesAgainstFreshComputation(t, seed, 4) })
	}
}

func randomChangesAgainstFreshComputation(t *testing.T, seed int64, workers int) {
	rng := rand.New(rand.NewSource(seed))
	nss := []string{"x", "y", "z"}
	apps := []string{"a", "b", "c"}
	nodes := []string{"n1", "n2", "n3", "n4"}
	pick := func(s []string) string { return s[rng.Intn(len(s))] }
	randPod := func(ns, name string) *v1.Pod {
		// 10.1/16 is the except of the ipBlock peer below, 10.2/16 is not.
		ip := fmt.Sprintf("10.%d.%d.%d", 1+rng.Intn(2), rng.Intn(4), rng.Intn(250))
		node := pick(nodes)
		if rng.Intn(6) == 0 {
			ip, node = "", ""
		}
		return newPod(ns, name, lbls("app", pick(apps)), ip, node, v1.ContainerPort{Name: "http", ContainerPort: int32(8000 + rng.Intn(3))})
	}
	randPeer := func() networkingv1.NetworkPolicyPeer {
		switch rng.Intn(4) {
		case 0:
			return networkingv1.NetworkPolicyPeer{PodSelector: matchLabels("app", pick(apps))}
		case 1:
			return networkingv1.NetworkPolicyPeer{NamespaceSelector: matchLabels("env", pick([]string{"prod", "dev"}))}
		case 2:
			return networkingv1.NetworkPolicyPeer{PodSelector: matchLabels("app", pick(apps)), NamespaceSelector: &metav1.LabelSelector{}}
		default:
			return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}
		}
	}
	randPolicy := func(ns, name string) *networkingv1.NetworkPolicy {
		spec := networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", pick(apps))}
		for i := rng.Intn(3); i > 0; i-- {
			spec.Ingress = append(spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{randPeer()}})
		}
		if rng.Intn(2) == 0 {
			spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{randPeer()},
				Ports: []networkingv1.NetworkPolicyPort{port(v1.ProtocolTCP, intstr.FromString("http"))}}}
		}
		return newPolicy(ns, name, spec)
	}
	randNamespace := func(name string) *v1.Namespace {
		return newNamespace(name, lbls("env", pick([]string{"prod", "dev", "test"})))
	}

	var initial []runtime.Object
	for _, ns := range nss {
		initial = append(initial, randNamespace(ns))
		for i := 0; i < 3; i++ {
			initial = append(initial, randPod(ns, fmt.Sprintf("p%d", i)), randPolicy(ns, fmt.Sprintf("np%d", i)))
		}
	}
	e := newEnv(t, initial...)
	for step := 0; step < 120; step++ {
		ns := pick(nss)
		name := fmt.Sprintf("%d", rng.Intn(4))
		var err error
		switch op := rng.Intn(10); {
		case op < 3:
			pod := randPod(ns, "p"+name)
			if _, err = e.client.CoreV1().Pods(ns).Update(e.ctx, pod, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
				_, err = e.client.CoreV1().Pods(ns).Create(e.ctx, pod, metav1.CreateOptions{})
			}
		case op < 4:
			err = e.client.CoreV1().Pods(ns).Delete(e.ctx, "p"+name, metav1.DeleteOptions{})
		case op < 6:
			_, err = e.client.CoreV1().Namespaces().Update(e.ctx, randNamespace(ns), metav1.UpdateOptions{})
		case op < 9:
			np := randPolicy(ns, "np"+name)
			if _, err = e.client.NetworkingV1().NetworkPolicies(ns).Update(e.ctx, np, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
				_, err = e.client.NetworkingV1().NetworkPolicies(ns).Create(e.ctx, np, metav1.CreateOptions{})
			}
		default:
			err = e.client.NetworkingV1().NetworkPolicies(ns).Delete(e.ctx, "np"+name, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("step %d: %v", step, err)
		}
		if step%10 == 0 {
			// Let some syncs interleave with the changes.
			drain := e.c.drain
			if workers > 1 {
				drain = func(ctx context.Context) error { return e.c.drainConcurrently(ctx, workers) }
			}
			if err := drain(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A fresh controller on the final objects is the reference.
	var final []runtime.Object
	pods, _ := e.client.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{})
	for i := range pods.Items {
		final = append(final, &pods.Items[i])
	}
	namespaces, _ := e.client.CoreV1().Namespaces().List(e.ctx, metav1.ListOptions{})
	for i := range namespaces.Items {
		final = append(final, &namespaces.Items[i])
	}
	policies, _ := e.client.NetworkingV1().NetworkPolicies("").List(e.ctx, metav1.ListOptions{})
	for i := range policies.Items {
		final = append(final, &policies.Items[i])
	}
	ref := newEnv(t, final...)
	if err := ref.c.drain(ref.ctx); err != nil {
		t.Fatal(err)
	}
	want := ref.snapshot()
	if len(policies.Items) == 0 || want == "" {
		t.Fatal("the random changes left nothing to compare")
	}
	e.eventually(t, func() error {
		if got := e.snapshot(); got != want {
			return fmt.Errorf("incremental stores differ from a fresh computation:\n got:\n%s\nwant:\n%s", got, want)
		}
		return nil
	})
}
