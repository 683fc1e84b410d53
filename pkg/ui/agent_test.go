package ui

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// The test's agent of node-1 speaking the controller's API as a real agent
// does (its ServiceAccount's rights from the manifest): the realization
// reports (networkpolicies/status) and the traffic counts of its rules
// (nodestatssummaries), which the controller aggregates into the stats API.

// agentClient is node-1's agent's client.
func (c *uiCluster) agentClient(t *testing.T) *versioned.Clientset {
	t.Helper()
	u, err := c.cp.Env.AddUser(envtest.User{Name: "system:serviceaccount:kube-system:antrea-agent",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return versioned.NewForConfigOrDie(u.Config())
}

// computedACNP waits for the internal policy of the demo ACNP.
func (c *uiCluster) computedACNP(t *testing.T) cpv1beta2.NetworkPolicy {
	t.Helper()
	var found cpv1beta2.NetworkPolicy
	err := wait.PollUntilContextTimeout(c.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := c.crd.ControlplaneV1beta2().NetworkPolicies().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, np := range l.Items {
			if np.SourceRef != nil && np.SourceRef.Name == denyACNP {
				found = np
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the controller never computed ACNP %s: %v", denyACNP, err)
	}
	return found
}

// reportRealized posts node's realization of np's current generation.
func reportRealized(t *testing.T, ctx context.Context, agent *versioned.Clientset, np cpv1beta2.NetworkPolicy, node string) {
	t.Helper()
	st := &cpv1beta2.NetworkPolicyStatus{ObjectMeta: metav1.ObjectMeta{Name: np.Name},
		Nodes: []cpv1beta2.NetworkPolicyNodeStatus{{NodeName: node, Generation: np.Generation}}}
	if _, err := agent.ControlplaneV1beta2().NetworkPolicies().UpdateStatus(ctx, np.Name, st, metav1.CreateOptions{}); err != nil {
		t.Fatalf("posting the realization of %s as the agent of %s: %v", np.Name, node, err)
	}
}

// reportDrops posts node's counts of the ACNP's rule since the last report.
func reportDrops(t *testing.T, ctx context.Context, agent *versioned.Clientset, np cpv1beta2.NetworkPolicy, node string, packets int64) {
	t.Helper()
	ts := statsv1alpha1.TrafficStats{Packets: packets, Bytes: 74 * packets, Sessions: packets}
	s := &cpv1beta2.NodeStatsSummary{ObjectMeta: metav1.ObjectMeta{Name: node},
		AntreaClusterNetworkPolicies: []cpv1beta2.NetworkPolicyStats{{NetworkPolicy: *np.SourceRef, TrafficStats: ts,
			RuleTrafficStats: []statsv1alpha1.RuleTrafficStats{{Name: denyRule, TrafficStats: ts}}}}}
	if _, err := agent.ControlplaneV1beta2().NodeStatsSummaries().Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("posting the stats of %s as its agent: %v", node, err)
	}
}
