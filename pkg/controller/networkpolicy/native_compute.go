package networkpolicy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/controller/grouping"
	"antrea.io/antrea/pkg/util/dnsname"
)

// Dependency keys: what a native policy's computation read besides its own
// object, so that a change of it re-syncs the policy.
const depNamespaces = "namespaces"

func depTier(name string) string           { return "tier:" + name }
func depClusterGroup(name string) string   { return "cg:" + name }
func depGroup(ns, name string) string      { return "grp:" + ns + "/" + name }
func depService(ns, name string) string    { return "svc:" + ns + "/" + name }
func nativeKeyACNP(name string) string     { return "acnp:" + name }
func nativeKeyANNP(ns, name string) string { return "annp:" + ns + "/" + name }

// nativeSpec is what ClusterNetworkPolicySpec and NetworkPolicySpec share.
type nativeSpec struct {
	tier      string
	priority  float64
	appliedTo []crdv1beta1.AppliedTo
	ingress   []crdv1beta1.Rule
	egress    []crdv1beta1.Rule
}

// nativeComputed is an Antrea-native policy turned into internal rules.
type nativeComputed struct {
	rules            []controlplane.NetworkPolicyRule
	appliedToGroups  []string
	appliedToPerRule bool
	tierPriority     int32
	// atgs are every AppliedToGroup selector (policy and rules), in order.
	atgs []*grouping.Selector
	// ags are the distinct peer selectors, by key.
	ags  map[string]*grouping.Selector
	deps sets.Set[string]
}

// nativeLister is what the computation reads besides Pods: Tiers, groups,
// Services and Namespaces (the informers' listers in the controller).
type nativeLister interface {
	tier(name string) (*crdv1beta1.Tier, error)
	clusterGroup(name string) (*crdv1beta1.ClusterGroup, error)
	group(ns, name string) (*crdv1beta1.Group, error)
	service(ns, name string) (*v1.Service, error)
	namespaces() ([]*v1.Namespace, error)
}

// nativeBuilder computes one native policy.
type nativeBuilder struct {
	l  nativeLister
	cp *nativeComputed
	// namespace is the Antrea NetworkPolicy's; empty for a ClusterNetworkPolicy.
	namespace string
	groupName func(selectorKey string) string
	policy    string
	atgSeen   sets.Set[string]
}

