package networkpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/controller/grouping"
)

// Named ports of egress rules whose peers are ipBlocks (issue 10): the
// controller gives each such block the AddressGroup of the Pods inside it,
// so that the agent resolves the port on the destination Pod as it does for
// selector peers.

// blockKey is the index key of an ipBlock peer's AddressGroup.
func blockKey(cidr string, except ...string) string {
	var ex []netip.Prefix
	for _, e := range except {
		ex = append(ex, netip.MustParsePrefix(e))
	}
	return grouping.NewIPBlockSelector(netip.MustParsePrefix(cidr), ex).Key()
}

func ipBlockPeer(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

// namedPortCluster: x/a is the client; x/b and y/c serve "http" (on
// different numbers), y/d has no named port, and z/e is dual-stack.
func namedPortCluster() []runtime.Object {
	http := func(n int32) v1.ContainerPort { return v1.ContainerPort{Name: "http", ContainerPort: n} }
	dual := newPod("z", "e", lbls("app", "e"), "10.2.0.5", "n2", http(8080))
	dual.Status.PodIPs = append(dual.Status.PodIPs, v1.PodIP{IP: "fd00::5"})
	return []runtime.Object{
		newNamespace("x", lbls("ns", "x")),
		newNamespace("y", lbls("ns", "y")),
		newNamespace("z", lbls("ns", "z")),
		newPod("x", "a", lbls("app", "a"), "10.0.0.1", "n1", http(8080)),
		newPod("x", "b", lbls("app", "b"), "10.0.0.2", "n2", http(8080)),
		newPod("y", "c", lbls("app", "c"), "10.1.0.3", "n3", http(9090)),
		newPod("y", "d", lbls("app", "d"), "10.1.0.4", "n3"),
		dual,
	}
}

// egressFromA is a policy on x/a with one egress rule.
func egressFromA(ports []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) *networkingv1.NetworkPolicy {
	return newPolicy("x", "np", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a"),
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress:      []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: ports}}})
}

var httpPort = []networkingv1.NetworkPolicyPort{port(v1.ProtocolTCP, intstr.FromString("http"))}

// egressAllowed lists, for "ip:port" destinations, whether the computed
// objects let x/a reach them over TCP, judged as an agent would (oracleEval).
func (e *env) egressAllowed(dests []string) []string {
	eval := e.oracleEval()
	src := &oraclePod{ns: "x", name: "a"}
	var out []string
	for _, d := range dests {
		ap := netip.MustParseAddrPort(d)
		ok := eval.allowed(controlplane.DirectionOut, src, ap.Addr().String(), int32(ap.Port()), v1.ProtocolTCP)
		out = append(out, fmt.Sprintf("%s=%v", d, ok))
	}
	return out
}

