package conformance

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/generator"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Policy-building shorthands. These write the policies of a case, never its
// expected result: that always comes from the oracles.

func policy(ns, name string, sel metav1.LabelSelector, types []networkingv1.PolicyType,
	ingress []networkingv1.NetworkPolicyIngressRule, egress []networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: sel, PolicyTypes: types, Ingress: ingress, Egress: egress},
	}
}

func podSel(kv ...string) metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return metav1.LabelSelector{MatchLabels: m}
}

func selPtr(kv ...string) *metav1.LabelSelector { s := podSel(kv...); return &s }

func inSel(key string, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}}}
}

func port(proto corev1.Protocol, p intstr.IntOrString) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(proto), Port: &p}
}

func portRange(proto corev1.Protocol, from, to int32) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(from)
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(proto), Port: &p, EndPort: ptr.To(to)}
}

var (
	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	both        = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	tcp, udp    = corev1.ProtocolTCP, corev1.ProtocolUDP
)

func from(peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{From: peers}}
}

func to(peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{{To: peers}}
}

// oneStep is a case made of one step that creates the given policies.
func oneStep(name string, policies ...*networkingv1.NetworkPolicy) testCase {
	var actions []*generator.Action
	for _, p := range policies {
		actions = append(actions, generator.CreatePolicy(p))
	}
	return fixed(generator.NewTestCase(name, nil, generator.NewTestStep(generator.ProbeAllAvailable, actions...)))
}

// cidrAround returns the network containing ip whose prefix is the IPv4
// prefix given: for an IPv6 address (ANTREA_CONFORMANCE_IP_FAMILY), the
// lab's ranges 40 bits longer (a node's /24 is its /64, the cluster's /16
// its /56, a host's /32 its /128).
func cidrAround(ip string, v4prefix int) string {
	prefix := v4prefix
	if netip.MustParseAddr(ip).Is6() {
		prefix += 40
	}
	return netip.MustParsePrefix(fmt.Sprintf("%s/%d", ip, prefix)).Masked().String()
}

