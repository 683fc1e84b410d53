package networkpolicy

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// A ClusterNetworkPolicy applied to Nodes by a nodeSelector (upstream's
// NodeNetworkPolicy) reaches exactly the selected Nodes' agents: its
// AppliedToGroup holds each selected Node as its own Node's member, the
// internal policy and its peers' AddressGroup span those Nodes, and a Node
// that gains the label joins the span.
func TestAPolicyAppliedToNodesReachesTheSelectedNodesAgents(t *testing.T) {
	kube, crd := nativeCluster()
	e := newNativeEnv(t, kube, crd)
	e.mustCreate(t, newACNP("restrict-ssh-to-workers", "application", 5, crdv1beta1.ClusterNetworkPolicySpec{
		AppliedTo: []crdv1beta1.AppliedTo{{NodeSelector: matchLabels("role", "worker")}},
		Ingress: []crdv1beta1.Rule{{Name: "allow-app-a", Action: action(crdv1beta1.RuleActionAllow),
			From: []crdv1beta1.NetworkPolicyPeer{{PodSelector: matchLabels("app", "a")}}}},
	}))
	span := func(want ...string) func() error {
		return func() error {
			p, ok := e.internal(controlplane.AntreaClusterNetworkPolicy, "", "restrict-ssh-to-workers")
			if !ok {
				return fmt.Errorf("internal policy not stored")
			}
			if !p.SpanMeta.NodeNames.Equal(sets.New(want...)) {
				return fmt.Errorf("policy span %v, want %v", sets.List(p.SpanMeta.NodeNames), want)
			}
			atg, ok := e.appliedToGroup("nodeSelector=role=worker")
			if !ok {
				return fmt.Errorf("the Nodes' AppliedToGroup is not stored")
			}
			got := map[string][]string{}
			for node, set := range memberSets(atg) {
				got[node] = members(set)
			}
			ips := map[string]string{"n1": "172.18.0.1", "n2": "172.18.0.2", "n3": "172.18.0.3"}
			for _, n := range want {
				if !slices.Equal(got[n], []string{"node " + n + "@" + ips[n]}) {
					return fmt.Errorf("AppliedToGroup members by Node %v: want Node %s its own member", got, n)
				}
			}
			if len(got) != len(want) {
				return fmt.Errorf("AppliedToGroup members by Node %v, want Nodes %v", got, want)
			}
			ag, ok := e.addressGroup(selKey(t, "", matchLabels("app", "a"), allNamespaces))
			if !ok {
				return fmt.Errorf("the peers' AddressGroup is not stored")
			}
			if !ag.SpanMeta.NodeNames.Equal(sets.New(want...)) {
				return fmt.Errorf("AddressGroup span %v, want %v", sets.List(ag.SpanMeta.NodeNames), want)
			}
			return nil
		}
	}
	e.eventually(t, span("n1", "n2"))
	e.mustUpdate(t, newNode("n3", lbls("role", "worker"), "172.18.0.3"))
	e.eventually(t, span("n1", "n2", "n3"))
}
