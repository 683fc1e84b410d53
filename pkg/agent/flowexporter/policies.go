package flowexporter

import (
	"strconv"
	"strings"

	"antrea.io/antrea/pkg/ipfix"
)

// RuleLookup names a realized NetworkPolicy rule by its conjunction id: the
// policy as "<type>:<namespace>/<name>" (or "<type>:<name>"), the rule's
// name (the agent's NetworkPolicy controller, TraceflowRule).
type RuleLookup interface {
	Rule(id uint32) (policy, rule string, ok bool)
}

// RuleLookupFunc is a RuleLookup that is a function.
type RuleLookupFunc func(id uint32) (policy, rule string, ok bool)

// Rule implements RuleLookup.
func (f RuleLookupFunc) Rule(id uint32) (string, string, bool) { return f(id) }

// PolicyRule is the NetworkPolicy rule of one direction of a record.
type PolicyRule struct {
	Type            uint8 // ipfix.PolicyType*
	Namespace, Name string
	Rule            string
	Action          uint8 // ipfix.RuleAction*
}

// ruleIDs reads the ids of the rules that allowed a connection from its
// conntrack label as dpctl prints it (hex, "0x" and leading zeros
// optional): the ingress rule's in bits 0..31, the egress rule's in bits
// 32..63 (pkg/agent/openflow's IngressRuleCTLabel, EgressRuleCTLabel).
func ruleIDs(labels string) (ingress, egress uint32) {
	h := strings.TrimPrefix(strings.TrimPrefix(labels, "0x"), "0X")
	if h == "" || len(h) > 32 {
		return 0, 0
	}
	h = strings.Repeat("0", 32-len(h)) + h
	in, err1 := strconv.ParseUint(h[24:32], 16, 32)
	eg, err2 := strconv.ParseUint(h[16:24], 16, 32)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return uint32(in), uint32(eg)
}

// policyRule names the rule id allowed, or the zero PolicyRule.
func policyRule(rules RuleLookup, id uint32) PolicyRule {
	if id == 0 || rules == nil {
		return PolicyRule{}
	}
	policy, rule, ok := rules.Rule(id)
	if !ok {
		return PolicyRule{}
	}
	return NamedRule(policy, rule, ipfix.RuleActionAllow)
}

// NamedRule is the PolicyRule of a policy named as RuleLookup names it
// ("<type>:<namespace>/<name>" or "<type>:<name>"), a rule name and an
// action (ipfix.RuleAction*).
func NamedRule(policy, rule string, action uint8) PolicyRule {
	typ, ref, _ := strings.Cut(policy, ":")
	ns, name, namespaced := strings.Cut(ref, "/")
	if !namespaced {
		ns, name = "", ref
	}
	p := PolicyRule{Namespace: ns, Name: name, Rule: rule, Action: action}
	switch typ {
	case "K8sNetworkPolicy":
		p.Type = ipfix.PolicyTypeK8s
	case "AntreaNetworkPolicy":
		p.Type = ipfix.PolicyTypeAntreaNetworkPolicy
	case "AntreaClusterNetworkPolicy":
		p.Type = ipfix.PolicyTypeAntreaClusterNetwork
	}
	return p
}
