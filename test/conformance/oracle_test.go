package conformance

import (
	"context"
	"fmt"
	"net"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	knpapi "sigs.k8s.io/kube-network-policies/pkg/api"
	knp "sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

// portProtocol is one probed destination port.
type portProtocol struct {
	Port     int
	Protocol corev1.Protocol
}

func (pp portProtocol) String() string { return fmt.Sprintf("%s/%d", pp.Protocol, pp.Port) }

// probedPorts are the columns of the upstream test matrix. SCTP is left out:
// the test pods serve TCP and UDP only.
var probedPorts = []portProtocol{
	{80, corev1.ProtocolTCP}, {81, corev1.ProtocolTCP},
	{80, corev1.ProtocolUDP}, {81, corev1.ProtocolUDP},
}

// cell is one probe: from a pod to another pod's IP on a port.
type cell struct {
	From, To string // namespace/name
	PP       portProtocol
}

// cells lists every probe of the matrix. A pod's traffic to its own IP is
// left out: the kernel delivers it on the pod's loopback, it never reaches
// the CNI, so no implementation can enforce a policy on it.
func cells(peers []peer) []cell {
	var out []cell
	for _, pp := range probedPorts {
		for _, from := range peers {
			for _, to := range peers {
				if from.key() != to.key() {
					out = append(out, cell{From: from.key(), To: to.key(), PP: pp})
				}
			}
		}
	}
	return out
}

// expectation is the oracles' verdict for every cell.
type expectation struct {
	// Allowed is cyclonus' verdict, the reference the lab is compared with.
	Allowed map[cell]bool
	// Disagreements lists the cells on which the two oracles differ.
	Disagreements []string
}

// expect computes what the policies allow between the peers, with both
// oracles, and records where they disagree.
func expect(ctx context.Context, peers []peer, policies []*networkingv1.NetworkPolicy) expectation {
	byKey := map[string]peer{}
	for _, p := range peers {
		byKey[p.key()] = p
	}
	cyc := matcher.BuildNetworkPolicies(true, policies)
	exp := expectation{Allowed: map[cell]bool{}}
	for _, c := range cells(peers) {
		src, dst := byKey[c.From], byKey[c.To]
		a := cyclonusAllows(cyc, src, dst, c.PP)
		b := knpAllows(ctx, policies, src, dst, c.PP)
		exp.Allowed[c] = a
		if a != b {
			exp.Disagreements = append(exp.Disagreements,
				fmt.Sprintf("%s -> %s %s: cyclonus says allowed=%t, kube-network-policies says allowed=%t", c.From, c.To, c.PP, a, b))
		}
	}
	return exp
}

// portName is the name of the destination's container port serving pp.
func portName(dst peer, pp portProtocol) string {
	for _, p := range dst.Ports {
		if int(p.ContainerPort) == pp.Port && p.Protocol == pp.Protocol {
			return p.Name
		}
	}
	return ""
}

func cyclonusAllows(policy *matcher.Policy, src, dst peer, pp portProtocol) bool {
	traffic := &matcher.Traffic{
		Source: &matcher.TrafficPeer{IP: src.IP, Internal: &matcher.InternalPeer{
			PodLabels: src.Labels, NamespaceLabels: src.NSLabels, Namespace: src.Namespace}},
		Destination: &matcher.TrafficPeer{IP: dst.IP, Internal: &matcher.InternalPeer{
			PodLabels: dst.Labels, NamespaceLabels: dst.NSLabels, Namespace: dst.Namespace}},
		ResolvedPort:     pp.Port,
		ResolvedPortName: portName(dst, pp),
		Protocol:         pp.Protocol,
	}
	return policy.IsTrafficAllowed(traffic).IsAllowed()
}

func knpPodInfo(p peer) *knpapi.PodInfo {
	info := &knpapi.PodInfo{
		Name:      p.Name,
		Labels:    p.Labels,
		Namespace: &knpapi.Namespace{Name: p.Namespace, Labels: p.NSLabels},
	}
	for _, cp := range p.Ports {
		info.ContainerPorts = append(info.ContainerPorts, &knpapi.ContainerPort{
			Name: cp.Name, Port: cp.ContainerPort, Protocol: string(cp.Protocol)})
	}
	return info
}

// selecting returns the policies that select the pod, as
// kube-network-policies' own lookup does before it evaluates a direction.
func selecting(policies []*networkingv1.NetworkPolicy, p peer) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, np := range policies {
		if np.Namespace != p.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, np)
		}
	}
	return out
}

// knpAllows evaluates egress at the source and ingress at the destination
// with the same arguments kube-network-policies' evaluators pass.
func knpAllows(ctx context.Context, policies []*networkingv1.NetworkPolicy, src, dst peer, pp portProtocol) bool {
	srcInfo, dstInfo := knpPodInfo(src), knpPodInfo(dst)
	egress := knp.EvaluatePolicyDirection(ctx, selecting(policies, src), networkingv1.PolicyTypeEgress,
		srcInfo, 0, dstInfo, net.ParseIP(dst.IP), pp.Port, pp.Protocol)
	ingress := knp.EvaluatePolicyDirection(ctx, selecting(policies, dst), networkingv1.PolicyTypeIngress,
		dstInfo, pp.Port, srcInfo, net.ParseIP(src.IP), 0, pp.Protocol)
	return egress && ingress
}
