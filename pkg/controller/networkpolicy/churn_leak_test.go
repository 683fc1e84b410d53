package networkpolicy

import (
	"fmt"
	goruntime "runtime"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/controller/stats"
)

// stateSizes counts the entries of every map the controller keeps per
// policy, group, selector, Pod, Namespace, Service or dependency, of the
// stores, and of the stats aggregator: what must return to its size once the
// objects of a churn cycle are gone.
func stateSizes(e *nativeEnv, agg *stats.Aggregator) map[string]int {
	c := e.c
	n := map[string]int{}
	c.mu.Lock()
	n["policies"] = len(c.policies)
	n["appliedToGroups"] = len(c.appliedToGroups)
	n["addressGroups"] = len(c.addressGroups)
	n["groupsBySelector"] = len(c.groupsBySelector)
	n["orphans"] = c.orphans.Len()
	n["nodeGroupKeys"] = c.nodeGroupKeys.Len()
	n["serviceGroupKeys"] = c.serviceGroupKeys.Len()
	c.mu.Unlock()
	c.depsMu.Lock()
	n["deps"] = len(c.deps)
	n["depsByPolicy"] = len(c.depsByPolicy)
	n["depChanged"] = len(c.depChanged)
	n["depReading"] = len(c.depReading)
	c.depsMu.Unlock()
	c.statusMu.Lock()
	n["statusInfo"] = len(c.statusInfo)
	n["keyByInternalName"] = len(c.keyByInternalName)
	c.statusMu.Unlock()
	n["index pods"], n["index namespaces"], n["index groups"] = c.index.Counts()
	n["store networkpolicies"] = len(e.nps.List())
	n["store appliedtogroups"] = len(e.atgs.List())
	n["store addressgroups"] = len(e.ags.List())
	n["stats networkpolicies"] = len(agg.ListNetworkPolicyStats(""))
	n["stats antreanetworkpolicies"] = len(agg.ListAntreaNetworkPolicyStats(""))
	for name, q := range map[string]interface{ Len() int }{"policy": c.policyQueue, "appliedToGroup": c.appliedToGroupQueue,
		"addressGroup": c.addressGroupQueue, "native": c.nativeQueue, "status": c.statusQueue, "groupStatus": c.groupStatusQueue} {
		n[name+" queue"] = q.Len()
	}
	return n
}

