package ui

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/antctl/query"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// The Policies page: Tiers in evaluation order, each with its Antrea-native
// policies by priority, and the K8s NetworkPolicies where they are
// evaluated (after the application Tier, before the baseline Tier). Traffic
// counts come from stats.antrea.io when the controller serves it; the page
// says so when it does not.

// Stats are a rule's or policy's traffic counters.
type Stats struct {
	Sessions int64 `json:"sessions"`
	Packets  int64 `json:"packets"`
	Bytes    int64 `json:"bytes"`
}

func statsOf(t statsv1alpha1.TrafficStats) *Stats {
	return &Stats{Sessions: t.Sessions, Packets: t.Packets, Bytes: t.Bytes}
}

// RuleView is one rule.
type RuleView struct {
	Direction string `json:"direction"`
	Name      string `json:"name,omitempty"`
	Action    string `json:"action"`
	Peers     string `json:"peers"`
	Ports     string `json:"ports"`
	AppliedTo string `json:"appliedTo,omitempty"`
	Stats     *Stats `json:"stats,omitempty"`
}

// PolicyView is one policy.
type PolicyView struct {
	Kind      string     `json:"kind"`
	Namespace string     `json:"namespace,omitempty"`
	Name      string     `json:"name"`
	Priority  float64    `json:"priority,omitempty"`
	AppliedTo string     `json:"appliedTo"`
	Rules     []RuleView `json:"rules"`
	// Realization is "current/desired Nodes (phase)", from the status.
	Realization string `json:"realization,omitempty"`
	Stats       *Stats `json:"stats,omitempty"`
	// Pods are the members of its AppliedToGroups (what it applies to),
	// Nodes its span with each Node's realization, from the controller.
	Pods  []string          `json:"pods,omitempty"`
	Nodes []NodeRealization `json:"nodes,omitempty"`
	// TierPriority: a SIG policy's place in the order.
	TierPriority int32 `json:"tierPriority,omitempty"`
}

// TierView is one Tier (or the K8s NetworkPolicy layer) with its policies.
type TierView struct {
	Name     string `json:"name"`
	Priority int32  `json:"priority"`
	// Layer: not a Tier, the place of K8s NetworkPolicies in the order.
	Layer       bool         `json:"layer,omitempty"`
	Description string       `json:"description,omitempty"`
	Policies    []PolicyView `json:"policies"`
}

// Policies is the page.
type Policies struct {
	Tiers      []TierView `json:"tiers"`
	StatsError string     `json:"statsError,omitempty"`
	// ComputedError says why the Pods and per-Node realization are missing.
	ComputedError string `json:"computedError,omitempty"`
}

// k8sLayerPriority places K8s NetworkPolicies between application (and the
// SIG AdminNetworkPolicies, 251) and baseline (253).
const k8sLayerPriority = crdv1beta1.DefaultTierPriority + 2

