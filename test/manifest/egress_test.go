package manifest

import (
	"os"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// TestUpstreamEgressExamplesApply applies the Egress and ExternalIPPool
// CRDs to a real kube-apiserver, then each Egress and ExternalIPPool example
// of docs/egress.md (upstream's, unchanged) with strict field validation: no
// warning, every object created, and what they say stored. The schema's own
// rules refuse an Egress with egressIP and egressIPs and a range with a start
// and no end.
func TestUpstreamEgressExamplesApply(t *testing.T) {
	doc, err := os.ReadFile(repoPath("docs/egress.md"))
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "kind: Egress\n") || strings.Contains(block, "kind: ExternalIPPool\n") {
			examples = append(examples, block)
		}
	}
	if len(examples) != 7 {
		t.Fatalf("docs/egress.md has %d Egress and ExternalIPPool examples, want upstream's 7", len(examples))
	}
	cp := apiservertest.Start(t)
	k := newKubectl(t, cp)
	applyCRD(t, k, "egresses")
	applyCRD(t, k, "externalippools")
	for i, ex := range examples {
		out, errOut := k.run([]byte(ex), "apply", "--validate=strict", "-f", "-")
		if n := strings.Count(ex, "\nkind: "); strings.Count(out, " created") != n || strings.TrimSpace(errOut) != "" {
			t.Errorf("example %d: kubectl apply said %q, warned %q; want %d objects created", i, out, errOut, n)
		}
		if i == 0 {
			got, _ := k.run(nil, "get", "egress", "egress-prod-web", "-o",
				`jsonpath={.spec.egressIP} {.spec.externalIPPool} {.spec.appliedTo.podSelector.matchLabels.role}`)
			if got != "10.10.0.8 prod-external-ip-pool web" {
				t.Errorf("example 0 stored as %q", got)
			}
		}
		if i == 3 {
			got, _ := k.run(nil, "get", "externalippool", "prod-external-ip-pool", "-o",
				`jsonpath={.spec.ipRanges[0].start}-{.spec.ipRanges[0].end} {.spec.subnetInfo.gateway}/{.spec.subnetInfo.prefixLength} {.spec.subnetInfo.vlan}`)
			if got != "10.10.0.2-10.10.0.10 10.10.0.1/24 10" {
				t.Errorf("example 3 stored as %q", got)
			}
		}
		k.run([]byte(ex), "delete", "-f", "-")
	}
	for _, tc := range []struct{ yaml, want string }{
		{"apiVersion: crd.antrea.io/v1beta1\nkind: Egress\nmetadata:\n  name: both\nspec:\n  appliedTo: {}\n  egressIP: 10.0.0.1\n  egressIPs: [10.0.0.2]\n",
			"exactly one of egressIP/externalIPPool and egressIPs/externalIPPools"},
		{"apiVersion: crd.antrea.io/v1beta1\nkind: ExternalIPPool\nmetadata:\n  name: half\nspec:\n  ipRanges:\n  - start: 10.0.0.1\n  nodeSelector: {}\n",
			"an IP range is either cidr or start and end"},
	} {
		_, errOut, err := run(t, []byte(tc.yaml), k.path, "--kubeconfig", k.kubeconfig, "apply", "--dry-run=server", "-f", "-")
		if err == nil || !strings.Contains(string(errOut), tc.want) {
			t.Errorf("%q: kubectl apply said %v: %s; want the schema's refusal %q", tc.yaml, err, errOut, tc.want)
		}
	}
}
