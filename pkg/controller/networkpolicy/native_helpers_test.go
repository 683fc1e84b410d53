package networkpolicy

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/apiserver/registry"
	"antrea.io/antrea/pkg/apiserver/storage"
	crdfake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/controller/types"
)

// nativeEnv is env with the Antrea-native kinds enabled, on a fake
// crd.antrea.io clientset, with the real status store as Realizer.
type nativeEnv struct {
	*env
	crd      *crdfake.Clientset
	statuses *registry.StatusStore
}

// staticTiers are the Tiers antrea-controller keeps in every cluster.
func staticTiers() []runtime.Object {
	var out []runtime.Object
	for _, t := range crdv1beta1.StaticTiers {
		out = append(out, &crdv1beta1.Tier{ObjectMeta: metav1.ObjectMeta{Name: t.Name}, Spec: t.Spec})
	}
	return out
}

func newNativeEnv(t *testing.T, kubeObjs, crdObjs []runtime.Object) *nativeEnv {
	t.Helper()
	client := fake.NewClientset(kubeObjs...)
	crdClient := crdfake.NewSimpleClientset(crdObjs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	crdFactory := crdinformers.NewSharedInformerFactory(crdClient, 0)
	e := &nativeEnv{env: &env{
		client: client,
		ags:    storage.NewAddressGroupStore(),
		atgs:   storage.NewAppliedToGroupStore(),
		nps:    storage.NewNetworkPolicyStore(),
	}, crd: crdClient}
	e.statuses = registry.NewStatusStore(e.nps)
	e.c = newTestController(t, client, factory, e.ags, e.atgs, e.nps)
	if err := e.c.EnableAntreaPolicies(AntreaPolicyConfig{CRDClient: crdClient, CRDInformers: crdFactory, Realizer: e.statuses}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		crdFactory.Shutdown()
	})
	factory.Start(ctx.Done())
	crdFactory.Start(ctx.Done())
	if !e.c.waitForCacheSync(ctx) {
		t.Fatal("informer caches did not sync")
	}
	return e
}

// internal returns the internal policy computed from a native policy.
func (e *nativeEnv) internal(typ controlplane.NetworkPolicyType, ns, name string) (*types.NetworkPolicy, bool) {
	for _, obj := range e.nps.List() {
		p := obj.(*types.NetworkPolicy)
		if r := p.SourceRef; r != nil && r.Type == typ && r.Namespace == ns && r.Name == name {
			return p, true
		}
	}
	return nil, false
}

func (e *nativeEnv) mustCreate(t *testing.T, obj runtime.Object) {
	t.Helper()
	var err error
	cv := e.crd.CrdV1beta1()
	switch o := obj.(type) {
	case *crdv1beta1.ClusterNetworkPolicy:
		_, err = cv.ClusterNetworkPolicies().Create(e.ctx, o, metav1.CreateOptions{})
	case *crdv1beta1.NetworkPolicy:
		_, err = cv.NetworkPolicies(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
	case *crdv1beta1.ClusterGroup:
		_, err = cv.ClusterGroups().Create(e.ctx, o, metav1.CreateOptions{})
	case *crdv1beta1.Group:
		_, err = cv.Groups(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
	case *crdv1beta1.Tier:
		_, err = cv.Tiers().Create(e.ctx, o, metav1.CreateOptions{})
	case *v1.Service:
		_, err = e.client.CoreV1().Services(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
	case *v1.Node:
		_, err = e.client.CoreV1().Nodes().Create(e.ctx, o, metav1.CreateOptions{})
	default:
		e.env.create(t, obj)
		return
	}
	if err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
}

func (e *nativeEnv) mustUpdate(t *testing.T, obj runtime.Object) {
	t.Helper()
	var err error
	cv := e.crd.CrdV1beta1()
	switch o := obj.(type) {
	case *crdv1beta1.ClusterNetworkPolicy:
		_, err = cv.ClusterNetworkPolicies().Update(e.ctx, o, metav1.UpdateOptions{})
	case *crdv1beta1.ClusterGroup:
		_, err = cv.ClusterGroups().Update(e.ctx, o, metav1.UpdateOptions{})
	case *v1.Service:
		_, err = e.client.CoreV1().Services(o.Namespace).Update(e.ctx, o, metav1.UpdateOptions{})
	case *v1.Node:
		_, err = e.client.CoreV1().Nodes().Update(e.ctx, o, metav1.UpdateOptions{})
	default:
		e.env.update(t, obj)
		return
	}
	if err != nil {
		t.Fatalf("update %T: %v", obj, err)
	}
}

func newACNP(name, tier string, priority float64, spec crdv1beta1.ClusterNetworkPolicySpec) *crdv1beta1.ClusterNetworkPolicy {
	spec.Tier, spec.Priority = tier, priority
	return &crdv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: k8stypes.UID("uid-acnp-" + name), Generation: 1}, Spec: spec}
}

func newANNP(ns, name string, priority float64, spec crdv1beta1.NetworkPolicySpec) *crdv1beta1.NetworkPolicy {
	spec.Priority = priority
	return &crdv1beta1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID("uid-annp-" + ns + "-" + name), Generation: 1}, Spec: spec}
}

