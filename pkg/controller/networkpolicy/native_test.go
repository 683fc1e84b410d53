package networkpolicy

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/controller/types"
)

// nativeCluster is cluster() plus a Pod running as ServiceAccount x/robot,
// three labelled Nodes and the static Tiers.
func nativeCluster() (kube, crd []runtime.Object) {
	robot := newPod("x", "bot", lbls("app", "bot"), "10.0.0.9", "n2")
	robot.Spec.ServiceAccountName = "robot"
	kube = append(cluster(), robot,
		newNode("n1", lbls("role", "worker"), "172.18.0.1"),
		newNode("n2", lbls("role", "worker"), "172.18.0.2"),
		newNode("n3", lbls("role", "control-plane"), "172.18.0.3"),
	)
	return kube, staticTiers()
}

var (
	allNamespaces = &metav1.LabelSelector{}
	appliedToAppA = []crdv1beta1.AppliedTo{{PodSelector: matchLabels("app", "a")}}
)

// The expectations below are written from upstream Antrea's documentation
// of the Antrea-native policy API (docs/antrea-network-policy.md: Tiers,
// priorities, rule order, appliedTo, peers, groups) and its controlplane
// types: never read back from this code's output.
func TestAntreaNativePoliciesComputeWhatUpstreamDocumentationSays(t *testing.T) {
	type want struct {
		tierPriority     int32
		priority         float64
		appliedTo        []string // selector keys of the policy-level AppliedToGroups
		perRule          bool
		rules            []string
		groups           map[string][]string // selector key -> AddressGroup members
		appliedToMembers map[string][]string // selector key -> AppliedToGroup members
	}
	tests := []struct {
		name   string
		extra  []runtime.Object // kube and crd objects besides the fixture
		policy runtime.Object
		want   want
	}{
		{
			name: "a ClusterNetworkPolicy carries its Tier's priority, its own, rule order per direction and the actions",
			policy: newACNP("p", "securityops", 5, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: appliedToAppA,
				Ingress: []crdv1beta1.Rule{
					{Action: action(crdv1beta1.RuleActionDrop), From: []crdv1beta1.NetworkPolicyPeer{{NamespaceSelector: matchLabels("ns", "y")}}},
					{Action: action(crdv1beta1.RuleActionAllow), From: []crdv1beta1.NetworkPolicyPeer{{IPBlock: &crdv1beta1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.0.1.0/24"}}}},
						Ports: []crdv1beta1.NetworkPolicyPort{{Port: ptrIntStr(intstr.FromInt32(80)), EndPort: i32(90)}}},
				},
				Egress: []crdv1beta1.Rule{
					{Action: action(crdv1beta1.RuleActionReject), To: []crdv1beta1.NetworkPolicyPeer{{PodSelector: matchLabels("app", "c")}}},
				},
			}),
			want: want{
				tierPriority: 100, priority: 5,
				appliedTo: []string{"namespaceSelector=<all> podSelector=app=a"},
				rules: []string{
					"In#0 Drop from=[namespaceSelector=ns=y podSelector=<all>] ips=[] services=all",
					"In#1 Allow from=[] ips=[10.0.0.0/8 except 10.0.1.0/24] services=[TCP/80-90]",
					"Out#0 Reject to=[namespaceSelector=<all> podSelector=app=c] ips=[] services=all",
				},
				groups: map[string][]string{
					"namespaceSelector=ns=y podSelector=<all>":  {"y/a@10.0.1.1"},
					"namespaceSelector=<all> podSelector=app=c": {"z/c@10.0.2.1"},
				},
				appliedToMembers: map[string][]string{"namespaceSelector=<all> podSelector=app=a": {"x/a@10.0.0.1", "y/a@10.0.1.1"}},
			},
		},
		{
			name: "fqdn peers reach the rule as patterns in lower case without the trailing dot, once each, beside the other peers",
			policy: newACNP("p", "securityops", 5, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: appliedToAppA,
				Egress: []crdv1beta1.Rule{
					{Action: action(crdv1beta1.RuleActionAllow), To: []crdv1beta1.NetworkPolicyPeer{{FQDN: "API.Example.Test."}, {FQDN: "*.wild.test"},
						{FQDN: "api.example.test"}, {IPBlock: &crdv1beta1.IPBlock{CIDR: "10.0.0.0/8"}}}},
					{Action: action(crdv1beta1.RuleActionDrop), To: []crdv1beta1.NetworkPolicyPeer{{FQDN: "*foobar.com"}}},
				},
			}),
			want: want{
				tierPriority: 100, priority: 5,
				appliedTo: []string{"namespaceSelector=<all> podSelector=app=a"},
				rules: []string{
					"Out#0 Allow to=[] ips=[10.0.0.0/8] fqdns=[api.example.test *.wild.test] services=all",
					"Out#1 Drop to=[] ips=[] fqdns=[*foobar.com] services=all",
				},
				appliedToMembers: map[string][]string{"namespaceSelector=<all> podSelector=app=a": {"x/a@10.0.0.1", "y/a@10.0.1.1"}},
			},
		},
		{
			name: "an empty tier is the application Tier, an absent from matches every address, and Pass is kept",
			policy: newACNP("p", "", 10, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: []crdv1beta1.AppliedTo{{NamespaceSelector: matchLabels("ns", "x")}},
				Ingress:   []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionPass)}},
			}),
			want: want{
				tierPriority: 250, priority: 10,
				appliedTo:        []string{"namespaceSelector=ns=x podSelector=<all>"},
				rules:            []string{"In#0 Pass from=[] ips=[0.0.0.0/0; ::/0] services=all"},
				appliedToMembers: map[string][]string{"namespaceSelector=ns=x podSelector=<all>": {"x/a@10.0.0.1", "x/b@10.0.0.2", "x/bot@10.0.0.9"}},
			},
		},
		{
			name: "appliedTo in the rules makes each rule carry its own AppliedToGroups",
			policy: newACNP("p", "baseline", 1, crdv1beta1.ClusterNetworkPolicySpec{
				Ingress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionDrop),
					AppliedTo: []crdv1beta1.AppliedTo{{NamespaceSelector: matchLabels("ns", "x")}}}},
				Egress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionAllow),
					AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: matchLabels("app", "c")}, {PodSelector: matchLabels("app", "a"), NamespaceSelector: matchLabels("ns", "y")}},
					To:        []crdv1beta1.NetworkPolicyPeer{{IPBlock: &crdv1beta1.IPBlock{CIDR: "fd00::/64"}}}}},
			}),
			want: want{
				tierPriority: 253, priority: 1, perRule: true,
				rules: []string{
					"In#0 Drop [appliedTo=namespaceSelector=ns=x podSelector=<all>] from=[] ips=[0.0.0.0/0; ::/0] services=all",
					"Out#0 Allow [appliedTo=namespaceSelector=<all> podSelector=app=c; namespaceSelector=ns=y podSelector=app=a] to=[] ips=[fd00::/64] services=all",
				},
			},
		},
		{
			name: "namespaces match Self expands the rule into one rule per Namespace, restricted to it",
			policy: newACNP("p", "securityops", 1, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: []crdv1beta1.AppliedTo{{NamespaceSelector: allNamespaces}},
				Ingress: []crdv1beta1.Rule{
					{Action: action(crdv1beta1.RuleActionAllow), From: []crdv1beta1.NetworkPolicyPeer{{Namespaces: &crdv1beta1.PeerNamespaces{Match: crdv1beta1.NamespaceMatchSelf}}}},
					{Action: action(crdv1beta1.RuleActionDrop), From: []crdv1beta1.NetworkPolicyPeer{{NamespaceSelector: allNamespaces}}},
				},
			}),
			want: want{
				tierPriority: 100, priority: 1, perRule: true,
				rules: []string{
					"In#0 Allow [appliedTo=namespace=x podSelector=<all>] from=[namespace=x podSelector=<all>] ips=[] services=all",
					"In#0 Allow [appliedTo=namespace=y podSelector=<all>] from=[namespace=y podSelector=<all>] ips=[] services=all",
					"In#0 Allow [appliedTo=namespace=z podSelector=<all>] from=[namespace=z podSelector=<all>] ips=[] services=all",
					"In#1 Drop [appliedTo=namespaceSelector=<all> podSelector=<all>] from=[namespaceSelector=<all> podSelector=<all>] ips=[] services=all",
				},
				groups:           map[string][]string{"namespace=y podSelector=<all>": {"y/a@10.0.1.1"}},
				appliedToMembers: map[string][]string{"namespace=z podSelector=<all>": {"z/c@10.0.2.1"}},
			},
		},
		{
			name: "namespaces sameLabels groups the Namespaces by their values and leaves out those without the label",
			extra: []runtime.Object{
				newNamespace("t1a", lbls("tenant", "t1")), newNamespace("t1b", lbls("tenant", "t1")), newNamespace("t2a", lbls("tenant", "t2")),
				newPod("t1b", "w", nil, "10.0.5.1", "n2"),
			},
			policy: newACNP("p", "securityops", 1, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: []crdv1beta1.AppliedTo{{NamespaceSelector: allNamespaces}},
				Ingress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionAllow),
					From: []crdv1beta1.NetworkPolicyPeer{{Namespaces: &crdv1beta1.PeerNamespaces{SameLabels: []string{"tenant"}}}}}},
			}),
			want: want{
				tierPriority: 100, priority: 1, perRule: true,
				rules: []string{
					"In#0 Allow [appliedTo=namespaceSelector=tenant=t1 podSelector=<all>] from=[namespaceSelector=tenant=t1 podSelector=<all>] ips=[] services=all",
					"In#0 Allow [appliedTo=namespaceSelector=tenant=t2 podSelector=<all>] from=[namespaceSelector=tenant=t2 podSelector=<all>] ips=[] services=all",
				},
				groups: map[string][]string{"namespaceSelector=tenant=t1 podSelector=<all>": {"t1b/w@10.0.5.1"}},
			},
		},
		{
			name: "ports keep ranges and source port ranges, protocols keep ICMP type and code",
			policy: newACNP("p", "", 3, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: appliedToAppA,
				Ingress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionAllow),
					Ports: []crdv1beta1.NetworkPolicyPort{
						{Port: ptrIntStr(intstr.FromInt32(8080)), EndPort: i32(8090), SourcePort: i32(1000), SourceEndPort: i32(2000)},
						{Protocol: protoPtr(v1.ProtocolUDP), Port: ptrIntStr(intstr.FromInt32(53))},
						{Port: ptrIntStr(intstr.FromString("http"))},
					},
					Protocols: []crdv1beta1.NetworkPolicyProtocol{{ICMP: &crdv1beta1.ICMPProtocol{ICMPType: i32(8), ICMPCode: i32(0)}}},
				}},
			}),
			want: want{
				tierPriority: 250, priority: 3,
				appliedTo: []string{"namespaceSelector=<all> podSelector=app=a"},
				rules:     []string{"In#0 Allow from=[] ips=[0.0.0.0/0; ::/0] services=[TCP/8080-8090 src=1000-2000 UDP/53 TCP/http ICMP/type=8,code=0]"},
			},
		},
		{
			name: "a ClusterGroup with childGroups stands for its children's selectors and ipBlocks",
			extra: []runtime.Object{
				&crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "cg-pods"}, Spec: crdv1beta1.GroupSpec{PodSelector: matchLabels("app", "c")}},
				&crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "cg-ips"}, Spec: crdv1beta1.GroupSpec{IPBlocks: []crdv1beta1.IPBlock{{CIDR: "192.168.0.0/16"}}}},
				&crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "cg-parent"}, Spec: crdv1beta1.GroupSpec{ChildGroups: []crdv1beta1.ClusterGroupReference{"cg-pods", "cg-ips"}}},
			},
			policy: newACNP("p", "", 3, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: appliedToAppA,
				Egress:    []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionDrop), To: []crdv1beta1.NetworkPolicyPeer{{Group: "cg-parent"}}}},
			}),
			want: want{
				tierPriority: 250, priority: 3,
				appliedTo: []string{"namespaceSelector=<all> podSelector=app=a"},
				rules:     []string{"Out#0 Drop to=[namespaceSelector=<all> podSelector=app=c] ips=[192.168.0.0/16] services=all"},
				groups:    map[string][]string{"namespaceSelector=<all> podSelector=app=c": {"z/c@10.0.2.1"}},
			},
		},
		{
			name: "a ClusterGroup with a serviceReference stands for the Pods of the Service's selector, also in appliedTo",
			extra: []runtime.Object{
				&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "web"}, Spec: v1.ServiceSpec{Selector: lbls("app", "a")}},
				&crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: crdv1beta1.GroupSpec{ServiceReference: &crdv1beta1.NamespacedName{Namespace: "y", Name: "web"}}},
			},
			policy: newACNP("p", "", 3, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: []crdv1beta1.AppliedTo{{Group: "web"}},
				Ingress:   []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionAllow), From: []crdv1beta1.NetworkPolicyPeer{{Group: "web"}}}},
			}),
			want: want{
				tierPriority: 250, priority: 3,
				appliedTo: []string{"namespace=y podSelector=app=a"},
				rules:     []string{"In#0 Allow from=[namespace=y podSelector=app=a] ips=[] services=all"},
				groups:    map[string][]string{"namespace=y podSelector=app=a": {"y/a@10.0.1.1"}},
			},
		},
		{
			name: "a serviceAccount peer selects the Pods that run as it",
			policy: newACNP("p", "", 3, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: appliedToAppA,
				Ingress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionDrop),
					From: []crdv1beta1.NetworkPolicyPeer{{ServiceAccount: &crdv1beta1.NamespacedName{Namespace: "x", Name: "robot"}}}}},
			}),
			want: want{
				tierPriority: 250, priority: 3,
				appliedTo: []string{"namespaceSelector=<all> podSelector=app=a"},
				rules:     []string{"In#0 Drop from=[namespace=x serviceAccount=robot] ips=[] services=all"},
				groups:    map[string][]string{"namespace=x serviceAccount=robot": {"x/bot@10.0.0.9"}},
			},
		},
		{
			name: "a nodeSelector peer is the selected Nodes' addresses",
			policy: newACNP("p", "", 3, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: appliedToAppA,
				Egress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionAllow),
					To: []crdv1beta1.NetworkPolicyPeer{{NodeSelector: matchLabels("role", "worker")}}}},
			}),
			want: want{
				tierPriority: 250, priority: 3,
				appliedTo: []string{"namespaceSelector=<all> podSelector=app=a"},
				rules:     []string{"Out#0 Allow to=[nodeSelector=role=worker] ips=[] services=all"},
				groups:    map[string][]string{"nodeSelector=role=worker": {"node n1@172.18.0.1", "node n2@172.18.0.2"}},
			},
		},
		{
			name: "toServices, the rule name, enableLogging and logLabel are kept",
			policy: newACNP("p", "", 3, crdv1beta1.ClusterNetworkPolicySpec{
				AppliedTo: appliedToAppA,
				Egress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionDrop), Name: "no-db", EnableLogging: true, LogLabel: "audit",
					ToServices: []crdv1beta1.PeerService{{Namespace: "z", Name: "db"}}}},
			}),
			want: want{
				tierPriority: 250, priority: 3,
				appliedTo: []string{"namespaceSelector=<all> podSelector=app=a"},
				rules:     []string{"Out#0 Drop to=[] ips=[] toService=z/db services=all name=no-db log=audit"},
			},
		},
		{
			name: "an Antrea NetworkPolicy selects in its own Namespace, and a group peer is a Group of that Namespace",
			extra: []runtime.Object{
				&crdv1beta1.Group{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "prod"}, Spec: crdv1beta1.GroupSpec{NamespaceSelector: matchLabels("env", "prod")}},
			},
			policy: newANNP("x", "p", 7, crdv1beta1.NetworkPolicySpec{
				Tier:      "platform",
				AppliedTo: appliedToAppA,
				Ingress: []crdv1beta1.Rule{
					{Action: action(crdv1beta1.RuleActionDrop), From: []crdv1beta1.NetworkPolicyPeer{{PodSelector: matchLabels("app", "b")}}},
					{Action: action(crdv1beta1.RuleActionAllow), From: []crdv1beta1.NetworkPolicyPeer{{Group: "prod"}}},
				},
			}),
			want: want{
				tierPriority: 200, priority: 7,
				appliedTo: []string{"namespace=x podSelector=app=a"},
				rules: []string{
					"In#0 Drop from=[namespace=x podSelector=app=b] ips=[] services=all",
					"In#1 Allow from=[namespaceSelector=env=prod podSelector=<all>] ips=[] services=all",
				},
				groups:           map[string][]string{"namespace=x podSelector=app=b": {"x/b@10.0.0.2"}},
				appliedToMembers: map[string][]string{"namespace=x podSelector=app=a": {"x/a@10.0.0.1"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube, crd := nativeCluster()
			for _, o := range tt.extra {
				switch o.(type) {
				case *crdv1beta1.ClusterGroup, *crdv1beta1.Group, *crdv1beta1.Tier:
					crd = append(crd, o)
				default:
					kube = append(kube, o)
				}
			}
			crd = append(crd, tt.policy)
			e := newNativeEnv(t, kube, crd)
			typ, ns, name := controlplane.AntreaClusterNetworkPolicy, "", "p"
			if annp, ok := tt.policy.(*crdv1beta1.NetworkPolicy); ok {
				typ, ns = controlplane.AntreaNetworkPolicy, annp.Namespace
			}
			var p *types.NetworkPolicy
			e.eventually(t, func() error {
				var ok bool
				if p, ok = e.internal(typ, ns, name); !ok {
					return fmt.Errorf("internal policy not stored")
				}
				if got := renderNative(p.Rules, e.nameToKey()); !slices.Equal(got, tt.want.rules) {
					return fmt.Errorf("rules:\n got %q\nwant %q", got, tt.want.rules)
				}
				return nil
			})
			if p.TierPriority == nil || *p.TierPriority != tt.want.tierPriority {
				t.Errorf("TierPriority = %v, want %d", p.TierPriority, tt.want.tierPriority)
			}
			if p.Priority == nil || *p.Priority != tt.want.priority {
				t.Errorf("Priority = %v, want %v", p.Priority, tt.want.priority)
			}
			if p.AppliedToPerRule != tt.want.perRule {
				t.Errorf("AppliedToPerRule = %v, want %v", p.AppliedToPerRule, tt.want.perRule)
			}
			var wantATGs []string
			for _, k := range tt.want.appliedTo {
				wantATGs = append(wantATGs, groupName(k))
			}
			if !slices.Equal(p.AppliedToGroups, wantATGs) {
				t.Errorf("AppliedToGroups = %v, want %v (%v)", p.AppliedToGroups, wantATGs, tt.want.appliedTo)
			}
			uid := "uid-acnp-p"
			if typ == controlplane.AntreaNetworkPolicy {
				uid = "uid-annp-" + ns + "-p"
			}
			wantRef := controlplane.NetworkPolicyReference{Type: typ, Namespace: ns, Name: "p", UID: k8stypes.UID(uid)}
			if *p.SourceRef != wantRef || p.Name != uid {
				t.Errorf("SourceRef = %+v named %s, want %+v named %s", p.SourceRef, p.Name, wantRef, uid)
			}
			for key, want := range tt.want.groups {
				ag, ok := e.addressGroup(key)
				if !ok {
					t.Errorf("AddressGroup %q not stored", key)
					continue
				}
				if got := members(ag.GroupMembers); !slices.Equal(got, want) {
					t.Errorf("AddressGroup %q members = %v, want %v", key, got, want)
				}
			}
			for key, want := range tt.want.appliedToMembers {
				atg, ok := e.appliedToGroup(key)
				if !ok {
					t.Errorf("AppliedToGroup %q not stored", key)
					continue
				}
				all := controlplane.GroupMemberSet{}
				for _, s := range memberSets(atg) {
					all = all.Union(s)
				}
				if got := members(all); !slices.Equal(got, want) {
					t.Errorf("AppliedToGroup %q members = %v, want %v", key, got, want)
				}
			}
		})
	}
}