func liveHeap() uint64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestChurnLeavesNoStateBehind replays test/e2e/datapath TestChurn's cycle
// (two Pods, created without and then with their IPs, a K8s NetworkPolicy
// letting one reach the other, an agent's realization report and stats,
// then all deleted) with what else comes and goes in a cluster: an Antrea
// NetworkPolicy applied to a Group of a Service's Pods (dependencies,
// status writes). Once a cycle's objects are gone, every per-object map of
// the computation, the stores and the stats aggregator is back to its size
// after the warm-up: nothing is kept for deleted objects. The live heap
// after N and 2N cycles is logged, not asserted (the fake clientsets and
// the stores' bounded watch history grow it too).
func TestChurnLeavesNoStateBehind(t *testing.T) {
	const warmUp, cycles = 5, 40
	kube := []runtime.Object{
		newNamespace("ns", nil),
		newPod("ns", "a", lbls("pod", "a"), "10.0.0.1", "n1"),
		newPod("ns", "b", lbls("pod", "b"), "10.0.0.2", "n2"),
		newNode("n1", nil, "192.168.0.1"), newNode("n2", nil, "192.168.0.2"),
	}
	e := newNativeEnv(t, kube, staticTiers())
	// The stats aggregator learns the policies from informers, as in
	// antrea-controller (pkg/controller/app).
	agg := stats.NewAggregator()
	kubeFactory := informers.NewSharedInformerFactory(e.client, 0)
	crdFactory := crdinformers.NewSharedInformerFactory(e.crd, 0)
	if err := agg.WatchPolicies(stats.KindK8s, kubeFactory.Networking().V1().NetworkPolicies().Informer()); err != nil {
		t.Fatal(err)
	}
	if err := agg.WatchPolicies(stats.KindANNP, crdFactory.Crd().V1beta1().NetworkPolicies().Informer()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	kubeFactory.Start(stop)
	crdFactory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		kubeFactory.Shutdown()
		crdFactory.Shutdown()
	})

	cycle := func(i int) {
		t.Helper()
		c, s, svc, grp := "c-"+strconv.Itoa(i), "s-"+strconv.Itoa(i), "svc-"+strconv.Itoa(i), "grp-"+strconv.Itoa(i)
		// As the kubelet does: the Pods come, then get their IPs.
		e.mustCreate(t, newPod("ns", c, lbls("pod", c), "", "n1"))
		e.mustCreate(t, newPod("ns", s, lbls("pod", s), "", "n2"))
		e.mustUpdate(t, newPod("ns", c, lbls("pod", c), fmt.Sprintf("10.1.%d.%d", i/200, i%200+1), "n1"))
		e.mustUpdate(t, newPod("ns", s, lbls("pod", s), fmt.Sprintf("10.2.%d.%d", i/200, i%200+1), "n2"))
		e.mustCreate(t, &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: svc},
			Spec: v1.ServiceSpec{Selector: lbls("pod", s), Ports: []v1.ServicePort{{Port: 80}}}})
		e.mustCreate(t, &crdv1beta1.Group{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: grp},
			Spec: crdv1beta1.GroupSpec{ServiceReference: &crdv1beta1.NamespacedName{Namespace: "ns", Name: svc}}})
		np := newPolicy("ns", s+"-only-from-"+c, networkingv1.NetworkPolicySpec{
			PodSelector: *matchLabels("pod", s),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("pod", c)}},
				Ports: []networkingv1.NetworkPolicyPort{port(v1.ProtocolTCP, intstr.FromInt32(80))},
			}},
		})
		e.mustCreate(t, np)
		annp := newANNP("ns", "annp-"+strconv.Itoa(i), 1, crdv1beta1.NetworkPolicySpec{
			AppliedTo: []crdv1beta1.AppliedTo{{Group: grp}},
			Ingress:   []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionAllow), From: []crdv1beta1.NetworkPolicyPeer{{PodSelector: matchLabels("pod", c)}}}},
		})
		e.mustCreate(t, annp)

		// Both policies are enforced on n2, whose agent reports them realized
		// and sends their stats.
		n2 := sets.New("n2")
		var k8sName, annpName string
		e.eventually(t, func() error {
			p, ok := e.internal(controlplane.K8sNetworkPolicy, "ns", np.Name)
			q, ok2 := e.internal(controlplane.AntreaNetworkPolicy, "ns", annp.Name)
			if !ok || !ok2 || !p.NodeNames.Equal(n2) || !q.NodeNames.Equal(n2) {
				return fmt.Errorf("cycle %d: the policies are not computed with span n2 yet", i)
			}
			// The aggregator drops a report of a policy it has not seen
			// yet (its own informer): under load it may lag behind.
			if _, ok := agg.GetNetworkPolicyStats("ns", np.Name); !ok {
				return fmt.Errorf("cycle %d: the stats aggregator does not know %s yet", i, np.Name)
			}
			if _, ok := agg.GetAntreaNetworkPolicyStats("ns", annp.Name); !ok {
				return fmt.Errorf("cycle %d: the stats aggregator does not know %s yet", i, annp.Name)
			}
			k8sName, annpName = p.Name, q.Name
			for _, x := range []struct {
				name string
				gen  int64
			}{{p.Name, p.Generation}, {q.Name, q.Generation}} {
				if err := e.statuses.Update(&controlplane.NetworkPolicyStatus{ObjectMeta: metav1.ObjectMeta{Name: x.name},
					Nodes: []controlplane.NetworkPolicyNodeStatus{{NodeName: "n2", Generation: x.gen}}}); err != nil {
					return err
				}
			}
			return nil
		})
		one := statsv1alpha1.TrafficStats{Packets: 1, Bytes: 100, Sessions: 1}
		agg.Collect(&controlplane.NodeStatsSummary{ObjectMeta: metav1.ObjectMeta{Name: "n2"},
			NetworkPolicies: []controlplane.NetworkPolicyStats{{NetworkPolicy: controlplane.NetworkPolicyReference{
				Type: controlplane.K8sNetworkPolicy, Namespace: "ns", Name: np.Name, UID: np.UID}, TrafficStats: one}},
			AntreaNetworkPolicies: []controlplane.NetworkPolicyStats{{NetworkPolicy: controlplane.NetworkPolicyReference{
				Type: controlplane.AntreaNetworkPolicy, Namespace: "ns", Name: annp.Name, UID: annp.UID}, TrafficStats: one,
				RuleTrafficStats: []statsv1alpha1.RuleTrafficStats{{Name: "rule-" + strconv.Itoa(i), TrafficStats: one}}}},
		})
		e.eventually(t, func() error {
			got, err := e.crd.CrdV1beta1().NetworkPolicies("ns").Get(e.ctx, annp.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.Phase != crdv1beta1.NetworkPolicyRealized {
				return fmt.Errorf("cycle %d: %s status %+v, want Realized", i, annp.Name, got.Status)
			}
			if st, ok := agg.GetNetworkPolicyStats("ns", np.Name); !ok || st.TrafficStats != one {
				return fmt.Errorf("cycle %d: stats of %s = %+v, %v", i, np.Name, st, ok)
			}
			return nil
		})

		del := metav1.DeleteOptions{}
		for _, err := range []error{
			e.client.NetworkingV1().NetworkPolicies("ns").Delete(e.ctx, np.Name, del),
			e.crd.CrdV1beta1().NetworkPolicies("ns").Delete(e.ctx, annp.Name, del),
			e.crd.CrdV1beta1().Groups("ns").Delete(e.ctx, grp, del),
			e.client.CoreV1().Services("ns").Delete(e.ctx, svc, del),
			e.client.CoreV1().Pods("ns").Delete(e.ctx, c, del),
			e.client.CoreV1().Pods("ns").Delete(e.ctx, s, del),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		e.eventually(t, func() error {
			if _, ok, _ := e.nps.Get(k8sName); ok {
				return fmt.Errorf("cycle %d: %s still stored", i, k8sName)
			}
			if _, ok, _ := e.nps.Get(annpName); ok {
				return fmt.Errorf("cycle %d: %s still stored", i, annpName)
			}
			if pods, _, _ := e.c.index.Counts(); pods != 2 {
				return fmt.Errorf("cycle %d: the index holds %d Pods", i, pods)
			}
			if _, err := e.c.native.svcLister.Services("ns").Get(svc); err == nil {
				return fmt.Errorf("cycle %d: Service %s still listed", i, svc)
			}
			if _, err := e.c.native.grpLister.Groups("ns").Get(grp); err == nil {
				return fmt.Errorf("cycle %d: Group %s still listed", i, grp)
			}
			if l := agg.ListNetworkPolicyStats(""); len(l) != 0 {
				return fmt.Errorf("cycle %d: stats of %d NetworkPolicies", i, len(l))
			}
			if l := agg.ListAntreaNetworkPolicyStats(""); len(l) != 0 {
				return fmt.Errorf("cycle %d: stats of %d Antrea NetworkPolicies", i, len(l))
			}
			return nil
		})
		// The fake clientsets record every call: forget them.
		e.client.ClearActions()
		e.crd.ClearActions()
	}

	i := 0
	for ; i < warmUp; i++ {
		cycle(i)
	}
	base, heap0 := stateSizes(e, agg), liveHeap()
	for ; i < warmUp+cycles; i++ {
		cycle(i)
	}
	afterN, heapN := stateSizes(e, agg), liveHeap()
	for ; i < warmUp+2*cycles; i++ {
		cycle(i)
	}
	after2N, heap2N := stateSizes(e, agg), liveHeap()
	t.Logf("heap in use: %d KiB after the warm-up, %d KiB after %d more cycles, %d KiB after %d", heap0>>10, heapN>>10, cycles, heap2N>>10, 2*cycles)
	t.Logf("state after the warm-up: %v", base)
	for name, want := range base {
		if afterN[name] != want || after2N[name] != want {
			t.Errorf("%s: %d entries after the warm-up, %d after %d more cycles, %d after %d", name, want, afterN[name], cycles, after2N[name], 2*cycles)
		}
	}
}

