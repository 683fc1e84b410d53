package query

import (
	"fmt"
	"sort"
	"strings"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// PolicyTypes are the values of upstream antctl's -T/--type
// (pkg/antctl/antctl.go, "networkpolicy" and "ovsflows") and the sourceRef
// type each stands for. AdminNetworkPolicy and BaselineAdminNetworkPolicy
// are the names the controller gives the SIG policies
// (pkg/controller/networkpolicy/sig_translate.go).
var PolicyTypes = map[string]cpv1beta2.NetworkPolicyType{
	"K8sNP": cpv1beta2.K8sNetworkPolicy,
	"ACNP":  cpv1beta2.AntreaClusterNetworkPolicy,
	"ANNP":  cpv1beta2.AntreaNetworkPolicy,
	"ANP":   "AdminNetworkPolicy",
	"BANP":  "BaselineAdminNetworkPolicy",
}

// ParsePolicyType reads a -T/--type value (any case); "" is every type.
func ParsePolicyType(s string) (cpv1beta2.NetworkPolicyType, error) {
	if s == "" {
		return "", nil
	}
	var names []string
	for k, t := range PolicyTypes {
		if strings.EqualFold(k, s) || strings.EqualFold(string(t), s) {
			return t, nil
		}
		names = append(names, k)
	}
	sort.Strings(names)
	return "", fmt.Errorf("unknown policy type %q; want one of %s", s, strings.Join(names, ", "))
}