func ptrIntStr(v intstr.IntOrString) *intstr.IntOrString { return &v }

func protoPtr(p v1.Protocol) *v1.Protocol { return &p }

// check returns a func for eventually that compares the rendered rules of a
// ClusterNetworkPolicy's internal policy.
func (e *nativeEnv) acnpRules(name string, want ...string) func() error {
	return func() error {
		p, ok := e.internal(controlplane.AntreaClusterNetworkPolicy, "", name)
		if !ok {
			if want == nil {
				return nil
			}
			return fmt.Errorf("internal policy of %s not stored", name)
		}
		if want == nil {
			return fmt.Errorf("internal policy of %s still stored", name)
		}
		if got := renderNative(p.Rules, e.nameToKey()); !slices.Equal(got, want) {
			return fmt.Errorf("rules:\n got %q\nwant %q", got, want)
		}
		return nil
	}
}

func (e *nativeEnv) addressGroupMembers(key string, want ...string) func() error {
	return func() error {
		ag, ok := e.addressGroup(key)
		if !ok {
			return fmt.Errorf("AddressGroup %q not stored", key)
		}
		if got := members(ag.GroupMembers); !slices.Equal(got, want) {
			return fmt.Errorf("AddressGroup %q members = %v, want %v", key, got, want)
		}
		return nil
	}
}

