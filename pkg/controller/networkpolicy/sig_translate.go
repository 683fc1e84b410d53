package networkpolicy

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	sigv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// The Kubernetes SIG network-policy-api kinds (sigs.k8s.io/network-policy-api)
// are computed by the Antrea-native path (computeNative): each is turned into
// the nativeSpec an equivalent ClusterNetworkPolicy would have, in a tier of
// its own whose priority places it among Antrea's Tiers as upstream Antrea
// does:
//
//	ClusterNetworkPolicy tier Admin     220  (after platform 200, before application 250)
//	AdminNetworkPolicy                  251  (after application, before K8s NetworkPolicy)
//	ClusterNetworkPolicy tier Baseline  254  (after Antrea's baseline 253, after K8s NetworkPolicy)
//	BaselineAdminNetworkPolicy          254
//
// The tiers are not Tier objects: their names hold a character a Tier name
// cannot, so no user Tier can shadow them, and sigTier answers them.
const (
	sigAdminTierName    = "sig:admin"
	sigANPTierName      = "sig:anp"
	sigBaselineTierName = "sig:baseline"

	// SIGAdminTierPriority is the tier priority of ClusterNetworkPolicies
	// (policy.networking.k8s.io/v1alpha2) of tier Admin.
	SIGAdminTierPriority int32 = 220
	// SIGANPTierPriority is the tier priority of AdminNetworkPolicies.
	SIGANPTierPriority int32 = 251
	// SIGBaselineTierPriority is the tier priority of BaselineAdminNetworkPolicies
	// and of ClusterNetworkPolicies of tier Baseline.
	SIGBaselineTierPriority int32 = 254
)

// The user-facing kinds' names in internal policies' sourceRef (and so in
// audit log lines): upstream Antrea's for AdminNetworkPolicy and
// BaselineAdminNetworkPolicy.
const (
	SIGClusterNetworkPolicyType      controlplane.NetworkPolicyType = "ClusterNetworkPolicy"
	AdminNetworkPolicyType           controlplane.NetworkPolicyType = "AdminNetworkPolicy"
	BaselineAdminNetworkPolicyType   controlplane.NetworkPolicyType = "BaselineAdminNetworkPolicy"
	sigKeyCNP, sigKeyANP, sigKeyBANP                                = "sigcnp", "anp", "banp"
)

func sigKeyOfCNP(name string) string  { return sigKeyCNP + ":" + name }
func sigKeyOfANP(name string) string  { return sigKeyANP + ":" + name }
func sigKeyOfBANP(name string) string { return sigKeyBANP + ":" + name }

// sigTier is the Tier standing for a SIG tier name; nil for any other name.
func sigTier(name string) *crdv1beta1.Tier {
	var p int32
	switch name {
	case sigAdminTierName:
		p = SIGAdminTierPriority
	case sigANPTierName:
		p = SIGANPTierPriority
	case sigBaselineTierName:
		p = SIGBaselineTierPriority
	default:
		return nil
	}
	return &crdv1beta1.Tier{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.TierSpec{Priority: p}}
}

var (
	actionAllow = crdv1beta1.RuleActionAllow
	actionDrop  = crdv1beta1.RuleActionDrop
	actionPass  = crdv1beta1.RuleActionPass
)

// sigAction maps a SIG action to Antrea's: Accept and Allow are Allow, Deny
// is Drop, Pass is Pass. A Pass in a baseline tier (the SIG's "skip the rest
// of this tier", and no tier follows) is Allow: the baseline table is the
// last one, so skipping its remaining rules is what an Allow does there.
func sigAction(a string, baseline bool) *crdv1beta1.RuleAction {
	switch a {
	case "Accept", "Allow":
		return &actionAllow
	case "Pass":
		if baseline {
			return &actionAllow
		}
		return &actionPass
	}
	// Deny, and (fail closed, as the API asks) anything unknown.
	return &actionDrop
}

// sigSubject is the appliedTo of a subject (namespaces or pods).
func sigSubject(namespaces *metav1.LabelSelector, pods *sigv1alpha1.NamespacedPod) []crdv1beta1.AppliedTo {
	switch {
	case namespaces != nil:
		return []crdv1beta1.AppliedTo{{NamespaceSelector: namespaces.DeepCopy()}}
	case pods != nil:
		return []crdv1beta1.AppliedTo{{NamespaceSelector: pods.NamespaceSelector.DeepCopy(), PodSelector: pods.PodSelector.DeepCopy()}}
	}
	// No field set: a newer API's subject; it selects nothing.
	return []crdv1beta1.AppliedTo{{NamespaceSelector: nothing(), PodSelector: nothing()}}
}

// nothing is a selector matching no object.
func nothing() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "policy.networking.k8s.io/none", Operator: metav1.LabelSelectorOpExists},
		{Key: "policy.networking.k8s.io/none", Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
}

