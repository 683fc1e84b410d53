package admission

import (
	"crypto/sha1" // #nosec G505: a name, not a secret: upstream's rule-name hash
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// patchOp is one RFC 6902 JSON Patch operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// policyDefaults returns the patch that fills in what upstream defaults in
// an Antrea-native policy: tier "application" when empty, and the name of
// each unnamed rule, ingress|egress-<action>-<first 7 hex digits of the
// SHA-1 of the rule's JSON> (upstream's names: a rule keeps its name across
// updates, and the same rule gets the same name as under upstream).
func policyDefaults(tier string, ingress, egress []crdv1beta1.Rule) []patchOp {
	var ops []patchOp
	if tier == "" {
		// "add" sets a member whether or not it exists ("replace" needs it).
		ops = append(ops, patchOp{Op: "add", Path: "/spec/tier", Value: crdv1beta1.DefaultTierName})
	}
	for _, dir := range []struct {
		name  string
		rules []crdv1beta1.Rule
	}{{"ingress", ingress}, {"egress", egress}} {
		for i, r := range dir.rules {
			if r.Name != "" {
				continue
			}
			ops = append(ops, patchOp{Op: "add", Path: fmt.Sprintf("/spec/%s/%d/name", dir.name, i), Value: GeneratedRuleName(dir.name, r)})
		}
	}
	return ops
}

// GeneratedRuleName is the name the mutating webhook gives an unnamed rule
// of direction "ingress" or "egress".
func GeneratedRuleName(direction string, r crdv1beta1.Rule) string {
	action := ""
	if r.Action != nil {
		action = strings.ToLower(string(*r.Action))
	}
	data, _ := json.Marshal(r) // a Rule always marshals
	sum := sha1.Sum(data)      // #nosec G401: see the import
	return fmt.Sprintf("%s-%s-%s", direction, action, hex.EncodeToString(sum[:])[:7])
}
