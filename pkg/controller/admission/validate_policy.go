package admission

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/util/dnsname"
)

// policyKind tells the checks that differ between a ClusterNetworkPolicy
// and an Antrea NetworkPolicy apart.
type policyKind struct {
	// namespace is the Antrea NetworkPolicy's; "" for a ClusterNetworkPolicy.
	namespace string
}

func (k policyKind) cluster() bool { return k.namespace == "" }

// ValidateClusterNetworkPolicy returns every reason to refuse p, each naming
// its field (upstream's validate.go list, plus the references that must
// exist: the Tier and the ClusterGroups).
func (v *Validator) ValidateClusterNetworkPolicy(ctx context.Context, p *crdv1beta1.ClusterNetworkPolicy) field.ErrorList {
	s := p.Spec
	return v.validatePolicy(ctx, policyKind{}, s.Tier, s.Priority, s.AppliedTo, s.Ingress, s.Egress)
}

// ValidateNetworkPolicy returns every reason to refuse an Antrea
// NetworkPolicy, each naming its field.
func (v *Validator) ValidateNetworkPolicy(ctx context.Context, p *crdv1beta1.NetworkPolicy) field.ErrorList {
	s := p.Spec
	return v.validatePolicy(ctx, policyKind{namespace: p.Namespace}, s.Tier, s.Priority, s.AppliedTo, s.Ingress, s.Egress)
}

func (v *Validator) validatePolicy(ctx context.Context, kind policyKind, tier string, priority float64,
	appliedTo []crdv1beta1.AppliedTo, ingress, egress []crdv1beta1.Rule) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, v.validateTierRef(ctx, spec.Child("tier"), tier)...)
	if math.IsNaN(priority) || priority < 1 || priority > 10000 {
		errs = append(errs, field.Invalid(spec.Child("priority"), priority, "must be between 1 and 10000"))
	}
	errs = append(errs, validateAppliedToPlacement(spec, appliedTo, ingress, egress)...)
	errs = append(errs, v.validateAppliedTos(ctx, kind, spec.Child("appliedTo"), appliedTo, len(egress) > 0)...)
	errs = append(errs, validateNodePolicy(spec, appliedTo, ingress, egress)...)

	names := map[string]*field.Path{}
	for _, dir := range []struct {
		name    string
		rules   []crdv1beta1.Rule
		ingress bool
	}{{"ingress", ingress, true}, {"egress", egress, false}} {
		for i := range dir.rules {
			r := &dir.rules[i]
			path := spec.Child(dir.name).Index(i)
			if r.Name != "" {
				if first, dup := names[r.Name]; dup {
					errs = append(errs, field.Duplicate(path.Child("name"), r.Name+" (also the name of "+first.String()+"); rule names must be unique within the policy"))
				} else {
					names[r.Name] = path
				}
			}
			errs = append(errs, v.validateRule(ctx, kind, path, r, dir.ingress, tier, appliedTo)...)
		}
	}
	return errs
}

// validateTierRef: an empty tier is the application Tier; any other must
// exist (upstream's CamelCase static names map to the static Tiers).
func (v *Validator) validateTierRef(ctx context.Context, path *field.Path, tier string) field.ErrorList {
	name := crdv1beta1.TierName(tier)
	if crdv1beta1.IsStaticTier(name) {
		return nil
	}
	t, err := v.lookup.Tier(ctx, name)
	if err != nil {
		return field.ErrorList{field.InternalError(path, fmt.Errorf("looking up Tier %s: %w", name, err))}
	}
	if t == nil {
		return field.ErrorList{field.NotFound(path, tier)}
	}
	return nil
}