func TestEgressNamedPortsToIPBlocksResolveOnThePodsInsideTheBlocks(t *testing.T) {
	tests := []struct {
		name      string
		policy    *networkingv1.NetworkPolicy
		wantRules []string
		// wantGroups maps a group key to its members; noGroup says the
		// policy needs no AddressGroup at all.
		wantGroups map[string][]string
		noGroup    bool
		// wantAllowed is "ip:port=allowed" for x/a's egress over TCP.
		wantAllowed []string
	}{
		{
			name:      "a block without except resolves the port on every pod inside it that names it",
			policy:    egressFromA(httpPort, ipBlockPeer("10.0.0.0/8")),
			wantRules: []string{"Out to=[ipBlock=10.0.0.0/8] ips=[10.0.0.0/8] ports=[TCP/http] prio=-1"},
			wantGroups: map[string][]string{blockKey("10.0.0.0/8"): {
				"x/a@10.0.0.1 http:8080/TCP", "x/b@10.0.0.2 http:8080/TCP", "y/c@10.1.0.3 http:9090/TCP", "z/e@10.2.0.5 http:8080/TCP"}},
			wantAllowed: []string{"10.0.0.2:8080=true", "10.1.0.3:9090=true", "10.1.0.3:8080=false", "10.1.0.4:8080=false"},
		},
		{
			name:      "an except leaves the pods inside it out",
			policy:    egressFromA(httpPort, ipBlockPeer("10.0.0.0/8", "10.1.0.0/16")),
			wantRules: []string{"Out to=[ipBlock=10.0.0.0/8 except 10.1.0.0/16] ips=[10.0.0.0/8 except 10.1.0.0/16] ports=[TCP/http] prio=-1"},
			wantGroups: map[string][]string{blockKey("10.0.0.0/8", "10.1.0.0/16"): {
				"x/a@10.0.0.1 http:8080/TCP", "x/b@10.0.0.2 http:8080/TCP", "z/e@10.2.0.5 http:8080/TCP"}},
			wantAllowed: []string{"10.0.0.2:8080=true", "10.1.0.3:9090=false"},
		},
		{
			name:   "an address of the block that is no pod's matches no named port",
			policy: egressFromA(httpPort, ipBlockPeer("10.0.0.0/8")),
			wantGroups: map[string][]string{blockKey("10.0.0.0/8"): {
				"x/a@10.0.0.1 http:8080/TCP", "x/b@10.0.0.2 http:8080/TCP", "y/c@10.1.0.3 http:9090/TCP", "z/e@10.2.0.5 http:8080/TCP"}},
			wantAllowed: []string{"10.0.0.99:8080=false", "10.0.0.99:9090=false"},
		},
		{
			name:      "overlapping blocks get a group each and a pod inside both is in both",
			policy:    egressFromA(httpPort, ipBlockPeer("10.0.0.0/8", "10.0.0.0/24"), ipBlockPeer("10.0.0.0/16")),
			wantRules: []string{"Out to=[ipBlock=10.0.0.0/8 except 10.0.0.0/24; ipBlock=10.0.0.0/16] ips=[10.0.0.0/8 except 10.0.0.0/24; 10.0.0.0/16] ports=[TCP/http] prio=-1"},
			wantGroups: map[string][]string{
				blockKey("10.0.0.0/8", "10.0.0.0/24"): {"y/c@10.1.0.3 http:9090/TCP", "z/e@10.2.0.5 http:8080/TCP"},
				blockKey("10.0.0.0/16"):               {"x/a@10.0.0.1 http:8080/TCP", "x/b@10.0.0.2 http:8080/TCP"},
			},
			wantAllowed: []string{"10.0.0.2:8080=true", "10.1.0.3:9090=true", "10.2.0.5:8080=true"},
		},
		{
			name:      "a selector peer next to a block keeps its own group and the block resolves the other pods",
			policy:    egressFromA(httpPort, networkingv1.NetworkPolicyPeer{PodSelector: matchLabels("app", "b")}, ipBlockPeer("10.1.0.0/16")),
			wantRules: []string{"Out to=[namespace=x podSelector=app=b; ipBlock=10.1.0.0/16] ips=[10.1.0.0/16] ports=[TCP/http] prio=-1"},
			wantGroups: map[string][]string{
				selKey(t, "x", matchLabels("app", "b"), nil): {"x/b@10.0.0.2 http:8080/TCP"},
				blockKey("10.1.0.0/16"):                      {"y/c@10.1.0.3 http:9090/TCP"},
			},
			wantAllowed: []string{"10.0.0.2:8080=true", "10.1.0.3:9090=true", "10.2.0.5:8080=false"},
		},
		{
			name:        "a numbered port next to the named one allows the whole block and the name only the pods",
			policy:      egressFromA(append([]networkingv1.NetworkPolicyPort{port(v1.ProtocolTCP, intstr.FromInt32(80))}, httpPort...), ipBlockPeer("10.0.0.0/8")),
			wantRules:   []string{"Out to=[ipBlock=10.0.0.0/8] ips=[10.0.0.0/8] ports=[TCP/80 TCP/http] prio=-1"},
			wantAllowed: []string{"10.0.0.99:80=true", "10.0.0.99:8080=false", "10.0.0.2:8080=true"},
		},
		{
			name:        "a dual-stack pod lends its port only to its address inside the block",
			policy:      egressFromA(httpPort, ipBlockPeer("fd00::/64")),
			wantGroups:  map[string][]string{blockKey("fd00::/64"): {"z/e@fd00::5 http:8080/TCP"}},
			wantAllowed: []string{"[fd00::5]:8080=true", "10.2.0.5:8080=false"},
		},
		{
			name:        "numbered ports alone need no group",
			policy:      egressFromA([]networkingv1.NetworkPolicyPort{port(v1.ProtocolTCP, intstr.FromInt32(8080))}, ipBlockPeer("10.0.0.0/8")),
			wantRules:   []string{"Out to=[] ips=[10.0.0.0/8] ports=[TCP/8080] prio=-1"},
			noGroup:     true,
			wantAllowed: []string{"10.0.0.99:8080=true"},
		},
		{
			name: "an ingress named port resolves on the applied-to pod and needs no group",
			policy: newPolicy("x", "np", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a"),
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{ipBlockPeer("10.0.0.0/8")}, Ports: httpPort}}}),
			wantRules: []string{"In from=[] ips=[10.0.0.0/8] ports=[TCP/http] prio=-1"},
			noGroup:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, append(namedPortCluster(), tt.policy)...)
			e.eventually(t, func() error {
				p, ok := e.policy("x", "np")
				if !ok {
					return fmt.Errorf("internal policy not stored")
				}
				if got := renderRules(p.Rules, e.nameToKey()); tt.wantRules != nil && !slices.Equal(got, tt.wantRules) {
					return fmt.Errorf("rules:\n got %q\nwant %q", got, tt.wantRules)
				}
				return nil
			})
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
			if tt.noGroup && len(e.ags.List()) != 0 {
				t.Errorf("%d AddressGroups stored, want none", len(e.ags.List()))
			}
			if tt.wantAllowed != nil {
				var dests []string
				for _, w := range tt.wantAllowed {
					dests = append(dests, w[:strings.LastIndex(w, "=")])
				}
				if got := e.egressAllowed(dests); !slices.Equal(got, tt.wantAllowed) {
					t.Errorf("egress of x/a: %v, want %v", got, tt.wantAllowed)
				}
			}
		})
	}
}