// sigPeer is one peer (exactly one field set) as Antrea peers; several for
// networks (one ipBlock each). A peer with no known field (a newer API's)
// matches everything for Deny and Pass and nothing for Accept/Allow: the
// API's "fail closed".
func sigPeer(namespaces *metav1.LabelSelector, pods *sigv1alpha1.NamespacedPod, nodes *metav1.LabelSelector, networks []string, allows bool) []crdv1beta1.NetworkPolicyPeer {
	switch {
	case namespaces != nil:
		return []crdv1beta1.NetworkPolicyPeer{{NamespaceSelector: namespaces.DeepCopy()}}
	case pods != nil:
		return []crdv1beta1.NetworkPolicyPeer{{NamespaceSelector: pods.NamespaceSelector.DeepCopy(), PodSelector: pods.PodSelector.DeepCopy()}}
	case nodes != nil:
		return []crdv1beta1.NetworkPolicyPeer{{NodeSelector: nodes.DeepCopy()}}
	case len(networks) > 0:
		out := make([]crdv1beta1.NetworkPolicyPeer, 0, len(networks))
		for _, n := range networks {
			out = append(out, crdv1beta1.NetworkPolicyPeer{IPBlock: &crdv1beta1.IPBlock{CIDR: n}})
		}
		return out
	}
	if allows {
		return []crdv1beta1.NetworkPolicyPeer{{NamespaceSelector: nothing(), PodSelector: nothing()}}
	}
	return []crdv1beta1.NetworkPolicyPeer{{IPBlock: &crdv1beta1.IPBlock{CIDR: "0.0.0.0/0"}}, {IPBlock: &crdv1beta1.IPBlock{CIDR: "::/0"}}}
}

// namedPortProtocols are the protocols a named port without one is matched
// on: the Pod's container port of that name says which it is.
var namedPortProtocols = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}

func protoPort(proto v1.Protocol, port intstr.IntOrString, end *int32) crdv1beta1.NetworkPolicyPort {
	p := proto
	return crdv1beta1.NetworkPolicyPort{Protocol: &p, Port: &port, EndPort: end}
}

func sigNamedPorts(name string) []crdv1beta1.NetworkPolicyPort {
	out := make([]crdv1beta1.NetworkPolicyPort, 0, len(namedPortProtocols))
	for _, proto := range namedPortProtocols {
		out = append(out, protoPort(proto, intstr.FromString(name), nil))
	}
	return out
}

// sigV1alpha2Ports converts ClusterNetworkPolicy protocols: a protocol
// without destinationPort is every port of it, a number one port, a range
// start..end; destinationNamedPort is the named port on whichever protocol
// the Pod declares it. Empty: every protocol and port.
func sigV1alpha2Ports(protocols []sigv1alpha2.ClusterNetworkPolicyProtocol) []crdv1beta1.NetworkPolicyPort {
	var out []crdv1beta1.NetworkPolicyPort
	add := func(proto v1.Protocol, dp *sigv1alpha2.Port) {
		switch {
		case dp == nil:
			p := proto
			out = append(out, crdv1beta1.NetworkPolicyPort{Protocol: &p})
		case dp.Range != nil:
			end := dp.Range.End
			out = append(out, protoPort(proto, intstr.FromInt32(dp.Range.Start), &end))
		default:
			out = append(out, protoPort(proto, intstr.FromInt32(dp.Number), nil))
		}
	}
	for i := range protocols {
		p := &protocols[i]
		switch {
		case p.TCP != nil:
			add(v1.ProtocolTCP, p.TCP.DestinationPort)
		case p.UDP != nil:
			add(v1.ProtocolUDP, p.UDP.DestinationPort)
		case p.SCTP != nil:
			add(v1.ProtocolSCTP, p.SCTP.DestinationPort)
		case p.DestinationNamedPort != "":
			out = append(out, sigNamedPorts(p.DestinationNamedPort)...)
		}
	}
	return out
}

// sigV1alpha1Ports converts AdminNetworkPolicy ports (portNumber, namedPort,
// portRange; a range's protocol defaults to TCP). nil: every port.
func sigV1alpha1Ports(ports *[]sigv1alpha1.AdminNetworkPolicyPort) []crdv1beta1.NetworkPolicyPort {
	if ports == nil {
		return nil
	}
	var out []crdv1beta1.NetworkPolicyPort
	for _, p := range *ports {
		switch {
		case p.PortNumber != nil:
			out = append(out, protoPort(orTCP(p.PortNumber.Protocol), intstr.FromInt32(p.PortNumber.Port), nil))
		case p.NamedPort != nil:
			out = append(out, sigNamedPorts(*p.NamedPort)...)
		case p.PortRange != nil:
			end := p.PortRange.End
			out = append(out, protoPort(orTCP(p.PortRange.Protocol), intstr.FromInt32(p.PortRange.Start), &end))
		}
	}
	return out
}

func orTCP(p v1.Protocol) v1.Protocol {
	if p == "" {
		return v1.ProtocolTCP
	}
	return p
}

