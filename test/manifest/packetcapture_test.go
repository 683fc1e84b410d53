package manifest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// TestUpstreamPacketCaptureExamplesApply applies the PacketCapture CRD to
// a real kube-apiserver, then each PacketCapture example of
// docs/packetcapture.md (upstream's, unchanged) with kubectl's strict field
// validation: the schema accepts them without a warning, and reads back
// what they say.
func TestUpstreamPacketCaptureExamplesApply(t *testing.T) {
	doc, err := os.ReadFile(repoPath("docs/packetcapture.md"))
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "kind: PacketCapture\n") {
			examples = append(examples, block)
		}
	}
	if len(examples) != 2 {
		t.Fatalf("docs/packetcapture.md has %d PacketCapture examples, want upstream's 2", len(examples))
	}
	cp := apiservertest.Start(t)
	k := newKubectl(t, cp)
	applyCRD(t, k, "packetcaptures")
	for i, ex := range examples {
		out, errOut := k.run([]byte(ex), "apply", "--validate=strict", "-f", "-")
		if !strings.Contains(out, "packetcapture.crd.antrea.io/pc-test") || strings.TrimSpace(errOut) != "" {
			t.Errorf("example %d: kubectl apply said %q, warned %q", i, out, errOut)
		}
		// What the example says, as kube-apiserver stored it.
		got, _ := k.run(nil, "get", "packetcapture", "pc-test", "-o",
			`jsonpath={.spec.captureConfig.firstN.number} {.spec.source.pod.name} {.spec.destination.pod.name} {.spec.packet.protocol}`)
		want := map[int]string{0: "5 frontend backend TCP", 1: "5 frontend backend ICMP"}[i]
		if got != want {
			t.Errorf("example %d stored as %q, want %q", i, got, want)
		}
		k.run(nil, "delete", "packetcapture", "pc-test")
	}
	// The schema's own rules: a Pod at one end at least.
	only := func(end string) []byte {
		return []byte("apiVersion: crd.antrea.io/v1alpha1\nkind: PacketCapture\nmetadata:\n  name: pc-only\nspec:\n" +
			"  captureConfig:\n    firstN:\n      number: 1\n" + end)
	}
	k.run(only("  destination:\n    pod:\n      name: backend\n"), "apply", "--dry-run=server", "-f", "-")
	_, errOut, err := run(t, only("  source:\n    ip: 10.0.0.1\n"), k.path, "--kubeconfig", k.kubeconfig, "apply", "--dry-run=server", "-f", "-")
	if err == nil || !strings.Contains(string(errOut), "at least one of source.pod and destination.pod") {
		t.Errorf("a capture without a Pod: kubectl apply said %v: %s; want the schema's refusal", err, errOut)
	}
}

// applyCRD applies the chart's CRD crd.antrea.io_PLURAL.yaml and waits until
// kube-apiserver established it.
func applyCRD(t *testing.T, k *kubectl, plural string) {
	t.Helper()
	k.run(nil, "apply", "-f", repoPath("build/charts/antrea/crds/crd.antrea.io_"+plural+".yaml"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		out, _, err := run(t, nil, k.path, "--kubeconfig", k.kubeconfig, "get", "crd", plural+".crd.antrea.io",
			"-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		return err == nil && string(out) == "True", nil
	}); err != nil {
		t.Fatalf("the CRD %s.crd.antrea.io never became established", plural)
	}
}