// validateAppliedToPlacement: appliedTo is set in the spec or in every rule,
// never both, never neither.
func validateAppliedToPlacement(spec *field.Path, appliedTo []crdv1beta1.AppliedTo, ingress, egress []crdv1beta1.Rule) field.ErrorList {
	var withRuleAppliedTo, withoutRuleAppliedTo []*field.Path
	for _, dir := range []struct {
		name  string
		rules []crdv1beta1.Rule
	}{{"ingress", ingress}, {"egress", egress}} {
		for i, r := range dir.rules {
			p := spec.Child(dir.name).Index(i).Child("appliedTo")
			if len(r.AppliedTo) > 0 {
				withRuleAppliedTo = append(withRuleAppliedTo, p)
			} else {
				withoutRuleAppliedTo = append(withoutRuleAppliedTo, p)
			}
		}
	}
	switch {
	case len(appliedTo) > 0 && len(withRuleAppliedTo) > 0:
		return field.ErrorList{field.Forbidden(withRuleAppliedTo[0],
			"appliedTo cannot be set in both spec and rules (spec.appliedTo is set)")}
	case len(appliedTo) == 0 && len(withRuleAppliedTo) == 0:
		return field.ErrorList{field.Required(spec.Child("appliedTo"),
			"appliedTo must be set either in spec or in every rule")}
	case len(withRuleAppliedTo) > 0 && len(withoutRuleAppliedTo) > 0:
		return field.ErrorList{field.Required(withoutRuleAppliedTo[0],
			"appliedTo must be set in every rule or in none of them ("+withRuleAppliedTo[0].String()+" is set)")}
	}
	return nil
}

// appliedToNodes reports whether an appliedTo list selects Nodes.
func appliedToNodes(a []crdv1beta1.AppliedTo) bool {
	return slices.ContainsFunc(a, func(a crdv1beta1.AppliedTo) bool { return a.NodeSelector != nil })
}

// validateNodePolicy checks a ClusterNetworkPolicy applied to Nodes
// (upstream's NodeNetworkPolicy): it applies to Nodes only, in every rule
// (a policy is applied to Nodes or to workloads, never both), and its rules
// use no fqdn peer, toServices nor l7Protocols, which have no meaning for
// the Node's own traffic. The nodeSelector mixed with other fields in one
// entry is refused by validateAppliedTos.
func validateNodePolicy(spec *field.Path, appliedTo []crdv1beta1.AppliedTo, ingress, egress []crdv1beta1.Rule) field.ErrorList {
	var errs field.ErrorList
	onNodes := appliedToNodes(appliedTo)
	var first *field.Path // the first appliedTo list that selects Nodes
	mixed := func(path *field.Path, list []crdv1beta1.AppliedTo) {
		for i := range list {
			if list[i].NodeSelector == nil && appliedToNodes(list) {
				errs = append(errs, field.Forbidden(path.Index(i),
					"a policy applied to Nodes (nodeSelector) cannot be applied to other workloads at the same time"))
			}
		}
	}
	if onNodes {
		first = spec.Child("appliedTo")
		mixed(first, appliedTo)
	}
	type ruleRef struct {
		path *field.Path
		r    *crdv1beta1.Rule
	}
	var rules []ruleRef
	for _, dir := range []struct {
		name  string
		rules []crdv1beta1.Rule
	}{{"ingress", ingress}, {"egress", egress}} {
		for i := range dir.rules {
			rules = append(rules, ruleRef{spec.Child(dir.name).Index(i), &dir.rules[i]})
		}
	}
	for _, rr := range rules {
		if len(rr.r.AppliedTo) == 0 {
			continue
		}
		p := rr.path.Child("appliedTo")
		mixed(p, rr.r.AppliedTo)
		switch nodes := appliedToNodes(rr.r.AppliedTo); {
		case nodes && first == nil:
			first, onNodes = p, true
		case first != nil && nodes != onNodes:
			errs = append(errs, field.Forbidden(p, "a policy applied to Nodes ("+first.String()+") cannot apply other rules to workloads"))
		}
	}
	if !onNodes {
		return errs
	}
	for _, rr := range rules {
		if len(rr.r.AppliedTo) > 0 && !appliedToNodes(rr.r.AppliedTo) {
			continue
		}
		for i, peer := range rr.r.To {
			if peer.FQDN != "" {
				errs = append(errs, field.Forbidden(rr.path.Child("to").Index(i).Child("fqdn"), "fqdn peers are not supported in a policy applied to Nodes"))
			}
		}
		if len(rr.r.ToServices) > 0 {
			errs = append(errs, field.Forbidden(rr.path.Child("toServices"), "toServices is not supported in a policy applied to Nodes"))
		}
		if len(rr.r.L7Protocols) > 0 {
			errs = append(errs, field.Forbidden(rr.path.Child("l7Protocols"), "layer 7 protocols are not supported in a policy applied to Nodes"))
		}
	}
	return errs
}

