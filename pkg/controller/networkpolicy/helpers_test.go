package networkpolicy

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apiserver/storage"
	"antrea.io/antrea/pkg/controller/grouping"
	"antrea.io/antrea/pkg/controller/types"
)

// env is a controller on a fake clientset writing into the real stores.
type env struct {
	client *fake.Clientset
	c      *Controller
	ags    storage.Interface
	atgs   storage.Interface
	nps    storage.Interface
	ctx    context.Context
}

func newEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	e := &env{
		client: client,
		ags:    storage.NewAddressGroupStore(),
		atgs:   storage.NewAppliedToGroupStore(),
		nps:    storage.NewNetworkPolicyStore(),
	}
	e.c = newTestController(t, client, factory, e.ags, e.atgs, e.nps)
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	if !e.c.waitForCacheSync(ctx) {
		t.Fatal("informer caches did not sync")
	}
	return e
}

// eventually drains the queues until check passes; informer events arrive
// asynchronously, so a check may need a few rounds. It fails after 10 s.
func (e *env) eventually(t *testing.T, check func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if derr := e.c.drain(e.ctx); derr != nil {
			t.Fatalf("drain: %v", derr)
		}
		if err = check(); err == nil {
			return
		}
	}
	t.Fatalf("condition not reached: %v", err)
}

func (e *env) policy(ns, name string) (*types.NetworkPolicy, bool) {
	var found *types.NetworkPolicy
	for _, obj := range e.nps.List() {
		p := obj.(*types.NetworkPolicy)
		if p.SourceRef != nil && p.SourceRef.Namespace == ns && p.SourceRef.Name == name {
			if found != nil {
				panic(fmt.Sprintf("two internal policies for %s/%s", ns, name))
			}
			found = p
		}
	}
	return found, found != nil
}

func (e *env) addressGroup(key string) (*types.AddressGroup, bool) {
	obj, ok, _ := e.ags.Get(groupName(key))
	if !ok {
		return nil, false
	}
	return obj.(*types.AddressGroup), true
}

func (e *env) appliedToGroup(key string) (*types.AppliedToGroup, bool) {
	obj, ok, _ := e.atgs.Get(groupName(key))
	if !ok {
		return nil, false
	}
	return obj.(*types.AppliedToGroup), true
}

// nameToKey maps group names back to selector keys for readable rules.
func (e *env) nameToKey() map[string]string {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	m := map[string]string{}
	for key := range e.c.groupsBySelector {
		m[groupName(key)] = key
	}
	return m
}

func (e *env) create(t *testing.T, obj runtime.Object) {
	t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Pod:
		_, err = e.client.CoreV1().Pods(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
	case *v1.Namespace:
		_, err = e.client.CoreV1().Namespaces().Create(e.ctx, o, metav1.CreateOptions{})
	case *networkingv1.NetworkPolicy:
		_, err = e.client.NetworkingV1().NetworkPolicies(o.Namespace).Create(e.ctx, o, metav1.CreateOptions{})
	default:
		t.Fatalf("cannot create %T", obj)
	}
	if err != nil {
		t.Fatalf("create: %v", err)
	}
}

func (e *env) update(t *testing.T, obj runtime.Object) {
	t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Pod:
		_, err = e.client.CoreV1().Pods(o.Namespace).Update(e.ctx, o, metav1.UpdateOptions{})
	case *v1.Namespace:
		_, err = e.client.CoreV1().Namespaces().Update(e.ctx, o, metav1.UpdateOptions{})
	case *networkingv1.NetworkPolicy:
		_, err = e.client.NetworkingV1().NetworkPolicies(o.Namespace).Update(e.ctx, o, metav1.UpdateOptions{})
	default:
		t.Fatalf("cannot update %T", obj)
	}
	if err != nil {
		t.Fatalf("update: %v", err)
	}
}

