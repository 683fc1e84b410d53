package app_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/controller/app"
)

func createPod(t *testing.T, ctx context.Context, c kubernetes.Interface, name, node, ip string, labels map[string]string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}}},
	}
	created, err := c.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if _, err := c.CoreV1().Pods("ns").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting the IP of pod %s: %v", name, err)
	}
}

// TestRunServesComputedPoliciesPerNode runs the whole antrea-controller
// (informers, computation, API server, CA sync) against a real kube-apiserver
// and reads the result through the aggregated API, as an agent would.
func TestRunServesComputedPoliciesPerNode(t *testing.T) {
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	cp.ApplyAntrea(t, ctx, port)
	opts := app.NewOptions()
	opts.Kubeconfig = cp.Kubeconfig
	opts.Workers = 2
	opts.APIServer.SecureServing.Listener = ln
	opts.APIServer.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	opts.APIServer.SecureServing.BindPort = port
	opts.APIServer.SecureServing.ServerCert.CertDirectory = filepath.Join(cp.Dir, "serving")
	if err := opts.Validate(); err != nil {
		cancel()
		t.Fatal(err)
	}
	// No CA here: antrea-controller writes it into the APIService itself.
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("antrea-controller did not stop")
		}
	})
	cp.WaitAPIServiceAvailable(t, ctx)

	kube := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, ctx, kube, "web", "n1", "10.10.1.2", map[string]string{"app": "web"})
	createPod(t, ctx, kube, "db", "n2", "10.10.2.2", map[string]string{"app": "db"})
	port80 := intstr.FromInt32(80)
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-from-db"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port80}},
			}},
		},
	}
	if _, err := kube.NetworkingV1().NetworkPolicies("ns").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cpClient := versioned.NewForConfigOrDie(cp.Config).ControlplaneV1beta2()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cpClient.NetworkPolicies().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if err != nil {
			return false, err
		}
		return len(l.Items) == 1, nil
	})
	if err != nil {
		t.Fatalf("the policy never reached n1's slice: %v", err)
	}

	tests := []struct {
		name     string
		list     func() (int, error)
		wantSize int
	}{
		{"n1, which runs the selected pod, gets the policy", func() (int, error) {
			l, err := cpClient.NetworkPolicies().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
			if err == nil && (l.Items[0].SourceRef == nil || l.Items[0].SourceRef.Name != "web-from-db") {
				t.Errorf("policy source = %+v, want ns/web-from-db", l.Items[0].SourceRef)
			}
			return len(l.Items), err
		}, 1},
		{"n2, which runs only the peer, gets no policy", func() (int, error) {
			l, err := cpClient.NetworkPolicies().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n2"})
			return len(l.Items), err
		}, 0},
		{"n1's applied-to group holds the web pod", func() (int, error) {
			l, err := cpClient.AppliedToGroups().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
			if err == nil && len(l.Items) == 1 && (len(l.Items[0].GroupMembers) != 1 || l.Items[0].GroupMembers[0].Pod.Name != "web") {
				t.Errorf("applied-to members = %+v, want web", l.Items[0].GroupMembers)
			}
			return len(l.Items), err
		}, 1},
		{"n1's address group holds the db pod from n2", func() (int, error) {
			l, err := cpClient.AddressGroups().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
			if err == nil && len(l.Items) == 1 && (len(l.Items[0].GroupMembers) != 1 || l.Items[0].GroupMembers[0].Pod.Name != "db") {
				t.Errorf("address group members = %+v, want db", l.Items[0].GroupMembers)
			}
			return len(l.Items), err
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := tt.list()
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantSize {
				t.Fatalf("listed %d, want %d", n, tt.wantSize)
			}
		})
	}
	t.Run("a ClusterNetworkPolicy is computed, served and its status follows the agent's report", func(t *testing.T) {
		antreaNativeThroughKubeAPIServer(t, ctx, cp.Config)
	})
	t.Run("an Egress gets an IP from its pool and its Pods are served per Node as an EgressGroup", func(t *testing.T) {
		egressThroughKubeAPIServer(t, ctx, cp.Config)
	})
}