// validateAppliedTos checks each appliedTo entry of a policy or rule.
// egressRules: whether the policy (policy level) or rule (rule level) has
// egress rules, which cannot apply to Services.
func (v *Validator) validateAppliedTos(ctx context.Context, kind policyKind, path *field.Path, appliedTo []crdv1beta1.AppliedTo, egress bool) field.ErrorList {
	var errs field.ErrorList
	services := 0
	for i := range appliedTo {
		a := &appliedTo[i]
		p := path.Index(i)
		set := setFields(map[string]bool{
			"podSelector":            a.PodSelector != nil,
			"namespaceSelector":      a.NamespaceSelector != nil,
			"externalEntitySelector": a.ExternalEntitySelector != nil,
			"group":                  a.Group != "",
			"serviceAccount":         a.ServiceAccount != nil,
			"service":                a.Service != nil,
			"nodeSelector":           a.NodeSelector != nil,
		})
		for _, alone := range []string{"group", "serviceAccount", "service", "nodeSelector"} {
			if slices.Contains(set, alone) && len(set) > 1 {
				errs = append(errs, field.Forbidden(p.Child(alone), alone+" cannot be set with other fields in appliedTo (set: "+strings.Join(set, ", ")+")"))
			}
		}
		if a.ExternalEntitySelector != nil {
			errs = append(errs, unsupported(p.Child("externalEntitySelector"), "ExternalEntities"))
		}
		if !kind.cluster() {
			for _, name := range []string{"namespaceSelector", "serviceAccount", "service", "nodeSelector"} {
				if slices.Contains(set, name) {
					errs = append(errs, field.Forbidden(p.Child(name), name+" in appliedTo is for ClusterNetworkPolicies; an Antrea NetworkPolicy applies to workloads of its own Namespace"))
				}
			}
		}
		if a.Service != nil {
			services++
			if egress {
				errs = append(errs, field.Forbidden(p.Child("service"), "egress rules cannot be applied to Services"))
			}
			errs = append(errs, validateNamespacedName(p.Child("service"), a.Service)...)
		}
		if a.ServiceAccount != nil {
			errs = append(errs, validateNamespacedName(p.Child("serviceAccount"), a.ServiceAccount)...)
		}
		if a.Group != "" {
			errs = append(errs, v.validateGroupRef(ctx, kind, p.Child("group"), a.Group)...)
		}
		errs = append(errs, validateSelector(p.Child("podSelector"), a.PodSelector)...)
		errs = append(errs, validateSelector(p.Child("namespaceSelector"), a.NamespaceSelector)...)
		errs = append(errs, validateSelector(p.Child("nodeSelector"), a.NodeSelector)...)
	}
	if services > 0 && services < len(appliedTo) {
		errs = append(errs, field.Forbidden(path, "a policy or rule cannot be applied to Services and other workloads at the same time"))
	}
	return errs
}