// upstreamScenarios are the scenarios of the upstream Kubernetes
// [Feature:NetworkPolicy] tests, written for the x,y,z / a,b,c model.
func upstreamScenarios() []testCase {
	cases := []testCase{
		oneStep("deny all ingress in a namespace",
			policy("x", "deny-ingress", metav1.LabelSelector{}, ingressOnly, nil, nil)),
		oneStep("deny all egress in a namespace",
			policy("x", "deny-egress", metav1.LabelSelector{}, egressOnly, nil, nil)),
		oneStep("deny all ingress and egress in a namespace",
			policy("x", "deny-all", metav1.LabelSelector{}, both, nil, nil)),
		oneStep("allow all ingress after deny all",
			policy("x", "deny-ingress", metav1.LabelSelector{}, ingressOnly, nil, nil),
			policy("x", "allow-all", metav1.LabelSelector{}, ingressOnly, []networkingv1.NetworkPolicyIngressRule{{}}, nil)),
		oneStep("allow ingress from the same namespace only",
			policy("x", "same-ns", metav1.LabelSelector{}, ingressOnly, from(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}), nil)),
		oneStep("allow ingress from a namespace selector",
			policy("x", "from-ns-y", podSel("pod", "a"), ingressOnly, from(networkingv1.NetworkPolicyPeer{NamespaceSelector: selPtr("ns", "y")}), nil)),
		oneStep("allow ingress from every namespace",
			policy("x", "from-all-ns", podSel("pod", "a"), ingressOnly, from(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}), nil)),
		oneStep("allow ingress from pods matching a pod selector and a namespace selector together",
			policy("x", "pod-and-ns", podSel("pod", "a"), ingressOnly, from(networkingv1.NetworkPolicyPeer{
				NamespaceSelector: inSel("ns", "y", "z"), PodSelector: inSel("pod", "b", "c")}), nil)),
		oneStep("allow ingress from pods matching a pod selector or a namespace selector",
			policy("x", "pod-or-ns", podSel("pod", "a"), ingressOnly, from(
				networkingv1.NetworkPolicyPeer{NamespaceSelector: selPtr("ns", "y")},
				networkingv1.NetworkPolicyPeer{PodSelector: selPtr("pod", "b")}), nil)),
		oneStep("allow ingress on one numbered port",
			policy("x", "port-80", podSel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, intstr.FromInt32(80))}}}, nil)),
		oneStep("allow ingress on one named port",
			policy("x", "named-80-tcp", podSel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, intstr.FromString("serve-80-tcp"))}}}, nil)),
		oneStep("allow egress on one named UDP port",
			policy("x", "named-81-udp", podSel("pod", "a"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{port(udp, intstr.FromString("serve-81-udp"))}}})),
		oneStep("a named port of the wrong protocol matches nothing",
			policy("x", "named-80-udp-as-tcp", podSel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, intstr.FromString("serve-80-udp"))}}}, nil)),
		oneStep("allow ingress on a port range with endPort",
			policy("x", "range-80-81", podSel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{portRange(tcp, 80, 81)}}}, nil)),
		oneStep("allow egress on a port range that covers only port 81",
			policy("y", "range-81-90", metav1.LabelSelector{}, egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{portRange(udp, 81, 90), portRange(tcp, 81, 1000)}}})),
		oneStep("a rule on SCTP only isolates the pod for TCP and UDP",
			policy("x", "sctp-only", podSel("pod", "b"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolSCTP, intstr.FromInt32(80))}}}, nil)),
		oneStep("egress allowed to one namespace only",
			policy("x", "egress-to-y", metav1.LabelSelector{}, egressOnly, nil, to(networkingv1.NetworkPolicyPeer{NamespaceSelector: selPtr("ns", "y")}))),
		oneStep("multiple policies on one pod allow the union of their rules",
			policy("x", "from-y-80", podSel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: selPtr("ns", "y")}},
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, intstr.FromInt32(80))}}}, nil),
			policy("x", "from-z-81", podSel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: selPtr("ns", "z")}},
				Ports: []networkingv1.NetworkPolicyPort{port(udp, intstr.FromInt32(81))}}}, nil),
			policy("x", "from-x-c", podSel("pod", "a"), ingressOnly, from(networkingv1.NetworkPolicyPeer{PodSelector: selPtr("pod", "c")}), nil)),
		oneStep("ingress and egress together in one policy",
			policy("x", "in-and-out", podSel("pod", "a"), both,
				from(networkingv1.NetworkPolicyPeer{PodSelector: selPtr("pod", "b")}),
				to(networkingv1.NetworkPolicyPeer{NamespaceSelector: selPtr("ns", "z")}))),
		oneStep("ingress rules of a policy typed Egress only are ignored",
			policy("x", "egress-typed", podSel("pod", "a"), egressOnly,
				from(networkingv1.NetworkPolicyPeer{PodSelector: selPtr("pod", "b")}),
				to(networkingv1.NetworkPolicyPeer{NamespaceSelector: selPtr("ns", "y")}))),
		oneStep("egress denied at the client even where the server allows it",
			policy("x", "deny-egress-a", podSel("pod", "a"), egressOnly, nil, nil),
			policy("y", "allow-all-in", metav1.LabelSelector{}, ingressOnly, []networkingv1.NetworkPolicyIngressRule{{}}, nil)),
	}
	// ipBlock peers depend on the pods' addresses.
	cases = append(cases,
		testCase{name: "allow ingress from an ipBlock with except", build: func(pods map[string]peer) *generator.TestCase {
			// Every pod of y/b's node, except y/b itself.
			b := pods["y/b"]
			return generator.NewTestCase("ipblock-except", nil, generator.NewTestStep(generator.ProbeAllAvailable, generator.CreatePolicy(
				policy("x", "ipblock-except", podSel("pod", "a"), ingressOnly, from(networkingv1.NetworkPolicyPeer{
					IPBlock: &networkingv1.IPBlock{CIDR: cidrAround(b.IP, 24), Except: []string{cidrAround(b.IP, 32)}}}), nil))))
		}},
		testCase{name: "allow egress to an ipBlock with except", build: func(pods map[string]peer) *generator.TestCase {
			// The whole cluster range but z/c's node's range, plus z/c back in.
			c := pods["z/c"]
			return generator.NewTestCase("egress-ipblock-except", nil, generator.NewTestStep(generator.ProbeAllAvailable, generator.CreatePolicy(
				policy("x", "egress-ipblock", metav1.LabelSelector{}, egressOnly, nil, to(
					networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidrAround(c.IP, 16), Except: []string{cidrAround(c.IP, 24)}}},
					networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidrAround(c.IP, 32)}})))))
		}},
	)
	return cases
}

