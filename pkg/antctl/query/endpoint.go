package query

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// antctl query endpoint: which policies select a pod (applied to it) and
// which rules name it as a peer, so allow or deny traffic from or to it.
// The answer is computed from the controller's controlplane objects
// (NetworkPolicies, AppliedToGroups, AddressGroups, as every agent receives
// them); the controller does not serve an endpoint query of its own.

// Endpoint answers for pod ns/name from the controlplane objects. A pod the
// credentials may not read is still answered (the groups name it).
func Endpoint(ctx context.Context, c *Clients, ns, name string) (*EndpointAnswer, error) {
	pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, CheckPod(ctx, c.Kube, ns, name)
		}
		if !apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("pod %s/%s: %w", ns, name, err)
		}
		pod = nil
	}
	cp := c.Antrea.ControlplaneV1beta2()
	pols, err := cp.NetworkPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing NetworkPolicies: %w", err)
	}
	atgs, err := cp.AppliedToGroups().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing AppliedToGroups: %w", err)
	}
	ags, err := cp.AddressGroups().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing AddressGroups: %w", err)
	}
	return EndpointOf(ns, name, pod, pols.Items, atgs.Items, ags.Items), nil
}

// Roles of a policy rule for the endpoint.
const (
	RoleApplied   = "applied"   // the rule applies to the endpoint
	RolePeer      = "peer"      // the endpoint is one of the rule's peers
	RoleIsolation = "isolation" // the direction a K8s NetworkPolicy isolates
)