func (s *Server) policies(w http.ResponseWriter, r *http.Request, _ string, sess session) {
	ctx := r.Context()
	crd := sess.clients.Antrea.CrdV1beta1()
	tiers, err := crd.Tiers().List(ctx, metav1.ListOptions{})
	if err != nil {
		s.kubeError(w, sess, "listing Tiers", err)
		return
	}
	acnps, err := crd.ClusterNetworkPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		s.kubeError(w, sess, "listing ClusterNetworkPolicies", err)
		return
	}
	annps, err := crd.NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil {
		s.kubeError(w, sess, "listing Antrea NetworkPolicies", err)
		return
	}
	knps, err := sess.clients.Kube.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil {
		s.kubeError(w, sess, "listing NetworkPolicies", err)
		return
	}
	stats, statsErr := readStats(ctx, sess.clients)
	out := Policies{}
	if statsErr != nil {
		out.StatsError = "traffic counts unavailable: " + apiMessage(statsErr)
	}
	computed, err := readComputed(ctx, sess.clients)
	if err != nil {
		out.ComputedError = "Pods and per-Node realization unavailable: " + apiMessage(err)
		computed = map[string]*computedPolicy{}
	}
	withComputed := func(v *PolicyView, typ string) {
		if p := computed[sourceKey(typ, v.Namespace, v.Name)]; p != nil {
			v.Pods, v.Nodes = p.pods, p.nodes
		}
	}
	byTier := map[string]*TierView{}
	tierOf := func(name string) *TierView {
		if name == "" {
			name = crdv1beta1.DefaultTierName
		}
		t, ok := byTier[name]
		if !ok {
			// A policy naming a Tier that does not exist (yet).
			t = &TierView{Name: name, Priority: -1, Description: "Tier not found"}
			byTier[name] = t
		}
		return t
	}
	for _, t := range tiers.Items {
		byTier[t.Name] = &TierView{Name: t.Name, Priority: t.Spec.Priority, Description: t.Spec.Description, Policies: []PolicyView{}}
	}
	for _, p := range acnps.Items {
		v := antreaPolicy("ClusterNetworkPolicy", "", p.Name, p.Spec.Priority, p.Spec.AppliedTo, p.Spec.Ingress, p.Spec.Egress, p.Status)
		v.applyStats(stats[statsKey(query.AntreaClusterNetworkPolicyStats, "", p.Name)], true)
		withComputed(&v, "AntreaClusterNetworkPolicy")
		t := tierOf(p.Spec.Tier)
		t.Policies = append(t.Policies, v)
	}
	for _, p := range annps.Items {
		v := antreaPolicy("NetworkPolicy", p.Namespace, p.Name, p.Spec.Priority, p.Spec.AppliedTo, p.Spec.Ingress, p.Spec.Egress, p.Status)
		v.applyStats(stats[statsKey(query.AntreaNetworkPolicyStats, p.Namespace, p.Name)], true)
		withComputed(&v, "AntreaNetworkPolicy")
		t := tierOf(p.Spec.Tier)
		t.Policies = append(t.Policies, v)
	}
	k8s := &TierView{Name: "K8s NetworkPolicies", Priority: k8sLayerPriority, Layer: true,
		Description: "Kubernetes NetworkPolicies, evaluated after the application Tier (and the SIG AdminNetworkPolicies) and before the baseline Tier", Policies: []PolicyView{}}
	for _, p := range knps.Items {
		v := k8sPolicy(&p)
		v.applyStats(stats[statsKey(query.NetworkPolicyStats, p.Namespace, p.Name)], false)
		withComputed(&v, "K8sNetworkPolicy")
		k8s.Policies = append(k8s.Policies, v)
	}
	byTier[""] = k8s
	if err := addSIGPolicies(ctx, sess.clients, computed, byTier); err != nil && out.ComputedError == "" {
		out.ComputedError = "SIG policies' peers unavailable: " + apiMessage(err)
	}
	for _, t := range byTier {
		sort.SliceStable(t.Policies, func(i, j int) bool {
			a, b := t.Policies[i], t.Policies[j]
			if a.Priority != b.Priority {
				return a.Priority < b.Priority
			}
			return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
		})
		out.Tiers = append(out.Tiers, *t)
	}
	sort.Slice(out.Tiers, func(i, j int) bool {
		if out.Tiers[i].Priority != out.Tiers[j].Priority {
			return out.Tiers[i].Priority < out.Tiers[j].Priority
		}
		return out.Tiers[i].Name < out.Tiers[j].Name
	})
	writeJSON(w, http.StatusOK, out)
}

func statsKey(kind query.StatsKind, ns, name string) string {
	return string(kind) + "/" + ns + "/" + name
}

// readStats reads the three stats kinds, by statsKey.
func readStats(ctx context.Context, c *query.Clients) (map[string]query.PolicyStats, error) {
	out := map[string]query.PolicyStats{}
	for _, k := range []query.StatsKind{query.NetworkPolicyStats, query.AntreaNetworkPolicyStats, query.AntreaClusterNetworkPolicyStats} {
		l, err := query.Stats(ctx, c, k, "", "")
		if err != nil {
			return out, err
		}
		for _, st := range l {
			out[statsKey(k, st.Namespace, st.Name)] = st
		}
	}
	return out, nil
}

// applyStats sets the policy's counts and, for a kind the stats API
// counts per rule, each named rule's (zero before any traffic).
func (v *PolicyView) applyStats(st query.PolicyStats, perRule bool) {
	if st.Name == "" {
		return
	}
	v.Stats = statsOf(st.Total)
	if !perRule {
		return
	}
	byRule := map[string]statsv1alpha1.TrafficStats{}
	for _, r := range st.Rules {
		byRule[r.Name] = r.TrafficStats
	}
	for i := range v.Rules {
		if v.Rules[i].Name != "" && len(st.Rules) == 0 && st.Total == (statsv1alpha1.TrafficStats{}) {
			// No traffic yet: every named rule counts zero.
			v.Rules[i].Stats = &Stats{}
		}
		if t, ok := byRule[v.Rules[i].Name]; ok && v.Rules[i].Name != "" {
			v.Rules[i].Stats = statsOf(t)
		}
	}
}

