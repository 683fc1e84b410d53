package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/controller/admission/admissiontest"
)

// fakeLookup is the cluster as the validator sees it, in memory.
type fakeLookup struct {
	tiers          map[string]*crdv1beta1.Tier
	clusterGroups  map[string]*crdv1beta1.ClusterGroup
	groups         map[string]*crdv1beta1.Group // by namespace/name
	policiesInTier map[string][2]int
}

func newFakeLookup() *fakeLookup {
	l := &fakeLookup{tiers: map[string]*crdv1beta1.Tier{}, clusterGroups: map[string]*crdv1beta1.ClusterGroup{},
		groups: map[string]*crdv1beta1.Group{}, policiesInTier: map[string][2]int{}}
	for _, st := range crdv1beta1.StaticTiers {
		l.addTier(st.Name, st.Spec.Priority)
	}
	return l
}

func (l *fakeLookup) addTier(name string, priority int32) {
	l.tiers[name] = &crdv1beta1.Tier{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.TierSpec{Priority: priority}}
}

func (l *fakeLookup) addClusterGroup(name string, spec crdv1beta1.GroupSpec) {
	l.clusterGroups[name] = &crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func (l *fakeLookup) addGroup(namespace, name string, spec crdv1beta1.GroupSpec) {
	l.groups[namespace+"/"+name] = &crdv1beta1.Group{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec}
}

func (l *fakeLookup) Tier(_ context.Context, name string) (*crdv1beta1.Tier, error) {
	return l.tiers[name], nil
}

func (l *fakeLookup) Tiers(context.Context) ([]*crdv1beta1.Tier, error) {
	var ts []*crdv1beta1.Tier
	for _, t := range l.tiers {
		ts = append(ts, t)
	}
	return ts, nil
}

func (l *fakeLookup) PoliciesInTier(_ context.Context, name string) (int, int, error) {
	n := l.policiesInTier[name]
	return n[0], n[1], nil
}

func (l *fakeLookup) ClusterGroup(_ context.Context, name string) (*crdv1beta1.ClusterGroup, error) {
	return l.clusterGroups[name], nil
}

func (l *fakeLookup) Group(_ context.Context, namespace, name string) (*crdv1beta1.Group, error) {
	return l.groups[namespace+"/"+name], nil
}

func (l *fakeLookup) ClusterGroupParents(_ context.Context, name string) ([]string, error) {
	var parents []string
	for _, g := range l.clusterGroups {
		for _, c := range g.Spec.ChildGroups {
			if string(c) == name {
				parents = append(parents, g.Name)
			}
		}
	}
	return parents, nil
}

func (l *fakeLookup) GroupParents(_ context.Context, namespace, name string) ([]string, error) {
	var parents []string
	for _, g := range l.groups {
		for _, c := range g.Spec.ChildGroups {
			if g.Namespace == namespace && string(c) == name {
				parents = append(parents, g.Name)
			}
		}
	}
	return parents, nil
}

const controllerUser = "system:serviceaccount:kube-system:antrea-controller"

func action(a crdv1beta1.RuleAction) *crdv1beta1.RuleAction { return &a }
func i32(i int32) *int32                                    { return &i }
func portNum(p int32) *intstr.IntOrString                   { v := intstr.FromInt32(p); return &v }
func selector(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

// goodACNP is a valid ClusterNetworkPolicy each invalid case changes once.
func goodACNP() *crdv1beta1.ClusterNetworkPolicy {
	tcp := corev1.ProtocolTCP
	return &crdv1beta1.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "acnp"},
		Spec: crdv1beta1.ClusterNetworkPolicySpec{
			Tier:      "securityops",
			Priority:  5,
			AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: selector("role", "db")}},
			Ingress: []crdv1beta1.Rule{{
				Action: action(crdv1beta1.RuleActionAllow),
				Name:   "AllowFromFrontend",
				From:   []crdv1beta1.NetworkPolicyPeer{{PodSelector: selector("role", "frontend")}},
				Ports:  []crdv1beta1.NetworkPolicyPort{{Protocol: &tcp, Port: portNum(8080), EndPort: i32(9000)}},
			}},
			Egress: []crdv1beta1.Rule{{
				Action: action(crdv1beta1.RuleActionDrop),
				Name:   "DropToThirdParty",
				To:     []crdv1beta1.NetworkPolicyPeer{{IPBlock: &crdv1beta1.IPBlock{CIDR: "10.0.10.0/24"}}},
			}},
		},
	}
}

// wantRefused checks that errs refuses naming field, with words in the
// message.
func wantRefused(t *testing.T, errs field.ErrorList, fieldPath string, words ...string) {
	t.Helper()
	if len(errs) == 0 {
		t.Fatalf("accepted; want refused naming %s", fieldPath)
	}
	msg := errs.ToAggregate().Error()
	if !strings.Contains(msg, fieldPath+":") && !strings.Contains(msg, fieldPath+"[") {
		t.Fatalf("refused without naming %s: %s", fieldPath, msg)
	}
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("the message does not say %q: %s", w, msg)
		}
	}
}

