package manifest

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/controller/app"
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
// ServiceAccount through kube-apiserver. The ServiceExternalIP gate is on:
// the controller writes a LoadBalancer Service's ingress IP. So is
// SupportBundleCollection: the controller and two agents, each as its
// ServiceAccount, run a collection to its end.
func TestControllerWorksWithTheManifestsRBAC(t *testing.T) {
	cp := apiservertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitForNamespace(t, ctx, cp, namespace)
	// The manifest's ServiceAccounts, RBAC, CRDs and webhooks; the loopback
	// APIService; the controller as its ServiceAccount.
	startControllerAs(t, ctx, cp, func(o *app.Options) { o.EnableServiceExternalIP, o.EnableSupportBundleCollection = true, true })

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
	egressAsServiceAccounts(t, ctx, cp, versioned.NewForConfigOrDie(agentUser.Config()))
	serviceExternalIPAsServiceAccount(t, ctx, cp)
	supportBundleCollectionAsServiceAccounts(t, ctx, cp, agentUser)
}

// serviceExternalIPAsServiceAccount: with the manifest's RBAC,
// antrea-controller writes the ingress IP of an annotated LoadBalancer
// Service (services/status) and the pool's usage, records its Event, and the
// pool webhook then refuses to delete the pool, naming the Service.
func serviceExternalIPAsServiceAccount(t *testing.T, ctx context.Context, cp *apiservertest.ControlPlane) {
	t.Helper()
	crd := versioned.NewForConfigOrDie(cp.Config).CrdV1beta1()
	kube := kubernetes.NewForConfigOrDie(cp.Config)
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "lb-pool"},
		Spec: crdv1beta1.ExternalIPPoolSpec{IPRanges: []crdv1beta1.IPRange{{CIDR: "10.30.0.0/30"}}}}
	if _, err := crd.ExternalIPPools().Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-lb",
		Annotations: map[string]string{crdv1beta1.ServiceExternalIPPoolAnnotationKey: "lb-pool"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}}}}
	if _, err := kube.CoreV1().Services("ns").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ingress []corev1.LoadBalancerIngress
	var used int
	var events int
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Services("ns").Get(ctx, "web-lb", metav1.GetOptions{})
		p, perr := crd.ExternalIPPools().Get(ctx, "lb-pool", metav1.GetOptions{})
		ev, eerr := kube.CoreV1().Events("ns").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web-lb"})
		if err != nil || perr != nil || eerr != nil {
			return false, nil
		}
		ingress, used, events = s.Status.LoadBalancer.Ingress, p.Status.Usage.Used, len(ev.Items)
		return len(ingress) == 1 && ingress[0].IP == "10.30.0.1" && used == 1 && events > 0, nil
	})
	if err != nil {
		t.Fatalf("antrea-controller never wrote the Service's ingress IP as its ServiceAccount: ingress %+v, pool used %d, %d Events",
			ingress, used, events)
	}
	err = crd.ExternalIPPools().Delete(ctx, "lb-pool", metav1.DeleteOptions{})
	if err == nil || !strings.Contains(err.Error(), "Service ns/web-lb (status.loadBalancer.ingress) holds its IP 10.30.0.1") {
		t.Errorf("deleting the pool of a Service's IP: %v", err)
	}
}

// egressAsServiceAccounts: with the manifest's RBAC, antrea-controller
// allocates an Egress's IP (spec.egressIP, the IPAllocated condition, the
// pool's status.usage) and antrea-agent lists the EgressGroup of its Node,
// reads the Egress and writes its status.
func egressAsServiceAccounts(t *testing.T, ctx context.Context, cp *apiservertest.ControlPlane, agent versioned.Interface) {
	t.Helper()
	admin := versioned.NewForConfigOrDie(cp.Config).CrdV1beta1()
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: "pool"},
		Spec: crdv1beta1.ExternalIPPoolSpec{IPRanges: []crdv1beta1.IPRange{{Start: "10.20.0.5", End: "10.20.0.6"}}}}
	if _, err := admin.ExternalIPPools().Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eg := &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "egress-web"}, Spec: crdv1beta1.EgressSpec{
		AppliedTo: crdv1beta1.EgressAppliedTo{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}, ExternalIPPool: "pool"}}
	if _, err := admin.Egresses().Create(ctx, eg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *crdv1beta1.Egress
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		e, err := admin.Egresses().Get(ctx, "egress-web", metav1.GetOptions{})
		p, perr := admin.ExternalIPPools().Get(ctx, "pool", metav1.GetOptions{})
		if err != nil || perr != nil {
			return false, nil
		}
		got = e
		return e.Spec.EgressIP == "10.20.0.5" && len(e.Status.Conditions) == 1 && p.Status.Usage.Used == 1, nil
	})
	if err != nil {
		t.Fatalf("antrea-controller never allocated the Egress IP as its ServiceAccount: %+v", got)
	}
	var groups int
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := agent.ControlplaneV1beta2().EgressGroups().List(ctx, metav1.ListOptions{FieldSelector: "nodeName=n1"})
		if err == nil {
			groups = len(l.Items)
		}
		return groups == 1, nil
	})
	if err != nil {
		t.Fatalf("antrea-agent of n1 lists %d EgressGroups, want 1", groups)
	}
	e, err := agent.CrdV1beta1().Egresses().Get(ctx, "egress-web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("antrea-agent cannot read the Egress: %v", err)
	}
	e.Status.EgressNode, e.Status.EgressIP = "n1", e.Spec.EgressIP
	if _, err := agent.CrdV1beta1().Egresses().UpdateStatus(ctx, e, metav1.UpdateOptions{}); err != nil {
		t.Errorf("antrea-agent cannot write the Egress's status: %v", err)
	}
}
