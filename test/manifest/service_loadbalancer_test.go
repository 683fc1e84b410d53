package manifest

import (
	"os"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/apiserver/apiservertest"
)

// TestUpstreamServiceLoadBalancerExamplesApply applies the ExternalIPPool CRD
// to a real kube-apiserver, then each ExternalIPPool and Service example of
// docs/service-loadbalancer.md (upstream's, unchanged) with strict field
// validation: no warning, every object created, the annotation and
// loadBalancerIP stored.
func TestUpstreamServiceLoadBalancerExamplesApply(t *testing.T) {
	doc, err := os.ReadFile(repoPath("docs/service-loadbalancer.md"))
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "kind: ExternalIPPool\n") || strings.Contains(block, "kind: Service\n") {
			examples = append(examples, block)
		}
	}
	// Upstream's four come first; the page's own (loadBalancerSourceRanges)
	// follow, and must apply as well.
	if len(examples) < 4 {
		t.Fatalf("docs/service-loadbalancer.md has %d ExternalIPPool and Service examples, want upstream's 4 first", len(examples))
	}
	cp := apiservertest.Start(t)
	k := newKubectl(t, cp)
	applyCRD(t, k, "externalippools")
	for i, ex := range examples {
		out, errOut := k.run([]byte(ex), "apply", "--validate=strict", "-f", "-")
		if n := strings.Count(ex, "\nkind: "); strings.Count(out, " created") != n || strings.TrimSpace(errOut) != "" {
			t.Errorf("example %d: kubectl apply said %q, warned %q; want %d objects created", i, out, errOut, n)
		}
		switch i {
		case 0:
			got, _ := k.run(nil, "get", "externalippool", "service-external-ip-pool", "-o",
				`jsonpath={.spec.ipRanges[0].start}-{.spec.ipRanges[0].end} {.spec.nodeSelector.matchLabels.network-role}`)
			if got != "10.10.0.2-10.10.0.10 ingress-node" {
				t.Errorf("example 0 stored as %q", got)
			}
		case 2:
			got, _ := k.run(nil, "get", "service", "my-service", "-o",
				`jsonpath={.spec.type} {.metadata.annotations.service\.antrea\.io/external-ip-pool} {.spec.loadBalancerIP}`)
			if got != "LoadBalancer service-external-ip-pool 10.10.0.2" {
				t.Errorf("example 2 stored as %q", got)
			}
		}
		if i > 0 {
			k.run([]byte(ex), "delete", "-f", "-")
		}
	}
}