// TestUpstreamNetworkPolicyScenarios runs the upstream e2e scenarios and
// cyclonus' rendering of the upstream e2e tests.
func TestUpstreamNetworkPolicyScenarios(t *testing.T) {
	requireLab(t)
	cases := upstreamScenarios()
	gen := generator.NewTestCaseGenerator(false, "", baseNamespaces, nil, nil)
	for _, tc := range gen.UpstreamE2ETestCases() {
		cases = append(cases, fixed(tc))
	}
	runCases(t, cases)
}

// TestUpdatesInFlight changes pods, namespaces and policies under a policy
// already in force and checks the matrix after each change.
func TestUpdatesInFlight(t *testing.T) {
	requireLab(t)
	step := func(actions ...*generator.Action) *generator.TestStep {
		return generator.NewTestStep(generator.ProbeAllAvailable, actions...)
	}
	fromPodB := policy("x", "from-y-b", podSel("pod", "a"), ingressOnly, from(networkingv1.NetworkPolicyPeer{
		NamespaceSelector: selPtr("ns", "y"), PodSelector: selPtr("pod", "b")}), nil)
	cases := []testCase{
		fixed(generator.NewTestCase("a relabelled pod enters and leaves the peers of a rule", nil,
			step(generator.CreatePolicy(fromPodB)),
			step(generator.SetPodLabels("y", "c", map[string]string{"pod": "b"})),
			step(generator.SetPodLabels("y", "b", map[string]string{"pod": "x"})),
			step(generator.SetPodLabels("y", "c", map[string]string{"pod": "c"})))),
		fixed(generator.NewTestCase("a relabelled pod becomes isolated and then free again", nil,
			step(generator.CreatePolicy(policy("x", "isolate-b", podSel("pod", "b"), both, nil, nil))),
			step(generator.SetPodLabels("x", "c", map[string]string{"pod": "b"})),
			step(generator.SetPodLabels("x", "c", map[string]string{"pod": "c"})))),
		fixed(generator.NewTestCase("a relabelled namespace enters and leaves the peers of a rule", nil,
			step(generator.CreatePolicy(policy("x", "from-team-blue", metav1.LabelSelector{}, ingressOnly,
				from(networkingv1.NetworkPolicyPeer{NamespaceSelector: selPtr("team", "blue")}), nil))),
			step(generator.SetNamespaceLabels("z", map[string]string{"ns": "z", "team": "blue"})),
			step(generator.SetNamespaceLabels("y", map[string]string{"ns": "y", "team": "blue"})),
			step(generator.SetNamespaceLabels("z", map[string]string{"ns": "z"})))),
		fixed(generator.NewTestCase("an edited policy changes its peers, ports and direction", nil,
			step(generator.CreatePolicy(fromPodB)),
			step(generator.UpdatePolicy(policy("x", "from-y-b", podSel("pod", "a"), ingressOnly, []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: selPtr("ns", "z")}},
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, intstr.FromInt32(81)), port(udp, intstr.FromString("serve-80-udp"))}}}, nil))),
			step(generator.UpdatePolicy(policy("x", "from-y-b", podSel("pod", "c"), both, nil,
				to(networkingv1.NetworkPolicyPeer{PodSelector: selPtr("pod", "a")})))),
			step(generator.DeletePolicy("x", "from-y-b")))),
		{
			name: "a pod deleted and re-created with a new IP keeps its rules, as peer and as target",
			build: func(map[string]peer) *generator.TestCase {
				return generator.NewTestCase("recreate", nil,
					step(generator.CreatePolicy(fromPodB),
						generator.CreatePolicy(policy("y", "isolate-b", podSel("pod", "b"), ingressOnly,
							from(networkingv1.NetworkPolicyPeer{NamespaceSelector: selPtr("ns", "x")}), nil))),
					step(generator.DeletePod("y", "b")),
					step(generator.CreatePod("y", "b", map[string]string{"pod": "b"})),
					step(generator.DeletePod("x", "a"), generator.CreatePod("x", "a", map[string]string{"pod": "a"})))
			},
			newIP: []string{"y/b", "x/a"},
		},
	}
	runCases(t, cases)
}

