package apiserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/controller/stats"
)

// TestNetworkPolicyStatsThroughKubeAPIServer: agents post their Nodes'
// counts through kube-apiserver as the antrea-agent ServiceAccount, the
// sums over both Nodes are served per policy and rule as stats.antrea.io
// (kubectl get shows them), a user bound only to the chart's antctl
// ClusterRole reads them but cannot post, and a deleted policy's stats go.
func TestNetworkPolicyStatsThroughKubeAPIServer(t *testing.T) {
	h := startControlPlane(t)
	ctx := h.ctx
	kube := kubernetes.NewForConfigOrDie(h.cp.Config)
	admin := versioned.NewForConfigOrDie(h.cp.Config)

	// The controller's wiring: the aggregator knows the K8s
	// NetworkPolicies from a real informer.
	factory := kubeinformers.NewSharedInformerFactory(kube, 0)
	if err := h.stores.Stats.WatchPolicies(stats.KindK8s, factory.Networking().V1().NetworkPolicies().Informer()); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	np, err := kube.NetworkingV1().NetworkPolicies("ns").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "np"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An ACNP as its informer would hand it over (its admission webhook
	// is not served here).
	h.stores.Stats.AddPolicy(stats.KindACNP, &metav1.ObjectMeta{Name: "acnp", UID: "acnp-uid", CreationTimestamp: metav1.Now()})

	// Wait until the stats group answers and the informer delivered np.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := admin.StatsV1alpha1().NetworkPolicyStatses("ns").Get(ctx, "np", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("networkpolicystats ns/np never served: %v", err)
	}

	agentUser, err := h.cp.Env.AddUser(envtest.User{Name: "system:serviceaccount:kube-system:antrea-agent", Groups: []string{"system:serviceaccounts"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	agent := versioned.NewForConfigOrDie(agentUser.Config())
	npRef := v1beta2.NetworkPolicyReference{Type: v1beta2.K8sNetworkPolicy, Namespace: "ns", Name: "np", UID: np.UID}
	acnpRef := v1beta2.NetworkPolicyReference{Type: v1beta2.AntreaClusterNetworkPolicy, Name: "acnp", UID: "acnp-uid"}
	post := func(node string, npPackets, allow, drop int64) {
		t.Helper()
		s := &v1beta2.NodeStatsSummary{ObjectMeta: metav1.ObjectMeta{Name: node},
			NetworkPolicies: []v1beta2.NetworkPolicyStats{{NetworkPolicy: npRef,
				TrafficStats: statsv1alpha1.TrafficStats{Packets: npPackets, Bytes: 60 * npPackets, Sessions: npPackets}}},
			AntreaClusterNetworkPolicies: []v1beta2.NetworkPolicyStats{{NetworkPolicy: acnpRef,
				TrafficStats: statsv1alpha1.TrafficStats{Packets: allow + drop, Bytes: 60 * (allow + drop), Sessions: allow + drop},
				RuleTrafficStats: []statsv1alpha1.RuleTrafficStats{
					{Name: "allow-web", TrafficStats: statsv1alpha1.TrafficStats{Packets: allow, Bytes: 60 * allow, Sessions: allow}},
					{Name: "drop-rest", TrafficStats: statsv1alpha1.TrafficStats{Packets: drop, Bytes: 60 * drop, Sessions: drop}},
				}}},
		}
		// kube-apiserver answers 503 while it does not yet route the
		// group to the server (a loaded machine): the summary never got
		// there, so it is posted again; any other error fails.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := agent.ControlplaneV1beta2().NodeStatsSummaries().Create(ctx, s, metav1.CreateOptions{})
			if apierrors.IsServiceUnavailable(err) {
				return false, nil
			}
			return true, err
		})
		if err != nil {
			t.Fatalf("posting the summary of %s as antrea-agent: %v", node, err)
		}
	}
	post("n1", 3, 2, 0)
	post("n2", 4, 1, 5)
	post("n1", 1, 1, 0)

	got, err := admin.StatsV1alpha1().NetworkPolicyStatses("ns").Get(ctx, "np", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (statsv1alpha1.TrafficStats{Packets: 8, Bytes: 480, Sessions: 8}); got.TrafficStats != want {
		t.Errorf("ns/np: got %+v, want %+v (3+4+1 over two Nodes)", got.TrafficStats, want)
	}
	acnp, err := admin.StatsV1alpha1().AntreaClusterNetworkPolicyStatses().Get(ctx, "acnp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantRules := map[string]int64{"allow-web": 4, "drop-rest": 5}
	for _, r := range acnp.RuleTrafficStats {
		if r.TrafficStats.Sessions != wantRules[r.Name] {
			t.Errorf("acnp rule %s: %d sessions, want %d", r.Name, r.TrafficStats.Sessions, wantRules[r.Name])
		}
		delete(wantRules, r.Name)
	}
	if len(wantRules) != 0 || acnp.TrafficStats.Sessions != 9 {
		t.Errorf("acnp: got %+v, want rules allow-web and drop-rest and 9 sessions", acnp)
	}

	if kubectl := filepath.Join(h.cp.Assets, "kubectl"); fileExists(kubectl) {
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", h.cp.Kubeconfig, "get", "networkpolicystats", "-A").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SESSIONS") || !strings.Contains(string(out), "np ") {
			t.Errorf("kubectl get networkpolicystats -A printed:\n%s(%v), want np with the SESSIONS column", out, err)
		}
		t.Logf("kubectl get networkpolicystats -A:\n%s", out)
	}

	// A user bound only to the chart's antctl ClusterRole reads stats and
	// may not post them.
	alice, err := h.cp.Env.AddUser(envtest.User{Name: "alice"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice-antctl"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "antctl"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "alice", APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	aliceClient := versioned.NewForConfigOrDie(alice.Config())
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := aliceClient.StatsV1alpha1().AntreaClusterNetworkPolicyStatses().List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Errorf("alice (antctl ClusterRole) cannot list antreaclusternetworkpolicystats: %v", err)
	}
	if _, err := aliceClient.StatsV1alpha1().NetworkPolicyStatses("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("alice cannot list networkpolicystats in every namespace: %v", err)
	}
	_, err = aliceClient.ControlplaneV1beta2().NodeStatsSummaries().Create(ctx, &v1beta2.NodeStatsSummary{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("alice posting a NodeStatsSummary: %v, want Forbidden", err)
	}

	// Deleting the policy deletes its stats.
	if err := kube.NetworkingV1().NetworkPolicies("ns").Delete(ctx, "np", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.StatsV1alpha1().NetworkPolicyStatses("ns").Get(ctx, "np", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("the stats of deleted ns/np are still served: %v", err)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
