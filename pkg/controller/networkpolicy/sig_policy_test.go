package networkpolicy

import (
	"context"
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	sigv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	sigv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	sigfake "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned/fake"
	siginformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apiserver/registry"
	"antrea.io/antrea/pkg/apiserver/storage"
	crdfake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
)

// sigEnv is nativeEnv with the SIG kinds enabled on a fake
// policy.networking.k8s.io clientset.
type sigEnv struct {
	*nativeEnv
	sig *sigfake.Clientset
}

func newSIGEnv(t *testing.T, kubeObjs []runtime.Object, sigObjs ...runtime.Object) *sigEnv {
	t.Helper()
	client := fake.NewClientset(kubeObjs...)
	crdClient := crdfake.NewSimpleClientset(staticTiers()...)
	sigClient := sigfake.NewSimpleClientset(sigObjs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	crdFactory := crdinformers.NewSharedInformerFactory(crdClient, 0)
	sigFactory := siginformers.NewSharedInformerFactory(sigClient, 0)
	e := &sigEnv{nativeEnv: &nativeEnv{env: &env{
		client: client,
		ags:    storage.NewAddressGroupStore(),
		atgs:   storage.NewAppliedToGroupStore(),
		nps:    storage.NewNetworkPolicyStore(),
	}, crd: crdClient}, sig: sigClient}
	e.statuses = registry.NewStatusStore(e.nps)
	e.c = newTestController(t, client, factory, e.ags, e.atgs, e.nps)
	if err := e.c.EnableAntreaPolicies(AntreaPolicyConfig{CRDClient: crdClient, CRDInformers: crdFactory, Realizer: e.statuses}); err != nil {
		t.Fatal(err)
	}
	if err := e.c.EnableSIGPolicies(SIGPolicyConfig{Client: sigClient, Informers: sigFactory, ClusterNetworkPolicies: true, AdminNetworkPolicies: true}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		crdFactory.Shutdown()
		sigFactory.Shutdown()
	})
	factory.Start(ctx.Done())
	crdFactory.Start(ctx.Done())
	sigFactory.Start(ctx.Done())
	if !e.c.waitForCacheSync(ctx) {
		t.Fatal("informer caches did not sync")
	}
	return e
}

func sigCNP(name string, tier sigv1alpha2.Tier, priority int32, spec sigv1alpha2.ClusterNetworkPolicySpec) *sigv1alpha2.ClusterNetworkPolicy {
	spec.Tier, spec.Priority = tier, priority
	return &sigv1alpha2.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-sigcnp-" + name), Generation: 1}, Spec: spec}
}

func nsPeer(kv ...string) sigv1alpha2.ClusterNetworkPolicyIngressPeer {
	return sigv1alpha2.ClusterNetworkPolicyIngressPeer{Namespaces: matchLabels(kv...)}
}

