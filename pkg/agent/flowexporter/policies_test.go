package flowexporter

import (
	"testing"

	"antrea.io/antrea/pkg/ipfix"
)

func TestTheRulesThatAllowedAConnectionAreReadFromItsLabel(t *testing.T) {
	for labels, want := range map[string][2]uint32{
		"":                                   {0, 0},
		"0x5":                                {5, 0},
		"0x700000005":                        {5, 7},
		"0x000000000000000000000007000000ff": {0xff, 7},
		"0x1000000000000000000000000":        {0, 0}, // bits 96+: neither rule
		"zz":                                 {0, 0},
	} {
		in, eg := ruleIDs(labels)
		if in != want[0] || eg != want[1] {
			t.Errorf("labels %q: ingress %d egress %d, want %d and %d", labels, in, eg, want[0], want[1])
		}
	}
}

func TestRecordsNameTheRulesThatAllowedThem(t *testing.T) {
	rules := RuleLookupFunc(func(id uint32) (string, string, bool) {
		switch id {
		case 5:
			return "AntreaClusterNetworkPolicy:acnp-web", "allow-80", true
		case 7:
			return "K8sNetworkPolicy:ns/np-client", "rule-0", true
		}
		return "", "", false
	})
	r := Record{Connection: Connection{Labels: "0x700000005"}}
	enrich(&r, nil, nil, rules, nil)
	if r.Ingress != (PolicyRule{Type: ipfix.PolicyTypeAntreaClusterNetwork, Name: "acnp-web", Rule: "allow-80", Action: ipfix.RuleActionAllow}) {
		t.Errorf("ingress %+v, want acnp-web's allow-80", r.Ingress)
	}
	if r.Egress != (PolicyRule{Type: ipfix.PolicyTypeK8s, Namespace: "ns", Name: "np-client", Rule: "rule-0", Action: ipfix.RuleActionAllow}) {
		t.Errorf("egress %+v, want ns/np-client's rule-0", r.Egress)
	}
	unknown := Record{Connection: Connection{Labels: "0x9"}}
	enrich(&unknown, nil, nil, rules, nil)
	if unknown.Ingress != (PolicyRule{}) {
		t.Errorf("an unknown rule id named %+v", unknown.Ingress)
	}
}