func TestInvalidClusterNetworkPoliciesAreRefusedNamingTheField(t *testing.T) {
	tests := []struct {
		name   string
		change func(p *crdv1beta1.ClusterNetworkPolicySpec)
		field  string
		words  []string
	}{
		{"a priority below 1", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Priority = 0 }, "spec.priority", []string{"between 1 and 10000"}},
		{"a priority above 10000", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Priority = 10000.5 }, "spec.priority", nil},
		{"a Tier that does not exist", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Tier = "nosuchtier" }, "spec.tier", []string{"nosuchtier"}},
		{"Pass in the baseline Tier", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Tier = "baseline"
			p.Ingress[0].Action = action(crdv1beta1.RuleActionPass)
		}, "spec.ingress[0].action", []string{"Pass", "baseline"}},
		{"Pass in the baseline Tier named the 0.9 way", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Tier = "Baseline"
			p.Egress[0].Action = action(crdv1beta1.RuleActionPass)
		}, "spec.egress[0].action", nil},
		{"an unknown action", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Ingress[0].Action = action("Deny") }, "spec.ingress[0].action", []string{"Deny"}},
		{"no action", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Egress[0].Action = nil }, "spec.egress[0].action", nil},
		{"appliedTo at both levels", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].AppliedTo = []crdv1beta1.AppliedTo{{PodSelector: selector("a", "b")}}
		}, "spec.ingress[0].appliedTo", []string{"both"}},
		{"appliedTo at neither level", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.AppliedTo = nil }, "spec.appliedTo", nil},
		{"appliedTo in some rules only", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo = nil
			p.Ingress[0].AppliedTo = []crdv1beta1.AppliedTo{{PodSelector: selector("a", "b")}}
		}, "spec.egress[0].appliedTo", []string{"every rule"}},
		{"a bad CIDR", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Egress[0].To[0].IPBlock.CIDR = "10.0.10.0/33" }, "spec.egress[0].to[0].ipBlock.cidr", nil},
		{"an except outside the CIDR", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Egress[0].To[0].IPBlock.Except = []string{"10.0.11.0/25"}
		}, "spec.egress[0].to[0].ipBlock.except[0]", []string{"inside"}},
		{"an except as large as the CIDR", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Egress[0].To[0].IPBlock.Except = []string{"10.0.10.0/24"}
		}, "spec.egress[0].to[0].ipBlock.except[0]", nil},
		{"an ipBlock with a selector", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Egress[0].To[0].PodSelector = selector("a", "b")
		}, "spec.egress[0].to[0].ipBlock", nil},
		{"endPort below port", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Ingress[0].Ports[0].EndPort = i32(80) }, "spec.ingress[0].ports[0].endPort", []string{"8080"}},
		{"endPort with a named port", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			named := intstr.FromString("http")
			p.Ingress[0].Ports[0].Port = &named
		}, "spec.ingress[0].ports[0].endPort", []string{"named"}},
		{"endPort without port", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Ingress[0].Ports[0].Port = nil }, "spec.ingress[0].ports[0].port", nil},
		{"a port above 65535", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].Ports[0].Port, p.Ingress[0].Ports[0].EndPort = portNum(70000), nil
		}, "spec.ingress[0].ports[0].port", nil},
		{"sourceEndPort below sourcePort", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].Ports[0].SourcePort, p.Ingress[0].Ports[0].SourceEndPort = i32(2000), i32(1000)
		}, "spec.ingress[0].ports[0].sourceEndPort", nil},
		{"sourceEndPort without sourcePort", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].Ports[0].SourceEndPort = i32(1000)
		}, "spec.ingress[0].ports[0].sourcePort", nil},
		{"an unknown protocol", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			icmp := corev1.Protocol("ICMP")
			p.Ingress[0].Ports[0].Protocol = &icmp
		}, "spec.ingress[0].ports[0].protocol", nil},
		{"namespaces with namespaceSelector", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].From[0].Namespaces = &crdv1beta1.PeerNamespaces{Match: crdv1beta1.NamespaceMatchSelf}
			p.Ingress[0].From[0].NamespaceSelector = selector()
		}, "spec.ingress[0].from[0].namespaces", []string{"namespaceSelector"}},
		{"namespaces with both match and sameLabels", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].From[0].Namespaces = &crdv1beta1.PeerNamespaces{Match: crdv1beta1.NamespaceMatchSelf, SameLabels: []string{"org"}}
		}, "spec.ingress[0].from[0].namespaces", nil},
		{"namespaces.match other than Self", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].From[0].Namespaces = &crdv1beta1.PeerNamespaces{Match: "self"}
		}, "spec.ingress[0].from[0].namespaces.match", nil},
		{"sameLabels with a bad label key", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].From[0].Namespaces = &crdv1beta1.PeerNamespaces{SameLabels: []string{"not a key"}}
		}, "spec.ingress[0].from[0].namespaces.sameLabels[0]", nil},
		{"a group with a selector in a peer", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Ingress[0].From[0].Group = "cg-frontend" }, "spec.ingress[0].from[0].group", []string{"other fields"}},
		{"a group that does not exist in a peer", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].From[0] = crdv1beta1.NetworkPolicyPeer{Group: "nosuchgroup"}
		}, "spec.ingress[0].from[0].group", []string{"nosuchgroup", "no ClusterGroup"}},
		{"a group that does not exist in appliedTo", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo = []crdv1beta1.AppliedTo{{Group: "nosuchgroup"}}
		}, "spec.appliedTo[0].group", nil},
		{"a serviceAccount with a selector", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo[0].ServiceAccount = &crdv1beta1.NamespacedName{Name: "sa", Namespace: "ns"}
		}, "spec.appliedTo[0].serviceAccount", nil},
		{"a serviceAccount without a Namespace", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].From[0] = crdv1beta1.NetworkPolicyPeer{ServiceAccount: &crdv1beta1.NamespacedName{Name: "sa"}}
		}, "spec.ingress[0].from[0].serviceAccount.namespace", nil},
		{"a nodeSelector with a podSelector", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].From[0].NodeSelector = selector("a", "b")
		}, "spec.ingress[0].from[0].nodeSelector", nil},
		{"a nodeSelector with a podSelector in one appliedTo", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo[0].NodeSelector = selector("kubernetes.io/hostname", "n1")
		}, "spec.appliedTo[0].nodeSelector", []string{"other fields"}},
		{"a nodeSelector beside a podSelector in appliedTo", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo = append(p.AppliedTo, crdv1beta1.AppliedTo{NodeSelector: selector("kubernetes.io/hostname", "n1")})
		}, "spec.appliedTo[0]", []string{"applied to Nodes"}},
		{"rules applied to Nodes and to Pods", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].AppliedTo = []crdv1beta1.AppliedTo{{NodeSelector: selector("kubernetes.io/hostname", "n1")}}
			p.Egress[0].AppliedTo, p.AppliedTo = p.AppliedTo, nil
		}, "spec.egress[0].appliedTo", []string{"spec.ingress[0].appliedTo", "applied to Nodes"}},
		{"an FQDN peer in a policy applied to Nodes", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo = []crdv1beta1.AppliedTo{{NodeSelector: selector("kubernetes.io/hostname", "n1")}}
			p.Egress[0].To[0] = crdv1beta1.NetworkPolicyPeer{FQDN: "api.foobar.com"}
		}, "spec.egress[0].to[0].fqdn", []string{"Nodes"}},
		{"toServices in a policy applied to Nodes", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo = []crdv1beta1.AppliedTo{{NodeSelector: selector("kubernetes.io/hostname", "n1")}}
			p.Egress[0].To = nil
			p.Egress[0].ToServices = []crdv1beta1.PeerService{{Name: "svc", Namespace: "ns"}}
		}, "spec.egress[0].toServices", []string{"Nodes"}},
		{"two rules with one name", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Egress[0].Name = "AllowFromFrontend" }, "spec.egress[0].name", []string{"unique"}},
		{"an FQDN peer in an ingress rule", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].From[0] = crdv1beta1.NetworkPolicyPeer{FQDN: "*foobar.com"}
		}, "spec.ingress[0].from[0].fqdn", []string{"egress"}},
		{"an FQDN peer that is a URL", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Egress[0].To[0] = crdv1beta1.NetworkPolicyPeer{FQDN: "https://foobar.com/"}
		}, "spec.egress[0].to[0].fqdn", []string{"not allowed"}},
		{"an FQDN peer with an empty label", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Egress[0].To[0] = crdv1beta1.NetworkPolicyPeer{FQDN: "api..foobar.com"}
		}, "spec.egress[0].to[0].fqdn", []string{"empty label"}},
		{"an FQDN peer with a podSelector", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Egress[0].To[0].FQDN = "api.foobar.com"
		}, "spec.egress[0].to[0].fqdn", []string{"other fields"}},
		{"a layer 7 protocol in a Drop rule", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			drop := crdv1beta1.RuleActionDrop
			p.Ingress[0].Action = &drop
			p.Ingress[0].L7Protocols = []crdv1beta1.L7Protocol{{HTTP: &crdv1beta1.HTTPProtocol{Path: "/"}}}
		}, "spec.ingress[0].l7Protocols", []string{"Allow", "Drop"}},
		{"a layer 7 protocol over UDP", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			udp := corev1.ProtocolUDP
			p.Ingress[0].Ports = []crdv1beta1.NetworkPolicyPort{{Protocol: &udp, Port: portNum(53)}}
			p.Ingress[0].L7Protocols = []crdv1beta1.L7Protocol{{HTTP: &crdv1beta1.HTTPProtocol{}}}
		}, "spec.ingress[0].ports[0].protocol", []string{"TCP"}},
		{"a layer 7 protocol with ICMP", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].Protocols = []crdv1beta1.NetworkPolicyProtocol{{ICMP: &crdv1beta1.ICMPProtocol{}}}
			p.Ingress[0].L7Protocols = []crdv1beta1.L7Protocol{{TLS: &crdv1beta1.TLSProtocol{SNI: "a.b"}}}
		}, "spec.ingress[0].protocols", []string{"TCP"}},
		{"a layer 7 protocol with toServices", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Egress[0].Action = action(crdv1beta1.RuleActionAllow)
			p.Egress[0].To = nil
			p.Egress[0].ToServices = []crdv1beta1.PeerService{{Name: "svc", Namespace: "ns"}}
			p.Egress[0].L7Protocols = []crdv1beta1.L7Protocol{{HTTP: &crdv1beta1.HTTPProtocol{}}}
		}, "spec.egress[0].l7Protocols", []string{"toServices"}},
		{"an empty layer 7 protocol entry", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].L7Protocols = []crdv1beta1.L7Protocol{{}}
		}, "spec.ingress[0].l7Protocols[0]", []string{"http", "tls"}},
		{"http and tls in one layer 7 entry", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].L7Protocols = []crdv1beta1.L7Protocol{{HTTP: &crdv1beta1.HTTPProtocol{}, TLS: &crdv1beta1.TLSProtocol{}}}
		}, "spec.ingress[0].l7Protocols[0].tls", []string{"not both"}},
		{"an unknown HTTP method", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].L7Protocols = []crdv1beta1.L7Protocol{{HTTP: &crdv1beta1.HTTPProtocol{Method: "get"}}}
		}, "spec.ingress[0].l7Protocols[0].http.method", []string{"GET"}},
		{"a layer 7 protocol in a policy applied to Nodes", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo = []crdv1beta1.AppliedTo{{NodeSelector: selector("kubernetes.io/hostname", "n1")}}
			p.Ingress[0].L7Protocols = []crdv1beta1.L7Protocol{{HTTP: &crdv1beta1.HTTPProtocol{}}}
		}, "spec.ingress[0].l7Protocols", []string{"Nodes"}},
		{"an ExternalEntity selector", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].From[0].ExternalEntitySelector = selector()
		}, "spec.ingress[0].from[0].externalEntitySelector", nil},
		{"a ClusterSet scope", func(p *crdv1beta1.ClusterNetworkPolicySpec) { p.Ingress[0].From[0].Scope = crdv1beta1.ScopeClusterSet }, "spec.ingress[0].from[0].scope", nil},
		{"toServices with ports", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Egress[0].To = nil
			p.Egress[0].ToServices = []crdv1beta1.PeerService{{Name: "svc", Namespace: "ns"}}
			p.Egress[0].Ports = []crdv1beta1.NetworkPolicyPort{{Port: portNum(80)}}
		}, "spec.egress[0].toServices", nil},
		{"toServices without a Service name", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Egress[0].To = nil
			p.Egress[0].ToServices = []crdv1beta1.PeerService{{Namespace: "ns"}}
		}, "spec.egress[0].toServices[0].name", nil},
		{"to in an ingress rule", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].To = []crdv1beta1.NetworkPolicyPeer{{PodSelector: selector()}}
		}, "spec.ingress[0].to", nil},
		{"an ICMP type above 255", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].Protocols = []crdv1beta1.NetworkPolicyProtocol{{ICMP: &crdv1beta1.ICMPProtocol{ICMPType: i32(300)}}}
		}, "spec.ingress[0].protocols[0].icmp.icmpType", nil},
		{"a protocol with neither icmp nor igmp", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0].Protocols = []crdv1beta1.NetworkPolicyProtocol{{}}
		}, "spec.ingress[0].protocols[0]", nil},
		{"IGMP with Reject", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0] = crdv1beta1.Rule{Action: action(crdv1beta1.RuleActionReject),
				Protocols: []crdv1beta1.NetworkPolicyProtocol{{IGMP: &crdv1beta1.IGMPProtocol{IGMPType: i32(crdv1beta1.IGMPQuery)}}}}
		}, "spec.ingress[0].action", []string{"IGMP"}},
		{"an IGMP report in an ingress rule", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0] = crdv1beta1.Rule{Action: action(crdv1beta1.RuleActionDrop),
				Protocols: []crdv1beta1.NetworkPolicyProtocol{{IGMP: &crdv1beta1.IGMPProtocol{IGMPType: i32(crdv1beta1.IGMPReportV2)}}}}
		}, "spec.ingress[0].protocols[0].igmp.igmpType", nil},
		{"an IGMP group that is not multicast", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Ingress[0] = crdv1beta1.Rule{Action: action(crdv1beta1.RuleActionDrop),
				Protocols: []crdv1beta1.NetworkPolicyProtocol{{IGMP: &crdv1beta1.IGMPProtocol{GroupAddress: "10.0.0.1"}}}}
		}, "spec.ingress[0].protocols[0].igmp.groupAddress", nil},
		{"multicast and unicast ipBlocks in one rule", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.Egress[0].To = append(p.Egress[0].To, crdv1beta1.NetworkPolicyPeer{IPBlock: &crdv1beta1.IPBlock{CIDR: "225.1.2.3/32"}})
		}, "spec.egress[0].to", []string{"multicast"}},
		{"a bad label value", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo[0].PodSelector = selector("role", "not a value")
		}, "spec.appliedTo[0].podSelector.matchLabels", nil},
		{"a Service appliedTo with egress rules", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo = []crdv1beta1.AppliedTo{{Service: &crdv1beta1.NamespacedName{Name: "svc", Namespace: "ns"}}}
		}, "spec.appliedTo[0].service", []string{"egress"}},
		{"a Service appliedTo with a podSelector source", func(p *crdv1beta1.ClusterNetworkPolicySpec) {
			p.AppliedTo = []crdv1beta1.AppliedTo{{Service: &crdv1beta1.NamespacedName{Name: "svc", Namespace: "ns"}}}
			p.Egress = nil
		}, "spec.ingress[0].from[0]", []string{"ipBlock"}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			lookup := newFakeLookup()
			lookup.addClusterGroup("cg-frontend", crdv1beta1.GroupSpec{PodSelector: selector("role", "frontend")})
			v := NewValidator(lookup, controllerUser).WithL7NetworkPolicy(true)
			p := goodACNP()
			if errs := v.ValidateClusterNetworkPolicy(context.Background(), p); len(errs) != 0 {
				t.Fatalf("the good policy is refused: %v", errs)
			}
			tt.change(&p.Spec)
			wantRefused(t, v.ValidateClusterNetworkPolicy(context.Background(), p), tt.field, tt.words...)
		})
	}
}

