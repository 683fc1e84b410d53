package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/flowaggregator"
)

const flowAggregatorManifest = "build/yamls/flow-aggregator.yml"

// TestFlowAggregatorManifestIsFreshAndMeetsTheAgents fails when
// build/yamls/flow-aggregator.yml is not what the chart renders, when its
// conf does not load, or when its Service is not where the agents' default
// flowExporter.flowCollectorAddr sends.
func TestFlowAggregatorManifestIsFreshAndMeetsTheAgents(t *testing.T) {
	dir := t.TempDir()
	_, errOut, err := run(t, nil, repoPath("hack/manifests.sh"), filepath.Join(dir, "antrea.yml"), filepath.Join(dir, "fa.yml"))
	if err != nil {
		t.Fatalf("hack/manifests.sh: %v\n%s", err, errOut)
	}
	want, err := os.ReadFile(filepath.Join(dir, "fa.yml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(repoPath(flowAggregatorManifest))
	if err != nil {
		t.Fatalf("%v: run `make manifests`", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run `make manifests` and commit it", flowAggregatorManifest)
	}
	objs := decode(t, got)
	def, err := agentconfig.ParseCollectorAddr(agentconfig.Defaults().FlowExporter.FlowCollectorAddr)
	if err != nil {
		t.Fatal(err)
	}
	one[*corev1.Namespace](t, objs, def.ServiceNamespace)
	svc := one[*corev1.Service](t, objs, def.ServiceName)
	if svc.Namespace != def.ServiceNamespace {
		t.Errorf("Service %s/%s, the agents send to %s/%s", svc.Namespace, svc.Name, def.ServiceNamespace, def.ServiceName)
	}
	// The agents' default (gRPC, TCP 14739) and IPFIX (TCP and UDP 4739).
	protos := map[int32]map[corev1.Protocol]bool{}
	for _, p := range svc.Spec.Ports {
		if protos[p.Port] == nil {
			protos[p.Port] = map[corev1.Protocol]bool{}
		}
		protos[p.Port][p.Protocol] = true
	}
	if def.Transport != agentconfig.TransportGRPC || !protos[int32(def.Port)][corev1.ProtocolTCP] {
		t.Errorf("Service ports %+v: want the agents' default %s (TCP %d)", svc.Spec.Ports, def.Transport, def.Port)
	}
	if !protos[agentconfig.DefaultCollectorPort][corev1.ProtocolTCP] || !protos[agentconfig.DefaultCollectorPort][corev1.ProtocolUDP] {
		t.Errorf("Service ports %+v: want IPFIX %d over TCP and UDP", svc.Spec.Ports, agentconfig.DefaultCollectorPort)
	}
	// The agents may read the CA and client certificate the aggregator
	// publishes in its Namespace.
	rb := one[*rbacv1.RoleBinding](t, objs, "flow-exporter-role-binding")
	if rb.Namespace != def.ServiceNamespace || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "antrea-agent" || rb.Subjects[0].Namespace != "kube-system" {
		t.Errorf("RoleBinding %s/%s %+v: want the agents' ServiceAccount kube-system/antrea-agent in %s", rb.Namespace, rb.Name, rb.Subjects, def.ServiceNamespace)
	}
	cm := one[*corev1.ConfigMap](t, objs, "flow-aggregator-config")
	if _, err := flowaggregator.ParseConfig(flowaggregator.ConfigFileName, []byte(cm.Data[flowaggregator.ConfigFileName])); err != nil {
		t.Errorf("the manifest's conf does not load: %v", err)
	}
	d := one[*appsv1.Deployment](t, objs, "flow-aggregator")
	if d.Namespace != def.ServiceNamespace {
		t.Errorf("Deployment in %s, want %s", d.Namespace, def.ServiceNamespace)
	}
}