// specOfSIGCNP is a v1alpha2 ClusterNetworkPolicy as a nativeSpec.
func specOfSIGCNP(p *sigv1alpha2.ClusterNetworkPolicy) *nativeSpec {
	baseline := p.Spec.Tier == sigv1alpha2.BaselineTier
	s := &nativeSpec{tier: sigAdminTierName, priority: float64(p.Spec.Priority)}
	if baseline {
		s.tier = sigBaselineTierName
	}
	subj := p.Spec.Subject
	var pods *sigv1alpha1.NamespacedPod
	if subj.Pods != nil {
		pods = &sigv1alpha1.NamespacedPod{NamespaceSelector: subj.Pods.NamespaceSelector, PodSelector: subj.Pods.PodSelector}
	}
	s.appliedTo = sigSubject(subj.Namespaces, pods)
	for _, r := range p.Spec.Ingress {
		action := sigAction(string(r.Action), baseline)
		rule := crdv1beta1.Rule{Name: r.Name, Action: action, Ports: sigV1alpha2Ports(r.Protocols)}
		for _, f := range r.From {
			rule.From = append(rule.From, sigPeer(f.Namespaces, v2pods(f.Pods), nil, nil, *action == actionAllow)...)
		}
		s.ingress = append(s.ingress, rule)
	}
	for _, r := range p.Spec.Egress {
		action := sigAction(string(r.Action), baseline)
		rule := crdv1beta1.Rule{Name: r.Name, Action: action, Ports: sigV1alpha2Ports(r.Protocols)}
		for _, t := range r.To {
			rule.To = append(rule.To, sigPeer(t.Namespaces, v2pods(t.Pods), t.Nodes, cidrs2(t.Networks), *action == actionAllow)...)
		}
		s.egress = append(s.egress, rule)
	}
	return s
}

func v2pods(p *sigv1alpha2.NamespacedPod) *sigv1alpha1.NamespacedPod {
	if p == nil {
		return nil
	}
	return &sigv1alpha1.NamespacedPod{NamespaceSelector: p.NamespaceSelector, PodSelector: p.PodSelector}
}

func cidrs2(in []sigv1alpha2.CIDR) []string {
	out := make([]string, len(in))
	for i, c := range in {
		out[i] = string(c)
	}
	return out
}

func cidrs1(in []sigv1alpha1.CIDR) []string {
	out := make([]string, len(in))
	for i, c := range in {
		out[i] = string(c)
	}
	return out
}

// specOfANP is a v1alpha1 AdminNetworkPolicy as a nativeSpec.
func specOfANP(p *sigv1alpha1.AdminNetworkPolicy) *nativeSpec {
	s := &nativeSpec{tier: sigANPTierName, priority: float64(p.Spec.Priority)}
	s.appliedTo = sigSubject(p.Spec.Subject.Namespaces, p.Spec.Subject.Pods)
	for _, r := range p.Spec.Ingress {
		action := sigAction(string(r.Action), false)
		rule := crdv1beta1.Rule{Name: r.Name, Action: action, Ports: sigV1alpha1Ports(r.Ports)}
		for _, f := range r.From {
			rule.From = append(rule.From, sigPeer(f.Namespaces, f.Pods, nil, nil, *action == actionAllow)...)
		}
		s.ingress = append(s.ingress, rule)
	}
	for _, r := range p.Spec.Egress {
		action := sigAction(string(r.Action), false)
		rule := crdv1beta1.Rule{Name: r.Name, Action: action, Ports: sigV1alpha1Ports(r.Ports)}
		for _, t := range r.To {
			rule.To = append(rule.To, sigPeer(t.Namespaces, t.Pods, t.Nodes, cidrs1(t.Networks), *action == actionAllow)...)
		}
		s.egress = append(s.egress, rule)
	}
	return s
}

// specOfBANP is the v1alpha1 BaselineAdminNetworkPolicy as a nativeSpec;
// only the singleton "default" is enforced (the CRD refuses other names).
func specOfBANP(p *sigv1alpha1.BaselineAdminNetworkPolicy) *nativeSpec {
	s := &nativeSpec{tier: sigBaselineTierName}
	s.appliedTo = sigSubject(p.Spec.Subject.Namespaces, p.Spec.Subject.Pods)
	for _, r := range p.Spec.Ingress {
		action := sigAction(string(r.Action), true)
		rule := crdv1beta1.Rule{Name: r.Name, Action: action, Ports: sigV1alpha1Ports(r.Ports)}
		for _, f := range r.From {
			rule.From = append(rule.From, sigPeer(f.Namespaces, f.Pods, nil, nil, *action == actionAllow)...)
		}
		s.ingress = append(s.ingress, rule)
	}
	for _, r := range p.Spec.Egress {
		action := sigAction(string(r.Action), true)
		rule := crdv1beta1.Rule{Name: r.Name, Action: action, Ports: sigV1alpha1Ports(r.Ports)}
		for _, t := range r.To {
			rule.To = append(rule.To, sigPeer(t.Namespaces, t.Pods, t.Nodes, cidrs1(t.Networks), *action == actionAllow)...)
		}
		s.egress = append(s.egress, rule)
	}
	return s
}
