package ui

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	sigv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	sigclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
)

// checkSIGPolicies: an AdminNetworkPolicy of the SIG network-policy-api
// shows at its place in the order (after the application Tier, before the
// K8s NetworkPolicies), with its rule as the controller computed it (Deny
// is Drop, the peers by their members) and the Pods it applies to.
func checkSIGPolicies(t *testing.T, cl *uiCluster, c *client) {
	sig := sigclient.NewForConfigOrDie(cl.cp.Config)
	anp := &sigv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-client-to-web"},
		Spec: sigv1alpha1.AdminNetworkPolicySpec{Priority: 10,
			Subject: sigv1alpha1.AdminNetworkPolicySubject{Pods: &sigv1alpha1.NamespacedPod{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
			Ingress: []sigv1alpha1.AdminNetworkPolicyIngressRule{{Name: "deny-client", Action: sigv1alpha1.AdminNetworkPolicyRuleActionDeny,
				From: []sigv1alpha1.AdminNetworkPolicyIngressPeer{{Pods: &sigv1alpha1.NamespacedPod{
					PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}}}}}}}
	if _, err := sig.PolicyV1alpha1().AdminNetworkPolicies().Create(cl.ctx, anp, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating an AdminNetworkPolicy: %v", err)
	}
	var got *PolicyView
	var order []string
	err := wait.PollUntilContextTimeout(cl.ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var p Policies
		c.get("/api/v1/policies", &p)
		order = order[:0]
		for _, tier := range p.Tiers {
			order = append(order, tier.Name)
			for i := range tier.Policies {
				if tier.Policies[i].Kind == "AdminNetworkPolicy" && tier.Policies[i].Name == anp.Name {
					got = &tier.Policies[i]
				}
			}
		}
		return got != nil, nil
	})
	if err != nil {
		t.Fatalf("the AdminNetworkPolicy never showed: tiers %v", order)
	}
	want := []string{"application", "SIG AdminNetworkPolicies (tier priority 251)", "K8s NetworkPolicies"}
	at := -1
	for i, n := range order {
		if n == want[0] {
			at = i
		}
	}
	if at < 0 || at+2 >= len(order) || order[at+1] != want[1] || order[at+2] != want[2] {
		t.Errorf("tiers %v: want %v in a row", order, want)
	}
	if len(got.Pods) != 1 || got.Pods[0] != demoNS+"/web" || len(got.Rules) != 1 || got.Rules[0].Name != "deny-client" ||
		got.Rules[0].Action != "Drop" || got.Rules[0].Peers != demoNS+"/client" {
		t.Errorf("AdminNetworkPolicy %+v: want it on demo/web, rule deny-client Drop from demo/client", got)
	}
}
