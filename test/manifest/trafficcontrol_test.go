package manifest

import (
	"os"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// TestUpstreamTrafficControlExamplesApply applies the CRD to a real
// kube-apiserver, then every example of docs/traffic-control.md (upstream's,
// unchanged) with strict field validation; the schema refuses a
// returnPort with Mirror, a port with two kinds or none, and an unknown
// direction, naming the field.
func TestUpstreamTrafficControlExamplesApply(t *testing.T) {
	doc, err := os.ReadFile(repoPath("docs/traffic-control.md"))
	if err != nil {
		t.Fatal(err)
	}
	cp := apiservertest.Start(t)
	k := newKubectl(t, cp)
	applyCRD(t, k, "trafficcontrols")
	var examples []string
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		example, _, _ := strings.Cut(block, "```")
		if strings.Contains(example, "kind: TrafficControl") {
			examples = append(examples, example)
		}
	}
	if len(examples) != 3 {
		t.Fatalf("docs/traffic-control.md has %d TrafficControl examples, want upstream's 3", len(examples))
	}
	for _, example := range examples {
		out, errOut := k.run([]byte(example), "apply", "--validate=strict", "-f", "-")
		if !strings.Contains(out, "trafficcontrol.crd.antrea.io/") || strings.TrimSpace(errOut) != "" {
			t.Errorf("kubectl apply said %q, warned %q for\n%s", out, errOut, example)
		}
	}
	if got, _ := k.run(nil, "get", "trafficcontrol", "redirect-web-to-local", "-o", "jsonpath={.spec.returnPort.ovsInternal.name}"); got != "antrea-tc-tap1" {
		t.Errorf("stored returnPort %q, want antrea-tc-tap1", got)
	}
	port := "  targetPort:\n    ovsInternal:\n      name: tap0\n"
	for _, tc := range []struct{ spec, want string }{
		{"  direction: Both\n  action: Mirror\n" + port + "  returnPort:\n    ovsInternal:\n      name: tap1\n", "returnPort is only for action Redirect"},
		{"  direction: Both\n  action: Mirror\n  targetPort:\n    ovsInternal:\n      name: tap0\n    device:\n      name: eth1\n", "exactly one of ovsInternal"},
		{"  direction: Both\n  action: Mirror\n  targetPort: {}\n", "exactly one of ovsInternal"},
		{"  direction: Sideways\n  action: Mirror\n" + port, "spec.direction"},
		{"  direction: Both\n  action: Copy\n" + port, "spec.action"},
	} {
		obj := []byte("apiVersion: crd.antrea.io/v1alpha2\nkind: TrafficControl\nmetadata:\n  name: bad\nspec:\n  appliedTo: {}\n" + tc.spec)
		_, errOut, err := run(t, obj, k.path, "--kubeconfig", k.kubeconfig, "apply", "--dry-run=server", "-f", "-")
		if err == nil || !strings.Contains(string(errOut), tc.want) {
			t.Errorf("%q: kubectl apply said %v: %s; want a refusal naming %q", tc.spec, err, errOut, tc.want)
		}
	}
}
