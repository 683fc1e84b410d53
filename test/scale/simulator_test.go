package scale

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"antrea.io/antrea/pkg/agent/simulator"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab/simnodes"
)

// TestSimulatedAgentsHoldTheirSpan: against a real kube-apiserver and the
// real antrea-controller, four simulated Nodes (the fake kubelet gives
// their pods IPs from the Nodes' CIDRs) and one simulated agent each,
// watching as the antrea-agent ServiceAccount. Every agent ends up with
// exactly its span (recomputed from the API objects), a Node hosting no
// pod receives no policy, every received object is recorded with its size,
// and a policy added later reaches exactly the Nodes hosting its pods.
func TestSimulatedAgentsHoldTheirSpan(t *testing.T) {
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	var running sync.WaitGroup
	t.Cleanup(func() { cancel(); running.Wait() })
	startControllerInProcess(t, ctx, cp)
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	crd := versioned.NewForConfigOrDie(cp.Config)

	const nodes = 4
	if err := simnodes.EnsureNodes(ctx, kube, simnodes.DefaultCIDR, nodes); err != nil {
		t.Fatal(err)
	}
	kubelet := simnodes.NewKubelet(kube)
	running.Add(1)
	go func() { defer running.Done(); _ = kubelet.Run(ctx, 2) }()

	// Pods go to sim-node-00000..2 only (placement is random with a seed);
	// sim-node-00003 gets none.
	w := Workload{Nodes: 3, PodsPerNode: 2, NamespaceSize: 3, ACNPs: 1, Seed: 7}
	if err := w.Create(ctx, kube, crd, 4); err != nil {
		t.Fatal(err)
	}
	if err := simnodes.WaitRunning(ctx, kube, WorkloadLabel+"=true", w.Pods(), 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, p := range w.PodsToCreate() {
		got, err := kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node, _ := kube.CoreV1().Nodes().Get(ctx, p.Node, metav1.GetOptions{})
		if cidr := netip.MustParsePrefix(node.Spec.PodCIDR); !cidr.Contains(netip.MustParseAddr(got.Status.PodIP)) {
			t.Errorf("pod %s/%s on %s has IP %s, outside the Node's CIDR %s", p.Namespace, p.Name, p.Node, got.Status.PodIP, cidr)
		}
	}

	names := make([]string, nodes)
	for i := range names {
		names[i] = simnodes.NodeName(i)
	}
	sim, err := simulator.New(agentConfig(t, ctx, cp.Config), names)
	if err != nil {
		t.Fatal(err)
	}
	running.Add(1)
	go func() { defer running.Done(); sim.Run(ctx) }()
	if err := sim.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	exp, err := Recompute(ctx, kube, crd)
	if err != nil {
		t.Fatal(err)
	}
	if len(exp[simnodes.NodeName(3)]) != 0 || len(exp[simnodes.NodeName(0)]) == 0 {
		t.Fatalf("workload placement: want pods on sim-node-00000 and none on sim-node-00003, expectation %v", exp)
	}
	if diffs := waitConsistent(ctx, sim, exp, 30*time.Second); len(diffs) > 0 {
		t.Fatalf("agents differ from the recomputation:\n%s", strings.Join(diffs, "\n"))
	}
	for _, a := range sim.Agents() {
		recs := a.Records()
		if len(exp[a.Node]) == 0 {
			// A Node hosting no pod (sim-node-00003 at least).
			if len(a.State().Policies) != 0 {
				t.Errorf("%s hosts no pod but holds %v", a.Node, a.State().Policies)
			}
			continue
		}
		if a.WireBytes() == 0 || len(recs) == 0 {
			t.Errorf("%s: %d records, %d bytes read", a.Node, len(recs), a.WireBytes())
		}
		for _, r := range recs {
			if r.Bytes == 0 || r.Name == "" || r.At.IsZero() {
				t.Errorf("%s: record without size, name or time: %+v", a.Node, r)
			}
		}
	}

	// A new policy in a namespace reaches the Nodes hosting its web pods,
	// recorded as an ADDED event naming its source, and no other Node.
	ns := NamespaceName(0)
	t0 := time.Now()
	if _, err := kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, WebFrom(ns, "extra", 8080), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if exp, err = Recompute(ctx, kube, crd); err != nil {
		t.Fatal(err)
	}
	if diffs := waitConsistent(ctx, sim, exp, 30*time.Second); len(diffs) > 0 {
		t.Fatalf("after a new policy, agents differ from the recomputation:\n%s", strings.Join(diffs, "\n"))
	}
	key := "K8sNetworkPolicy/" + ns + "/extra"
	for _, a := range sim.Agents() {
		_, inSpan := exp[a.Node][key]
		got := false
		for _, r := range a.Records() {
			if r.Source == key && r.Type == simulator.Added && !r.At.Before(t0) {
				got = true
			}
		}
		if got != inSpan {
			t.Errorf("%s: received ADDED %s = %v, in its span = %v", a.Node, key, got, inSpan)
		}
	}
}