// validateRule checks one ingress or egress rule.
func (v *Validator) validateRule(ctx context.Context, kind policyKind, path *field.Path, r *crdv1beta1.Rule, ingress bool,
	tier string, policyAppliedTo []crdv1beta1.AppliedTo) field.ErrorList {
	var errs field.ErrorList
	if r.Action == nil {
		errs = append(errs, field.Required(path.Child("action"), "one of Allow, Drop, Reject, Pass"))
	} else {
		switch *r.Action {
		case crdv1beta1.RuleActionAllow, crdv1beta1.RuleActionDrop, crdv1beta1.RuleActionReject:
		case crdv1beta1.RuleActionPass:
			if crdv1beta1.TierName(tier) == crdv1beta1.BaselineTierName {
				errs = append(errs, field.Forbidden(path.Child("action"), "Pass cannot be used in the baseline Tier: nothing is evaluated after it"))
			}
		default:
			errs = append(errs, field.NotSupported(path.Child("action"), *r.Action,
				[]crdv1beta1.RuleAction{crdv1beta1.RuleActionAllow, crdv1beta1.RuleActionDrop, crdv1beta1.RuleActionReject, crdv1beta1.RuleActionPass}))
		}
	}
	if len(r.L7Protocols) > 0 && !v.l7NetworkPolicy {
		errs = append(errs, field.Forbidden(path.Child("l7Protocols"),
			"layer 7 protocols need the L7NetworkPolicy feature gate of antrea-controller (featureGates.L7NetworkPolicy in antrea-controller.conf), which is off"))
	}
	errs = append(errs, validateL7Protocols(path, r)...)
	errs = append(errs, validatePorts(path.Child("ports"), r.Ports)...)
	errs = append(errs, v.validateAppliedTos(ctx, kind, path.Child("appliedTo"), r.AppliedTo, !ingress)...)

	peersName, peers := "to", r.To
	if ingress {
		peersName, peers = "from", r.From
		if len(r.To) > 0 {
			errs = append(errs, field.Forbidden(path.Child("to"), "an ingress rule matches its sources with from"))
		}
		if len(r.ToServices) > 0 {
			errs = append(errs, field.Forbidden(path.Child("toServices"), "toServices is for egress rules"))
		}
	} else if len(r.From) > 0 {
		errs = append(errs, field.Forbidden(path.Child("from"), "an egress rule matches its destinations with to"))
	}
	errs = append(errs, v.validatePeers(ctx, kind, path.Child(peersName), peers, ingress)...)

	if len(r.ToServices) > 0 && !ingress {
		if len(r.To) > 0 || len(r.Ports) > 0 || len(r.Protocols) > 0 {
			errs = append(errs, field.Forbidden(path.Child("toServices"), "toServices cannot be used with to, ports or protocols"))
		}
		for i, s := range r.ToServices {
			p := path.Child("toServices").Index(i)
			if s.Name == "" {
				errs = append(errs, field.Required(p.Child("name"), "the Service's name"))
			}
			if s.Namespace == "" {
				errs = append(errs, field.Required(p.Child("namespace"), "the Service's Namespace"))
			}
			if s.Scope == crdv1beta1.ScopeClusterSet {
				errs = append(errs, unsupported(p.Child("scope"), "multi-cluster (ClusterSet) scope"))
			}
		}
	}

	// Policies applied to Services select their clients by ipBlock only.
	if ingress && (appliedToService(policyAppliedTo) || appliedToService(r.AppliedTo)) {
		for i, peer := range r.From {
			if peer.IPBlock == nil || len(peerFields(&peer)) > 1 {
				errs = append(errs, field.Forbidden(path.Child("from").Index(i), "a policy or rule applied to Services can only select its sources with ipBlock"))
			}
		}
	}
	errs = append(errs, validateProtocols(path, r, ingress)...)
	if !ingress {
		errs = append(errs, validateMulticastEgress(path, r)...)
	}
	return errs
}

func appliedToService(a []crdv1beta1.AppliedTo) bool { return len(a) > 0 && a[0].Service != nil }

// peerFields are the names of the fields set in a peer.
func peerFields(p *crdv1beta1.NetworkPolicyPeer) []string {
	return setFields(map[string]bool{
		"ipBlock":                p.IPBlock != nil,
		"podSelector":            p.PodSelector != nil,
		"namespaceSelector":      p.NamespaceSelector != nil,
		"namespaces":             p.Namespaces != nil,
		"externalEntitySelector": p.ExternalEntitySelector != nil,
		"group":                  p.Group != "",
		"fqdn":                   p.FQDN != "",
		"serviceAccount":         p.ServiceAccount != nil,
		"nodeSelector":           p.NodeSelector != nil,
	})
}

