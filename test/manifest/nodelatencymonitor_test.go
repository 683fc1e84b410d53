package manifest

import (
	"os"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// TestUpstreamNodeLatencyMonitorExampleApplies applies the CRD to a real
// kube-apiserver, then the example of docs/node-latency-monitor.md
// (upstream's, unchanged) with strict field validation; the schema refuses
// an interval below 1 naming the field, and another name than default.
func TestUpstreamNodeLatencyMonitorExampleApplies(t *testing.T) {
	doc, err := os.ReadFile(repoPath("docs/node-latency-monitor.md"))
	if err != nil {
		t.Fatal(err)
	}
	example, _, _ := strings.Cut(strings.SplitN(string(doc), "```yaml\n", 2)[1], "```")
	cp := apiservertest.Start(t)
	k := newKubectl(t, cp)
	applyCRD(t, k, "nodelatencymonitors")
	out, errOut := k.run([]byte(example), "apply", "--validate=strict", "-f", "-")
	if !strings.Contains(out, "nodelatencymonitor.crd.antrea.io/default") || strings.TrimSpace(errOut) != "" {
		t.Errorf("kubectl apply said %q, warned %q", out, errOut)
	}
	if got, _ := k.run(nil, "get", "nodelatencymonitor", "default", "-o", "jsonpath={.spec.pingIntervalSeconds}"); got != "60" {
		t.Errorf("stored pingIntervalSeconds %q, want 60", got)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"metadata:\n  name: default\nspec:\n  pingIntervalSeconds: 0\n", "spec.pingIntervalSeconds"},
		{"metadata:\n  name: mine\nspec:\n  pingIntervalSeconds: 5\n", "must be named default"},
	} {
		obj := []byte("apiVersion: crd.antrea.io/v1alpha1\nkind: NodeLatencyMonitor\n" + tc.yaml)
		_, errOut, err := run(t, obj, k.path, "--kubeconfig", k.kubeconfig, "apply", "--dry-run=server", "-f", "-")
		if err == nil || !strings.Contains(string(errOut), tc.want) {
			t.Errorf("%q: kubectl apply said %v: %s; want a refusal naming %q", tc.yaml, err, errOut, tc.want)
		}
	}
}
