package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

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
	protos := map[corev1.Protocol]bool{}
	for _, p := range svc.Spec.Ports {
		if p.Port == int32(def.Port) {
			protos[p.Protocol] = true
		}
	}
	// The agents' default transport (grpc, as upstream's) runs over TCP;
	// only udp needs the port over UDP.
	wantProto := corev1.ProtocolTCP
	if def.Transport == "udp" {
		wantProto = corev1.ProtocolUDP
	}
	if !protos[wantProto] {
		t.Errorf("Service ports %+v: want %d over %s (the agents' default transport %s)", svc.Spec.Ports, def.Port, wantProto, def.Transport)
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
