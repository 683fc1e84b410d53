package networkpolicy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/apis/controlplane"
)

// cluster is the fixture most tests start from: namespaces x, y, z (z is
// env=prod) and pods spread over nodes n1..n3.
func cluster() []runtime.Object {
	http := v1.ContainerPort{Name: "http", ContainerPort: 8080}
	return []runtime.Object{
		newNamespace("x", lbls("ns", "x")),
		newNamespace("y", lbls("ns", "y")),
		newNamespace("z", lbls("ns", "z", "env", "prod")),
		newPod("x", "a", lbls("app", "a"), "10.0.0.1", "n1", http),
		newPod("x", "b", lbls("app", "b"), "10.0.0.2", "n2"),
		newPod("y", "a", lbls("app", "a"), "10.0.1.1", "n1"),
		newPod("z", "c", lbls("app", "c"), "10.0.2.1", "n3"),
	}
}

func TestPoliciesComputeTheRulesKubernetesSemanticsSay(t *testing.T) {
	appA := *matchLabels("app", "a")
	ingress := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egress := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	both := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	allIPs := "0.0.0.0/0; ::/0"
	tests := []struct {
		name       string
		spec       networkingv1.NetworkPolicySpec
		wantRules  []string
		wantGroups map[string][]string // selector key -> AddressGroup members
	}{
		{
			name: "a policy without policyTypes and with ingress rules isolates ingress only",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("app", "b")}},
				Ports: []networkingv1.NetworkPolicyPort{port(v1.ProtocolTCP, intstr.FromInt32(80))},
			}}},
			wantRules:  []string{"In from=[namespace=x podSelector=app=b] ips=[] ports=[TCP/80] prio=-1"},
			wantGroups: map[string][]string{selKey(t, "x", matchLabels("app", "b"), nil): {"x/b@10.0.0.2"}},
		},
		{
			name: "a policy without policyTypes but with egress rules also isolates ingress",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.0.1.0/24"}}}},
			}}},
			wantRules: []string{
				"In from=[] ips=[] ports=all prio=-1",
				"Out to=[] ips=[10.0.0.0/8 except 10.0.1.0/24] ports=all prio=-1",
			},
		},
		{
			name:      "policyTypes Egress without egress rules denies all egress and leaves ingress alone",
			spec:      networkingv1.NetworkPolicySpec{PodSelector: appA, PolicyTypes: egress},
			wantRules: []string{"Out to=[] ips=[] ports=all prio=-1"},
		},
		{
			name:      "policyTypes Ingress and Egress without rules deny both directions",
			spec:      networkingv1.NetworkPolicySpec{PodSelector: appA, PolicyTypes: both},
			wantRules: []string{"In from=[] ips=[] ports=all prio=-1", "Out to=[] ips=[] ports=all prio=-1"},
		},
		{
			name: "rules of a direction missing from policyTypes are ignored",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, PolicyTypes: egress,
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("app", "b")}}}},
				Egress:  []networkingv1.NetworkPolicyEgressRule{{}},
			},
			wantRules: []string{"Out to=[] ips=[" + allIPs + "] ports=all prio=-1"},
		},
		{
			name: "an empty from list, an absent one, empty ports and absent ports all allow everything",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, PolicyTypes: ingress, Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{}, Ports: []networkingv1.NetworkPolicyPort{}},
				{},
			}},
			wantRules: []string{
				"In from=[] ips=[" + allIPs + "] ports=all prio=-1",
				"In from=[] ips=[" + allIPs + "] ports=all prio=-1",
			},
		},
		{
			name: "an empty pod selector peer selects every pod of the policy namespace",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}},
			}}},
			wantRules:  []string{"In from=[namespace=x podSelector=<all>] ips=[] ports=all prio=-1"},
			wantGroups: map[string][]string{selKey(t, "x", &metav1.LabelSelector{}, nil): {"x/a@10.0.0.1 http:8080/TCP", "x/b@10.0.0.2"}},
		},
		{
			name: "a namespace selector alone selects every pod of the matching namespaces",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: matchLabels("env", "prod")}},
			}}},
			wantRules:  []string{"In from=[namespaceSelector=env=prod podSelector=<all>] ips=[] ports=all prio=-1"},
			wantGroups: map[string][]string{selKey(t, "", nil, matchLabels("env", "prod")): {"z/c@10.0.2.1"}},
		},
		{
			name: "pod and namespace selectors in one peer must both match",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("app", "a"), NamespaceSelector: &metav1.LabelSelector{}}},
			}}},
			wantRules:  []string{"In from=[namespaceSelector=<all> podSelector=app=a] ips=[] ports=all prio=-1"},
			wantGroups: map[string][]string{selKey(t, "", matchLabels("app", "a"), &metav1.LabelSelector{}): {"x/a@10.0.0.1 http:8080/TCP", "y/a@10.0.1.1"}},
		},
		{
			name: "several peers of one rule keep their groups and ipBlocks, IPv4 and IPv6",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: matchLabels("app", "b")},
					{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.1.0/24", "192.168.2.0/24"}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::/64", Except: []string{"fd00::/96"}}},
					{NamespaceSelector: matchLabels("ns", "y")},
				},
			}}},
			wantRules: []string{"In from=[namespace=x podSelector=app=b; namespaceSelector=ns=y podSelector=<all>] " +
				"ips=[192.168.0.0/16 except 192.168.1.0/24,192.168.2.0/24; fd00::/64 except fd00::/96] ports=all prio=-1"},
		},
		{
			name: "an invalid ipBlock peer is left out so that its rule matches nothing rather than everything",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.300/8"}}},
			}}},
			wantRules: []string{"In from=[] ips=[] ports=all prio=-1"},
		},
		{
			name: "named ports, port ranges and every protocol are kept as written",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{
					port(v1.ProtocolTCP, intstr.FromString("http")),
					port(v1.ProtocolUDP, intstr.FromInt32(53), 60),
					port(v1.ProtocolSCTP, intstr.FromInt32(9000)),
					port("", intstr.FromInt32(443)),
					{Protocol: func() *v1.Protocol { p := v1.ProtocolUDP; return &p }()},
				},
			}}},
			wantRules: []string{"In from=[] ips=[" + allIPs + "] ports=[TCP/http UDP/53-60 SCTP/9000 TCP/443 UDP/any] prio=-1"},
		},
		{
			name: "an egress rule to everyone on a named port adds the all-pods group to resolve the port",
			spec: networkingv1.NetworkPolicySpec{PodSelector: appA, PolicyTypes: egress, Egress: []networkingv1.NetworkPolicyEgressRule{{
				Ports: []networkingv1.NetworkPolicyPort{port(v1.ProtocolTCP, intstr.FromString("http"))},
			}}},
			wantRules: []string{"Out to=[namespaceSelector=<all> podSelector=<all>] ips=[" + allIPs + "] ports=[TCP/http] prio=-1"},
			wantGroups: map[string][]string{selKey(t, "", nil, &metav1.LabelSelector{}): {
				"x/a@10.0.0.1 http:8080/TCP", "x/b@10.0.0.2", "y/a@10.0.1.1", "z/c@10.0.2.1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, append(cluster(), newPolicy("x", "np", tt.spec))...)
			e.eventually(t, func() error {
				p, ok := e.policy("x", "np")
				if !ok {
					return fmt.Errorf("internal policy not stored")
				}
				if got := renderRules(p.Rules, e.nameToKey()); !slices.Equal(got, tt.wantRules) {
					return fmt.Errorf("rules:\n got %q\nwant %q", got, tt.wantRules)
				}
				return nil
			})
			p, _ := e.policy("x", "np")
			wantRef := controlplane.NetworkPolicyReference{Type: controlplane.K8sNetworkPolicy, Namespace: "x", Name: "np", UID: "uid-x-np"}
			if p.SourceRef == nil || *p.SourceRef != wantRef {
				t.Errorf("SourceRef = %+v, want %+v", p.SourceRef, wantRef)
			}
			if p.Priority != nil || p.TierPriority != nil {
				t.Errorf("priorities of a K8s policy must be nil, got %v, %v", p.Priority, p.TierPriority)
			}
			if p.Generation != 1 {
				t.Errorf("Generation = %d, want 1", p.Generation)
			}
			if p.Name != "uid-x-np" || p.UID != "uid-x-np" {
				t.Errorf("internal policy named %q (UID %q), want the K8s policy's UID", p.Name, p.UID)
			}
			atgKey := selKey(t, "x", &tt.spec.PodSelector, nil)
			if want := []string{groupName(atgKey)}; !slices.Equal(p.AppliedToGroups, want) {
				t.Errorf("AppliedToGroups = %v, want %v", p.AppliedToGroups, want)
			}
			if got := p.SortedNodeNames(); !slices.Equal(got, []string{"n1"}) {
				t.Errorf("policy span = %v, want [n1]", got)
			}
			for key, want := range tt.wantGroups {
				ag, ok := e.addressGroup(key)
				if !ok {
					t.Errorf("AddressGroup %q not stored", key)
					continue
				}
				if got := memberNames(ag.GroupMembers); !slices.Equal(got, want) {
					t.Errorf("AddressGroup %q members = %v, want %v", key, got, want)
				}
				if got := ag.SortedNodeNames(); !slices.Equal(got, []string{"n1"}) {
					t.Errorf("AddressGroup %q span = %v, want the policy's [n1]", key, got)
				}
			}
		})
	}
}