// validatePeers checks the from (ingress) or to (egress) peers of a rule.
func (v *Validator) validatePeers(ctx context.Context, kind policyKind, path *field.Path, peers []crdv1beta1.NetworkPolicyPeer, ingress bool) field.ErrorList {
	var errs field.ErrorList
	for i := range peers {
		peer := &peers[i]
		p := path.Index(i)
		set := peerFields(peer)
		for _, alone := range []string{"ipBlock", "group", "serviceAccount", "nodeSelector", "fqdn"} {
			if slices.Contains(set, alone) && len(set) > 1 {
				errs = append(errs, field.Forbidden(p.Child(alone), alone+" cannot be set with other fields in a peer (set: "+strings.Join(set, ", ")+")"))
			}
		}
		if peer.Namespaces != nil {
			np := p.Child("namespaces")
			if peer.NamespaceSelector != nil {
				errs = append(errs, field.Forbidden(np, "namespaces and namespaceSelector cannot be set at the same time"))
			}
			if !kind.cluster() {
				errs = append(errs, field.Forbidden(np, "namespaces is for ClusterNetworkPolicies; an Antrea NetworkPolicy selects Namespaces with namespaceSelector"))
			}
			switch {
			case peer.Namespaces.Match != "" && len(peer.Namespaces.SameLabels) > 0:
				errs = append(errs, field.Forbidden(np, "only one of match and sameLabels can be set"))
			case peer.Namespaces.Match == "" && len(peer.Namespaces.SameLabels) == 0:
				errs = append(errs, field.Required(np, "match: Self or sameLabels"))
			}
			if m := peer.Namespaces.Match; m != "" && m != crdv1beta1.NamespaceMatchSelf {
				errs = append(errs, field.NotSupported(np.Child("match"), m, []crdv1beta1.NamespaceMatchType{crdv1beta1.NamespaceMatchSelf}))
			}
			for j, k := range peer.Namespaces.SameLabels {
				for _, msg := range validation.IsQualifiedName(k) {
					errs = append(errs, field.Invalid(np.Child("sameLabels").Index(j), k, "not a label key: "+msg))
				}
			}
		}
		if peer.IPBlock != nil {
			errs = append(errs, validateIPBlock(p.Child("ipBlock"), peer.IPBlock)...)
		}
		if peer.Group != "" {
			errs = append(errs, v.validateGroupRef(ctx, kind, p.Child("group"), peer.Group)...)
		}
		if peer.ServiceAccount != nil {
			if !kind.cluster() {
				errs = append(errs, field.Forbidden(p.Child("serviceAccount"), "serviceAccount peers are for ClusterNetworkPolicies"))
			}
			errs = append(errs, validateNamespacedName(p.Child("serviceAccount"), peer.ServiceAccount)...)
		}
		if peer.FQDN != "" {
			switch {
			case ingress:
				// Upstream: a name is learned from the answers to the
				// applied-to Pods' own lookups, so it selects destinations.
				errs = append(errs, field.Forbidden(p.Child("fqdn"), "fqdn peers are for egress rules (to), not ingress rules (from)"))
			default:
				if err := dnsname.Validate(peer.FQDN); err != nil {
					errs = append(errs, field.Invalid(p.Child("fqdn"), peer.FQDN, "not a domain name nor a \"*\" pattern: "+err.Error()))
				}
			}
		}
		if peer.ExternalEntitySelector != nil {
			errs = append(errs, unsupported(p.Child("externalEntitySelector"), "ExternalEntities"))
		}
		switch peer.Scope {
		case "", crdv1beta1.ScopeCluster:
		case crdv1beta1.ScopeClusterSet:
			errs = append(errs, unsupported(p.Child("scope"), "multi-cluster (ClusterSet) scope"))
		default:
			errs = append(errs, field.NotSupported(p.Child("scope"), peer.Scope, []crdv1beta1.PeerScope{crdv1beta1.ScopeCluster}))
		}
		errs = append(errs, validateSelector(p.Child("podSelector"), peer.PodSelector)...)
		errs = append(errs, validateSelector(p.Child("namespaceSelector"), peer.NamespaceSelector)...)
		errs = append(errs, validateSelector(p.Child("nodeSelector"), peer.NodeSelector)...)
	}
	return errs
}