func TestAntreaNativePoliciesFollowTheirTiersGroupsServicesNamespacesAndNodes(t *testing.T) {
	kube, crd := nativeCluster()
	kube = append(kube, &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "web"}, Spec: v1.ServiceSpec{Selector: lbls("app", "a")}})
	crd = append(crd,
		&crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "cg"}, Spec: crdv1beta1.GroupSpec{PodSelector: matchLabels("app", "c")}},
		&crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: crdv1beta1.GroupSpec{ServiceReference: &crdv1beta1.NamespacedName{Namespace: "y", Name: "web"}}},
	)
	e := newNativeEnv(t, kube, crd)
	drop := action(crdv1beta1.RuleActionDrop)

	t.Run("a policy of a missing Tier is computed once the Tier exists", func(t *testing.T) {
		e.mustCreate(t, newACNP("late", "mytier", 1, crdv1beta1.ClusterNetworkPolicySpec{
			AppliedTo: appliedToAppA, Ingress: []crdv1beta1.Rule{{Action: drop}},
		}))
		e.eventually(t, func() error {
			p, err := e.crd.CrdV1beta1().ClusterNetworkPolicies().Get(e.ctx, "late", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(p.Status.Conditions) == 0 || p.Status.Conditions[0].Status != metav1.ConditionFalse || p.Status.Phase != crdv1beta1.NetworkPolicyPending {
				return fmt.Errorf("status = %+v, want Pending and Realizable False", p.Status)
			}
			return nil
		})
		if _, ok := e.internal(controlplane.AntreaClusterNetworkPolicy, "", "late"); ok {
			t.Fatal("a policy of a missing Tier was computed")
		}
		e.mustCreate(t, &crdv1beta1.Tier{ObjectMeta: metav1.ObjectMeta{Name: "mytier"}, Spec: crdv1beta1.TierSpec{Priority: 20}})
		e.eventually(t, func() error {
			p, ok := e.internal(controlplane.AntreaClusterNetworkPolicy, "", "late")
			if !ok || p.TierPriority == nil || *p.TierPriority != 20 {
				return fmt.Errorf("internal policy %v, want tier priority 20", p)
			}
			return nil
		})
	})

	t.Run("ClusterGroup members follow Pod labels and the ClusterGroup's spec", func(t *testing.T) {
		e.mustCreate(t, newACNP("to-cg", "", 1, crdv1beta1.ClusterNetworkPolicySpec{
			AppliedTo: appliedToAppA, Egress: []crdv1beta1.Rule{{Action: drop, To: []crdv1beta1.NetworkPolicyPeer{{Group: "cg"}}}},
		}))
		appC := "namespaceSelector=<all> podSelector=app=c"
		e.eventually(t, e.acnpRules("to-cg", "Out#0 Drop to=["+appC+"] ips=[] services=all"))
		e.eventually(t, e.addressGroupMembers(appC, "z/c@10.0.2.1"))
		relabelled := newPod("x", "b", lbls("app", "c"), "10.0.0.2", "n2")
		e.mustUpdate(t, relabelled)
		e.eventually(t, e.addressGroupMembers(appC, "x/b@10.0.0.2", "z/c@10.0.2.1"))
		e.mustUpdate(t, &crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "cg"}, Spec: crdv1beta1.GroupSpec{
			IPBlocks: []crdv1beta1.IPBlock{{CIDR: "192.168.1.0/24"}}}})
		e.eventually(t, e.acnpRules("to-cg", "Out#0 Drop to=[] ips=[192.168.1.0/24] services=all"))
		e.eventually(t, func() error {
			if _, ok := e.addressGroup(appC); ok {
				return fmt.Errorf("AddressGroup %q no policy uses is still stored", appC)
			}
			return nil
		})
	})

	t.Run("a serviceReference group follows the Service's selector", func(t *testing.T) {
		e.mustCreate(t, newACNP("from-web", "", 1, crdv1beta1.ClusterNetworkPolicySpec{
			AppliedTo: appliedToAppA, Ingress: []crdv1beta1.Rule{{Action: drop, From: []crdv1beta1.NetworkPolicyPeer{{Group: "web"}}}},
		}))
		e.eventually(t, e.acnpRules("from-web", "In#0 Drop from=[namespace=y podSelector=app=a] ips=[] services=all"))
		e.mustUpdate(t, &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "web"}, Spec: v1.ServiceSpec{Selector: lbls("app", "web")}})
		e.eventually(t, e.acnpRules("from-web", "In#0 Drop from=[namespace=y podSelector=app=web] ips=[] services=all"))
	})

	t.Run("namespaces match Self covers a Namespace created later", func(t *testing.T) {
		e.mustCreate(t, newACNP("self", "", 1, crdv1beta1.ClusterNetworkPolicySpec{
			AppliedTo: []crdv1beta1.AppliedTo{{NamespaceSelector: matchLabels("team", "blue")}},
			Ingress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionAllow),
				From: []crdv1beta1.NetworkPolicyPeer{{Namespaces: &crdv1beta1.PeerNamespaces{Match: crdv1beta1.NamespaceMatchSelf}}}}},
		}))
		e.eventually(t, e.acnpRules("self"))
		e.create(t, newNamespace("blue1", lbls("team", "blue")))
		e.eventually(t, e.acnpRules("self",
			"In#0 Allow [appliedTo=namespace=blue1 podSelector=<all>] from=[namespace=blue1 podSelector=<all>] ips=[] services=all"))
	})

	t.Run("nodeSelector groups follow Node labels", func(t *testing.T) {
		e.mustCreate(t, newACNP("to-nodes", "", 1, crdv1beta1.ClusterNetworkPolicySpec{
			AppliedTo: appliedToAppA, Egress: []crdv1beta1.Rule{{Action: drop, To: []crdv1beta1.NetworkPolicyPeer{{NodeSelector: matchLabels("role", "control-plane")}}}},
		}))
		key := "nodeSelector=role=control-plane"
		e.eventually(t, e.addressGroupMembers(key, "node n3@172.18.0.3"))
		e.mustUpdate(t, newNode("n1", lbls("role", "control-plane"), "172.18.0.1"))
		e.eventually(t, e.addressGroupMembers(key, "node n1@172.18.0.1", "node n3@172.18.0.3"))
	})

	t.Run("a deleted policy leaves neither its internal policy nor its groups", func(t *testing.T) {
		if err := e.crd.CrdV1beta1().ClusterNetworkPolicies().Delete(e.ctx, "to-nodes", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.eventually(t, e.acnpRules("to-nodes"))
		e.eventually(t, func() error {
			if _, ok := e.addressGroup("nodeSelector=role=control-plane"); ok {
				return fmt.Errorf("the Node group of a deleted policy is still stored")
			}
			return nil
		})
	})
}