// computeNative turns an Antrea-native policy into internal rules, as
// upstream Antrea's controller does (pkg/controller/networkpolicy
// clusternetworkpolicy.go, antreanetworkpolicy.go, crd_utils.go):
//   - tierPriority is the priority of the Tier named by spec.tier (empty:
//     application); a missing Tier is an error (the policy is not realizable);
//   - rules keep their order; each rule's priority is its index among the
//     rules of its direction, its action, name, enableLogging and logLabel
//     are the user's;
//   - appliedTo at policy level becomes the policy's AppliedToGroups; at
//     rule level each rule's, with appliedToPerRule set;
//   - a ClusterNetworkPolicy rule with a namespaces peer (match Self or
//     sameLabels) is expanded into one rule per Namespace (Self) or per set
//     of label values (sameLabels) whose appliedTo and peers are restricted
//     to those Namespaces; the policy then has appliedToPerRule set;
//   - a group (ClusterGroup or, in an Antrea NetworkPolicy, Group of its
//     Namespace) stands for its selector's AddressGroup or AppliedToGroup,
//     its ipBlocks, the Pods of its serviceReference's selector, or the
//     union of its childGroups'.
func computeNative(l nativeLister, kind controlplane.NetworkPolicyType, namespace, name string, spec *nativeSpec, groupName func(string) string) (*nativeComputed, error) {
	b := &nativeBuilder{
		l:         l,
		cp:        &nativeComputed{ags: map[string]*grouping.Selector{}, deps: sets.New[string]()},
		namespace: namespace,
		groupName: groupName,
		policy:    string(kind) + ":" + strings.TrimPrefix(namespace+"/"+name, "/"),
		atgSeen:   sets.New[string](),
	}
	if kind == controlplane.AntreaClusterNetworkPolicy {
		b.namespace = ""
	}
	tierName := crdv1beta1.TierName(spec.tier)
	b.cp.deps.Insert(depTier(tierName))
	tier, err := l.tier(tierName)
	if err != nil {
		return b.cp, fmt.Errorf("tier %q of %s: %w", tierName, b.policy, err)
	}
	b.cp.tierPriority = tier.Spec.Priority

	policyAppliedTo := b.appliedTo(spec.appliedTo)
	perRule := len(spec.appliedTo) == 0
	for _, rules := range [][]crdv1beta1.Rule{spec.ingress, spec.egress} {
		for i := range rules {
			if b.perNamespace(&rules[i]) {
				perRule = true
			}
		}
	}
	b.cp.appliedToPerRule = perRule
	if !perRule {
		b.cp.appliedToGroups = b.atgNames(policyAppliedTo)
	}
	for d, rules := range [][]crdv1beta1.Rule{spec.ingress, spec.egress} {
		dir := controlplane.DirectionIn
		if d == 1 {
			dir = controlplane.DirectionOut
		}
		for i := range rules {
			r := &rules[i]
			appliedTo := policyAppliedTo
			if len(r.AppliedTo) > 0 {
				appliedTo = b.appliedTo(r.AppliedTo)
			}
			base := controlplane.NetworkPolicyRule{
				Direction:     dir,
				Services:      nativeServices(r.Ports, r.Protocols),
				Priority:      int32(i),
				Action:        ruleAction(r.Action),
				EnableLogging: r.EnableLogging,
				LogLabel:      r.LogLabel,
				Name:          r.Name,
				L7Protocols:   l7Protocols(r.L7Protocols),
			}
			if b.perNamespace(r) {
				b.expandPerNamespace(base, r, appliedTo)
				continue
			}
			peer := b.peer(dir, r, nil)
			if dir == controlplane.DirectionIn {
				base.From = peer
			} else {
				base.To = peer
			}
			if perRule {
				base.AppliedToGroups = b.atgNames(appliedTo)
			}
			b.cp.rules = append(b.cp.rules, base)
		}
	}
	return b.cp, nil
}

func ruleAction(a *crdv1beta1.RuleAction) *controlplane.RuleAction {
	action := controlplane.RuleActionAllow
	if a != nil {
		action = controlplane.RuleAction(*a)
	}
	return &action
}

// atgNames registers the selectors as AppliedToGroups and returns their names.
func (b *nativeBuilder) atgNames(sels []*grouping.Selector) []string {
	names := make([]string, 0, len(sels))
	seen := sets.New[string]()
	for _, s := range sels {
		key := s.Key()
		if !b.atgSeen.Has(key) {
			b.atgSeen.Insert(key)
			b.cp.atgs = append(b.cp.atgs, s)
		}
		if seen.Has(key) {
			continue
		}
		seen.Insert(key)
		names = append(names, b.groupName(key))
	}
	return names
}

func (b *nativeBuilder) addressGroup(s *grouping.Selector) string {
	b.cp.ags[s.Key()] = s
	return b.groupName(s.Key())
}

// everything is the namespaceSelector of a ClusterNetworkPolicy selector
// without one: every Namespace.
var everything = &metav1.LabelSelector{}

// labelSelector is NewSelector that logs and drops an invalid selector
// (admission refuses them; one that slips through narrows the policy).
func (b *nativeBuilder) labelSelector(ns string, pod, nsSel *metav1.LabelSelector) *grouping.Selector {
	s, err := grouping.NewSelector(ns, pod, nsSel)
	if err != nil {
		klog.ErrorS(err, "Ignoring invalid selector", "policy", b.policy)
		return nil
	}
	return s
}

func (b *nativeBuilder) nodeSelector(sel *metav1.LabelSelector) *grouping.Selector {
	s, err := grouping.NewNodeSelector(sel)
	if err != nil {
		klog.ErrorS(err, "Ignoring invalid nodeSelector", "policy", b.policy)
		return nil
	}
	return s
}