// The expectations are the SIG API's documented semantics (the types'
// comments in sigs.k8s.io/network-policy-api v0.2.0 and v0.1.7) and upstream
// Antrea's placement of the tiers (220, 251, 254), never read back from
// this code's output.
func TestSIGPoliciesComputeIntoTheirTiers(t *testing.T) {
	web := "web"
	tests := []struct {
		name         string
		obj          runtime.Object
		typ          controlplane.NetworkPolicyType
		tierPriority int32
		priority     float64
		appliedTo    []string
		rules        []string
	}{
		{
			name: "an Admin ClusterNetworkPolicy: tier priority 220, Accept/Deny/Pass as Allow/Drop/Pass, rule order kept",
			obj: sigCNP("admin", sigv1alpha2.AdminTier, 7, sigv1alpha2.ClusterNetworkPolicySpec{
				Subject: sigv1alpha2.ClusterNetworkPolicySubject{Namespaces: matchLabels("ns", "x")},
				Ingress: []sigv1alpha2.ClusterNetworkPolicyIngressRule{
					{Name: "pass-y", Action: sigv1alpha2.ClusterNetworkPolicyRuleActionPass, From: []sigv1alpha2.ClusterNetworkPolicyIngressPeer{nsPeer("ns", "y")}},
					{Name: "accept-z-80", Action: sigv1alpha2.ClusterNetworkPolicyRuleActionAccept, From: []sigv1alpha2.ClusterNetworkPolicyIngressPeer{nsPeer("ns", "z")},
						Protocols: []sigv1alpha2.ClusterNetworkPolicyProtocol{{TCP: &sigv1alpha2.ClusterNetworkPolicyProtocolTCP{DestinationPort: &sigv1alpha2.Port{Number: 80}}}}},
					{Name: "deny-all", Action: sigv1alpha2.ClusterNetworkPolicyRuleActionDeny, From: []sigv1alpha2.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}},
				},
				Egress: []sigv1alpha2.ClusterNetworkPolicyEgressRule{
					{Name: "deny-nodes-and-net", Action: sigv1alpha2.ClusterNetworkPolicyRuleActionDeny,
						To:        []sigv1alpha2.ClusterNetworkPolicyEgressPeer{{Nodes: matchLabels("role", "worker")}, {Networks: []sigv1alpha2.CIDR{"192.0.2.0/24", "198.51.100.0/24"}}},
						Protocols: []sigv1alpha2.ClusterNetworkPolicyProtocol{{UDP: &sigv1alpha2.ClusterNetworkPolicyProtocolUDP{DestinationPort: &sigv1alpha2.Port{Range: &sigv1alpha2.PortRange{Start: 5000, End: 5999}}}}, {SCTP: &sigv1alpha2.ClusterNetworkPolicyProtocolSCTP{}}}},
					{Name: "accept-web", Action: sigv1alpha2.ClusterNetworkPolicyRuleActionAccept,
						To:        []sigv1alpha2.ClusterNetworkPolicyEgressPeer{{Pods: &sigv1alpha2.NamespacedPod{NamespaceSelector: *matchLabels("ns", "x"), PodSelector: *matchLabels("app", "b")}}},
						Protocols: []sigv1alpha2.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "http"}}},
				},
			}),
			typ: SIGClusterNetworkPolicyType, tierPriority: 220, priority: 7,
			appliedTo: []string{"namespaceSelector=ns=x podSelector=<all>"},
			rules: []string{
				"In#0 Pass from=[namespaceSelector=ns=y podSelector=<all>] ips=[] services=all name=pass-y",
				"In#1 Allow from=[namespaceSelector=ns=z podSelector=<all>] ips=[] services=[TCP/80] name=accept-z-80",
				"In#2 Drop from=[namespaceSelector=<all> podSelector=<all>] ips=[] services=all name=deny-all",
				"Out#0 Drop to=[nodeSelector=role=worker] ips=[192.0.2.0/24; 198.51.100.0/24] services=[UDP/5000-5999 SCTP] name=deny-nodes-and-net",
				"Out#1 Allow to=[namespaceSelector=ns=x podSelector=app=b] ips=[] services=[TCP/http UDP/http SCTP/http] name=accept-web",
			},
		},
		{
			name: "a Baseline ClusterNetworkPolicy: tier priority 254 (after Antrea's baseline 253); its Pass ends the last tier, so allows",
			obj: sigCNP("base", sigv1alpha2.BaselineTier, 3, sigv1alpha2.ClusterNetworkPolicySpec{
				Subject: sigv1alpha2.ClusterNetworkPolicySubject{Pods: &sigv1alpha2.NamespacedPod{NamespaceSelector: metav1.LabelSelector{}, PodSelector: *matchLabels("app", "a")}},
				Ingress: []sigv1alpha2.ClusterNetworkPolicyIngressRule{
					{Action: sigv1alpha2.ClusterNetworkPolicyRuleActionPass, From: []sigv1alpha2.ClusterNetworkPolicyIngressPeer{nsPeer("ns", "y")}},
					{Action: sigv1alpha2.ClusterNetworkPolicyRuleActionDeny, From: []sigv1alpha2.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}},
				},
			}),
			typ: SIGClusterNetworkPolicyType, tierPriority: 254, priority: 3,
			appliedTo: []string{"namespaceSelector=<all> podSelector=app=a"},
			rules: []string{
				"In#0 Allow from=[namespaceSelector=ns=y podSelector=<all>] ips=[] services=all",
				"In#1 Drop from=[namespaceSelector=<all> podSelector=<all>] ips=[] services=all",
			},
		},
		{
			name: "an AdminNetworkPolicy: tier priority 251 (after application 250, before K8s NetworkPolicy), ports, named ports and ranges",
			obj: &sigv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "anp", UID: "uid-anp", Generation: 1}, Spec: sigv1alpha1.AdminNetworkPolicySpec{
				Priority: 40,
				Subject:  sigv1alpha1.AdminNetworkPolicySubject{Namespaces: matchLabels("ns", "z")},
				Ingress: []sigv1alpha1.AdminNetworkPolicyIngressRule{
					{Name: "allow", Action: sigv1alpha1.AdminNetworkPolicyRuleActionAllow, From: []sigv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: matchLabels("ns", "x")}},
						Ports: &[]sigv1alpha1.AdminNetworkPolicyPort{{PortNumber: &sigv1alpha1.Port{Protocol: v1.ProtocolUDP, Port: 53}}, {NamedPort: &web}, {PortRange: &sigv1alpha1.PortRange{Start: 8000, End: 8080}}}},
				},
				Egress: []sigv1alpha1.AdminNetworkPolicyEgressRule{
					{Name: "pass", Action: sigv1alpha1.AdminNetworkPolicyRuleActionPass, To: []sigv1alpha1.AdminNetworkPolicyEgressPeer{{Networks: []sigv1alpha1.CIDR{"10.0.0.0/8"}}}},
				},
			}},
			typ: AdminNetworkPolicyType, tierPriority: 251, priority: 40,
			appliedTo: []string{"namespaceSelector=ns=z podSelector=<all>"},
			rules: []string{
				"In#0 Allow from=[namespaceSelector=ns=x podSelector=<all>] ips=[] services=[UDP/53 TCP/web UDP/web SCTP/web TCP/8000-8080] name=allow",
				"Out#0 Pass to=[] ips=[10.0.0.0/8] services=all name=pass",
			},
		},
		{
			name: "the BaselineAdminNetworkPolicy default: tier priority 254, Allow and Deny",
			obj: &sigv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "uid-banp", Generation: 1}, Spec: sigv1alpha1.BaselineAdminNetworkPolicySpec{
				Subject: sigv1alpha1.AdminNetworkPolicySubject{Pods: &sigv1alpha1.NamespacedPod{NamespaceSelector: *matchLabels("ns", "x"), PodSelector: *matchLabels("app", "a")}},
				Egress: []sigv1alpha1.BaselineAdminNetworkPolicyEgressRule{
					{Action: sigv1alpha1.BaselineAdminNetworkPolicyRuleActionAllow, To: []sigv1alpha1.BaselineAdminNetworkPolicyEgressPeer{{Pods: &sigv1alpha1.NamespacedPod{NamespaceSelector: *matchLabels("ns", "z"), PodSelector: metav1.LabelSelector{}}}}},
					{Action: sigv1alpha1.BaselineAdminNetworkPolicyRuleActionDeny, To: []sigv1alpha1.BaselineAdminNetworkPolicyEgressPeer{{Namespaces: &metav1.LabelSelector{}}}},
				},
			}},
			typ: BaselineAdminNetworkPolicyType, tierPriority: 254, priority: 0,
			appliedTo: []string{"namespaceSelector=ns=x podSelector=app=a"},
			rules: []string{
				"Out#0 Allow to=[namespaceSelector=ns=z podSelector=<all>] ips=[] services=all",
				"Out#1 Drop to=[namespaceSelector=<all> podSelector=<all>] ips=[] services=all",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newSIGEnv(t, append(cluster(), newNode("n1", lbls("role", "worker"), "172.18.0.1")), tt.obj)
			name := tt.obj.(metav1.Object).GetName()
			e.eventually(t, func() error {
				p, ok := e.internal(tt.typ, "", name)
				if !ok {
					return fmt.Errorf("no internal policy for %s %s", tt.typ, name)
				}
				if *p.TierPriority != tt.tierPriority || *p.Priority != tt.priority {
					return fmt.Errorf("tier priority %d, priority %g; want %d, %g", *p.TierPriority, *p.Priority, tt.tierPriority, tt.priority)
				}
				names := e.nameToKey()
				var atgs []string
				for _, g := range p.AppliedToGroups {
					atgs = append(atgs, names[g])
				}
				if !slices.Equal(atgs, tt.appliedTo) {
					return fmt.Errorf("appliedTo %q, want %q", atgs, tt.appliedTo)
				}
				if got := renderNative(p.Rules, names); !slices.Equal(got, tt.rules) {
					return fmt.Errorf("rules\n got %q\nwant %q", got, tt.rules)
				}
				return nil
			})
		})
	}
}