// TestDependencyChangesAreKeptOnlyForTheComputationsThatMayHaveMissedThem:
// a change of a native policy's dependency (a Service, Tier or group) is
// remembered only while a computation that started before it is in flight,
// which is queued again if it read it; then it is forgotten, so that
// Services and groups created and deleted leave nothing behind.
func TestDependencyChangesAreKeptOnlyForTheComputationsThatMayHaveMissedThem(t *testing.T) {
	e := newNativeEnv(t, nil, staticTiers())
	c := e.c
	sizes := func() (changed, reading int) {
		c.depsMu.Lock()
		defer c.depsMu.Unlock()
		return len(c.depChanged), len(c.depReading)
	}
	c.enqueueDep(depService("ns", "idle"))
	if changed, _ := sizes(); changed != 0 {
		t.Fatalf("a change while nothing computes is kept (%d entries)", changed)
	}
	first := c.depMark()
	c.enqueueDep(depService("ns", "a"))
	second := c.depMark()
	c.enqueueDep(depService("ns", "b"))
	if changed, reading := sizes(); changed != 2 || reading != 2 {
		t.Fatalf("two computations in flight, two changes: %d changes and %d marks kept", changed, reading)
	}
	// The first computation ends: only the second, which started after the
	// change of a, is still in flight.
	c.depDone(first)
	if changed, reading := sizes(); changed != 1 || reading != 1 {
		t.Fatalf("after the first computation: %d changes and %d marks kept, want 1 and 1", changed, reading)
	}
	// The second read b, changed after it started: it is queued again.
	c.setDepsSince("annp:ns/p", sets.New(depService("ns", "b")), second)
	if n := c.nativeQueue.Len(); n != 1 {
		t.Fatalf("a computation that read a dependency changed meanwhile was not queued again (queue length %d)", n)
	}
	c.setDeps("annp:ns/p", nil)
	c.depDone(second)
	if changed, reading := sizes(); changed != 0 || reading != 0 {
		t.Fatalf("with no computation in flight: %d changes and %d marks kept", changed, reading)
	}
}
