package ui

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/antctl/query"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// What the controller computed of each policy (controlplane.antrea.io): the
// Pods it applies to (its AppliedToGroups' members) and, Node by Node of
// its span, whether that Node's agent realized its current generation (GET
// networkpolicies/{name}/status, the controller's record of the agents'
// reports).

// NodeRealization is one Node of a policy's span.
type NodeRealization struct {
	Node string `json:"node"`
	// State is "realized", "failed", "behind" (an older generation) or
	// "not reported".
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}

// computedPolicy is one internal NetworkPolicy as the pages show it.
type computedPolicy struct {
	np    cpv1beta2.NetworkPolicy
	pods  []string
	nodes []NodeRealization
}

// maxStatusReads bounds the per-policy status reads of one page view.
const maxStatusReads = 200

// sourceKey names the user policy an internal one comes from.
func sourceKey(typ, ns, name string) string { return typ + "/" + ns + "/" + name }

// readComputed lists the internal NetworkPolicies with their Pods and
// per-Node realization, by sourceKey.
func readComputed(ctx context.Context, c *query.Clients) (map[string]*computedPolicy, error) {
	cp := c.Antrea.ControlplaneV1beta2()
	nps, err := cp.NetworkPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the computed networkpolicies: %w", err)
	}
	atgs, err := cp.AppliedToGroups().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the appliedtogroups: %w", err)
	}
	members := map[string][]string{}
	for _, g := range atgs.Items {
		for _, m := range g.GroupMembers {
			members[g.Name] = append(members[g.Name], query.MemberString(m))
		}
	}
	out := map[string]*computedPolicy{}
	for i, np := range nps.Items {
		if np.SourceRef == nil {
			continue
		}
		p := &computedPolicy{np: np}
		seen := map[string]bool{}
		for _, g := range query.AppliedToGroupsOf(&np) {
			for _, m := range members[g] {
				if !seen[m] {
					seen[m] = true
					p.pods = append(p.pods, m)
				}
			}
		}
		sort.Strings(p.pods)
		if i < maxStatusReads {
			p.nodes, err = nodeRealization(ctx, c, &np)
			if err != nil {
				return nil, err
			}
		}
		out[sourceKey(string(np.SourceRef.Type), np.SourceRef.Namespace, np.SourceRef.Name)] = p
	}
	return out, nil
}

// nodeRealization reads the per-Node status of one internal policy.
func nodeRealization(ctx context.Context, c *query.Clients, np *cpv1beta2.NetworkPolicy) ([]NodeRealization, error) {
	var st cpv1beta2.NetworkPolicyStatus
	err := c.Antrea.ControlplaneV1beta2().RESTClient().Get().Resource("networkpolicies").Name(np.Name).SubResource("status").
		Do(ctx).Into(&st)
	if err != nil {
		return nil, fmt.Errorf("reading the realization of networkpolicy %s: %w", np.Name, err)
	}
	out := make([]NodeRealization, 0, len(st.Nodes))
	for _, n := range st.Nodes {
		r := NodeRealization{Node: n.NodeName}
		switch {
		case n.Generation == 0:
			r.State = "not reported"
		case n.RealizationFailure:
			r.State, r.Message = "failed", n.Message
		case n.Generation != st.Generation:
			r.State, r.Message = "behind", fmt.Sprintf("realized generation %d of %d", n.Generation, st.Generation)
		default:
			r.State = "realized"
		}
		out = append(out, r)
	}
	return out, nil
}

// pendingByNode counts, per Node, the policies of its span it has not
// realized in their current generation: the Summary's realization lag.
func pendingByNode(computed map[string]*computedPolicy) (pending map[string]int, total int) {
	pending = map[string]int{}
	for _, p := range computed {
		behind := false
		for _, n := range p.nodes {
			if n.State != "realized" {
				pending[n.Node]++
				behind = true
			}
		}
		if behind {
			total++
		}
	}
	return pending, total
}

// sigTiers are where the SIG network-policy-api's kinds are evaluated
// (docs/sig-network-policy-api.md): not Tier objects, layers of the order.
var sigTiers = map[cpv1beta2.NetworkPolicyType]struct {
	name string
	desc string
}{
	"ClusterNetworkPolicy":       {"SIG ClusterNetworkPolicies", "policy.networking.k8s.io ClusterNetworkPolicy, tier Admin (220) or Baseline (254)"},
	"AdminNetworkPolicy":         {"SIG AdminNetworkPolicies", "policy.networking.k8s.io AdminNetworkPolicy, evaluated after the application Tier (251)"},
	"BaselineAdminNetworkPolicy": {"SIG BaselineAdminNetworkPolicy", "policy.networking.k8s.io BaselineAdminNetworkPolicy, evaluated last (254)"},
}

// sigPolicyView shows a SIG policy from its computed form: the rules as
// the agents receive them, peers by their AddressGroups' members.
func sigPolicyView(p *computedPolicy, agMembers map[string][]string) PolicyView {
	np := p.np
	v := PolicyView{Kind: string(np.SourceRef.Type), Namespace: np.SourceRef.Namespace, Name: np.SourceRef.Name,
		Rules: []RuleView{}, Pods: p.pods, Nodes: p.nodes}
	if np.Priority != nil {
		v.Priority = *np.Priority
	}
	if np.TierPriority != nil {
		v.TierPriority = *np.TierPriority
	}
	v.AppliedTo = fmt.Sprintf("%d Pods", len(p.pods))
	for _, r := range np.Rules {
		dir, peer := "Ingress", r.From
		if r.Direction == cpv1beta2.DirectionOut {
			dir, peer = "Egress", r.To
		}
		action := "Allow"
		if r.Action != nil {
			action = string(*r.Action)
		}
		var peers []string
		for _, g := range peer.AddressGroups {
			peers = append(peers, query.JoinFew(agMembers[g], 5))
		}
		for _, b := range peer.IPBlocks {
			peers = append(peers, "ipBlock "+ipNet(b.CIDR))
		}
		if len(peers) == 0 {
			peers = append(peers, "any")
		}
		var ports []string
		for _, s := range r.Services {
			d := "TCP"
			if s.Protocol != nil {
				d = string(*s.Protocol)
			}
			if s.Port != nil {
				d += "/" + s.Port.String()
			}
			ports = append(ports, d)
		}
		if len(ports) == 0 {
			ports = append(ports, "any")
		}
		v.Rules = append(v.Rules, RuleView{Direction: dir, Name: r.Name, Action: action, Peers: strings.Join(peers, "; "), Ports: strings.Join(ports, ", ")})
	}
	return v
}

func ipNet(n cpv1beta2.IPNet) string {
	ips := query.IPStrings([]cpv1beta2.IPAddress{n.IP})
	if len(ips) == 0 {
		return ""
	}
	return fmt.Sprintf("%s/%d", ips[0], n.PrefixLength)
}