func TestInvalidAntreaNetworkPoliciesAreRefusedNamingTheField(t *testing.T) {
	good := func() *crdv1beta1.NetworkPolicy {
		acnp := goodACNP()
		return &crdv1beta1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "annp"}, Spec: crdv1beta1.NetworkPolicySpec{
			Tier: acnp.Spec.Tier, Priority: acnp.Spec.Priority, AppliedTo: acnp.Spec.AppliedTo, Ingress: acnp.Spec.Ingress, Egress: acnp.Spec.Egress}}
	}
	tests := []struct {
		name   string
		change func(p *crdv1beta1.NetworkPolicySpec)
		field  string
	}{
		{"namespaces, a ClusterNetworkPolicy field", func(p *crdv1beta1.NetworkPolicySpec) {
			p.Ingress[0].From[0].Namespaces = &crdv1beta1.PeerNamespaces{Match: crdv1beta1.NamespaceMatchSelf}
		}, "spec.ingress[0].from[0].namespaces"},
		{"a namespaceSelector in appliedTo", func(p *crdv1beta1.NetworkPolicySpec) {
			p.AppliedTo[0].NamespaceSelector = selector()
		}, "spec.appliedTo[0].namespaceSelector"},
		{"a Group of another Namespace", func(p *crdv1beta1.NetworkPolicySpec) {
			p.Ingress[0].From[0] = crdv1beta1.NetworkPolicyPeer{Group: "grp-other"}
		}, "spec.ingress[0].from[0].group"},
		{"a ClusterGroup's name", func(p *crdv1beta1.NetworkPolicySpec) {
			p.Ingress[0].From[0] = crdv1beta1.NetworkPolicyPeer{Group: "cg-frontend"}
		}, "spec.ingress[0].from[0].group"},
		{"appliedTo at both levels", func(p *crdv1beta1.NetworkPolicySpec) {
			p.Egress[0].AppliedTo = []crdv1beta1.AppliedTo{{PodSelector: selector()}}
		}, "spec.egress[0].appliedTo"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			lookup := newFakeLookup()
			lookup.addClusterGroup("cg-frontend", crdv1beta1.GroupSpec{PodSelector: selector()})
			lookup.addGroup("other", "grp-other", crdv1beta1.GroupSpec{PodSelector: selector()})
			lookup.addGroup("ns", "grp", crdv1beta1.GroupSpec{PodSelector: selector()})
			v := NewValidator(lookup, controllerUser)
			p := good()
			if errs := v.ValidateNetworkPolicy(context.Background(), p); len(errs) != 0 {
				t.Fatalf("the good policy is refused: %v", errs)
			}
			p.Spec.Ingress[0].From = append(p.Spec.Ingress[0].From, crdv1beta1.NetworkPolicyPeer{Group: "grp"})
			if errs := v.ValidateNetworkPolicy(context.Background(), p); len(errs) != 0 {
				t.Fatalf("a Group of the policy's Namespace is refused: %v", errs)
			}
			tt.change(&p.Spec)
			wantRefused(t, v.ValidateNetworkPolicy(context.Background(), p), tt.field)
		})
	}
}

