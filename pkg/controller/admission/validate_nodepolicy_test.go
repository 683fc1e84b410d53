package admission

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// The ClusterNetworkPolicies of docs/antrea-node-network-policy.md
// (upstream's examples of Node NetworkPolicy) decode strictly and are
// accepted.
func TestUpstreamNodeNetworkPolicyExamplesAreAccepted(t *testing.T) {
	_, here, _, _ := runtime.Caller(0)
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../../docs/antrea-node-network-policy.md"))
	if err != nil {
		t.Fatal(err)
	}
	v := NewValidator(newFakeLookup(), controllerUser)
	n := 0
	for _, part := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if !strings.Contains(block, "kind: ClusterNetworkPolicy") {
			continue
		}
		n++
		var p crdv1beta1.ClusterNetworkPolicy
		if err := yaml.UnmarshalStrict([]byte(block), &p); err != nil {
			t.Errorf("an example does not decode strictly: %v\n%s", err, block)
			continue
		}
		if errs := v.ValidateClusterNetworkPolicy(context.Background(), &p); len(errs) != 0 {
			t.Errorf("example %s refused: %v", p.Name, errs)
		}
	}
	if n != 2 {
		t.Errorf("docs/antrea-node-network-policy.md has %d ClusterNetworkPolicy examples, want upstream's 2", n)
	}
}