// appliedTo converts appliedTo entries into AppliedToGroup selectors.
func (b *nativeBuilder) appliedTo(list []crdv1beta1.AppliedTo) []*grouping.Selector {
	var out []*grouping.Selector
	add := func(s *grouping.Selector) {
		if s != nil {
			out = append(out, s)
		}
	}
	for i := range list {
		a := &list[i]
		switch {
		case a.Group != "":
			sels, _ := b.groupRef(a.Group)
			out = append(out, sels...)
		case a.ServiceAccount != nil:
			add(grouping.NewServiceAccountSelector(a.ServiceAccount.Namespace, a.ServiceAccount.Name))
		case a.NodeSelector != nil:
			add(b.nodeSelector(a.NodeSelector))
		case a.Service != nil:
			// The Service itself is the member, on every Node: its
			// NodePorts are served everywhere (groups.go, serviceMember).
			add(grouping.NewServiceSelector(a.Service.Namespace, a.Service.Name))
		case a.PodSelector != nil || a.NamespaceSelector != nil:
			if b.namespace != "" {
				// An Antrea NetworkPolicy applies to its own Namespace's Pods.
				add(b.labelSelector(b.namespace, a.PodSelector, nil))
				continue
			}
			nsSel := a.NamespaceSelector
			if nsSel == nil {
				nsSel = everything
			}
			add(b.labelSelector("", a.PodSelector, nsSel))
		}
	}
	return out
}

// groupRef resolves a group name: a ClusterGroup for a ClusterNetworkPolicy,
// a Group of the policy's Namespace for an Antrea NetworkPolicy.
func (b *nativeBuilder) groupRef(name string) ([]*grouping.Selector, []controlplane.IPBlock) {
	if b.namespace == "" {
		return b.clusterGroup(name, 0)
	}
	return b.group(b.namespace, name, 0)
}

func (b *nativeBuilder) clusterGroup(name string, depth int) ([]*grouping.Selector, []controlplane.IPBlock) {
	b.cp.deps.Insert(depClusterGroup(name))
	cg, err := b.l.clusterGroup(name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.ErrorS(err, "Cannot read ClusterGroup", "policy", b.policy, "clusterGroup", name)
		}
		return nil, nil
	}
	return b.groupSpec(&cg.Spec, "", depth, func(child string) ([]*grouping.Selector, []controlplane.IPBlock) {
		return b.clusterGroup(child, depth+1)
	})
}

func (b *nativeBuilder) group(ns, name string, depth int) ([]*grouping.Selector, []controlplane.IPBlock) {
	b.cp.deps.Insert(depGroup(ns, name))
	g, err := b.l.group(ns, name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.ErrorS(err, "Cannot read Group", "policy", b.policy, "group", ns+"/"+name)
		}
		return nil, nil
	}
	return b.groupSpec(&g.Spec, ns, depth, func(child string) ([]*grouping.Selector, []controlplane.IPBlock) {
		return b.group(ns, child, depth+1)
	})
}

// groupSpec resolves a group's spec; ns is the Group's Namespace, empty for
// a ClusterGroup. Children are followed one level deep (admission refuses
// more), which also stops a cycle made behind admission's back.
func (b *nativeBuilder) groupSpec(spec *crdv1beta1.GroupSpec, ns string, depth int, child func(string) ([]*grouping.Selector, []controlplane.IPBlock)) ([]*grouping.Selector, []controlplane.IPBlock) {
	switch {
	case len(spec.ChildGroups) > 0:
		if depth > 0 {
			return nil, nil
		}
		var sels []*grouping.Selector
		var blocks []controlplane.IPBlock
		for _, c := range spec.ChildGroups {
			s, bl := child(string(c))
			sels = append(sels, s...)
			blocks = append(blocks, bl...)
		}
		return sels, blocks
	case len(spec.IPBlocks) > 0:
		var blocks []controlplane.IPBlock
		for i := range spec.IPBlocks {
			blk, err := toIPBlock(spec.IPBlocks[i].CIDR, spec.IPBlocks[i].Except)
			if err != nil {
				klog.ErrorS(err, "Ignoring invalid ipBlock of a group", "policy", b.policy)
				continue
			}
			blocks = append(blocks, blk)
		}
		return nil, blocks
	case spec.ServiceReference != nil:
		svcNS := spec.ServiceReference.Namespace
		if ns != "" {
			svcNS = ns
		}
		b.cp.deps.Insert(depService(svcNS, spec.ServiceReference.Name))
		svc, err := b.l.service(svcNS, spec.ServiceReference.Name)
		if err != nil || len(svc.Spec.Selector) == 0 {
			// A missing Service, or one without a selector, has no Pods.
			return nil, nil
		}
		s := b.labelSelector(svcNS, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, nil)
		if s == nil {
			return nil, nil
		}
		return []*grouping.Selector{s}, nil
	case spec.NodeSelector != nil:
		if s := b.nodeSelector(spec.NodeSelector); s != nil {
			return []*grouping.Selector{s}, nil
		}
		return nil, nil
	case spec.PodSelector != nil || spec.NamespaceSelector != nil:
		if ns != "" {
			// A Group: K8s NetworkPolicy peer semantics in its Namespace.
			if s := b.labelSelector(ns, spec.PodSelector, spec.NamespaceSelector); s != nil {
				return []*grouping.Selector{s}, nil
			}
			return nil, nil
		}
		nsSel := spec.NamespaceSelector
		if nsSel == nil {
			nsSel = everything
		}
		if s := b.labelSelector("", spec.PodSelector, nsSel); s != nil {
			return []*grouping.Selector{s}, nil
		}
	}
	return nil, nil
}