func antreaPolicy(kind, ns, name string, prio float64, at []crdv1beta1.AppliedTo, in, eg []crdv1beta1.Rule, st crdv1beta1.NetworkPolicyStatus) PolicyView {
	v := PolicyView{Kind: kind, Namespace: ns, Name: name, Priority: prio, AppliedTo: appliedTo(at), Rules: []RuleView{}}
	if st.DesiredNodesRealized > 0 || st.Phase != "" {
		v.Realization = fmt.Sprintf("%d/%d Nodes", st.CurrentNodesRealized, st.DesiredNodesRealized)
		if st.Phase != "" {
			v.Realization += " (" + string(st.Phase) + ")"
		}
	}
	add := func(dir string, rules []crdv1beta1.Rule, peers func(r crdv1beta1.Rule) []crdv1beta1.NetworkPolicyPeer) {
		for _, r := range rules {
			action := "Allow"
			if r.Action != nil {
				action = string(*r.Action)
			}
			rv := RuleView{Direction: dir, Name: r.Name, Action: action, Peers: antreaPeers(peers(r)), Ports: antreaPorts(r),
				AppliedTo: appliedTo(r.AppliedTo)}
			if len(r.ToServices) > 0 {
				var svcs []string
				for _, s := range r.ToServices {
					svcs = append(svcs, "service "+s.Namespace+"/"+s.Name)
				}
				rv.Peers = strings.Join(svcs, ", ")
			}
			v.Rules = append(v.Rules, rv)
		}
	}
	add("Ingress", in, func(r crdv1beta1.Rule) []crdv1beta1.NetworkPolicyPeer { return r.From })
	add("Egress", eg, func(r crdv1beta1.Rule) []crdv1beta1.NetworkPolicyPeer { return r.To })
	return v
}

func selector(kind string, s *metav1.LabelSelector) string {
	if s == nil {
		return ""
	}
	f := metav1.FormatLabelSelector(s)
	if f == "" || f == "<none>" {
		f = "all"
	}
	return kind + " " + f
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " in ")
}

func appliedTo(ats []crdv1beta1.AppliedTo) string {
	var out []string
	for _, a := range ats {
		d := joinNonEmpty(selector("pods", a.PodSelector), selector("namespaces", a.NamespaceSelector),
			selector("external entities", a.ExternalEntitySelector), selector("nodes", a.NodeSelector))
		switch {
		case a.Group != "":
			d = "group " + a.Group
		case a.Service != nil:
			d = "service " + a.Service.Namespace + "/" + a.Service.Name
		case a.ServiceAccount != nil:
			d = "service account " + a.ServiceAccount.Namespace + "/" + a.ServiceAccount.Name
		}
		out = append(out, d)
	}
	return strings.Join(out, "; ")
}

func antreaPeers(ps []crdv1beta1.NetworkPolicyPeer) string {
	if len(ps) == 0 {
		return "any"
	}
	var out []string
	for _, p := range ps {
		d := joinNonEmpty(selector("pods", p.PodSelector), selector("namespaces", p.NamespaceSelector),
			selector("external entities", p.ExternalEntitySelector), selector("nodes", p.NodeSelector))
		switch {
		case p.IPBlock != nil:
			d = "ipBlock " + p.IPBlock.CIDR
			if len(p.IPBlock.Except) > 0 {
				d += " except " + strings.Join(p.IPBlock.Except, ",")
			}
		case p.Group != "":
			d = "group " + p.Group
		case p.FQDN != "":
			d = "fqdn " + p.FQDN
		case p.ServiceAccount != nil:
			d = "service account " + p.ServiceAccount.Namespace + "/" + p.ServiceAccount.Name
		case p.Namespaces != nil && p.Namespaces.Match == crdv1beta1.NamespaceMatchSelf:
			d = joinNonEmpty(selector("pods", p.PodSelector), "the same namespace")
		}
		out = append(out, d)
	}
	return strings.Join(out, "; ")
}

