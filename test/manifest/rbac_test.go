package manifest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// serviceAccountUser is how kube-apiserver sees a Pod's ServiceAccount.
func serviceAccountUser(name string) envtest.User {
	return envtest.User{
		Name:   "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// TestControllerWorksWithTheManifestsRBAC runs the real antrea-controller as
// its ServiceAccount, with no permission but the manifest's (roles trimmed to
// least privilege must still be enough): it computes a NetworkPolicy from Pods
// and Namespaces, writes its CA into the APIService (which then becomes
// Available) and authorizes the agent, who reads its slice as its own
// ServiceAccount through kube-apiserver.
func TestControllerWorksWithTheManifestsRBAC(t *testing.T) {
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitForNamespace(t, ctx, cp, namespace)
	// The manifest's ServiceAccounts, RBAC, CRDs and webhooks; the loopback
	// APIService; the controller as its ServiceAccount.
	startControllerAs(t, ctx, cp)

	// Available only once the controller, as its ServiceAccount, wrote its CA.
	cp.WaitAPIServiceAvailable(t, ctx)

	admin := kubernetes.NewForConfigOrDie(cp.Config)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "none"}}},
	}
	created, err := admin.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.10.1.2", PodIPs: []corev1.PodIP{{IP: "10.10.1.2"}}}
	if _, err := admin.CoreV1().Pods("ns").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "deny-web"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if _, err := admin.NetworkingV1().NetworkPolicies("ns").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	agentUser, err := cp.Env.AddUser(serviceAccountUser("antrea-agent"), nil)
	if err != nil {
		t.Fatal(err)
	}
	agent := versioned.NewForConfigOrDie(agentUser.Config()).ControlplaneV1beta2()
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := agent.NetworkPolicies().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if err != nil {
			lastErr = err
			return false, nil
		}
		return len(l.Items) == 1, nil
	})
	if err != nil {
		t.Fatalf("the agent of n1 never read the policy as antrea-agent (last error: %v): "+
			"the manifest's RBAC is not enough for antrea-controller or antrea-agent", lastErr)
	}
}