// egressThroughKubeAPIServer creates an ExternalIPPool and Egresses through
// kube-apiserver (admission webhooks included): the webhooks refuse an
// egressIP outside its pool, an overlapping pool and the deletion of a pool
// in use, naming the field; the Egress gets the pool's first IP, and the
// EgressGroup of the web Pod (on n1) reaches n1 alone, as an agent lists
// and watches it.
func egressThroughKubeAPIServer(t *testing.T, ctx context.Context, cfg *rest.Config) {
	crd := versioned.NewForConfigOrDie(cfg).CrdV1beta1()
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "pool"},
		Spec: crdv1beta1.ExternalIPPoolSpec{IPRanges: []crdv1beta1.IPRange{{CIDR: "10.20.0.0/30"}}}}
	// The webhooks answer once antrea-controller's caches hold the pools.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := crd.ExternalIPPools().Create(ctx, pool, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the ExternalIPPool was never created: %v", err)
	}
	overlapping := pool.DeepCopy()
	overlapping.Name, overlapping.Spec.IPRanges = "other", []crdv1beta1.IPRange{{Start: "10.20.0.2", End: "10.20.0.9"}}
	if _, err := crd.ExternalIPPools().Create(ctx, overlapping, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "spec.ipRanges[0]") || !strings.Contains(err.Error(), "ExternalIPPool pool") {
		t.Errorf("an overlapping pool: %v, want a refusal naming spec.ipRanges[0] and pool", err)
	}
	web := crdv1beta1.EgressAppliedTo{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	outside := &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "outside"},
		Spec: crdv1beta1.EgressSpec{AppliedTo: web, EgressIP: "10.20.0.9", ExternalIPPool: "pool"}}
	if _, err := crd.Egresses().Create(ctx, outside, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.egressIP") {
		t.Errorf("an egressIP outside its pool: %v, want a refusal naming spec.egressIP", err)
	}
	eg := &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "egress-web"}, Spec: crdv1beta1.EgressSpec{AppliedTo: web, ExternalIPPool: "pool"}}
	if _, err := crd.Egresses().Create(ctx, eg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := crd.Egresses().Get(ctx, "egress-web", metav1.GetOptions{})
		if err == nil {
			ip = got.Spec.EgressIP
		}
		return ip != "", nil
	})
	if err != nil || ip != "10.20.0.1" {
		t.Fatalf("the Egress got %q (%v), want 10.20.0.1", ip, err)
	}
	if err := crd.ExternalIPPools().Delete(ctx, "pool", metav1.DeleteOptions{}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("deleting the pool in use: %v, want a refusal", err)
	}

	cp := versioned.NewForConfigOrDie(cfg).ControlplaneV1beta2().EgressGroups()
	w, err := cp.Watch(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		g, ok := ev.Object.(*cpv1beta2.EgressGroup)
		if !ok || g.Name != "egress-web" || len(g.GroupMembers) != 1 || g.GroupMembers[0].Pod.Name != "web" {
			t.Errorf("n1's watch got %s %#v, want egress-web with the web Pod", ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("n1's watch got no EgressGroup")
	}
	if l, err := cp.List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n2"}); err != nil || len(l.Items) != 0 {
		t.Errorf("n2 lists %+v (%v), want no EgressGroup: no member of egress-web runs there", l, err)
	}
	if l, err := cp.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 || len(l.Items[0].GroupMembers) != 1 {
		t.Errorf("a list without a Node: %+v (%v), want egress-web with its member", l, err)
	}
}

// antreaNativeThroughKubeAPIServer creates a ClusterNetworkPolicy through
// kube-apiserver (admission webhooks included), waits for its internal
// policy in n1's slice, reports n1's realization as the agent does and
// waits for the ClusterNetworkPolicy's status to say so.
func antreaNativeThroughKubeAPIServer(t *testing.T, ctx context.Context, cfg *rest.Config) {
	crd := versioned.NewForConfigOrDie(cfg)
	// The static Tiers are kept by antrea-controller; wait for them.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := crd.CrdV1beta1().Tiers().Get(ctx, "securityops", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the static Tiers never appeared: %v", err)
	}
	drop := crdv1beta1.RuleActionDrop
	acnp := &crdv1beta1.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "isolate-web"},
		Spec: crdv1beta1.ClusterNetworkPolicySpec{
			Tier: "securityops", Priority: 5,
			AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			Ingress: []crdv1beta1.Rule{{Action: &drop,
				From: []crdv1beta1.NetworkPolicyPeer{{Namespaces: &crdv1beta1.PeerNamespaces{Match: crdv1beta1.NamespaceMatchSelf}}}}},
		},
	}
	if _, err := crd.CrdV1beta1().ClusterNetworkPolicies().Create(ctx, acnp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cpClient := crd.ControlplaneV1beta2()
	var internal cpv1beta2.NetworkPolicy
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cpClient.NetworkPolicies().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if err != nil {
			return false, err
		}
		for _, p := range l.Items {
			if p.SourceRef != nil && p.SourceRef.Type == cpv1beta2.AntreaClusterNetworkPolicy {
				internal = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the ClusterNetworkPolicy never reached n1's slice: %v", err)
	}
	if internal.TierPriority == nil || *internal.TierPriority != 100 || internal.Priority == nil || *internal.Priority != 5 || !internal.AppliedToPerRule {
		t.Fatalf("internal policy = %+v, want tier priority 100, priority 5, rules with their own AppliedToGroups", internal)
	}
	// One rule per Namespace (default, kube-system, ns, ...), each named by admission.
	nss, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(internal.Rules) != len(nss.Items) {
		t.Errorf("%d rules for %d Namespaces", len(internal.Rules), len(nss.Items))
	}
	for _, r := range internal.Rules {
		if r.Name == "" || r.Action == nil || *r.Action != cpv1beta2.RuleActionDrop || r.Priority != 0 || len(r.AppliedToGroups) != 1 {
			t.Errorf("rule %+v, want a named Drop rule of priority 0 with one AppliedToGroup", r)
		}
	}
	_, err = cpClient.NetworkPolicies().UpdateStatus(ctx, internal.Name, &cpv1beta2.NetworkPolicyStatus{
		ObjectMeta: metav1.ObjectMeta{Name: internal.Name},
		Nodes:      []cpv1beta2.NetworkPolicyNodeStatus{{NodeName: "n1", Generation: internal.Generation}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := crd.CrdV1beta1().ClusterNetworkPolicies().Get(ctx, "isolate-web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := p.Status
		return st.Phase == crdv1beta1.NetworkPolicyRealized && st.CurrentNodesRealized == 1 && st.DesiredNodesRealized == 1 &&
			st.ObservedGeneration == p.Generation, nil
	})
	if err != nil {
		p, _ := crd.CrdV1beta1().ClusterNetworkPolicies().Get(ctx, "isolate-web", metav1.GetOptions{})
		t.Fatalf("status never became Realized 1/1: %v (status %+v)", err, p.Status)
	}
}