// validateGroupRef: a ClusterNetworkPolicy references ClusterGroups, an
// Antrea NetworkPolicy the Groups of its Namespace; the group must exist.
// (Upstream accepts a missing group and reports the policy unrealizable;
// refusing it says so at once, by name.)
func (v *Validator) validateGroupRef(ctx context.Context, kind policyKind, path *field.Path, name string) field.ErrorList {
	var exists bool
	var err error
	if kind.cluster() {
		var cg *crdv1beta1.ClusterGroup
		cg, err = v.lookup.ClusterGroup(ctx, name)
		exists = cg != nil
	} else {
		var g *crdv1beta1.Group
		g, err = v.lookup.Group(ctx, kind.namespace, name)
		exists = g != nil
	}
	if err != nil {
		return field.ErrorList{field.InternalError(path, fmt.Errorf("looking up group %s: %w", name, err))}
	}
	if !exists {
		what := "no ClusterGroup of that name exists"
		if !kind.cluster() {
			what = "no Group of that name exists in Namespace " + kind.namespace
		}
		return field.ErrorList{field.Invalid(path, name, what)}
	}
	return nil
}

// validatePorts checks port numbers and ranges.
func validatePorts(path *field.Path, ports []crdv1beta1.NetworkPolicyPort) field.ErrorList {
	var errs field.ErrorList
	for i, port := range ports {
		p := path.Index(i)
		if port.Protocol != nil {
			switch *port.Protocol {
			case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
			default:
				errs = append(errs, field.NotSupported(p.Child("protocol"), *port.Protocol,
					[]corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}))
			}
		}
		if port.Port != nil {
			if port.Port.Type == intstr.Int {
				errs = append(errs, validatePortNumber(p.Child("port"), port.Port.IntVal)...)
			} else {
				for _, msg := range validation.IsValidPortName(port.Port.StrVal) {
					errs = append(errs, field.Invalid(p.Child("port"), port.Port.StrVal, msg))
				}
			}
		}
		if port.EndPort != nil {
			ep := p.Child("endPort")
			errs = append(errs, validatePortNumber(ep, *port.EndPort)...)
			switch {
			case port.Port == nil:
				errs = append(errs, field.Required(p.Child("port"), "endPort needs a numerical port"))
			case port.Port.Type == intstr.String:
				errs = append(errs, field.Forbidden(ep, "endPort cannot be set with a named port"))
			case *port.EndPort < port.Port.IntVal:
				errs = append(errs, field.Invalid(ep, *port.EndPort, fmt.Sprintf("must not be less than port (%d)", port.Port.IntVal)))
			}
		}
		if port.SourcePort != nil {
			errs = append(errs, validatePortNumber(p.Child("sourcePort"), *port.SourcePort)...)
		}
		if port.SourceEndPort != nil {
			sep := p.Child("sourceEndPort")
			errs = append(errs, validatePortNumber(sep, *port.SourceEndPort)...)
			switch {
			case port.SourcePort == nil:
				errs = append(errs, field.Required(p.Child("sourcePort"), "sourceEndPort needs sourcePort"))
			case *port.SourceEndPort < *port.SourcePort:
				errs = append(errs, field.Invalid(sep, *port.SourceEndPort, fmt.Sprintf("must not be less than sourcePort (%d)", *port.SourcePort)))
			}
		}
	}
	return errs
}

func validatePortNumber(path *field.Path, port int32) field.ErrorList {
	if port < 1 || port > 65535 {
		return field.ErrorList{field.Invalid(path, port, "must be between 1 and 65535")}
	}
	return nil
}

