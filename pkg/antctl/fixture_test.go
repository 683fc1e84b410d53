package antctl

import (
	"bytes"
	"context"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	antreafake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

// cluster is a small cluster the API tests read through fake clientsets:
// two Nodes, pods in two namespaces, and three computed policies. The fake
// controlplane API evaluates nodeName=<node> as the real server does
// (docs/design/controlplane-api.md): a policy is sent to the Nodes of its
// applied-to pods, an AppliedToGroup with that Node's members only, an
// AddressGroup to the Nodes of the policies using it.
type cluster struct {
	pods     []*corev1.Pod
	policies []*cpv1beta2.NetworkPolicy
	atgs     []*cpv1beta2.AppliedToGroup
	ags      []*cpv1beta2.AddressGroup
	realized map[string]string
	extra    []runtime.Object // more Kubernetes objects
}

func pod(ns, name, node, ip string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{PodIP: ip}}
}

func member(p *corev1.Pod) cpv1beta2.GroupMember {
	return cpv1beta2.GroupMember{Pod: &cpv1beta2.PodReference{Namespace: p.Namespace, Name: p.Name},
		IPs: []cpv1beta2.IPAddress{cpv1beta2.IPAddress(net.ParseIP(p.Status.PodIP).To4())}}
}

// The test cluster's objects, named so expectations are built from them.
var (
	web0   = pod("demo", "web-0", "node-1", "10.10.1.2")
	web1   = pod("demo", "web-1", "node-2", "10.10.2.2")
	client = pod("demo", "client", "node-1", "10.10.1.3")
	other  = pod("default", "other", "node-2", "10.10.2.3")

	atgWeb    = &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-web"}, GroupMembers: []cpv1beta2.GroupMember{member(web0), member(web1)}}
	atgClient = &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-client"}, GroupMembers: []cpv1beta2.GroupMember{member(client)}}
	atgOther  = &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-other"}, GroupMembers: []cpv1beta2.GroupMember{member(other)}}
	agClient  = &cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag-client"}, GroupMembers: []cpv1beta2.GroupMember{member(client)}}
	agWeb     = &cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag-web"}, GroupMembers: []cpv1beta2.GroupMember{member(web0), member(web1)}}

	tcp   = cpv1beta2.ProtocolTCP
	p80   = intstr.FromInt32(80)
	npWeb = &cpv1beta2.NetworkPolicy{
		ObjectMeta:      metav1.ObjectMeta{Name: "uid-allow-client", Generation: 1},
		SourceRef:       &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.K8sNetworkPolicy, Namespace: "demo", Name: "allow-client"},
		AppliedToGroups: []string{atgWeb.Name},
		Rules: []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionIn,
			From: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{agClient.Name}}, Services: []cpv1beta2.Service{{Protocol: &tcp, Port: &p80}}}},
	}
	npClient = &cpv1beta2.NetworkPolicy{
		ObjectMeta:      metav1.ObjectMeta{Name: "uid-client-egress", Generation: 3},
		SourceRef:       &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.K8sNetworkPolicy, Namespace: "demo", Name: "client-egress"},
		AppliedToGroups: []string{atgClient.Name},
		Rules: []cpv1beta2.NetworkPolicyRule{
			{Direction: cpv1beta2.DirectionOut, To: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{agWeb.Name}}},
			{Direction: cpv1beta2.DirectionIn},
		},
	}
	npOther = &cpv1beta2.NetworkPolicy{
		ObjectMeta:      metav1.ObjectMeta{Name: "uid-deny-other", Generation: 1},
		SourceRef:       &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.K8sNetworkPolicy, Namespace: "default", Name: "deny-other"},
		AppliedToGroups: []string{atgOther.Name},
		Rules:           []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionIn}},
	}
)

func defaultCluster() *cluster {
	return &cluster{
		pods:     []*corev1.Pod{web0, web1, client, other},
		policies: []*cpv1beta2.NetworkPolicy{npWeb, npClient, npOther},
		atgs:     []*cpv1beta2.AppliedToGroup{atgWeb, atgClient, atgOther},
		ags:      []*cpv1beta2.AddressGroup{agClient, agWeb},
		realized: map[string]string{npWeb.Name: "2/2", npClient.Name: "0/1", npOther.Name: "1/1"},
	}
}

func (c *cluster) nodeOf(m cpv1beta2.GroupMember) string {
	for _, p := range c.pods {
		if m.Pod != nil && p.Namespace == m.Pod.Namespace && p.Name == m.Pod.Name {
			return p.Spec.NodeName
		}
	}
	return ""
}