// A SIG policy's status carries Accepted and Realized conditions; a
// BaselineAdminNetworkPolicy not named default (which the CRD refuses) is
// not enforced; a deleted policy's internal policy goes away.
func TestSIGPolicyStatusAndLifecycle(t *testing.T) {
	cnp := sigCNP("p", sigv1alpha2.AdminTier, 1, sigv1alpha2.ClusterNetworkPolicySpec{
		Subject: sigv1alpha2.ClusterNetworkPolicySubject{Namespaces: matchLabels("ns", "x")},
		Ingress: []sigv1alpha2.ClusterNetworkPolicyIngressRule{{Action: sigv1alpha2.ClusterNetworkPolicyRuleActionDeny, From: []sigv1alpha2.ClusterNetworkPolicyIngressPeer{nsPeer("ns", "y")}}},
	})
	other := &sigv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "uid-other"}, Spec: sigv1alpha1.BaselineAdminNetworkPolicySpec{
		Subject: sigv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		Ingress: []sigv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: sigv1alpha1.BaselineAdminNetworkPolicyRuleActionDeny, From: []sigv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}},
	}}
	e := newSIGEnv(t, cluster(), cnp, other)
	e.eventually(t, func() error {
		p, err := e.sig.PolicyV1alpha2().ClusterNetworkPolicies().Get(e.ctx, "p", metav1.GetOptions{})
		if err != nil {
			return err
		}
		acc := meta.FindStatusCondition(p.Status.Conditions, SIGConditionAccepted)
		rea := meta.FindStatusCondition(p.Status.Conditions, SIGConditionRealized)
		if acc == nil || acc.Status != metav1.ConditionTrue || rea == nil {
			return fmt.Errorf("conditions %+v", p.Status.Conditions)
		}
		// No agent reported: x's Pod is on n1, which has not realized it.
		if rea.Status != metav1.ConditionFalse || rea.Reason != "Realizing" {
			return fmt.Errorf("Realized %+v, want False/Realizing", rea)
		}
		return nil
	})
	if _, ok := e.internal(BaselineAdminNetworkPolicyType, "", "other"); ok {
		t.Errorf("a BaselineAdminNetworkPolicy not named default was enforced")
	}
	if err := e.sig.PolicyV1alpha2().ClusterNetworkPolicies().Delete(e.ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually(t, func() error {
		if _, ok := e.internal(SIGClusterNetworkPolicyType, "", "p"); ok {
			return fmt.Errorf("the internal policy of a deleted ClusterNetworkPolicy is still there")
		}
		return nil
	})
}