// perNamespace tells whether a rule has a namespaces peer (Self or sameLabels).
func (b *nativeBuilder) perNamespace(r *crdv1beta1.Rule) bool {
	if b.namespace != "" {
		return false
	}
	for _, peers := range [][]crdv1beta1.NetworkPolicyPeer{r.From, r.To} {
		for i := range peers {
			if n := peers[i].Namespaces; n != nil && (n.Match == crdv1beta1.NamespaceMatchSelf || len(n.SameLabels) > 0) {
				return true
			}
		}
	}
	return false
}

// peer converts a rule's peers. nsScope, for a rule expanded per Namespace,
// turns each namespaces peer into its selector in those Namespaces.
func (b *nativeBuilder) peer(dir controlplane.Direction, r *crdv1beta1.Rule, nsScope func(*crdv1beta1.NetworkPolicyPeer) *grouping.Selector) controlplane.NetworkPolicyPeer {
	peers := r.From
	if dir == controlplane.DirectionOut {
		peers = r.To
	}
	var out controlplane.NetworkPolicyPeer
	if dir == controlplane.DirectionOut {
		for _, s := range r.ToServices {
			ns := s.Namespace
			if ns == "" {
				ns = b.namespace
			}
			out.ToServices = append(out.ToServices, controlplane.ServiceReference{Name: s.Name, Namespace: ns})
		}
	}
	if len(peers) == 0 {
		if len(out.ToServices) == 0 {
			out.IPBlocks = matchAllIPBlocks()
		}
		return out
	}
	seen := sets.New[string]()
	addAG := func(s *grouping.Selector) {
		if s == nil {
			return
		}
		if name := b.addressGroup(s); !seen.Has(name) {
			seen.Insert(name)
			out.AddressGroups = append(out.AddressGroups, name)
		}
	}
	for i := range peers {
		p := &peers[i]
		switch {
		case p.IPBlock != nil:
			blk, err := toIPBlock(p.IPBlock.CIDR, p.IPBlock.Except)
			if err != nil {
				klog.ErrorS(err, "Ignoring invalid ipBlock peer", "policy", b.policy)
				continue
			}
			out.IPBlocks = append(out.IPBlocks, blk)
		case p.Group != "":
			sels, blocks := b.groupRef(p.Group)
			for _, s := range sels {
				addAG(s)
			}
			out.IPBlocks = append(out.IPBlocks, blocks...)
		case p.FQDN != "":
			// The agents learn the addresses from the DNS answers their
			// Pods receive; the rule carries the pattern (admission
			// allows it in egress rules only).
			if dir == controlplane.DirectionOut {
				if name := dnsname.Normalize(p.FQDN); !slices.Contains(out.FQDNs, name) {
					out.FQDNs = append(out.FQDNs, name)
				}
			}
		case p.ServiceAccount != nil:
			addAG(grouping.NewServiceAccountSelector(p.ServiceAccount.Namespace, p.ServiceAccount.Name))
		case p.NodeSelector != nil:
			addAG(b.nodeSelector(p.NodeSelector))
		case p.Namespaces != nil && (p.Namespaces.Match != "" || len(p.Namespaces.SameLabels) > 0):
			if nsScope != nil {
				addAG(nsScope(p))
			}
		case p.PodSelector != nil || p.NamespaceSelector != nil:
			if b.namespace != "" {
				addAG(b.labelSelector(b.namespace, p.PodSelector, p.NamespaceSelector))
				continue
			}
			nsSel := p.NamespaceSelector
			if nsSel == nil {
				nsSel = everything
			}
			addAG(b.labelSelector("", p.PodSelector, nsSel))
		}
	}
	return out
}