func TestAppliedToGroupsHoldScheduledLivePodsPerNode(t *testing.T) {
	terminated := newPod("x", "done", lbls("app", "a"), "10.0.0.7", "n2")
	terminated.Status.Phase = v1.PodSucceeded
	hostNet := newPod("x", "host", lbls("app", "a"), "192.168.0.10", "n3")
	hostNet.Spec.HostNetwork = true
	objs := append(cluster(),
		newPod("x", "a2", lbls("app", "a"), "10.0.0.3", "n2"),
		newPod("x", "pending", lbls("app", "a"), "", ""),
		newPod("x", "noip", lbls("app", "a"), "", "n2"),
		terminated, hostNet,
		newPolicy("x", "np", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("app", "a")}}}}}),
	)
	e := newEnv(t, objs...)
	key := selKey(t, "x", matchLabels("app", "a"), nil)
	wantATG := map[string][]string{"n1": {"x/a@10.0.0.1 http:8080/TCP"}, "n2": {"x/a2@10.0.0.3", "x/noip@"}}
	wantAG := []string{"x/a2@10.0.0.3", "x/a@10.0.0.1 http:8080/TCP"}
	e.eventually(t, func() error {
		atg, ok := e.appliedToGroup(key)
		if !ok {
			return fmt.Errorf("AppliedToGroup not stored")
		}
		if got := byNodeNames(atg); fmt.Sprint(got) != fmt.Sprint(wantATG) {
			return fmt.Errorf("AppliedToGroup members %v, want %v", got, wantATG)
		}
		ag, ok := e.addressGroup(key)
		if !ok {
			return fmt.Errorf("AddressGroup not stored")
		}
		if got := memberNames(ag.GroupMembers); !slices.Equal(got, wantAG) {
			return fmt.Errorf("AddressGroup members %v, want %v", got, wantAG)
		}
		return nil
	})
	atg, _ := e.appliedToGroup(key)
	ag, _ := e.addressGroup(key)
	p, _ := e.policy("x", "np")
	for what, span := range map[string][]string{"AppliedToGroup": atg.SortedNodeNames(), "AddressGroup": ag.SortedNodeNames(), "policy": p.SortedNodeNames()} {
		if !slices.Equal(span, []string{"n1", "n2"}) {
			t.Errorf("%s span = %v, want [n1 n2]", what, span)
		}
	}
}