// selKey is the index key of a selector built like a policy peer.
func selKey(t testing.TB, ns string, podSel, nsSel *metav1.LabelSelector) string {
	t.Helper()
	s, err := grouping.NewSelector(ns, podSel, nsSel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Key()
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func lbls(kv ...string) map[string]string {
	return matchLabels(kv...).MatchLabels
}

func newPod(ns, name string, labels map[string]string, ip, node string, ports ...v1.ContainerPort) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Ports: ports}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	if ip != "" {
		p.Status.PodIP = ip
		p.Status.PodIPs = []v1.PodIP{{IP: ip}}
	}
	return p
}

func newNamespace(name string, labels map[string]string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func newPolicy(ns, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID("uid-" + ns + "-" + name)}, Spec: spec}
}

func port(p v1.Protocol, port intstr.IntOrString, endPort ...int32) networkingv1.NetworkPolicyPort {
	np := networkingv1.NetworkPolicyPort{Port: &port}
	if p != "" {
		np.Protocol = &p
	}
	if len(endPort) > 0 {
		np.EndPort = &endPort[0]
	}
	return np
}

// renderRules prints rules in a compact form with group names replaced by
// their selector keys, e.g. "In from=[namespace=ns podSelector=app=db] ips=[] ports=[TCP/80]".
func renderRules(rules []controlplane.NetworkPolicyRule, names map[string]string) []string {
	var out []string
	for _, r := range rules {
		peer, word := r.From, "from"
		if r.Direction == controlplane.DirectionOut {
			peer, word = r.To, "to"
		}
		var groups []string
		for _, g := range peer.AddressGroups {
			if k, ok := names[g]; ok {
				groups = append(groups, k)
			} else {
				groups = append(groups, "unknown:"+g)
			}
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
		ports := "all"
		if r.Services != nil {
			var ps []string
			for _, s := range r.Services {
				p := "any"
				if s.Port != nil {
					p = s.Port.String()
				}
				if s.EndPort != nil {
					p += fmt.Sprintf("-%d", *s.EndPort)
				}
				ps = append(ps, string(*s.Protocol)+"/"+p)
			}
			ports = "[" + strings.Join(ps, " ") + "]"
		}
		action := ""
		if r.Action != nil {
			action = " action=" + string(*r.Action)
		}
		out = append(out, fmt.Sprintf("%s %s=[%s] ips=[%s] ports=%s prio=%d%s", r.Direction, word,
			strings.Join(groups, "; "), strings.Join(ips, "; "), ports, r.Priority, action))
	}
	return out
}

func ipNetString(n controlplane.IPNet) string {
	return fmt.Sprintf("%s/%d", net.IP(n.IP).String(), n.PrefixLength)
}

// memberNames prints members as ns/name@ips, sorted.
func memberNames(s controlplane.GroupMemberSet) []string {
	out := []string{}
	for _, m := range s {
		var ips []string
		for _, ip := range m.IPs {
			ips = append(ips, net.IP(ip).String())
		}
		name := m.Pod.Namespace + "/" + m.Pod.Name + "@" + strings.Join(ips, ",")
		for _, p := range m.Ports {
			name += fmt.Sprintf(" %s:%d/%s", p.Name, p.Port, p.Protocol)
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// memberSets returns the members of g per Node, as sets.
func memberSets(g *types.AppliedToGroup) map[string]controlplane.GroupMemberSet {
	out := map[string]controlplane.GroupMemberSet{}
	for _, m := range g.Members {
		if out[m.Node] == nil {
			out[m.Node] = controlplane.GroupMemberSet{}
		}
		out[m.Node][m.Key] = m.Member
	}
	return out
}

func byNodeNames(g *types.AppliedToGroup) map[string][]string {
	out := map[string][]string{}
	for node, s := range memberSets(g) {
		out[node] = memberNames(s)
	}
	return out
}

// newTestController is NewController for a test, which it fails when the
// controller cannot watch the informers.
func newTestController(tb testing.TB, kubeClient kubernetes.Interface, informerFactory informers.SharedInformerFactory,
	addressGroupStore, appliedToGroupStore, networkPolicyStore Store) *Controller {
	tb.Helper()
	c, err := NewController(kubeClient, informerFactory, addressGroupStore, appliedToGroupStore, networkPolicyStore)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
