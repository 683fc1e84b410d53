package networkpolicy

import (
	"fmt"
	"math/rand"
	"net"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/grouping"
	"antrea.io/antrea/pkg/controller/types"
)

// The oracle test checks the computation's semantics against cyclonus'
// matcher, an implementation of K8s NetworkPolicy we did not write: for
// random policies over the upstream netpol universe (namespaces x, y, z x
// pods a, b, c, plus an outside address), every connection is judged twice —
// by cyclonus from the K8s objects, and by an evaluator of the computed
// objects that does what an agent does (isolation by the policies whose
// AppliedToGroup holds the Pod, peers by AddressGroup IPs and ipBlocks,
// named ports resolved against the members' ports).

const outsideIP = "192.168.1.10"

type oraclePod struct {
	ns, name, ip string
	labels       map[string]string
	ports        []v1.ContainerPort
}

// oracleEval answers from the computed objects in the stores.
type oracleEval struct {
	policies []*types.NetworkPolicy
	atgs     map[string]*types.AppliedToGroup
	ags      map[string]*types.AddressGroup
}

func (e *env) oracleEval() *oracleEval {
	o := &oracleEval{atgs: map[string]*types.AppliedToGroup{}, ags: map[string]*types.AddressGroup{}}
	for _, x := range e.nps.List() {
		o.policies = append(o.policies, x.(*types.NetworkPolicy))
	}
	for _, x := range e.atgs.List() {
		g := x.(*types.AppliedToGroup)
		o.atgs[g.Name] = g
	}
	for _, x := range e.ags.List() {
		g := x.(*types.AddressGroup)
		o.ags[g.Name] = g
	}
	return o
}

// appliedMember returns the member of a Pod in the policy's AppliedToGroup.
func (o *oracleEval) appliedMember(p *types.NetworkPolicy, pod *oraclePod) *controlplane.GroupMember {
	for _, name := range p.AppliedToGroups {
		g := o.atgs[name]
		if g == nil {
			continue
		}
		for _, set := range memberSets(g) {
			for _, m := range set {
				if m.Pod != nil && m.Pod.Namespace == pod.ns && m.Pod.Name == pod.name {
					return m
				}
			}
		}
	}
	return nil
}

// peerMember returns the member with ip in the peer's AddressGroups.
func (o *oracleEval) peerMember(peer controlplane.NetworkPolicyPeer, ip net.IP) *controlplane.GroupMember {
	for _, name := range peer.AddressGroups {
		if g := o.ags[name]; g != nil {
			for _, m := range g.GroupMembers {
				for _, mip := range m.IPs {
					if net.IP(mip).Equal(ip) {
						return m
					}
				}
			}
		}
	}
	return nil
}

func inIPNet(n controlplane.IPNet, ip net.IP) bool {
	bits := 32
	if len(n.IP) == net.IPv6len {
		bits = 128
	}
	ipn := net.IPNet{IP: net.IP(n.IP), Mask: net.CIDRMask(int(n.PrefixLength), bits)}
	return ipn.Contains(ip)
}

func peerMatches(o *oracleEval, peer controlplane.NetworkPolicyPeer, ip net.IP) bool {
	if o.peerMember(peer, ip) != nil {
		return true
	}
	for _, b := range peer.IPBlocks {
		if !inIPNet(b.CIDR, ip) {
			continue
		}
		excluded := false
		for _, ex := range b.Except {
			excluded = excluded || inIPNet(ex, ip)
		}
		if !excluded {
			return true
		}
	}
	return false
}

// serviceMatches resolves named ports against ports, those of the Pod
// receiving the traffic as the agent knows them from group members.
func serviceMatches(services []controlplane.Service, port int32, proto v1.Protocol, ports []controlplane.NamedPort) bool {
	if services == nil {
		return true
	}
	for _, s := range services {
		if string(*s.Protocol) != string(proto) {
			continue
		}
		switch {
		case s.Port == nil:
			return true
		case s.Port.Type == intstr.Int:
			hi := s.Port.IntVal
			if s.EndPort != nil {
				hi = *s.EndPort
			}
			if port >= s.Port.IntVal && port <= hi {
				return true
			}
		default:
			for _, np := range ports {
				if np.Name == s.Port.StrVal && string(np.Protocol) == string(proto) && np.Port == port {
					return true
				}
			}
		}
	}
	return false
}