func TestInvalidGroupsAreRefusedNamingTheField(t *testing.T) {
	ipBlocks := []crdv1beta1.IPBlock{{CIDR: "10.0.0.0/24"}}
	svc := &crdv1beta1.NamespacedName{Name: "svc", Namespace: "ns"}
	tests := []struct {
		name  string
		name_ string
		spec  crdv1beta1.GroupSpec
		field string
	}{
		{"a podSelector with ipBlocks", "g", crdv1beta1.GroupSpec{PodSelector: selector(), IPBlocks: ipBlocks}, "spec.ipBlocks"},
		{"a namespaceSelector with ipBlocks", "g", crdv1beta1.GroupSpec{NamespaceSelector: selector(), IPBlocks: ipBlocks}, "spec.ipBlocks"},
		{"a serviceReference with a podSelector", "g", crdv1beta1.GroupSpec{PodSelector: selector(), ServiceReference: svc}, "spec.serviceReference"},
		{"a serviceReference with a namespaceSelector", "g", crdv1beta1.GroupSpec{NamespaceSelector: selector(), ServiceReference: svc}, "spec.serviceReference"},
		{"childGroups with a podSelector", "g", crdv1beta1.GroupSpec{PodSelector: selector(), ChildGroups: []crdv1beta1.ClusterGroupReference{"leaf"}}, "spec.childGroups"},
		{"a serviceReference without a Namespace", "g", crdv1beta1.GroupSpec{ServiceReference: &crdv1beta1.NamespacedName{Name: "svc"}}, "spec.serviceReference.namespace"},
		{"a bad CIDR", "g", crdv1beta1.GroupSpec{IPBlocks: []crdv1beta1.IPBlock{{CIDR: "10.0.0.300/24"}}}, "spec.ipBlocks[0].cidr"},
		{"an except outside its CIDR", "g", crdv1beta1.GroupSpec{IPBlocks: []crdv1beta1.IPBlock{{CIDR: "10.0.0.0/24", Except: []string{"10.1.0.0/28"}}}}, "spec.ipBlocks[0].except[0]"},
		{"multicast and unicast CIDRs", "g", crdv1beta1.GroupSpec{IPBlocks: []crdv1beta1.IPBlock{{CIDR: "10.0.0.0/24"}, {CIDR: "224.0.0.0/24"}}}, "spec.ipBlocks"},
		{"a child that has children (two levels)", "g", crdv1beta1.GroupSpec{ChildGroups: []crdv1beta1.ClusterGroupReference{"middle"}}, "spec.childGroups[0]"},
		{"children for a group that is a child (two levels)", "leaf", crdv1beta1.GroupSpec{ChildGroups: []crdv1beta1.ClusterGroupReference{"other"}}, "spec.childGroups"},
		{"itself as its child", "g", crdv1beta1.GroupSpec{ChildGroups: []crdv1beta1.ClusterGroupReference{"g"}}, "spec.childGroups[0]"},
		{"a bad label key", "g", crdv1beta1.GroupSpec{PodSelector: selector("-bad", "x")}, "spec.podSelector.matchLabels"},
	}
	for _, tt := range tests {
		lookupWithNesting := func() *fakeLookup {
			l := newFakeLookup()
			leaf := crdv1beta1.GroupSpec{PodSelector: selector("app", "leaf")}
			middle := crdv1beta1.GroupSpec{ChildGroups: []crdv1beta1.ClusterGroupReference{"leaf"}}
			l.addClusterGroup("leaf", leaf)
			l.addClusterGroup("middle", middle)
			l.addGroup("ns", "leaf", leaf)
			l.addGroup("ns", "middle", middle)
			return l
		}
		t.Run("a ClusterGroup with "+tt.name+" is refused", func(t *testing.T) {
			v := NewValidator(lookupWithNesting(), controllerUser)
			cg := &crdv1beta1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: tt.name_}, Spec: tt.spec}
			wantRefused(t, v.ValidateClusterGroup(context.Background(), cg), tt.field)
		})
		t.Run("a Group with "+tt.name+" is refused", func(t *testing.T) {
			v := NewValidator(lookupWithNesting(), controllerUser)
			g := &crdv1beta1.Group{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: tt.name_}, Spec: tt.spec}
			wantRefused(t, v.ValidateGroup(context.Background(), g), tt.field)
		})
	}
}

