package query_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/antctl/query"
)

func TestClusterFeatureGatesReadTheConfigMap(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: query.AntreaNamespace, Name: query.AntreaConfigMap},
		Data: map[string]string{"antrea-agent.conf": "featureGates:\n  AntreaProxy: false\n  TopologyAwareHints: true\n"}}
	gates, err := query.ClusterFeatureGates(context.Background(), &query.Clients{Kube: kubefake.NewClientset(cm)})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]query.FeatureGate{}
	for _, g := range gates {
		found[g.Name] = g
	}
	if g := found["AntreaProxy"]; g.Component != "antrea-agent" || g.Enabled || !g.Implemented ||
		g.Source != "configmap kube-system/antrea-config antrea-agent.conf" {
		t.Errorf("AntreaProxy: %+v, want the agent's, off, implemented, from the ConfigMap", g)
	}
	if g := found["TopologyAwareHints"]; !g.Enabled || g.Implemented || !strings.Contains(g.Note, "not implemented") {
		t.Errorf("TopologyAwareHints: %+v, want on but not implemented here", g)
	}
	if _, err := query.ClusterFeatureGates(context.Background(), &query.Clients{Kube: kubefake.NewClientset()}); err == nil ||
		!strings.HasPrefix(err.Error(), "configmap kube-system/antrea-config: ") {
		t.Errorf("no ConfigMap: %v", err)
	}
}