// TestCyclonusGeneratedCases runs the cases cyclonus' generator makes: every
// case with ANTREA_CONFORMANCE=all, else a representative subset (the
// action cases and every tenth of the rest).
func TestCyclonusGeneratedCases(t *testing.T) {
	requireLab(t)
	c := setup(t)
	peers, err := c.peers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var podIP string
	for _, p := range peers {
		if p.key() == "x/a" {
			podIP = p.IP
		}
	}
	gen := generator.NewTestCaseGenerator(false, podIP, baseNamespaces, nil, nil)
	var cases []testCase
	all := gen.GenerateAllTestCases()
	for i, tc := range all {
		// The upstream e2e cases run in TestUpstreamNetworkPolicyScenarios.
		if tc.Tags.ContainsAny([]string{generator.TagUpstreamE2E}) {
			continue
		}
		if selectAll() || len(tc.Steps) > 1 || i%10 == 0 {
			tc.Description = fmt.Sprintf("%03d %s", i, tc.Description)
			cases = append(cases, fixed(tc))
		}
	}
	t.Logf("running %d of the %d cases cyclonus generates (ANTREA_CONFORMANCE=all runs all)", len(cases), len(all))
	runCases(t, cases)
}

// TestManyRulesOnOnePod applies 5,000 rules to one pod (50 policies of 100
// rules, each from its own unused /32 on its own port) and then one rule
// that admits namespace y. Every rule applied to a pod shares that pod's
// destination-clause flow, so this checks that a pod may carry more rules
// than one OpenFlow message can list conjunctions for (about 4,090).
// It runs with ANTREA_CONFORMANCE=all only: it is heavy.
func TestManyRulesOnOnePod(t *testing.T) {
	requireLab(t)
	if !selectAll() {
		t.Skip("heavy (5,000 rules on one pod): runs with ANTREA_CONFORMANCE=all")
	}
	const policies, rulesPer = 50, 100
	var actions []*generator.Action
	for p := range policies {
		var rules []networkingv1.NetworkPolicyIngressRule
		for r := range rulesPer {
			rules = append(rules, networkingv1.NetworkPolicyIngressRule{
				From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: fmt.Sprintf("192.168.%d.%d/32", p, r)}}},
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, intstr.FromInt(1000+p*rulesPer+r))},
			})
		}
		actions = append(actions, generator.CreatePolicy(policy("x", fmt.Sprintf("many-%d", p), podSel("pod", "c"), ingressOnly, rules, nil)))
	}
	actions = append(actions, generator.CreatePolicy(policy("x", "from-y", podSel("pod", "c"), ingressOnly,
		from(networkingv1.NetworkPolicyPeer{NamespaceSelector: selPtr("ns", "y")}), nil)))
	runCases(t, []testCase{fixed(generator.NewTestCase("5,000 rules and one more on one pod", nil,
		generator.NewTestStep(generator.ProbeAllAvailable, actions...)))})
}