func TestTiers(t *testing.T) {
	tier := func(name string, priority int32, description string) *crdv1beta1.Tier {
		return &crdv1beta1.Tier{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.TierSpec{Priority: priority, Description: description}}
	}
	ctx := context.Background()
	setup := func() (*Validator, *fakeLookup) {
		l := newFakeLookup()
		l.addTier("mytier", 10)
		l.policiesInTier["mytier"] = [2]int{2, 1}
		l.addTier("unused", 20)
		return NewValidator(l, controllerUser), l
	}
	refused := []struct {
		name  string
		check func(v *Validator) field.ErrorList
		field string
		words []string
	}{
		{"a Tier with another Tier's priority", func(v *Validator) field.ErrorList {
			return v.ValidateTierCreate(ctx, tier("t", 100, ""), "alice")
		}, "spec.priority", []string{"securityops"}},
		{"a Tier with the reserved priority 251", func(v *Validator) field.ErrorList {
			return v.ValidateTierCreate(ctx, tier("t", 251, ""), "alice")
		}, "spec.priority", []string{"reserved"}},
		{"a custom Tier at the application Tier's 250", func(v *Validator) field.ErrorList {
			return v.ValidateTierCreate(ctx, tier("t", 250, ""), "alice")
		}, "spec.priority", nil},
		{"a static Tier created by a user with another priority", func(v *Validator) field.ErrorList {
			return v.ValidateTierCreate(ctx, tier("emergency", 5, ""), "alice")
		}, "spec.priority", nil},
		{"a Tier's priority updated", func(v *Validator) field.ErrorList {
			return v.ValidateTierUpdate(tier("mytier", 11, ""), tier("mytier", 10, ""), "alice")
		}, "spec.priority", []string{"cannot be updated"}},
		{"a static Tier's description updated by a user", func(v *Validator) field.ErrorList {
			return v.ValidateTierUpdate(tier("baseline", 253, "mine"), tier("baseline", 253, "[READ-ONLY]: System generated Baseline Tier"), "alice")
		}, "spec.description", []string{"read-only"}},
		{"a static Tier deleted", func(v *Validator) field.ErrorList {
			return v.ValidateTierDelete(ctx, tier("application", 250, ""))
		}, "metadata.name", []string{"static"}},
		{"a Tier that policies reference deleted", func(v *Validator) field.ErrorList {
			return v.ValidateTierDelete(ctx, tier("mytier", 10, ""))
		}, "metadata.name", []string{"2 ClusterNetworkPolicies and 1 Antrea NetworkPolicies"}},
		{"a Tier beyond the 20th", func(v *Validator) field.ErrorList {
			v.lookup.(*fakeLookup).tiers = map[string]*crdv1beta1.Tier{}
			for i := range int32(crdv1beta1.MaxSupportedTiers) {
				v.lookup.(*fakeLookup).addTier(string(rune('a'+i)), i)
			}
			return v.ValidateTierCreate(ctx, tier("t", 40, ""), "alice")
		}, "metadata.name", nil},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			v, _ := setup()
			wantRefused(t, tt.check(v), tt.field, tt.words...)
		})
	}
	accepted := []struct {
		name  string
		check func(v *Validator) field.ErrorList
	}{
		{"a custom Tier with a free priority", func(v *Validator) field.ErrorList { return v.ValidateTierCreate(ctx, tier("t", 30, "mine"), "alice") }},
		{"a static Tier created by antrea-controller", func(v *Validator) field.ErrorList {
			delete(v.lookup.(*fakeLookup).tiers, "baseline")
			return v.ValidateTierCreate(ctx, tier("baseline", 253, ""), controllerUser)
		}},
		{"a static Tier restored by antrea-controller", func(v *Validator) field.ErrorList {
			return v.ValidateTierUpdate(tier("platform", 200, "x"), tier("platform", 201, "y"), controllerUser)
		}},
		{"a custom Tier's description updated", func(v *Validator) field.ErrorList {
			return v.ValidateTierUpdate(tier("mytier", 10, "new"), tier("mytier", 10, "old"), "alice")
		}},
		{"an unreferenced custom Tier deleted", func(v *Validator) field.ErrorList { return v.ValidateTierDelete(ctx, tier("unused", 20, "")) }},
	}
	for _, tt := range accepted {
		t.Run(tt.name+" is accepted", func(t *testing.T) {
			v, _ := setup()
			if errs := tt.check(v); len(errs) != 0 {
				t.Fatalf("refused: %v", errs)
			}
		})
	}
}