// allowed judges one direction at the Pod target (nil: outside, allowed).
func (o *oracleEval) allowed(dir controlplane.Direction, target *oraclePod, peerIP string, port int32, proto v1.Protocol) bool {
	if target == nil {
		return true
	}
	ip := net.ParseIP(peerIP)
	isolated := false
	for _, p := range o.policies {
		member := o.appliedMember(p, target)
		if member == nil {
			continue
		}
		for _, r := range p.Rules {
			if r.Direction != dir {
				continue
			}
			isolated = true
			peer, ports := r.From, member.Ports
			if dir == controlplane.DirectionOut {
				peer, ports = r.To, nil
				if m := o.peerMember(r.To, ip); m != nil {
					ports = m.Ports
				}
			}
			if peerMatches(o, peer, ip) && serviceMatches(r.Services, port, proto, ports) {
				return true
			}
		}
	}
	return !isolated
}

func TestComputedPoliciesAllowWhatCyclonusAllows(t *testing.T) {
	for seed := int64(1); seed <= 80; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) { oracleRound(t, seed) })
	}
}

func oracleRound(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	nsNames := []string{"x", "y", "z"}
	nsLabels := map[string]map[string]string{}
	var objs []runtime.Object
	var pods []*oraclePod
	allPorts := []v1.ContainerPort{
		{Name: "serve-80-tcp", ContainerPort: 80, Protocol: v1.ProtocolTCP},
		{Name: "serve-81-udp", ContainerPort: 81, Protocol: v1.ProtocolUDP},
		{Name: "serve-82-sctp", ContainerPort: 82, Protocol: v1.ProtocolSCTP},
	}
	for i, ns := range nsNames {
		l := map[string]string{"ns": ns, "env": []string{"prod", "dev"}[rng.Intn(2)]}
		objs = append(objs, newNamespace(ns, l))
		nsLabels[ns] = map[string]string{grouping.NamespaceNameLabel: ns}
		for k, v := range l {
			nsLabels[ns][k] = v
		}
		for j, name := range []string{"a", "b", "c"} {
			var ports []v1.ContainerPort
			for _, p := range allPorts {
				if rng.Intn(4) > 0 {
					ports = append(ports, p)
				}
			}
			p := &oraclePod{ns: ns, name: name, ip: fmt.Sprintf("10.%d.0.%d", i, j+1),
				labels: map[string]string{"pod": name, "app": []string{"web", "db"}[rng.Intn(2)]}, ports: ports}
			pods = append(pods, p)
			objs = append(objs, newPod(ns, name, p.labels, p.ip, fmt.Sprintf("n%d", 1+rng.Intn(3)), ports...))
		}
	}

	podSelectors := []metav1.LabelSelector{{}, *matchLabels("pod", "a"), *matchLabels("app", "web"),
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pod", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}}
	randPeer := func() networkingv1.NetworkPolicyPeer {
		switch rng.Intn(9) {
		case 0:
			return networkingv1.NetworkPolicyPeer{PodSelector: matchLabels("pod", "b")}
		case 1:
			return networkingv1.NetworkPolicyPeer{NamespaceSelector: matchLabels("ns", "y")}
		case 2:
			return networkingv1.NetworkPolicyPeer{PodSelector: matchLabels("app", "db"), NamespaceSelector: matchLabels("env", "prod")}
		case 3:
			return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}
		case 4:
			return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}
		case 5:
			return networkingv1.NetworkPolicyPeer{PodSelector: matchLabels("pod", "c"), NamespaceSelector: &metav1.LabelSelector{}}
		case 6:
			return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}
		case 7:
			// Overlaps the block above, and covers ns y which it excepts.
			return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.1.0.0/23", Except: []string{"10.1.0.2/32"}}}
		default:
			return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.1.0/24"}}
		}
	}
	randPorts := func() []networkingv1.NetworkPolicyPort {
		switch rng.Intn(4) {
		case 0:
			return nil
		case 1:
			return []networkingv1.NetworkPolicyPort{}
		}
		options := []networkingv1.NetworkPolicyPort{
			port(v1.ProtocolTCP, intstr.FromInt32(80)),
			port(v1.ProtocolTCP, intstr.FromString("serve-80-tcp")),
			port(v1.ProtocolUDP, intstr.FromInt32(81)),
			port(v1.ProtocolUDP, intstr.FromString("serve-81-udp")),
			port(v1.ProtocolSCTP, intstr.FromInt32(82)),
			port(v1.ProtocolSCTP, intstr.FromString("serve-82-sctp")),
			port(v1.ProtocolTCP, intstr.FromInt32(80), 81),
			port("", intstr.FromInt32(81)),
			{Protocol: func() *v1.Protocol { p := v1.ProtocolUDP; return &p }()},
		}
		var out []networkingv1.NetworkPolicyPort
		for i := 1 + rng.Intn(2); i > 0; i-- {
			out = append(out, options[rng.Intn(len(options))])
		}
		return out
	}
	randPeers := func() []networkingv1.NetworkPolicyPeer {
		switch rng.Intn(4) {
		case 0:
			return nil
		case 1:
			return []networkingv1.NetworkPolicyPeer{}
		}
		var out []networkingv1.NetworkPolicyPeer
		for i := 1 + rng.Intn(2); i > 0; i-- {
			out = append(out, randPeer())
		}
		return out
	}
	var policies []*networkingv1.NetworkPolicy
	for i := 1 + rng.Intn(4); i > 0; i-- {
		spec := networkingv1.NetworkPolicySpec{PodSelector: podSelectors[rng.Intn(len(podSelectors))]}
		spec.PolicyTypes = [][]networkingv1.PolicyType{nil, {networkingv1.PolicyTypeIngress}, {networkingv1.PolicyTypeEgress},
			{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}[rng.Intn(4)]
		if rng.Intn(4) > 0 {
			for j := rng.Intn(3); j >= 0; j-- {
				ports := randPorts()
				spec.Ingress = append(spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: randPeers(), Ports: ports})
			}
		}
		if rng.Intn(3) > 0 {
			for j := rng.Intn(2); j >= 0; j-- {
				ports := randPorts()
				spec.Egress = append(spec.Egress, networkingv1.NetworkPolicyEgressRule{To: randPeers(), Ports: ports})
			}
		}
		np := newPolicy(nsNames[rng.Intn(3)], fmt.Sprintf("np%d", i), spec)
		policies = append(policies, np)
		objs = append(objs, np)
	}

	e := newEnv(t, objs...)
	if err := e.c.drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	eval := e.oracleEval()
	if len(eval.policies) != len(policies) {
		t.Fatalf("%d internal policies for %d K8s policies", len(eval.policies), len(policies))
	}

	// Cyclonus needs explicit policyTypes: give it the API server's default.
	var defaulted []*networkingv1.NetworkPolicy
	for _, np := range policies {
		d := np.DeepCopy()
		if len(d.Spec.PolicyTypes) == 0 {
			d.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
			if len(d.Spec.Egress) > 0 {
				d.Spec.PolicyTypes = append(d.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
			}
		}
		defaulted = append(defaulted, d)
	}
	oracle := matcher.BuildNetworkPolicies(false, defaulted)

	peer := func(p *oraclePod) *matcher.TrafficPeer {
		if p == nil {
			return &matcher.TrafficPeer{IP: outsideIP}
		}
		return &matcher.TrafficPeer{IP: p.ip, Internal: &matcher.InternalPeer{PodLabels: p.labels, NamespaceLabels: nsLabels[p.ns], Namespace: p.ns}}
	}
	ends := append([]*oraclePod{nil}, pods...)
	traffic := []struct {
		port  int32
		proto v1.Protocol
	}{{80, v1.ProtocolTCP}, {81, v1.ProtocolTCP}, {81, v1.ProtocolUDP}, {80, v1.ProtocolUDP}, {82, v1.ProtocolSCTP}}
	checked, allowedCount := 0, 0
	for _, src := range ends {
		for _, dst := range ends {
			if src == nil && dst == nil {
				continue
			}
			for _, tr := range traffic {
				portName := ""
				if dst != nil {
					for _, cp := range dst.ports {
						if cp.ContainerPort == tr.port && cp.Protocol == tr.proto {
							portName = cp.Name
						}
					}
				}
				want := oracle.IsTrafficAllowed(&matcher.Traffic{Source: peer(src), Destination: peer(dst),
					ResolvedPort: int(tr.port), ResolvedPortName: portName, Protocol: tr.proto}).IsAllowed()
				srcIP, dstIP := outsideIP, outsideIP
				if src != nil {
					srcIP = src.ip
				}
				if dst != nil {
					dstIP = dst.ip
				}
				got := eval.allowed(controlplane.DirectionIn, dst, srcIP, tr.port, tr.proto) &&
					eval.allowed(controlplane.DirectionOut, src, dstIP, tr.port, tr.proto)
				checked++
				if want {
					allowedCount++
				}
				if got != want {
					t.Errorf("%s -> %s %d/%s: computed policies allow=%v, cyclonus allow=%v", name(src), name(dst), tr.port, tr.proto, got, want)
				}
			}
		}
	}
	if t.Failed() {
		for _, np := range policies {
			t.Logf("policy %s/%s: %+v", np.Namespace, np.Name, np.Spec)
		}
	}
	t.Logf("%d connections checked, %d allowed, %d policies", checked, allowedCount, len(policies))
}

func name(p *oraclePod) string {
	if p == nil {
		return "outside"
	}
	return p.ns + "/" + p.name
}
