package apiserver_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// TestMulticastGroupsThroughKubeAPIServer: two agents post their Nodes'
// multicast groups through kube-apiserver as the antrea-agent
// ServiceAccount; multicastgroups serves each group with the Pods of both
// Nodes (kubectl get shows them), a Node's next report replaces its
// previous one, a user bound only to the chart's antctl ClusterRole reads
// them, and a deleted Node's members drop out.
func TestMulticastGroupsThroughKubeAPIServer(t *testing.T) {
	h := startControlPlane(t)
	ctx := h.ctx
	kube := kubernetes.NewForConfigOrDie(h.cp.Config)
	admin := versioned.NewForConfigOrDie(h.cp.Config)

	// The controller's wiring: a deleted Node's groups go.
	factory := kubeinformers.NewSharedInformerFactory(kube, 0)
	if err := h.stores.Stats.WatchNodes(factory.Core().V1().Nodes().Informer()); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	for _, n := range []string{"mc-n1", "mc-n2"} {
		if _, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}

	agentUser, err := h.cp.Env.AddUser(envtest.User{Name: "system:serviceaccount:kube-system:antrea-agent", Groups: []string{"system:serviceaccounts"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	agent := versioned.NewForConfigOrDie(agentUser.Config())
	post := func(node string, groups map[string][]string) {
		t.Helper()
		s := &v1beta2.NodeStatsSummary{ObjectMeta: metav1.ObjectMeta{Name: node}}
		for g, pods := range groups {
			info := v1beta2.MulticastGroupInfo{Group: g}
			for _, p := range pods {
				ns, name, _ := strings.Cut(p, "/")
				info.Pods = append(info.Pods, v1beta2.PodReference{Namespace: ns, Name: name})
			}
			s.Multicast = append(s.Multicast, info)
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := agent.ControlplaneV1beta2().NodeStatsSummaries().Create(ctx, s, metav1.CreateOptions{})
			if apierrors.IsServiceUnavailable(err) {
				return false, nil // kube-apiserver does not route the group yet: the summary never got there
			}
			return true, err
		})
		if err != nil {
			t.Fatalf("posting the summary of %s as antrea-agent: %v", node, err)
		}
	}
	list := func(c versioned.Interface) (map[string][]string, error) {
		l, err := c.StatsV1alpha1().MulticastGroups().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string][]string{}
		for _, g := range l.Items {
			for _, p := range g.Pods {
				out[g.Name] = append(out[g.Name], p.Namespace+"/"+p.Name)
			}
		}
		return out, nil
	}
	expect := func(what string, want map[string][]string) {
		t.Helper()
		var got map[string][]string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			got, err = list(admin)
			return err == nil && reflect.DeepEqual(got, want), nil
		})
		if err != nil {
			t.Errorf("%s: multicastgroups = %v, want %v", what, got, want)
		}
	}

	post("mc-n1", map[string][]string{"225.1.2.3": {"demo/local"}, "239.1.1.1": {"demo/local"}})
	post("mc-n2", map[string][]string{"225.1.2.3": {"demo/remote"}})
	expect("both Nodes reported", map[string][]string{"225.1.2.3": {"demo/local", "demo/remote"}, "239.1.1.1": {"demo/local"}})
	g, err := admin.StatsV1alpha1().MulticastGroups().Get(ctx, "225.1.2.3", metav1.GetOptions{})
	if err != nil || g.Group != "225.1.2.3" || len(g.Pods) != 2 {
		t.Errorf("get multicastgroup 225.1.2.3 = %+v, %v; want the group with 2 Pods", g, err)
	}
	if _, err := admin.StatsV1alpha1().MulticastGroups().Get(ctx, "225.9.9.9", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get multicastgroup 225.9.9.9: %v, want NotFound", err)
	}
	if kubectl := filepath.Join(h.cp.Assets, "kubectl"); fileExists(kubectl) {
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", h.cp.Kubeconfig, "get", "multicastgroups").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PODS") || !strings.Contains(string(out), "demo/local, demo/remote") {
			t.Errorf("kubectl get multicastgroups printed:\n%s(%v), want 225.1.2.3 with demo/local, demo/remote", out, err)
		}
		t.Logf("kubectl get multicastgroups:\n%s", out)
		out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig", h.cp.Kubeconfig, "get", "multicastgroup", "225.1.2.3", "-o", "yaml").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "group: 225.1.2.3") {
			t.Errorf("kubectl get multicastgroup 225.1.2.3 -o yaml printed:\n%s(%v), want group: 225.1.2.3", out, err)
		}
		t.Logf("kubectl get multicastgroup 225.1.2.3 -o yaml:\n%s", out)
	}

	post("mc-n1", map[string][]string{"239.1.1.1": {"demo/local"}}) // demo/local left 225.1.2.3
	expect("n1's next report replaced its previous one", map[string][]string{"225.1.2.3": {"demo/remote"}, "239.1.1.1": {"demo/local"}})

	// A user bound only to the chart's antctl ClusterRole reads them.
	alice, err := h.cp.Env.AddUser(envtest.User{Name: "mc-alice"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mc-alice-antctl"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "antctl"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "mc-alice", APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), "mc-alice-antctl", metav1.DeleteOptions{})
	})
	aliceClient := versioned.NewForConfigOrDie(alice.Config())
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := list(aliceClient)
		return err == nil, nil
	})
	if err != nil {
		t.Errorf("mc-alice (antctl ClusterRole) cannot list multicastgroups: %v", err)
	}

	if err := kube.CoreV1().Nodes().Delete(ctx, "mc-n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("mc-n2 was deleted", map[string][]string{"239.1.1.1": {"demo/local"}})
}