func antreaPorts(r crdv1beta1.Rule) string {
	var out []string
	for _, p := range r.Ports {
		proto := "TCP"
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		d := proto
		if p.Port != nil {
			d += "/" + p.Port.String()
			if p.EndPort != nil {
				d += fmt.Sprintf("-%d", *p.EndPort)
			}
		}
		out = append(out, d)
	}
	for _, p := range r.Protocols {
		switch {
		case p.ICMP != nil:
			out = append(out, "ICMP")
		case p.IGMP != nil:
			out = append(out, "IGMP")
		}
	}
	if len(out) == 0 {
		return "any"
	}
	return strings.Join(out, ", ")
}

func k8sPolicy(p *networkingv1.NetworkPolicy) PolicyView {
	v := PolicyView{Kind: "K8s NetworkPolicy", Namespace: p.Namespace, Name: p.Name,
		AppliedTo: selector("pods", &p.Spec.PodSelector), Rules: []RuleView{}}
	peers := func(ps []networkingv1.NetworkPolicyPeer) string {
		if len(ps) == 0 {
			return "any"
		}
		var out []string
		for _, q := range ps {
			if q.IPBlock != nil {
				d := "ipBlock " + q.IPBlock.CIDR
				if len(q.IPBlock.Except) > 0 {
					d += " except " + strings.Join(q.IPBlock.Except, ",")
				}
				out = append(out, d)
				continue
			}
			out = append(out, joinNonEmpty(selector("pods", q.PodSelector), selector("namespaces", q.NamespaceSelector)))
		}
		return strings.Join(out, "; ")
	}
	ports := func(ps []networkingv1.NetworkPolicyPort) string {
		if len(ps) == 0 {
			return "any"
		}
		var out []string
		for _, q := range ps {
			d := "TCP"
			if q.Protocol != nil {
				d = string(*q.Protocol)
			}
			if q.Port != nil {
				d += "/" + q.Port.String()
				if q.EndPort != nil {
					d += fmt.Sprintf("-%d", *q.EndPort)
				}
			}
			out = append(out, d)
		}
		return strings.Join(out, ", ")
	}
	isolates := map[networkingv1.PolicyType]bool{}
	for _, t := range p.Spec.PolicyTypes {
		isolates[t] = true
	}
	if len(p.Spec.PolicyTypes) == 0 {
		isolates[networkingv1.PolicyTypeIngress] = true
		isolates[networkingv1.PolicyTypeEgress] = len(p.Spec.Egress) > 0
	}
	for _, r := range p.Spec.Ingress {
		v.Rules = append(v.Rules, RuleView{Direction: "Ingress", Action: "Allow", Peers: peers(r.From), Ports: ports(r.Ports)})
	}
	for _, r := range p.Spec.Egress {
		v.Rules = append(v.Rules, RuleView{Direction: "Egress", Action: "Allow", Peers: peers(r.To), Ports: ports(r.Ports)})
	}
	for _, d := range []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress} {
		if isolates[d] {
			v.Rules = append(v.Rules, RuleView{Direction: string(d), Action: "Drop", Peers: "everything else (isolation)", Ports: "any"})
		}
	}
	return v
}

// addSIGPolicies adds the SIG network-policy-api's policies, from their
// computed form, each kind and tier priority a layer of the order.
func addSIGPolicies(ctx context.Context, c *query.Clients, computed map[string]*computedPolicy, byTier map[string]*TierView) error {
	var sig []*computedPolicy
	for _, p := range computed {
		if _, ok := sigTiers[p.np.SourceRef.Type]; ok {
			sig = append(sig, p)
		}
	}
	if len(sig) == 0 {
		return nil
	}
	ags, err := c.Antrea.ControlplaneV1beta2().AddressGroups().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	agMembers := map[string][]string{}
	for _, g := range ags.Items {
		for _, m := range g.GroupMembers {
			agMembers[g.Name] = append(agMembers[g.Name], query.MemberString(m))
		}
	}
	for _, p := range sig {
		v := sigPolicyView(p, agMembers)
		t := sigTiers[p.np.SourceRef.Type]
		key := fmt.Sprintf("sig/%s/%d", p.np.SourceRef.Type, v.TierPriority)
		if byTier[key] == nil {
			byTier[key] = &TierView{Name: fmt.Sprintf("%s (tier priority %d)", t.name, v.TierPriority), Priority: v.TierPriority,
				Layer: true, Description: t.desc, Policies: []PolicyView{}}
		}
		byTier[key].Policies = append(byTier[key].Policies, v)
	}
	return nil
}