func TestAntreaNativePolicyStatusFollowsTheAgentsReports(t *testing.T) {
	kube, crd := nativeCluster()
	crd = append(crd,
		newACNP("p", "", 1, crdv1beta1.ClusterNetworkPolicySpec{AppliedTo: appliedToAppA, Ingress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionDrop)}}}),
		&crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "parent"}, Spec: crdv1beta1.GroupSpec{ChildGroups: []crdv1beta1.ClusterGroupReference{"child"}}},
	)
	e := newNativeEnv(t, kube, crd)
	status := func(phase crdv1beta1.NetworkPolicyPhase, current, desired int32) func() error {
		return func() error {
			p, err := e.crd.CrdV1beta1().ClusterNetworkPolicies().Get(e.ctx, "p", metav1.GetOptions{})
			if err != nil {
				return err
			}
			st := p.Status
			if st.Phase != phase || st.CurrentNodesRealized != current || st.DesiredNodesRealized != desired || st.ObservedGeneration != 1 {
				return fmt.Errorf("status = %+v, want %s %d/%d observedGeneration 1", st, phase, current, desired)
			}
			return nil
		}
	}
	// x/a and y/a run on n1: one Node to realize the policy.
	e.eventually(t, status(crdv1beta1.NetworkPolicyRealizing, 0, 1))
	p, _ := e.internal(controlplane.AntreaClusterNetworkPolicy, "", "p")
	report := func(failed bool) {
		t.Helper()
		if err := e.statuses.Update(&controlplane.NetworkPolicyStatus{ObjectMeta: metav1.ObjectMeta{Name: p.Name},
			Nodes: []controlplane.NetworkPolicyNodeStatus{{NodeName: "n1", Generation: p.Generation, RealizationFailure: failed}}}); err != nil {
			t.Fatal(err)
		}
	}
	report(false)
	e.eventually(t, status(crdv1beta1.NetworkPolicyRealized, 1, 1))
	report(true)
	e.eventually(t, status(crdv1beta1.NetworkPolicyFailed, 0, 1))
	// The policy now also applies to z/c on n3, which has not reported.
	e.mustUpdate(t, newACNP("p", "", 1, crdv1beta1.ClusterNetworkPolicySpec{
		AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: matchLabels("app", "a")}, {PodSelector: matchLabels("app", "c")}},
		Ingress:   []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionDrop)}}}))
	e.eventually(t, status(crdv1beta1.NetworkPolicyRealizing, 0, 2))

	groupCondition := func(want v1.ConditionStatus) func() error {
		return func() error {
			g, err := e.crd.CrdV1beta1().ClusterGroups().Get(e.ctx, "parent", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range g.Status.Conditions {
				if c.Type == crdv1beta1.GroupMembersComputed && c.Status == want {
					return nil
				}
			}
			return fmt.Errorf("conditions = %+v, want GroupMembersComputed %s", g.Status.Conditions, want)
		}
	}
	e.eventually(t, groupCondition(v1.ConditionFalse))
	e.mustCreate(t, &crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "child"}, Spec: crdv1beta1.GroupSpec{PodSelector: matchLabels("app", "c")}})
	e.eventually(t, groupCondition(v1.ConditionTrue))
}
