package manifest

import (
	"os"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// TestUpstreamSupportBundleCollectionExamplesApply applies the
// SupportBundleCollection CRD to a real kube-apiserver, then each example of
// docs/support-bundle-guide.md (upstream's, unchanged) with kubectl's strict
// field validation: the schema accepts them without a warning and reads back
// what they say (with upstream's default expirationMinutes). Then the
// printer columns show a status, and the schema refuses a collection of no
// Nodes.
func TestUpstreamSupportBundleCollectionExamplesApply(t *testing.T) {
	doc, err := os.ReadFile(repoPath("docs/support-bundle-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, block := range strings.Split(string(doc), "cat << EOF | kubectl apply -f -\n")[1:] {
		block, _, _ = strings.Cut(block, "\nEOF\n")
		if strings.Contains(block, "kind: SupportBundleCollection\n") {
			examples = append(examples, block)
		}
	}
	if len(examples) != 2 {
		t.Fatalf("docs/support-bundle-guide.md has %d SupportBundleCollection examples, want upstream's 2", len(examples))
	}
	cp := apiservertest.Start(t)
	k := newKubectl(t, cp)
	applyCRD(t, k, "supportbundlecollections")
	for i, want := range []struct{ name, fields, stored string }{
		{"support-bundle-for-nodes",
			`{.spec.nodes.nodeNames[0]} {.spec.nodes.matchLabels.role} {.spec.expirationMinutes} {.spec.sinceTime} {.spec.fileServer.url} {.spec.authentication.authSecret.name}`,
			"worker1 workers 10 2h sftp://yourtestdomain.com:22/root/test support-bundle-secret"},
		{"support-bundle-for-vms",
			`{.spec.externalNodes.namespace} {.spec.externalNodes.nodeSelector.matchLabels.role} {.spec.expirationMinutes} {.spec.fileServer.url} {.spec.authentication.authType}`,
			"vm-ns vms 60 yourtestdomain.com:22/root/test BasicAuthentication"},
	} {
		out, errOut := k.run([]byte(examples[i]), "apply", "--validate=strict", "-f", "-")
		if !strings.Contains(out, "supportbundlecollection.crd.antrea.io/"+want.name) || strings.TrimSpace(errOut) != "" {
			t.Errorf("example %d: kubectl apply said %q, warned %q", i, out, errOut)
		}
		if got, _ := k.run(nil, "get", "supportbundlecollection", want.name, "-o", "jsonpath="+want.fields); got != want.stored {
			t.Errorf("example %d stored as %q, want %q", i, got, want.stored)
		}
	}

	// The printer columns, on a status as antrea-controller writes it.
	k.run([]byte(`{"status":{"desiredNodes":3,"collectedNodes":2,"conditions":[`+
		`{"type":"Completed","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z"},`+
		`{"type":"CollectionFailure","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z","message":"Node worker3: authentication failed"}],`+
		`"nodes":[{"name":"worker3","state":"Failed","message":"authentication failed"}]}}`),
		"patch", "sbc", "support-bundle-for-nodes", "--subresource=status", "--type=merge", "--patch-file=/dev/stdin")
	out, _ := k.run(nil, "get", "supportbundlecollections", "-o", "wide")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := strings.Fields(lines[0])
	if strings.Join(header, " ") != "NAME DESIRED COLLECTED COMPLETED FAILURE FAILED-NODES FILE-SERVER AGE" {
		t.Errorf("columns %v", header)
	}
	if !strings.Contains(out, "support-bundle-for-nodes   3         2           True        True      Node worker3: authentication failed") {
		t.Errorf("kubectl get -o wide:\n%s\nwant the counts, conditions and the failed Node", out)
	}

	// The schema's own rule: Nodes or ExternalNodes.
	none := []byte("apiVersion: crd.antrea.io/v1alpha1\nkind: SupportBundleCollection\nmetadata:\n  name: none\nspec:\n" +
		"  fileServer:\n    url: sftp://files.example:22/up\n  authentication:\n    authType: BasicAuthentication\n" +
		"    authSecret:\n      name: s\n      namespace: default\n")
	_, errOut, err := run(t, none, k.path, "--kubeconfig", k.kubeconfig, "apply", "--dry-run=server", "-f", "-")
	if err == nil || !strings.Contains(string(errOut), "one of nodes and externalNodes must be set") {
		t.Errorf("a collection of no Nodes: kubectl apply said %v: %s; want the schema's refusal", err, errOut)
	}
}