// validateProtocols checks protocols: exactly one of icmp and igmp each;
// IGMP as upstream (queries in ingress rules, reports in egress rules,
// multicast groups, Allow or Drop, nothing else in the rule).
func validateProtocols(path *field.Path, r *crdv1beta1.Rule, ingress bool) field.ErrorList {
	var errs field.ErrorList
	haveIGMP, haveICMP := false, false
	for i, proto := range r.Protocols {
		p := path.Child("protocols").Index(i)
		switch {
		case proto.ICMP != nil && proto.IGMP != nil:
			errs = append(errs, field.Forbidden(p, "only one of icmp and igmp can be set"))
		case proto.ICMP == nil && proto.IGMP == nil:
			errs = append(errs, field.Required(p, "one of icmp and igmp"))
		}
		if proto.ICMP != nil {
			haveICMP = true
			if proto.ICMP.ICMPCode != nil && proto.ICMP.ICMPType == nil {
				errs = append(errs, field.Required(p.Child("icmp", "icmpType"), "icmpCode needs icmpType"))
			}
			for name, val := range map[string]*int32{"icmpType": proto.ICMP.ICMPType, "icmpCode": proto.ICMP.ICMPCode} {
				if val != nil && (*val < 0 || *val > 255) {
					errs = append(errs, field.Invalid(p.Child("icmp", name), *val, "must be between 0 and 255"))
				}
			}
		}
		if proto.IGMP != nil {
			haveIGMP = true
			ip := p.Child("igmp")
			if t := proto.IGMP.IGMPType; t != nil {
				switch {
				case ingress && *t != crdv1beta1.IGMPQuery:
					errs = append(errs, field.Invalid(ip.Child("igmpType"), *t, "an ingress rule matches IGMP queries: 0x11 (17)"))
				case !ingress && *t != crdv1beta1.IGMPReportV1 && *t != crdv1beta1.IGMPReportV2 && *t != crdv1beta1.IGMPReportV3:
					errs = append(errs, field.Invalid(ip.Child("igmpType"), *t, "an egress rule matches IGMP reports: 0x12, 0x16 or 0x22 (18, 22, 34)"))
				}
			}
			if g := proto.IGMP.GroupAddress; g != "" {
				if addr := net.ParseIP(g); addr == nil || !addr.IsMulticast() {
					errs = append(errs, field.Invalid(ip.Child("groupAddress"), g, "not a multicast address"))
				}
			}
			if r.Action != nil && (*r.Action == crdv1beta1.RuleActionPass || *r.Action == crdv1beta1.RuleActionReject) {
				errs = append(errs, field.Forbidden(path.Child("action"), "IGMP rules support only Allow and Drop"))
			}
		}
	}
	if haveIGMP && (haveICMP || len(r.Ports) > 0 || len(r.ToServices) > 0 || len(r.From) > 0 || len(r.To) > 0) {
		errs = append(errs, field.Forbidden(path.Child("protocols"), "an IGMP rule cannot have other protocols, ports, toServices, from or to"))
	}
	return errs
}

// validateMulticastEgress: an egress rule to multicast ipBlocks has no
// unicast ipBlock nor selector, and is Allow or Drop.
func validateMulticastEgress(path *field.Path, r *crdv1beta1.Rule) field.ErrorList {
	multicast, unicast, selectors := false, false, false
	for _, to := range r.To {
		if to.IPBlock == nil {
			selectors = true
			continue
		}
		ip, _, err := net.ParseCIDR(to.IPBlock.CIDR)
		if err != nil {
			continue // validateIPBlock reports it
		}
		if ip.IsMulticast() {
			multicast = true
		} else {
			unicast = true
		}
	}
	if !multicast {
		return nil
	}
	var errs field.ErrorList
	if unicast {
		errs = append(errs, field.Forbidden(path.Child("to"), "multicast and unicast ipBlocks cannot be set in the same rule"))
	}
	if selectors {
		errs = append(errs, field.Forbidden(path.Child("to"), "multicast ipBlocks and selectors cannot be set in the same rule"))
	}
	if r.Action != nil && (*r.Action == crdv1beta1.RuleActionPass || *r.Action == crdv1beta1.RuleActionReject) {
		errs = append(errs, field.Forbidden(path.Child("action"), "multicast rules support only Allow and Drop"))
	}
	return errs
}