func TestPoliciesWithTheSameSelectorsShareGroupsAndAddressGroupsSpanAllTheirPolicies(t *testing.T) {
	fromProd := []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: matchLabels("env", "prod")}}}}
	objs := append(cluster(),
		newPolicy("x", "np1", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a"), Ingress: fromProd}),
		newPolicy("x", "np2", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a"), Ingress: fromProd}),
		newPolicy("x", "np3", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "b"), Ingress: fromProd}),
	)
	e := newEnv(t, objs...)
	agKey := selKey(t, "", nil, matchLabels("env", "prod"))
	e.eventually(t, func() error {
		if got := len(e.nps.List()); got != 3 {
			return fmt.Errorf("%d policies stored, want 3", got)
		}
		ag, ok := e.addressGroup(agKey)
		if !ok {
			return fmt.Errorf("shared AddressGroup not stored")
		}
		if got := ag.SortedNodeNames(); !slices.Equal(got, []string{"n1", "n2"}) {
			return fmt.Errorf("AddressGroup span %v, want the union [n1 n2]", got)
		}
		return nil
	})
	if got := len(e.ags.List()); got != 1 {
		t.Errorf("%d AddressGroups stored, want 1 shared by all policies", got)
	}
	if got := len(e.atgs.List()); got != 2 {
		t.Errorf("%d AppliedToGroups stored, want 2 (app=a shared by np1 and np2, app=b)", got)
	}
	p1, _ := e.policy("x", "np1")
	p2, _ := e.policy("x", "np2")
	if !slices.Equal(p1.AppliedToGroups, p2.AppliedToGroups) {
		t.Errorf("np1 and np2 apply to %v and %v, want the same group", p1.AppliedToGroups, p2.AppliedToGroups)
	}

	// Without np3 (applied on n2) the shared group no longer spans n2.
	if err := e.client.NetworkingV1().NetworkPolicies("x").Delete(e.ctx, "np3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually(t, func() error {
		if ag, _ := e.addressGroup(agKey); !slices.Equal(ag.SortedNodeNames(), []string{"n1"}) {
			return fmt.Errorf("AddressGroup span %v after deleting np3, want [n1]", ag.SortedNodeNames())
		}
		return nil
	})

	// Nor once np2 moves to a rule without it.
	e.update(t, newPolicy("x", "np2", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a")}))
	e.update(t, newPolicy("x", "np1", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "b"), Ingress: fromProd}))
	e.eventually(t, func() error {
		if ag, _ := e.addressGroup(agKey); !slices.Equal(ag.SortedNodeNames(), []string{"n2"}) {
			return fmt.Errorf("AddressGroup span %v after np1 moved to app=b and np2 dropped it, want [n2]", ag.SortedNodeNames())
		}
		return nil
	})
}