// expandPerNamespace adds the rules of a ClusterNetworkPolicy rule with a
// namespaces peer. With match Self, one rule per Namespace holding applied-to
// workloads: appliedTo and the Self peers restricted to that Namespace. With
// sameLabels only, one rule per set of values of those labels: appliedTo
// restricted to the Namespaces with these values, the peers to the Pods of
// every Namespace with them. Namespaces missing one of the labels hold no
// applied-to workload of the rule. Each rule keeps the source rule's priority.
func (b *nativeBuilder) expandPerNamespace(base controlplane.NetworkPolicyRule, r *crdv1beta1.Rule, appliedTo []*grouping.Selector) {
	b.cp.deps.Insert(depNamespaces)
	nss, err := b.l.namespaces()
	if err != nil {
		klog.ErrorS(err, "Cannot list Namespaces", "policy", b.policy)
		return
	}
	sort.Slice(nss, func(i, j int) bool { return nss[i].Name < nss[j].Name })
	self, sameLabels := false, sets.New[string]()
	for _, peers := range [][]crdv1beta1.NetworkPolicyPeer{r.From, r.To} {
		for i := range peers {
			if n := peers[i].Namespaces; n != nil {
				self = self || n.Match == crdv1beta1.NamespaceMatchSelf
				sameLabels.Insert(n.SameLabels...)
			}
		}
	}
	emit := func(atgs []*grouping.Selector, nsScope func(*crdv1beta1.NetworkPolicyPeer) *grouping.Selector) {
		if len(atgs) == 0 {
			return
		}
		rule := base
		rule.AppliedToGroups = b.atgNames(atgs)
		peer := b.peer(rule.Direction, r, nsScope)
		if rule.Direction == controlplane.DirectionIn {
			rule.From = peer
		} else {
			rule.To = peer
		}
		b.cp.rules = append(b.cp.rules, rule)
	}
	if self {
		for _, ns := range nss {
			nsLabels := namespaceLabelSet(ns)
			var atgs []*grouping.Selector
			for _, s := range appliedTo {
				if in := s.InNamespace(ns.Name, nsLabels); in != nil {
					atgs = append(atgs, in)
				}
			}
			nsName := ns.Name
			emit(atgs, func(p *crdv1beta1.NetworkPolicyPeer) *grouping.Selector {
				if p.Namespaces.Match == crdv1beta1.NamespaceMatchSelf {
					return b.labelSelector(nsName, p.PodSelector, nil)
				}
				return b.labelSelector("", p.PodSelector, sameLabelsSelector(p.Namespaces.SameLabels, nsLabels))
			})
		}
		return
	}
	keys := sets.List(sameLabels)
	type valueSet struct {
		values labels.Set
		nss    []*v1.Namespace
	}
	byValues := map[string]*valueSet{}
	var order []string
	for _, ns := range nss {
		nsLabels := namespaceLabelSet(ns)
		vals := labels.Set{}
		complete := true
		for _, k := range keys {
			v, ok := nsLabels[k]
			if !ok {
				complete = false
				break
			}
			vals[k] = v
		}
		if !complete {
			continue
		}
		id := vals.String()
		vs := byValues[id]
		if vs == nil {
			vs = &valueSet{values: vals}
			byValues[id] = vs
			order = append(order, id)
		}
		vs.nss = append(vs.nss, ns)
	}
	sort.Strings(order)
	for _, id := range order {
		vs := byValues[id]
		var atgs []*grouping.Selector
		for _, s := range appliedTo {
			if in := restrictToValues(s, vs.values, vs.nss); in != nil {
				atgs = append(atgs, in)
			}
		}
		values := vs.values
		emit(atgs, func(p *crdv1beta1.NetworkPolicyPeer) *grouping.Selector {
			return b.labelSelector("", p.PodSelector, sameLabelsSelector(p.Namespaces.SameLabels, values))
		})
	}
}