// validateIPBlock: cidr is a CIDR; each except is a CIDR strictly inside it.
func validateIPBlock(path *field.Path, b *crdv1beta1.IPBlock) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(path.Child("cidr"), "a CIDR such as 10.0.0.0/24")}
	}
	_, cidr, err := net.ParseCIDR(b.CIDR)
	if err != nil {
		return field.ErrorList{field.Invalid(path.Child("cidr"), b.CIDR, "not a CIDR (such as 10.0.0.0/24)")}
	}
	var errs field.ErrorList
	cidrLen, _ := cidr.Mask.Size()
	for i, e := range b.Except {
		p := path.Child("except").Index(i)
		_, except, err := net.ParseCIDR(e)
		if err != nil {
			errs = append(errs, field.Invalid(p, e, "not a CIDR"))
			continue
		}
		exceptLen, _ := except.Mask.Size()
		if !cidr.Contains(except.IP) || exceptLen <= cidrLen || len(except.IP) != len(cidr.IP) {
			errs = append(errs, field.Invalid(p, e, "not strictly inside cidr "+b.CIDR))
		}
	}
	return errs
}

func validateNamespacedName(path *field.Path, n *crdv1beta1.NamespacedName) field.ErrorList {
	var errs field.ErrorList
	if n.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	}
	if n.Namespace == "" {
		errs = append(errs, field.Required(path.Child("namespace"), ""))
	}
	return errs
}

// validateSelector checks a label selector as kube-apiserver checks those of
// K8s NetworkPolicies (label keys and values, operators).
func validateSelector(path *field.Path, s *metav1.LabelSelector) field.ErrorList {
	if s == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, path)
}

// httpMethods are the methods upstream documents for an http match.
var httpMethods = []string{"GET", "POST", "PUT", "HEAD", "DELETE", "TRACE", "OPTIONS", "CONNECT", "PATCH"}

// validateL7Protocols checks a rule's l7Protocols as upstream does: only in
// an Allow rule (the engine lets through what matches and denies the rest),
// not with toServices, and only over TCP (a port's protocol TCP or unset, no
// protocols entry); each entry sets exactly one of http and tls, an http
// method is one of upstream's list. Globs in host, path and sni are free
// text ("*" is the only special character).
func validateL7Protocols(path *field.Path, r *crdv1beta1.Rule) field.ErrorList {
	if len(r.L7Protocols) == 0 {
		return nil
	}
	var errs field.ErrorList
	l7 := path.Child("l7Protocols")
	if r.Action != nil && *r.Action != crdv1beta1.RuleActionAllow {
		errs = append(errs, field.Forbidden(l7, "layer 7 protocols can only be used in a rule whose action is Allow (it is "+string(*r.Action)+")"))
	}
	if len(r.ToServices) > 0 {
		errs = append(errs, field.Forbidden(l7, "layer 7 protocols cannot be used with toServices"))
	}
	for i, port := range r.Ports {
		if port.Protocol != nil && *port.Protocol != corev1.ProtocolTCP {
			errs = append(errs, field.Forbidden(path.Child("ports").Index(i).Child("protocol"),
				"layer 7 protocols (l7Protocols) need TCP: the port's protocol must be TCP or unset"))
		}
	}
	if len(r.Protocols) > 0 {
		errs = append(errs, field.Forbidden(path.Child("protocols"), "layer 7 protocols (l7Protocols) need TCP: protocols cannot be set with them"))
	}
	for i, l := range r.L7Protocols {
		p := l7.Index(i)
		switch {
		case l.HTTP == nil && l.TLS == nil:
			errs = append(errs, field.Required(p, "one of http and tls"))
		case l.HTTP != nil && l.TLS != nil:
			errs = append(errs, field.Forbidden(p.Child("tls"), "an entry sets one of http and tls, not both"))
		case l.HTTP != nil && l.HTTP.Method != "" && !slices.Contains(httpMethods, l.HTTP.Method):
			errs = append(errs, field.NotSupported(p.Child("http", "method"), l.HTTP.Method, httpMethods))
		}
	}
	return errs
}

func unsupported(path *field.Path, what string) *field.Error {
	return field.Forbidden(path, what+": not supported by this Antrea")
}

// setFields returns the names whose value is true, sorted.
func setFields(fields map[string]bool) []string {
	var set []string
	for name, ok := range fields {
		if ok {
			set = append(set, name)
		}
	}
	slices.Sort(set)
	return set
}