func TestIncrementalUpdatesKeepTheStoresCurrent(t *testing.T) {
	fromB := networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("app", "b")}}}}}
	fromProd := networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: matchLabels("env", "prod")}}}}}
	bKey := func(t *testing.T) string { return selKey(t, "x", matchLabels("app", "b"), nil) }
	prodKey := func(t *testing.T) string { return selKey(t, "", nil, matchLabels("env", "prod")) }
	aKey := func(t *testing.T) string { return selKey(t, "x", matchLabels("app", "a"), nil) }

	agMembers := func(e *env, key string, want ...string) error {
		ag, ok := e.addressGroup(key)
		if !ok {
			return fmt.Errorf("AddressGroup %q not stored", key)
		}
		if want == nil {
			want = []string{}
		}
		if got := memberNames(ag.GroupMembers); !slices.Equal(got, want) {
			return fmt.Errorf("AddressGroup %q members %v, want %v", key, got, want)
		}
		return nil
	}
	spans := func(e *env, t *testing.T, want ...string) error {
		p, ok := e.policy("x", "np")
		if !ok {
			return fmt.Errorf("policy not stored")
		}
		ag, _ := e.addressGroup(bKey(t))
		atg, _ := e.appliedToGroup(aKey(t))
		if got := p.SortedNodeNames(); !slices.Equal(got, want) {
			return fmt.Errorf("policy span %v, want %v", got, want)
		}
		if got := atg.SortedNodeNames(); !slices.Equal(got, want) {
			return fmt.Errorf("AppliedToGroup span %v, want %v", got, want)
		}
		if got := ag.SortedNodeNames(); !slices.Equal(got, want) {
			return fmt.Errorf("AddressGroup span %v, want %v", got, want)
		}
		return nil
	}
	tests := []struct {
		name   string
		policy networkingv1.NetworkPolicySpec
		extra  []runtime.Object
		before func(e *env, t *testing.T) error
		change func(e *env, t *testing.T)
		after  func(e *env, t *testing.T) error
	}{
		{
			name:   "a label change moves a pod between address groups",
			policy: fromB,
			before: func(e *env, t *testing.T) error { return agMembers(e, bKey(t), "x/b@10.0.0.2") },
			change: func(e *env, t *testing.T) {
				e.update(t, newPod("x", "b", lbls("app", "c"), "10.0.0.2", "n2"))
				e.create(t, newPod("x", "d", lbls("app", "b"), "10.0.0.4", "n3"))
			},
			after: func(e *env, t *testing.T) error { return agMembers(e, bKey(t), "x/d@10.0.0.4") },
		},
		{
			name:   "an IP change of a member updates its address group",
			policy: fromB,
			before: func(e *env, t *testing.T) error { return agMembers(e, bKey(t), "x/b@10.0.0.2") },
			change: func(e *env, t *testing.T) { e.update(t, newPod("x", "b", lbls("app", "b"), "10.0.0.99", "n2")) },
			after:  func(e *env, t *testing.T) error { return agMembers(e, bKey(t), "x/b@10.0.0.99") },
		},
		{
			name:   "a deleted pod leaves its address group",
			policy: fromB,
			before: func(e *env, t *testing.T) error { return agMembers(e, bKey(t), "x/b@10.0.0.2") },
			change: func(e *env, t *testing.T) {
				if err := e.client.CoreV1().Pods("x").Delete(e.ctx, "b", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			after: func(e *env, t *testing.T) error { return agMembers(e, bKey(t)) },
		},
		{
			name:   "a namespace relabel moves its pods into a namespace-selected group",
			policy: fromProd,
			before: func(e *env, t *testing.T) error { return agMembers(e, prodKey(t), "z/c@10.0.2.1") },
			change: func(e *env, t *testing.T) {
				e.update(t, newNamespace("y", lbls("ns", "y", "env", "prod")))
				e.update(t, newNamespace("z", lbls("ns", "z")))
			},
			after: func(e *env, t *testing.T) error { return agMembers(e, prodKey(t), "y/a@10.0.1.1") },
		},
		{
			name:   "a pod scheduled on a new node re-spans the policy and its groups",
			policy: fromB,
			before: func(e *env, t *testing.T) error { return spans(e, t, "n1") },
			change: func(e *env, t *testing.T) {
				e.create(t, newPod("x", "a3", lbls("app", "a"), "10.0.0.5", "n3"))
			},
			after: func(e *env, t *testing.T) error { return spans(e, t, "n1", "n3") },
		},
		{
			name:   "a pending pod joins the applied-to group once scheduled, re-spanning the policy",
			policy: fromB,
			extra:  []runtime.Object{newPod("x", "late", lbls("app", "a"), "", "")},
			before: func(e *env, t *testing.T) error { return spans(e, t, "n1") },
			change: func(e *env, t *testing.T) {
				e.update(t, newPod("x", "late", lbls("app", "a"), "10.0.0.6", "n2"))
			},
			after: func(e *env, t *testing.T) error { return spans(e, t, "n1", "n2") },
		},
		{
			name:   "a pod relabelled out of the applied-to selection shrinks the span",
			policy: fromB,
			before: func(e *env, t *testing.T) error { return spans(e, t, "n1") },
			change: func(e *env, t *testing.T) {
				e.update(t, newPod("x", "a", lbls("app", "zzz"), "10.0.0.1", "n1"))
			},
			after: func(e *env, t *testing.T) error { return spans(e, t) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := append(cluster(), newPolicy("x", "np", tt.policy))
			e := newEnv(t, append(objs, tt.extra...)...)
			e.eventually(t, func() error { return tt.before(e, t) })
			before, _ := e.policy("x", "np")
			tt.change(e, t)
			e.eventually(t, func() error { return tt.after(e, t) })
			if after, _ := e.policy("x", "np"); after.Generation != before.Generation {
				t.Errorf("pod and namespace events changed the policy generation from %d to %d; only the policy's content should",
					before.Generation, after.Generation)
			}
		})
	}
}

func TestPolicyUpdatesAndDeletesReleaseTheirGroups(t *testing.T) {
	spec := func(peer string) networkingv1.NetworkPolicySpec {
		return networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("app", peer)}}}}}
	}
	bKey := selKey(t, "x", matchLabels("app", "b"), nil)
	cKey := selKey(t, "x", matchLabels("app", "c"), nil)
	aKey := selKey(t, "x", matchLabels("app", "a"), nil)
	e := newEnv(t, append(cluster(), newPolicy("x", "np1", spec("b")), newPolicy("x", "np2", spec("b")))...)
	stored := func(key string) (ag, atg bool) {
		_, ag = e.addressGroup(key)
		_, atg = e.appliedToGroup(key)
		return
	}
	e.eventually(t, func() error {
		if ag, _ := stored(bKey); !ag {
			return fmt.Errorf("AddressGroup app=b not stored")
		}
		if len(e.nps.List()) != 2 {
			return fmt.Errorf("policies not stored")
		}
		return nil
	})

	// Changing np1's peer keeps the shared group for np2 and bumps np1's generation.
	e.update(t, newPolicy("x", "np1", spec("c")))
	e.eventually(t, func() error {
		p, _ := e.policy("x", "np1")
		if p.Generation != 2 {
			return fmt.Errorf("np1 generation %d, want 2 after a rule change", p.Generation)
		}
		if ag, _ := stored(cKey); !ag {
			return fmt.Errorf("AddressGroup app=c not stored")
		}
		return nil
	})
	if ag, _ := stored(bKey); !ag {
		t.Errorf("AddressGroup app=b deleted while np2 still uses it")
	}

	// Deleting np2, the last user of app=b, deletes that group.
	if err := e.client.NetworkingV1().NetworkPolicies("x").Delete(e.ctx, "np2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually(t, func() error {
		if _, ok := e.policy("x", "np2"); ok {
			return fmt.Errorf("np2 still stored")
		}
		if ag, _ := stored(bKey); ag {
			return fmt.Errorf("AddressGroup app=b still stored after its last policy went")
		}
		return nil
	})
	if _, atg := stored(aKey); !atg {
		t.Errorf("AppliedToGroup app=a deleted while np1 still applies to it")
	}

	// Changing np1's pod selector moves it to a new AppliedToGroup, deletes
	// the old one, and re-spans np1 and the AddressGroup it uses.
	np1 := spec("c")
	np1.PodSelector = *matchLabels("app", "b")
	e.update(t, newPolicy("x", "np1", np1))
	e.eventually(t, func() error {
		if _, atg := stored(aKey); atg {
			return fmt.Errorf("AppliedToGroup app=a still stored after np1 left it")
		}
		p, _ := e.policy("x", "np1")
		if p.Generation != 3 || !slices.Equal(p.SortedNodeNames(), []string{"n2"}) {
			return fmt.Errorf("np1 generation %d span %v, want 3 and [n2]", p.Generation, p.SortedNodeNames())
		}
		if ag, _ := e.addressGroup(cKey); !slices.Equal(ag.SortedNodeNames(), []string{"n2"}) {
			return fmt.Errorf("AddressGroup app=c span %v, want [n2]", ag.SortedNodeNames())
		}
		return nil
	})

	// np1 deleted and created again before a sync: a new UID, a new object.
	if err := e.client.NetworkingV1().NetworkPolicies("x").Delete(e.ctx, "np1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	recreated := newPolicy("x", "np1", np1)
	recreated.UID = "uid-x-np1-again"
	e.create(t, recreated)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		// No sync runs until the informer holds the new object, so that one
		// sync sees the UID change.
		if np, err := e.c.npLister.NetworkPolicies("x").Get("np1"); err == nil && np.UID == recreated.UID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("informer never saw the recreated np1")
		}
	}
	e.eventually(t, func() error {
		p, ok := e.policy("x", "np1")
		if !ok || p.Name != "uid-x-np1-again" || p.Generation != 1 {
			return fmt.Errorf("recreated np1 stored as %+v, want name uid-x-np1-again, generation 1", p)
		}
		if _, ok, _ := e.nps.Get("uid-x-np1"); ok {
			return fmt.Errorf("the internal policy of the deleted np1 is still stored")
		}
		return nil
	})

	// Deleting np1 empties every store and the index.
	if err := e.client.NetworkingV1().NetworkPolicies("x").Delete(e.ctx, "np1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually(t, func() error {
		if n := len(e.nps.List()) + len(e.ags.List()) + len(e.atgs.List()); n != 0 {
			return fmt.Errorf("%d objects left in the stores", n)
		}
		return nil
	})
	if _, _, groups := e.c.index.Counts(); groups != 0 {
		t.Errorf("%d groups left in the index", groups)
	}
}

func TestRunComputesWithWorkersUntilCancelled(t *testing.T) {
	e := newEnv(t, append(cluster(), newPolicy("x", "np", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a")}))...)
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.c.Run(ctx, 2)
	}()
	defer func() {
		cancel()
		wg.Wait()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p, ok := e.policy("x", "np"); ok && len(p.Rules) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not compute the policy")
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.create(t, newPod("x", "a9", lbls("app", "a"), "10.0.0.9", "n9"))
	for {
		if p, _ := e.policy("x", "np"); p.Has("n9") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not re-span the policy after a new pod")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