// EndpointRule is one rule that concerns the endpoint.
type EndpointRule struct {
	Role      string `json:"role"`
	Policy    string `json:"policy"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Internal is the controlplane NetworkPolicy's name.
	Internal  string `json:"internalName"`
	Tier      string `json:"tierPriority,omitempty"`
	Priority  string `json:"priority,omitempty"`
	Rule      string `json:"rule"`
	Direction string `json:"direction"`
	Action    string `json:"action"`
	// Peers: for an applied rule, who it allows or denies; for a peer rule,
	// the pods it applies to.
	Peers    []string `json:"peers,omitempty"`
	Services string   `json:"services,omitempty"`
	// Effect says in words what the rule does for the endpoint.
	Effect string `json:"effect"`
}

// EndpointAnswer is what query endpoint prints.
type EndpointAnswer struct {
	Namespace string         `json:"namespace"`
	Pod       string         `json:"pod"`
	IPs       []string       `json:"ips,omitempty"`
	Node      string         `json:"node,omitempty"`
	Applied   []string       `json:"appliedPolicies"`
	Isolated  []string       `json:"isolatedDirections,omitempty"`
	Rules     []EndpointRule `json:"rules"`
}

// EndpointOf computes the answer from the controlplane objects.
func EndpointOf(ns, name string, pod *corev1.Pod, pols []cpv1beta2.NetworkPolicy, atgs []cpv1beta2.AppliedToGroup, ags []cpv1beta2.AddressGroup) *EndpointAnswer {
	ans := &EndpointAnswer{Namespace: ns, Pod: name, Applied: []string{}, Rules: []EndpointRule{}}
	var ips []net.IP
	if pod != nil {
		ans.Node = pod.Spec.NodeName
		for _, ip := range pod.Status.PodIPs {
			if p := net.ParseIP(ip.IP); p != nil {
				ips = append(ips, p)
				ans.IPs = append(ans.IPs, ip.IP)
			}
		}
		if len(ips) == 0 && pod.Status.PodIP != "" {
			if p := net.ParseIP(pod.Status.PodIP); p != nil {
				ips = append(ips, p)
				ans.IPs = append(ans.IPs, pod.Status.PodIP)
			}
		}
	}
	// The groups holding the pod; their members give the IPs when the pod
	// could not be read.
	inATG := sets.New[string]()
	atgMembers := map[string][]cpv1beta2.GroupMember{}
	for _, g := range atgs {
		atgMembers[g.Name] = g.GroupMembers
		if hasPod(g.GroupMembers, ns, name) {
			inATG.Insert(g.Name)
		}
	}
	inAG := sets.New[string]()
	agMembers := map[string][]string{}
	for _, g := range ags {
		for _, m := range g.GroupMembers {
			agMembers[g.Name] = append(agMembers[g.Name], MemberString(m))
		}
		sort.Strings(agMembers[g.Name])
		if hasPod(g.GroupMembers, ns, name) {
			inAG.Insert(g.Name)
			if len(ips) == 0 {
				for _, m := range g.GroupMembers {
					if m.Pod != nil && m.Pod.Namespace == ns && m.Pod.Name == name {
						for _, ip := range m.IPs {
							ips = append(ips, net.IP(ip))
							ans.IPs = append(ans.IPs, net.IP(ip).String())
						}
					}
				}
			}
		}
	}
	sort.Slice(pols, func(i, j int) bool { return SourceString(&pols[i]) < SourceString(&pols[j]) })
	isolated := sets.New[string]()
	for i := range pols {
		p := &pols[i]
		applied := false
		for ri, r := range p.Rules {
			groups := r.AppliedToGroups
			if len(groups) == 0 {
				groups = p.AppliedToGroups
			}
			base := ruleBase(p, ri, r)
			dir := directionWord(r.Direction)
			if inATG.HasAny(groups...) {
				applied = true
				peer := r.From
				if r.Direction == cpv1beta2.DirectionOut {
					peer = r.To
				}
				e := base
				e.Role = RoleApplied
				e.Peers = peerStrings(peer, agMembers)
				k8s := p.SourceRef != nil && p.SourceRef.Type == cpv1beta2.K8sNetworkPolicy
				if k8s {
					isolated.Insert(dir + " (by " + p.SourceRef.Namespace + "/" + p.SourceRef.Name + ")")
				}
				switch {
				case len(e.Peers) == 0 && k8s:
					e.Role = RoleIsolation
					e.Effect = fmt.Sprintf("isolates the pod for %s: only what another rule allows gets through", dir)
				case r.Direction == cpv1beta2.DirectionIn:
					e.Effect = fmt.Sprintf("%s traffic to the pod from %s%s", actionVerb(e.Action), JoinFew(e.Peers, 3), portsSuffix(e.Services))
				default:
					e.Effect = fmt.Sprintf("%s traffic from the pod to %s%s", actionVerb(e.Action), JoinFew(e.Peers, 3), portsSuffix(e.Services))
				}
				ans.Rules = append(ans.Rules, e)
			}
			peer := r.From
			if r.Direction == cpv1beta2.DirectionOut {
				peer = r.To
			}
			if inAG.HasAny(peer.AddressGroups...) || ipBlocksHold(peer.IPBlocks, ips) {
				e := base
				e.Role = RolePeer
				var targets []string
				for _, g := range groups {
					for _, m := range atgMembers[g] {
						targets = append(targets, MemberString(m))
					}
				}
				sort.Strings(targets)
				e.Peers = targets
				what := "the pods of " + strings.Join(groups, ",")
				if len(targets) > 0 {
					what = JoinFew(targets, 3)
				}
				if r.Direction == cpv1beta2.DirectionIn {
					e.Effect = fmt.Sprintf("%s traffic from the pod to %s%s", actionVerb(e.Action), what, portsSuffix(e.Services))
				} else {
					e.Effect = fmt.Sprintf("%s traffic to the pod from %s%s", actionVerb(e.Action), what, portsSuffix(e.Services))
				}
				ans.Rules = append(ans.Rules, e)
			}
		}
		if applied {
			ans.Applied = append(ans.Applied, SourceString(p))
		}
	}
	ans.Isolated = sets.List(isolated)
	return ans
}

func ruleBase(p *cpv1beta2.NetworkPolicy, i int, r cpv1beta2.NetworkPolicyRule) EndpointRule {
	tier, prio := Priorities(p)
	e := EndpointRule{Policy: SourceString(p), Internal: p.Name, Tier: tier, Priority: prio,
		Direction: directionWord(r.Direction), Action: "Allow", Services: servicesString(r.Services)}
	if p.SourceRef != nil {
		e.Namespace, e.Name = p.SourceRef.Namespace, p.SourceRef.Name
	}
	e.Rule = r.Name
	if e.Rule == "" {
		e.Rule = fmt.Sprintf("%s rule %d", strings.ToLower(directionWord(r.Direction)), ruleIndex(p, i))
	}
	if r.Action != nil {
		e.Action = string(*r.Action)
	}
	return e
}

// ruleIndex is the rule's position among the policy's rules of its
// direction, as the policy lists them (0-based).
func ruleIndex(p *cpv1beta2.NetworkPolicy, i int) int {
	n := 0
	for j := 0; j < i; j++ {
		if p.Rules[j].Direction == p.Rules[i].Direction {
			n++
		}
	}
	return n
}

func directionWord(d cpv1beta2.Direction) string {
	if d == cpv1beta2.DirectionOut {
		return "Egress"
	}
	return "Ingress"
}

func actionVerb(a string) string {
	switch a {
	case "Drop":
		return "drops"
	case "Reject":
		return "rejects"
	case "Pass":
		return "passes (to K8s NetworkPolicy, then baseline)"
	}
	return "allows"
}

func portsSuffix(s string) string {
	if s == "" {
		return ""
	}
	return " on " + s
}

// peerStrings lists a rule's peers: the members of its AddressGroups (the
// group's name when it is empty), its ipBlocks and Services.
func peerStrings(p cpv1beta2.NetworkPolicyPeer, agMembers map[string][]string) []string {
	var out []string
	for _, g := range p.AddressGroups {
		if ms := agMembers[g]; len(ms) > 0 {
			out = append(out, ms...)
		} else {
			out = append(out, "addressGroup:"+g+" (empty)")
		}
	}
	for _, b := range p.IPBlocks {
		s := ipNetString(b.CIDR)
		if s == "0.0.0.0/0" || s == "::/0" {
			s = "any " + s
		}
		for _, ex := range b.Except {
			s += " except " + ipNetString(ex)
		}
		out = append(out, s)
	}
	for _, svc := range p.ToServices {
		out = append(out, "service:"+svc.Namespace+"/"+svc.Name)
	}
	return out
}

func ipNetString(n cpv1beta2.IPNet) string {
	return net.IP(n.IP).String() + "/" + strconv.Itoa(int(n.PrefixLength))
}

func ipBlocksHold(blocks []cpv1beta2.IPBlock, ips []net.IP) bool {
	for _, b := range blocks {
		cidr := &net.IPNet{IP: net.IP(b.CIDR.IP), Mask: net.CIDRMask(int(b.CIDR.PrefixLength), 8*len(b.CIDR.IP))}
		for _, ip := range ips {
			if len(ip) != len(cidr.IP) {
				if v4 := ip.To4(); v4 != nil && len(cidr.IP) == net.IPv4len {
					ip = v4
				} else if len(cidr.IP) == net.IPv6len {
					ip = ip.To16()
				}
			}
			if !cidr.Contains(ip) {
				continue
			}
			excepted := false
			for _, ex := range b.Except {
				en := &net.IPNet{IP: net.IP(ex.IP), Mask: net.CIDRMask(int(ex.PrefixLength), 8*len(ex.IP))}
				if en.Contains(ip) {
					excepted = true
				}
			}
			if !excepted {
				return true
			}
		}
	}
	return false
}

func servicesString(svcs []cpv1beta2.Service) string {
	var out []string
	for _, s := range svcs {
		proto := "TCP"
		if s.Protocol != nil {
			proto = string(*s.Protocol)
		}
		str := proto
		if s.Port != nil {
			str += "/" + s.Port.String()
			if s.EndPort != nil {
				str += "-" + strconv.Itoa(int(*s.EndPort))
			}
		}
		if s.ICMPType != nil {
			str += fmt.Sprintf(" type %d", *s.ICMPType)
			if s.ICMPCode != nil {
				str += fmt.Sprintf(" code %d", *s.ICMPCode)
			}
		}
		if s.SrcPort != nil {
			str += fmt.Sprintf(" from port %d", *s.SrcPort)
			if s.SrcEndPort != nil {
				str += fmt.Sprintf("-%d", *s.SrcEndPort)
			}
		}
		out = append(out, str)
	}
	return strings.Join(out, ",")
}

// JoinFew joins the first n items and says how many more there are, so a
// column or a sentence of names stays readable; the lists have them all.
func JoinFew(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ",")
	}
	return fmt.Sprintf("%s +%d more", strings.Join(items[:n], ","), len(items)-n)
}
