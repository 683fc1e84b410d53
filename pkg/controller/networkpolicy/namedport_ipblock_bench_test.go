package networkpolicy

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apiserver/storage"
)

// BenchmarkIncrementalPodAddAmong100kPodsUnderNamedPortRules measures the
// whole computation of one Pod add and its delete (one op is both: index,
// AddressGroup syncs, store writes) among 100,000 Pods serving a named port,
// in 1,000 namespaces, with one policy whose egress rule uses that name
// towards the peer of the sub-benchmark. The new Pod falls inside the peer.
// An AddressGroup sync rebuilds the group's member set, so the cost follows
// the population of the group the Pod joins, not that of the cluster: the
// ipBlock group of a /24 holds 160 Pods, those of 10.0.0.0/8 and of the
// all-namespaces selector (the reference) all 100,000.
func BenchmarkIncrementalPodAddAmong100kPodsUnderNamedPortRules(b *testing.B) {
	peers := []struct {
		name string
		peer networkingv1.NetworkPolicyPeer
	}{
		{"ipBlock of a /24 holding 160 pods", networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.1.134.0/24"}}},
		{"ipBlock 10.0.0.0/8 holding every pod", networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.2.0.0/16"}}}},
		{"selector of every pod, for reference", networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}},
	}
	for _, pc := range peers {
		b.Run(pc.name, func(b *testing.B) {
			klog.SetLogger(klog.Background().V(10))
			w := &workload{}
			http := v1.Container{Name: "c", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
			for n := 0; n < 1000; n++ {
				w.namespace(fmt.Sprintf("ns-%d", n))
			}
			for n := 0; n < 100000; n++ {
				w.pod(fmt.Sprintf("ns-%d", n%1000), fmt.Sprintf("pod-%d", n), map[string]string{"app": "web"})
				w.podList.Items[n].Spec.Containers = []v1.Container{http}
			}
			named := intstr.FromString("http")
			w.npList.Items = append(w.npList.Items, networkingv1.NetworkPolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns-0", Name: "egress-http", UID: k8stypes.UID("np-egress-http")},
				Spec: networkingv1.NetworkPolicySpec{
					PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
					Egress: []networkingv1.NetworkPolicyEgressRule{{
						Ports: []networkingv1.NetworkPolicyPort{{Port: &named}},
						To:    []networkingv1.NetworkPolicyPeer{pc.peer},
					}},
				},
			})
			client := w.client()
			factory := informers.NewSharedInformerFactory(client, 0)
			ags := storage.NewAddressGroupStore()
			c := newTestController(b, client, factory, ags, storage.NewAppliedToGroupStore(), storage.NewNetworkPolicyStore())
			ctx, cancel := context.WithCancel(context.Background())
			defer func() {
				cancel()
				factory.Shutdown()
			}()
			factory.Start(ctx.Done())
			if !c.waitForCacheSync(ctx) {
				b.Fatal("caches did not sync")
			}
			if err := c.drain(ctx); err != nil {
				b.Fatal(err)
			}
			if n := len(ags.List()); n != 1 {
				b.Fatalf("%d AddressGroups, want the peer's", n)
			}
			pod := newPod("ns-1", "new", map[string]string{"app": "other"}, "10.1.134.200", "node-1", http.Ports...)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				c.addPod(pod)
				if err := c.drain(ctx); err != nil {
					b.Fatal(err)
				}
				c.deletePod(pod)
				if err := c.drain(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