// policySpan is the Nodes of a policy's applied-to pods.
func (c *cluster) policySpan(p *cpv1beta2.NetworkPolicy) sets.Set[string] {
	span := sets.New[string]()
	for _, g := range c.atgs {
		if sets.New(appliedToOf(p)...).Has(g.Name) {
			for _, m := range g.GroupMembers {
				span.Insert(c.nodeOf(m))
			}
		}
	}
	return span
}

func (c *cluster) clients() *Clients {
	kubeObjs := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"pool": "a"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{"pool": "b"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
	}
	for _, p := range c.pods {
		kubeObjs = append(kubeObjs, p)
	}
	kube := kubefake.NewClientset(append(kubeObjs, c.extra...)...)
	var objs []runtime.Object
	for _, p := range c.policies {
		objs = append(objs, p)
	}
	for _, g := range c.atgs {
		objs = append(objs, g)
	}
	for _, g := range c.ags {
		objs = append(objs, g)
	}
	antrea := antreafake.NewSimpleClientset(objs...)
	node := func(a k8stesting.Action) string {
		if l, ok := a.(k8stesting.ListAction); ok && l.GetListRestrictions().Fields != nil {
			if n, ok := l.GetListRestrictions().Fields.RequiresExactMatch(nodeNameField); ok {
				return n
			}
		}
		return ""
	}
	antrea.PrependReactor("list", "networkpolicies", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := node(a)
		if n == "" {
			return false, nil, nil
		}
		list := &cpv1beta2.NetworkPolicyList{}
		for _, p := range c.policies {
			if c.policySpan(p).Has(n) {
				list.Items = append(list.Items, *p)
			}
		}
		return true, list, nil
	})
	antrea.PrependReactor("list", "appliedtogroups", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := node(a)
		if n == "" {
			return false, nil, nil
		}
		list := &cpv1beta2.AppliedToGroupList{}
		for _, g := range c.atgs {
			mine := *g
			mine.GroupMembers = nil
			for _, m := range g.GroupMembers {
				if c.nodeOf(m) == n {
					mine.GroupMembers = append(mine.GroupMembers, m)
				}
			}
			if len(mine.GroupMembers) > 0 {
				list.Items = append(list.Items, mine)
			}
		}
		return true, list, nil
	})
	antrea.PrependReactor("list", "addressgroups", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := node(a)
		if n == "" {
			return false, nil, nil
		}
		list := &cpv1beta2.AddressGroupList{}
		for _, g := range c.ags {
			for _, p := range c.policies {
				if sets.New(addressGroupsOf(p)...).Has(g.Name) && c.policySpan(p).Has(n) {
					list.Items = append(list.Items, *g)
					break
				}
			}
		}
		return true, list, nil
	})
	return &Clients{Kube: kube, Antrea: antrea,
		Realization: func(context.Context) (map[string]string, error) { return c.realized, nil }}
}

// result is one antctl run.
type result struct {
	out, err string
	runErr   error
}

// runAntctl runs a command line against the cluster (nil: no API), out of
// local mode (an empty --config-dir) unless the args give a --config-dir.
func runAntctl(t *testing.T, c *cluster, args ...string) result {
	t.Helper()
	var clients *Clients
	if c != nil {
		clients = c.clients()
	}
	return runAntctlWith(t, clients, args...)
}

// runAntctlWith runs a command line with these clients.
func runAntctlWith(t *testing.T, clients *Clients, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Out: &out, Err: &errb}
	if clients != nil {
		env.Clients = func() (*Clients, error) { return clients, nil }
	} else {
		env.Clients = func() (*Clients, error) { return nil, errors.New("this test has no API server") }
	}
	cmd := NewCommand(env)
	hasDir := false
	for _, a := range args {
		hasDir = hasDir || strings.HasPrefix(a, "--config-dir")
	}
	switch {
	case hasDir:
	case len(args) > 0 && args[0] == "__complete":
		// The last argument is the word to complete.
		args = append([]string{args[0], "--config-dir", t.TempDir()}, args[1:]...)
	default:
		args = append(args, "--config-dir", t.TempDir())
	}
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return result{out: out.String(), err: errb.String(), runErr: err}
}

// forbidden answers as kube-apiserver does to an identity without the RBAC.
func forbidden(resource string) k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC: access denied"))
	}
}

var columnGap = regexp.MustCompile(`\s{2,}`)

// rows splits a table into cells: columns are at least two blanks apart
// and no cell holds two blanks in a row.
func rows(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l == "" {
			continue
		}
		out = append(out, columnGap.Split(strings.TrimRight(l, " "), -1))
	}
	return out
}