func TestIPBlockGroupsOfNamedPortsFollowPodChanges(t *testing.T) {
	block := blockKey("10.0.0.0/8", "10.9.0.0/16")
	policy := egressFromA(httpPort, ipBlockPeer("10.0.0.0/8", "10.9.0.0/16"),
		networkingv1.NetworkPolicyPeer{NamespaceSelector: matchLabels("ns", "y"), PodSelector: matchLabels("app", "c")})
	yc := selKey(t, "", matchLabels("app", "c"), matchLabels("ns", "y"))
	http := v1.ContainerPort{Name: "http", ContainerPort: 9090}
	deletePod := func(e *env, t *testing.T, ns, name string) {
		if err := e.client.CoreV1().Pods(ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	initial := []string{"x/a@10.0.0.1 http:8080/TCP", "x/b@10.0.0.2 http:8080/TCP", "y/c@10.1.0.3 http:9090/TCP", "z/e@10.2.0.5 http:8080/TCP"}
	tests := []struct {
		name        string
		change      func(e *env, t *testing.T)
		wantBlock   []string
		wantSel     []string
		wantAllowed []string
	}{
		{
			name: "a relabelled pod leaves the selector group but stays in the block group",
			change: func(e *env, t *testing.T) {
				e.update(t, newPod("y", "c", lbls("app", "other"), "10.1.0.3", "n3", http))
			},
			wantBlock:   initial,
			wantSel:     []string{},
			wantAllowed: []string{"10.1.0.3:9090=true"},
		},
		{
			name: "a pod re-created with a new IP inside the block is in it under the new IP",
			change: func(e *env, t *testing.T) {
				deletePod(e, t, "y", "c")
				e.create(t, newPod("y", "c", lbls("app", "c"), "10.1.7.7", "n3", http))
			},
			wantBlock:   []string{"x/a@10.0.0.1 http:8080/TCP", "x/b@10.0.0.2 http:8080/TCP", "y/c@10.1.7.7 http:9090/TCP", "z/e@10.2.0.5 http:8080/TCP"},
			wantSel:     []string{"y/c@10.1.7.7 http:9090/TCP"},
			wantAllowed: []string{"10.1.7.7:9090=true", "10.1.0.3:9090=false"},
		},
		{
			name: "a pod re-created with a new IP in the except leaves the block but keeps its selector peer",
			change: func(e *env, t *testing.T) {
				deletePod(e, t, "y", "c")
				e.create(t, newPod("y", "c", lbls("app", "c"), "10.9.0.3", "n3", http))
			},
			wantBlock:   []string{"x/a@10.0.0.1 http:8080/TCP", "x/b@10.0.0.2 http:8080/TCP", "z/e@10.2.0.5 http:8080/TCP"},
			wantSel:     []string{"y/c@10.9.0.3 http:9090/TCP"},
			wantAllowed: []string{"10.9.0.3:9090=true", "10.1.0.3:9090=false"},
		},
		{
			name: "a relabelled pod re-created outside the block matches no named port",
			change: func(e *env, t *testing.T) {
				deletePod(e, t, "y", "c")
				e.create(t, newPod("y", "c", lbls("app", "other"), "192.168.0.3", "n3", http))
			},
			wantBlock:   []string{"x/a@10.0.0.1 http:8080/TCP", "x/b@10.0.0.2 http:8080/TCP", "z/e@10.2.0.5 http:8080/TCP"},
			wantSel:     []string{},
			wantAllowed: []string{"192.168.0.3:9090=false", "10.1.0.3:9090=false"},
		},
		{
			name: "a pod whose IP changes in place moves with it",
			change: func(e *env, t *testing.T) {
				e.update(t, newPod("x", "b", lbls("app", "b"), "10.9.0.2", "n2", v1.ContainerPort{Name: "http", ContainerPort: 8080}))
			},
			wantBlock:   []string{"x/a@10.0.0.1 http:8080/TCP", "y/c@10.1.0.3 http:9090/TCP", "z/e@10.2.0.5 http:8080/TCP"},
			wantSel:     []string{"y/c@10.1.0.3 http:9090/TCP"},
			wantAllowed: []string{"10.0.0.2:8080=false", "10.9.0.2:8080=false"},
		},
		{
			name:        "a pod that gains the named port joins the block group",
			change:      func(e *env, t *testing.T) { e.update(t, newPod("y", "d", lbls("app", "d"), "10.1.0.4", "n3", http)) },
			wantBlock:   append(slices.Clone(initial), "y/d@10.1.0.4 http:9090/TCP"),
			wantSel:     []string{"y/c@10.1.0.3 http:9090/TCP"},
			wantAllowed: []string{"10.1.0.4:9090=true"},
		},
		{
			name:        "a deleted pod leaves the block group and its address resolves no named port",
			change:      func(e *env, t *testing.T) { deletePod(e, t, "x", "b") },
			wantBlock:   []string{"x/a@10.0.0.1 http:8080/TCP", "y/c@10.1.0.3 http:9090/TCP", "z/e@10.2.0.5 http:8080/TCP"},
			wantSel:     []string{"y/c@10.1.0.3 http:9090/TCP"},
			wantAllowed: []string{"10.0.0.2:8080=false"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, append(namedPortCluster(), policy)...)
			groups := func(wantBlock, wantSel []string) error {
				for key, want := range map[string][]string{block: wantBlock, yc: wantSel} {
					ag, ok := e.addressGroup(key)
					if !ok {
						return fmt.Errorf("AddressGroup %q not stored", key)
					}
					if got := memberNames(ag.GroupMembers); !slices.Equal(got, want) {
						return fmt.Errorf("AddressGroup %q members %v, want %v", key, got, want)
					}
				}
				return nil
			}
			e.eventually(t, func() error { return groups(initial, []string{"y/c@10.1.0.3 http:9090/TCP"}) })
			before, _ := e.policy("x", "np")
			tt.change(e, t)
			sort.Strings(tt.wantBlock)
			e.eventually(t, func() error { return groups(tt.wantBlock, tt.wantSel) })
			var dests []string
			for _, w := range tt.wantAllowed {
				dests = append(dests, w[:strings.LastIndex(w, "=")])
			}
			if got := e.egressAllowed(dests); !slices.Equal(got, tt.wantAllowed) {
				t.Errorf("egress of x/a: %v, want %v", got, tt.wantAllowed)
			}
			if after, _ := e.policy("x", "np"); after.Generation != before.Generation {
				t.Errorf("pod events changed the policy generation from %d to %d", before.Generation, after.Generation)
			}
		})
	}
}

func TestAnIPBlockGroupIsSharedByItsRulesAndDeletedWithTheLast(t *testing.T) {
	e := newEnv(t, append(namedPortCluster(),
		egressFromA(httpPort, ipBlockPeer("10.0.0.0/8")),
		newPolicy("y", "np2", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "c"),
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{ipBlockPeer("10.0.0.0/8")}, Ports: httpPort}}}))...)
	key := blockKey("10.0.0.0/8")
	e.eventually(t, func() error {
		ag, ok := e.addressGroup(key)
		if !ok {
			return fmt.Errorf("AddressGroup not stored")
		}
		if got := ag.SortedNodeNames(); !slices.Equal(got, []string{"n1", "n3"}) {
			return fmt.Errorf("AddressGroup span %v, want both policies' [n1 n3]", got)
		}
		return nil
	})
	if n := len(e.ags.List()); n != 1 {
		t.Errorf("%d AddressGroups stored, want the one shared", n)
	}
	// Moving np to numbered ports releases its use of the group.
	e.update(t, egressFromA([]networkingv1.NetworkPolicyPort{port(v1.ProtocolTCP, intstr.FromInt32(8080))}, ipBlockPeer("10.0.0.0/8")))
	e.eventually(t, func() error {
		if ag, _ := e.addressGroup(key); ag == nil || !slices.Equal(ag.SortedNodeNames(), []string{"n3"}) {
			return fmt.Errorf("AddressGroup %v, want it spanning np2's [n3] only", ag)
		}
		return nil
	})
	if err := e.client.NetworkingV1().NetworkPolicies("y").Delete(e.ctx, "np2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually(t, func() error {
		if _, ok := e.addressGroup(key); ok {
			return fmt.Errorf("AddressGroup still stored after its last rule went")
		}
		if e.c.index.HasGroup(key) {
			return fmt.Errorf("ipBlock group still in the index")
		}
		return nil
	})
}