// sameLabelsSelector selects the Namespaces whose values of keys are those
// of nsLabels; nil (nothing) when nsLabels lacks one of them.
func sameLabelsSelector(keys []string, nsLabels labels.Set) *metav1.LabelSelector {
	m := map[string]string{}
	for _, k := range keys {
		v, ok := nsLabels[k]
		if !ok {
			return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpExists}, {Key: k, Operator: metav1.LabelSelectorOpDoesNotExist}}}
		}
		m[k] = v
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// restrictToValues is an applied-to selector restricted to the Namespaces
// carrying values (those of nss); nil when it selects none of them.
func restrictToValues(s *grouping.Selector, values labels.Set, nss []*v1.Namespace) *grouping.Selector {
	if s.IPBlock != nil || s.External() {
		return nil
	}
	found := false
	for _, ns := range nss {
		if s.InNamespace(ns.Name, namespaceLabelSet(ns)) != nil {
			found = true
			break
		}
	}
	if !found {
		return nil
	}
	if s.NamespaceSelector == nil {
		return s
	}
	nsSel := s.NamespaceSelector
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		req, err := labels.NewRequirement(k, selection.Equals, []string{values[k]})
		if err != nil {
			return nil
		}
		nsSel = nsSel.Add(*req)
	}
	return grouping.NewLabelSelector("", s.PodSelector, nsSel)
}

// namespaceLabelSet is a Namespace's labels as selectors see them, with
// the name label the API server adds.
func namespaceLabelSet(ns *v1.Namespace) labels.Set {
	out := make(labels.Set, len(ns.Labels)+1)
	for k, v := range ns.Labels {
		out[k] = v
	}
	out[grouping.NamespaceNameLabel] = ns.Name
	return out
}

// nativeServices converts ports and protocols; nil (every protocol and
// port) when both are empty.
func nativeServices(ports []crdv1beta1.NetworkPolicyPort, protocols []crdv1beta1.NetworkPolicyProtocol) []controlplane.Service {
	if len(ports) == 0 && len(protocols) == 0 {
		return nil
	}
	out := make([]controlplane.Service, 0, len(ports)+len(protocols))
	for i := range ports {
		p := &ports[i]
		proto := controlplane.ProtocolTCP
		if p.Protocol != nil {
			proto = controlplane.Protocol(*p.Protocol)
		}
		s := controlplane.Service{Protocol: &proto}
		if p.Port != nil {
			port := *p.Port
			s.Port = &port
		}
		s.EndPort = copyInt32(p.EndPort)
		s.SrcPort = copyInt32(p.SourcePort)
		s.SrcEndPort = copyInt32(p.SourceEndPort)
		out = append(out, s)
	}
	for i := range protocols {
		p := &protocols[i]
		switch {
		case p.ICMP != nil:
			proto := controlplane.ProtocolICMP
			out = append(out, controlplane.Service{Protocol: &proto, ICMPType: copyInt32(p.ICMP.ICMPType), ICMPCode: copyInt32(p.ICMP.ICMPCode)})
		case p.IGMP != nil:
			proto := controlplane.ProtocolIGMP
			out = append(out, controlplane.Service{Protocol: &proto, IGMPType: copyInt32(p.IGMP.IGMPType), GroupAddress: p.IGMP.GroupAddress})
		}
	}
	return out
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// l7Protocols copies a rule's layer 7 matches into the controlplane form
// (admission has checked them: one of http and tls per entry).
func l7Protocols(in []crdv1beta1.L7Protocol) []controlplane.L7Protocol {
	var out []controlplane.L7Protocol
	for _, l := range in {
		var p controlplane.L7Protocol
		if l.HTTP != nil {
			p.HTTP = &controlplane.HTTPProtocol{Host: l.HTTP.Host, Method: l.HTTP.Method, Path: l.HTTP.Path}
		}
		if l.TLS != nil {
			p.TLS = &controlplane.TLSProtocol{SNI: l.TLS.SNI}
		}
		out = append(out, p)
	}
	return out
}