// TestUpstreamDocsExamplesAreAccepted: every example of upstream's
// docs/antrea-network-policy.md is accepted, with the Tiers and groups it
// names existing (the docs say they are "defined separately"), except the
// features this Antrea refuses with a message naming them and the examples
// upstream's own schema refuses.
func TestUpstreamDocsExamplesAreAccepted(t *testing.T) {
	lookup := newFakeLookup()
	for _, name := range admissiontest.ReferencedClusterGroups {
		lookup.addClusterGroup(name, crdv1beta1.GroupSpec{PodSelector: selector()})
	}
	for _, name := range admissiontest.ReferencedGroups {
		lookup.addGroup("default", name, crdv1beta1.GroupSpec{PodSelector: selector()})
	}
	// The L7 examples' prerequisite (upstream's doc): the controller's
	// L7NetworkPolicy gate on.
	v := NewValidator(lookup, controllerUser).WithL7NetworkPolicy(true)
	ctx := context.Background()
	examples, err := admissiontest.UpstreamDocsExamples()
	if err != nil {
		t.Fatal(err)
	}
	// In order, as kubectl apply of each: a Tier or group is there for the
	// examples after it.
	for _, ex := range examples {
		t.Run(ex.Kind+" "+ex.Name, func(t *testing.T) {
			var errs field.ErrorList
			decode := func(obj any) {
				if err := yaml.Unmarshal(ex.YAML, obj); err != nil {
					t.Fatalf("decoding: %v", err)
				}
			}
			switch ex.Kind {
			case "Tier":
				var o crdv1beta1.Tier
				decode(&o)
				if errs = v.ValidateTierCreate(ctx, &o, "alice"); len(errs) == 0 {
					lookup.addTier(o.Name, o.Spec.Priority)
				}
			case "ClusterNetworkPolicy":
				var o crdv1beta1.ClusterNetworkPolicy
				decode(&o)
				errs = v.ValidateClusterNetworkPolicy(ctx, &o)
			case "NetworkPolicy":
				var o crdv1beta1.NetworkPolicy
				decode(&o)
				errs = v.ValidateNetworkPolicy(ctx, &o)
			case "ClusterGroup":
				var o crdv1beta1.ClusterGroup
				decode(&o)
				if errs = v.ValidateClusterGroup(ctx, &o); len(errs) == 0 {
					lookup.addClusterGroup(o.Name, o.Spec)
				}
			case "Group":
				var o crdv1beta1.Group
				decode(&o)
				if errs = v.ValidateGroup(ctx, &o); len(errs) == 0 {
					lookup.addGroup(o.Namespace, o.Name, o.Spec)
				}
			default:
				t.Fatalf("unexpected kind %s", ex.Kind)
			}
			if f, ok := admissiontest.Unsupported[ex.Name]; ok {
				wantRefused(t, errs, f, "not supported")
				return
			}
			if f, ok := admissiontest.RefusedByUpstream[ex.Name]; ok {
				wantRefused(t, errs, f, `Unsupported value: "Deny"`)
				return
			}
			if len(errs) != 0 {
				t.Fatalf("refused: %v", errs)
			}
		})
	}
}

