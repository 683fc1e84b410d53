package conformance

import (
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/generator"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Egress named ports crossed with ipBlock peers (issue 10). Kubernetes
// resolves a named port on the destination pod whichever peer matched its
// address; both oracles do, so a pod inside a block is reached on the port
// its container names, and a block's address that is no pod's on none.
// Every block is drawn around the pods' current addresses: which pods a case
// covers depends on the lab's layout, what it must allow only on the oracles.

func block(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func host(p peer) string { return cidrAround(p.IP, 32) }

// namedPort is a port by name; without a protocol, as in the issue, the API
// server defaults it to TCP.
func namedPort(name string) networkingv1.NetworkPolicyPort {
	p := intstr.FromString(name)
	return networkingv1.NetworkPolicyPort{Port: &p}
}

func egress(ports []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicyEgressRule {
	return networkingv1.NetworkPolicyEgressRule{Ports: ports, To: peers}
}

func ports(ps ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyPort { return ps }

func probeAfter(actions ...*generator.Action) *generator.TestStep {
	return generator.NewTestStep(generator.ProbeAllAvailable, actions...)
}

// namedPortIPBlockCases are the cases of the family, in the default subset.
func namedPortIPBlockCases() []testCase {
	allOfX := metav1.LabelSelector{}
	return []testCase{
		{
			// The table, one row per step: the named port to an
			// ipBlock, the port number to it, the named port to every
			// namespace.
			name: "egress on a named port to ipBlock 10.0.0.0/8, then on its number, then to every namespace",
			build: func(pods map[string]peer) *generator.TestCase {
				// 10.0.0.0/8; on IPv6 pods the /48 of the lab's pod ranges.
				wide := cidrAround(pods["x/a"].IP, 8)
				rule := func(p networkingv1.NetworkPolicyPort, to networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
					return policy("x", "issue-10", allOfX, egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{egress(ports(p), to)})
				}
				eighty := intstr.FromInt32(80)
				return generator.NewTestCase("issue-10-table", nil,
					probeAfter(generator.CreatePolicy(rule(namedPort("serve-80-tcp"), block(wide)))),
					probeAfter(generator.UpdatePolicy(rule(networkingv1.NetworkPolicyPort{Port: &eighty}, block(wide)))),
					probeAfter(generator.UpdatePolicy(rule(namedPort("serve-80-tcp"),
						networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}))))
			},
		},
		{
			name: "egress on named TCP and UDP ports to an ipBlock except one node's pods",
			build: func(pods map[string]peer) *generator.TestCase {
				ya := pods["y/a"]
				return generator.NewTestCase("named-block-except-node", nil, probeAfter(generator.CreatePolicy(
					policy("x", "named-block-except", allOfX, egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
						egress(ports(namedPort("serve-80-tcp"), port(udp, intstr.FromString("serve-81-udp"))),
							block(cidrAround(ya.IP, 16), cidrAround(ya.IP, 24))),
					}))))
			},
		},
		{
			name: "egress on a named port to an ipBlock except one pod",
			build: func(pods map[string]peer) *generator.TestCase {
				zb := pods["z/b"]
				return generator.NewTestCase("named-block-except-pod", nil, probeAfter(generator.CreatePolicy(
					policy("x", "named-block-except-pod", podSel("pod", "b"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
						egress(ports(port(tcp, intstr.FromString("serve-81-tcp"))), block(cidrAround(zb.IP, 16), host(zb))),
					}))))
			},
		},
		{
			name: "egress on named ports to overlapping ipBlocks, in one rule and across policies",
			build: func(pods map[string]peer) *generator.TestCase {
				yb, za := pods["y/b"], pods["z/a"]
				return generator.NewTestCase("named-overlapping-blocks", nil, probeAfter(
					generator.CreatePolicy(policy("x", "overlap-in-rule", podSel("pod", "a"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
						egress(ports(namedPort("serve-80-tcp"), port(udp, intstr.FromString("serve-80-udp"))),
							block(cidrAround(yb.IP, 16), cidrAround(yb.IP, 24)), block(cidrAround(yb.IP, 24), host(yb))),
					})),
					generator.CreatePolicy(policy("x", "overlap-across-policies", podSel("pod", "a"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
						egress(ports(port(udp, intstr.FromString("serve-81-udp"))), block(cidrAround(za.IP, 8), cidrAround(za.IP, 24)), block(cidrAround(za.IP, 24))),
					})),
					generator.CreatePolicy(policy("x", "overlap-other-pod", podSel("pod", "c"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
						egress(ports(port(tcp, intstr.FromString("serve-81-tcp"))), block(cidrAround(za.IP, 24), host(za))),
						egress(ports(port(tcp, intstr.FromString("serve-80-tcp"))), block(host(za))),
					}))))
			},
		},
		{
			name: "egress on named ports to selector peers and ipBlocks together, and a named next to a numbered port",
			build: func(pods map[string]peer) *generator.TestCase {
				ya, yc := pods["y/a"], pods["y/c"]
				return generator.NewTestCase("named-selectors-and-blocks", nil, probeAfter(generator.CreatePolicy(
					policy("x", "named-mixed", allOfX, egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
						egress(ports(namedPort("serve-80-tcp")),
							networkingv1.NetworkPolicyPeer{PodSelector: selPtr("pod", "b")},
							networkingv1.NetworkPolicyPeer{NamespaceSelector: selPtr("ns", "z"), PodSelector: selPtr("pod", "c")},
							block(host(ya))),
						egress(ports(port(tcp, intstr.FromString("serve-81-tcp")), port(udp, intstr.FromInt32(80))),
							block(cidrAround(yc.IP, 24), host(yc))),
					}))))
			},
		},
		{
			name: "egress on a named port to an ipBlock follows pod relabels, as source and as peer",
			build: func(pods map[string]peer) *generator.TestCase {
				yb := pods["y/b"]
				return generator.NewTestCase("named-block-relabel", nil,
					probeAfter(generator.CreatePolicy(policy("x", "named-relabel", podSel("pod", "a"), egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
						egress(ports(namedPort("serve-80-tcp"), port(udp, intstr.FromString("serve-81-udp"))),
							block(cidrAround(yb.IP, 24)),
							networkingv1.NetworkPolicyPeer{NamespaceSelector: selPtr("ns", "z"), PodSelector: inSel("pod", "b", "c")}),
					}))),
					// x/b becomes a source the policy isolates.
					probeAfter(generator.SetPodLabels("x", "b", map[string]string{"pod": "a"})),
					// z/b and z/c leave the selector peer: a pod inside the
					// block (y/b's node range) stays a peer, one outside not.
					probeAfter(generator.SetPodLabels("z", "b", map[string]string{"pod": "x"})),
					probeAfter(generator.SetPodLabels("z", "c", map[string]string{"pod": "x"})),
					// A relabel of a pod the block holds changes nothing.
					probeAfter(generator.SetPodLabels("y", "b", map[string]string{"pod": "q"})),
					probeAfter(generator.SetPodLabels("x", "b", map[string]string{"pod": "b"}),
						generator.SetPodLabels("z", "b", map[string]string{"pod": "b"}),
						generator.SetPodLabels("z", "c", map[string]string{"pod": "c"})))
			},
		},
		{
			name: "egress on a named port to ipBlocks follows pods re-created with new IPs",
			build: func(pods map[string]peer) *generator.TestCase {
				yb, zb, yc := pods["y/b"], pods["z/b"], pods["y/c"]
				return generator.NewTestCase("named-block-recreate", nil,
					probeAfter(generator.CreatePolicy(policy("x", "named-recreate", allOfX, egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{
						// y/b's address: once y/b is re-created it is no pod's.
						egress(ports(namedPort("serve-80-tcp"), port(udp, intstr.FromString("serve-81-udp"))),
							block(host(yb)), block(cidrAround(zb.IP, 24), host(yc))),
					}))),
					probeAfter(generator.DeletePod("y", "b")),
					probeAfter(generator.CreatePod("y", "b", map[string]string{"pod": "b"})),
					// z/b comes back on its node, inside the same /24.
					probeAfter(generator.DeletePod("z", "b"), generator.CreatePod("z", "b", map[string]string{"pod": "b"})),
					// A re-created source keeps the policy's egress rules.
					probeAfter(generator.DeletePod("x", "a"), generator.CreatePod("x", "a", map[string]string{"pod": "a"})))
			},
			newIP: []string{"y/b", "z/b", "x/a"},
		},
	}
}

// TestEgressNamedPortsToIPBlocks runs the family; the oracles, not this
// file, say what each step must allow.
func TestEgressNamedPortsToIPBlocks(t *testing.T) {
	requireLab(t)
	runCases(t, namedPortIPBlockCases())
}
