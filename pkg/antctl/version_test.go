package antctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/version"
)

// antreaPod is a running pod of the manifest's DaemonSet or Deployment.
func antreaPod(component, name, node, image, digest string, ready bool) *corev1.Pod {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"app": "antrea", "component": component}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: component, Image: image}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: component, Image: image, ImageID: digest}}},
	}
}

func TestVersionShowsClientControllerAndEveryAgent(t *testing.T) {
	const (
		agentImage      = "docker.io/antrea/antrea-agent:v2.4.1"
		controllerImage = "docker.io/antrea/antrea-controller:latest"
		agentDigest     = "docker.io/antrea/antrea-agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		controllerSHA   = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	)
	c := defaultCluster()
	c.Extra = []runtime.Object{
		antreaPod("antrea-controller", "antrea-controller-5d8f", "node-1", controllerImage, controllerSHA, true),
		antreaPod("antrea-agent", "antrea-agent-b2", "node-2", agentImage, agentDigest, false),
		antreaPod("antrea-agent", "antrea-agent-a1", "node-1", agentImage, agentDigest, true),
	}
	clients := c.Clients()
	clients.Kube.(*kubefake.Clientset).Resources = []*metav1.APIResourceList{{GroupVersion: "controlplane.antrea.io/v1beta2"}}
	r := runAntctlWith(t, clients, "version")
	if r.runErr != nil {
		t.Fatalf("%v (stderr %q)", r.runErr, r.err)
	}
	want := [][]string{
		{"COMPONENT", "VERSION", "POD", "NODE", "IMAGE", "STATUS"},
		{"antctl", version.Version + " (git " + version.GitSHA + ", tree " + version.GitTreeState + ")", "-", "-", "-", "-"},
		// The controller's tag is no version: antctl says it does not know.
		{"antrea-controller", "-", "kube-system/antrea-controller-5d8f", "node-1", controllerImage + "@sha256:fedcba987654", "Running, ready"},
		{"antrea-agent", "v2.4.1", "kube-system/antrea-agent-a1", "node-1", agentImage + "@sha256:0123456789ab", "Running, ready"},
		{"antrea-agent", "v2.4.1", "kube-system/antrea-agent-b2", "node-2", agentImage + "@sha256:0123456789ab", "Running, not ready"},
		{"controlplane API: controlplane.antrea.io/v1beta2 is served"},
	}
	if got := rows(r.out); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("antctl version printed\n%s\nwant %q", r.out, want)
	}

	r = runAntctlWith(t, clients, "version", "-o", "json")
	var info versionInfo
	if err := json.Unmarshal([]byte(r.out), &info); err != nil || r.runErr != nil {
		t.Fatalf("-o json printed %q: %v %v", r.out, err, r.runErr)
	}
	if len(info.Components) != 3 || info.Components[1].ImageID != agentDigest || info.Client.Component != "antctl" {
		t.Errorf("-o json printed %s", r.out)
	}
}

func TestVersionWithTheAgentsServiceAccountSaysWhatItCannotRead(t *testing.T) {
	// The agent's RBAC has no pods: version in local mode tells so.
	clients := defaultCluster().Clients()
	clients.Kube.(*kubefake.Clientset).PrependReactor("list", "pods", forbidden("pods"))
	r := runAntctlWith(t, clients, "version")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	if !strings.Contains(r.err, "note: antrea-controller: cannot list pods in kube-system with these credentials") {
		t.Errorf("stderr %q does not say the pods could not be listed", r.err)
	}
}

func TestFeatureGatesFromTheConfigMapOrTheLocalFiles(t *testing.T) {
	const (
		agentConf      = "featureGates:\n  AntreaProxy: false\n  Traceflow: true\n  Egress: false\n"
		controllerConf = "featureGates:\n  Traceflow: true\n"
	)
	want := func(src func(string) string) [][]string {
		return [][]string{
			{"COMPONENT", "FEATUREGATE", "STATUS", "NOTE"},
			{"antrea-agent", "AntreaProxy", "Disabled", "-"},
			{"antrea-agent", "BGPPolicy", "Disabled", "-"},
			{"antrea-agent", "Egress", "Disabled", "-"},
			{"antrea-agent", "EgressTrafficShaping", "Disabled", "-"},
			{"antrea-agent", "FlowExporter", "Disabled", "-"},
			{"antrea-agent", "L7NetworkPolicy", "Disabled", "-"},
			{"antrea-agent", "Multicast", "Enabled", "-"},
			{"antrea-agent", "NetworkPolicyStats", "Enabled", "-"},
			{"antrea-agent", "NodeLatencyMonitor", "Disabled", "-"},
			{"antrea-agent", "NodeNetworkPolicy", "Disabled", "-"},
			{"antrea-agent", "NodePortLocal", "Enabled", "-"},
			{"antrea-agent", "PacketCapture", "Disabled", "-"},
			{"antrea-agent", "ServiceExternalIP", "Enabled", "-"},
			{"antrea-agent", "SupportBundleCollection", "Disabled", "-"},
			{"antrea-agent", "TrafficControl", "Disabled", "-"},
			{"antrea-agent", "Traceflow", "Not implemented", "set to true; not implemented by this Antrea"},
			{"antrea-controller", "Egress", "Enabled", "-"},
			{"antrea-controller", "L7NetworkPolicy", "Disabled", "-"},
			{"antrea-controller", "ServiceExternalIP", "Disabled", "-"},
			{"antrea-controller", "SupportBundleCollection", "Disabled", "-"},
			{"antrea-controller", "Traceflow", "Not implemented", "set to true; not implemented by this Antrea"},
		}
	}
	c := defaultCluster()
	c.Extra = []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "antrea-config"},
		Data: map[string]string{"antrea-agent.conf": agentConf, "antrea-controller.conf": controllerConf}}}
	r := runAntctl(t, c, "get", "featuregates")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	if got := rows(r.out); !slices.EqualFunc(got, want(nil), slices.Equal) {
		t.Errorf("from the ConfigMap: printed\n%s\nwant %q", r.out, want(nil))
	}

	dir := t.TempDir()
	for name, content := range map[string]string{"antrea-agent.conf": agentConf, "antrea-controller.conf": controllerConf} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r = runAntctl(t, nil, "get", "fg", "--config-dir", dir, "-o", "json")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	var gates []query.FeatureGate
	if err := json.Unmarshal([]byte(r.out), &gates); err != nil {
		t.Fatalf("-o json printed %q: %v", r.out, err)
	}
	if len(gates) != len(want(nil))-1 || gates[0].Name != "AntreaProxy" || gates[0].Enabled || !gates[0].Implemented ||
		gates[0].Source != filepath.Join(dir, "antrea-agent.conf") {
		t.Errorf("local mode: printed %s, want the gates of %s", r.out, dir)
	}

	// A default conf: AntreaProxy on.
	if err := os.WriteFile(filepath.Join(dir, "antrea-agent.conf"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runAntctl(t, nil, "get", "featuregates", "--config-dir", dir)
	if got := rows(r.out); r.runErr != nil || len(got) < 2 || !slices.Equal(got[1], []string{"antrea-agent", "AntreaProxy", "Enabled", "-"}) {
		t.Errorf("default conf: printed %q (%v)", r.out, r.runErr)
	}
}
