package networkpolicy

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// loggingPolicy has an ingress rule and isolates for egress (a rule with an
// empty peer), so both kinds of computed rule are checked.
func loggingPolicy(ns string) *networkingv1.NetworkPolicy {
	return newPolicy(ns, "np", networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
			port(v1.ProtocolTCP, intstr.FromInt32(80))}}},
	})
}

func annotatedNamespace(name string, annotations map[string]string) *v1.Namespace {
	ns := newNamespace(name, nil)
	ns.Annotations = annotations
	return ns
}

// rulesLog checks that every rule of the K8s NetworkPolicy ns/np has
// enableLogging set to want.
func (e *env) rulesLog(ns string, want bool) error {
	p, ok := e.policy(ns, "np")
	if !ok {
		return fmt.Errorf("no internal policy for %s/np", ns)
	}
	if len(p.Rules) != 2 {
		return fmt.Errorf("want an ingress and an isolation rule, got %d rules", len(p.Rules))
	}
	for i, r := range p.Rules {
		if r.EnableLogging != want {
			return fmt.Errorf("rule %d (%s) has enableLogging %v, want %v", i, r.Direction, r.EnableLogging, want)
		}
	}
	return nil
}

func TestK8sNetworkPolicyRulesLogWhenTheirNamespaceSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        bool
	}{
		{"a Namespace annotated enable-logging: \"true\" makes every rule log", map[string]string{EnableLoggingAnnotation: "true"}, true},
		{"a Namespace without the annotation logs nothing", nil, false},
		{"a Namespace annotated \"false\" logs nothing", map[string]string{EnableLoggingAnnotation: "false"}, false},
		{"only \"true\" enables logging, as upstream reads it", map[string]string{EnableLoggingAnnotation: "yes"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := annotatedNamespace("other", map[string]string{EnableLoggingAnnotation: "true"})
			e := newEnv(t, annotatedNamespace("ns", tc.annotations), other, loggingPolicy("ns"))
			e.eventually(t, func() error { return e.rulesLog("ns", tc.want) })
		})
	}
}

func TestAChangeOfTheAnnotationRecomputesTheNamespacesPolicies(t *testing.T) {
	e := newEnv(t, annotatedNamespace("ns", nil), loggingPolicy("ns"), annotatedNamespace("other", nil), loggingPolicy("other"))
	e.eventually(t, func() error { return e.rulesLog("ns", false) })
	before, _ := e.policy("ns", "np")

	e.update(t, annotatedNamespace("ns", map[string]string{EnableLoggingAnnotation: "true"}))
	e.eventually(t, func() error { return e.rulesLog("ns", true) })
	if after, _ := e.policy("ns", "np"); after.Generation <= before.Generation {
		t.Errorf("the policy changed, its generation should grow: %d then %d", before.Generation, after.Generation)
	}
	if err := e.rulesLog("other", false); err != nil {
		t.Errorf("another Namespace's policy is left alone: %v", err)
	}

	e.update(t, annotatedNamespace("ns", map[string]string{EnableLoggingAnnotation: "false"}))
	e.eventually(t, func() error { return e.rulesLog("ns", false) })
}