// Upstream's webhook refuses l7Protocols while the controller's
// L7NetworkPolicy gate is off (its default); with the gate on the same
// policy (upstream's documented example rule) is accepted.
func TestLayer7RulesNeedTheControllersL7NetworkPolicyGate(t *testing.T) {
	p := goodACNP()
	p.Spec.Ingress[0].Ports = nil
	p.Spec.Ingress[0].L7Protocols = []crdv1beta1.L7Protocol{{HTTP: &crdv1beta1.HTTPProtocol{Path: "/api/v2/*", Host: "foo.bar.com", Method: "GET"}}}
	wantRefused(t, NewValidator(newFakeLookup(), controllerUser).ValidateClusterNetworkPolicy(context.Background(), p),
		"spec.ingress[0].l7Protocols", "L7NetworkPolicy", "featureGates.L7NetworkPolicy")
	np := &crdv1beta1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "np", Namespace: "ns"}, Spec: crdv1beta1.NetworkPolicySpec{
		Tier: "application", Priority: 5, AppliedTo: []crdv1beta1.AppliedTo{{PodSelector: selector("app", "web")}},
		Egress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionAllow), Name: "allow-tls", L7Protocols: []crdv1beta1.L7Protocol{{TLS: &crdv1beta1.TLSProtocol{SNI: "*.bar.com"}}}}},
	}}
	wantRefused(t, NewValidator(newFakeLookup(), controllerUser).ValidateNetworkPolicy(context.Background(), np),
		"spec.egress[0].l7Protocols", "L7NetworkPolicy")
	if errs := NewValidator(newFakeLookup(), controllerUser).WithL7NetworkPolicy(true).ValidateClusterNetworkPolicy(context.Background(), p); len(errs) != 0 {
		t.Errorf("with the gate on the layer 7 rule is refused: %v", errs)
	}
	if errs := NewValidator(newFakeLookup(), controllerUser).WithL7NetworkPolicy(true).ValidateNetworkPolicy(context.Background(), np); len(errs) != 0 {
		t.Errorf("with the gate on the layer 7 NetworkPolicy is refused: %v", errs)
	}
}