func action(a crdv1beta1.RuleAction) *crdv1beta1.RuleAction { return &a }

func i32(v int32) *int32 { return &v }

func newNode(name string, labels map[string]string, ips ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	return n
}

// renderNative prints the rules of a native policy with group names
// replaced by their selector keys, e.g.
// "In#0 Drop [appliedTo=namespace=x podSelector=<all>] from=[...] ips=[...] services=[TCP/80 src=1000-2000] name=r".
func renderNative(rules []controlplane.NetworkPolicyRule, names map[string]string) []string {
	keys := func(groups []string) string {
		var out []string
		for _, g := range groups {
			if k, ok := names[g]; ok {
				out = append(out, k)
			} else {
				out = append(out, "unknown:"+g)
			}
		}
		return strings.Join(out, "; ")
	}
	var out []string
	for _, r := range rules {
		peer, word := r.From, "from"
		if r.Direction == controlplane.DirectionOut {
			peer, word = r.To, "to"
		}
		var ips []string
		for _, b := range peer.IPBlocks {
			s := ipNetString(b.CIDR)
			for i, ex := range b.Except {
				if i == 0 {
					s += " except "
				} else {
					s += ","
				}
				s += ipNetString(ex)
			}
			ips = append(ips, s)
		}
		svcs := "all"
		if r.Services != nil {
			var ps []string
			for _, s := range r.Services {
				p := string(*s.Protocol)
				switch {
				case s.Port != nil:
					p += "/" + s.Port.String()
				case s.ICMPType != nil:
					p += fmt.Sprintf("/type=%d", *s.ICMPType)
				}
				if s.EndPort != nil {
					p += fmt.Sprintf("-%d", *s.EndPort)
				}
				if s.ICMPCode != nil {
					p += fmt.Sprintf(",code=%d", *s.ICMPCode)
				}
				if s.SrcPort != nil {
					p += fmt.Sprintf(" src=%d", *s.SrcPort)
					if s.SrcEndPort != nil {
						p += fmt.Sprintf("-%d", *s.SrcEndPort)
					}
				}
				ps = append(ps, p)
			}
			svcs = "[" + strings.Join(ps, " ") + "]"
		}
		line := fmt.Sprintf("%s#%d %s", r.Direction, r.Priority, *r.Action)
		if len(r.AppliedToGroups) > 0 {
			line += " [appliedTo=" + keys(r.AppliedToGroups) + "]"
		}
		line += fmt.Sprintf(" %s=[%s] ips=[%s]", word, keys(peer.AddressGroups), strings.Join(ips, "; "))
		for _, s := range peer.ToServices {
			line += " toService=" + s.Namespace + "/" + s.Name
		}
		if len(peer.FQDNs) > 0 {
			line += " fqdns=[" + strings.Join(peer.FQDNs, " ") + "]"
		}
		line += " services=" + svcs
		if r.Name != "" {
			line += " name=" + r.Name
		}
		if r.EnableLogging {
			line += " log=" + r.LogLabel
		}
		out = append(out, line)
	}
	return out
}

// members prints group members as pod ns/name@ips or node name@ips, sorted.
func members(s controlplane.GroupMemberSet) []string {
	out := []string{}
	for _, m := range s {
		var ips []string
		for _, ip := range m.IPs {
			ips = append(ips, net.IP(ip).String())
		}
		switch {
		case m.Pod != nil:
			out = append(out, m.Pod.Namespace+"/"+m.Pod.Name+"@"+strings.Join(ips, ","))
		case m.Node != nil:
			out = append(out, "node "+m.Node.Name+"@"+strings.Join(ips, ","))
		}
	}
	sort.Strings(out)
	return out
}
