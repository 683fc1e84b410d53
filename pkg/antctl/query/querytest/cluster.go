// Package querytest is a small cluster behind fake clientsets, for the
// tests of the query layer and of antctl: two Nodes, pods in two namespaces,
// three computed K8s NetworkPolicies and their groups.
package querytest

import (
	"context"
	"net"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"antrea.io/antrea/pkg/antctl/query"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	antreafake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

// Cluster is a small cluster the API tests read through fake clientsets:
// two Nodes, pods in two namespaces, and three computed policies. The fake
// controlplane API evaluates nodeName=<node> as the real server does
// (docs/design/controlplane-api.md): a policy is sent to the Nodes of its
// applied-to pods, an AppliedToGroup with that Node's members only, an
// AddressGroup to the Nodes of the policies using it.
type Cluster struct {
	Pods     []*corev1.Pod
	Policies []*cpv1beta2.NetworkPolicy
	ATGs     []*cpv1beta2.AppliedToGroup
	AGs      []*cpv1beta2.AddressGroup
	Realized map[string]string
	Extra    []runtime.Object // more Kubernetes objects
}

// Pod is a pod of node with address ip.
func Pod(ns, name, node, ip string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{PodIP: ip}}
}

// Member is p as a group member.
func Member(p *corev1.Pod) cpv1beta2.GroupMember {
	return cpv1beta2.GroupMember{Pod: &cpv1beta2.PodReference{Namespace: p.Namespace, Name: p.Name},
		IPs: []cpv1beta2.IPAddress{cpv1beta2.IPAddress(net.ParseIP(p.Status.PodIP).To4())}}
}

// The cluster's objects, named so that tests build their expectations from them.
var (
	Web0   = Pod("demo", "web-0", "node-1", "10.10.1.2")
	Web1   = Pod("demo", "web-1", "node-2", "10.10.2.2")
	Client = Pod("demo", "client", "node-1", "10.10.1.3")
	Other  = Pod("default", "other", "node-2", "10.10.2.3")

	ATGWeb    = &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-web"}, GroupMembers: []cpv1beta2.GroupMember{Member(Web0), Member(Web1)}}
	ATGClient = &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-client"}, GroupMembers: []cpv1beta2.GroupMember{Member(Client)}}
	ATGOther  = &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-other"}, GroupMembers: []cpv1beta2.GroupMember{Member(Other)}}
	AGClient  = &cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag-client"}, GroupMembers: []cpv1beta2.GroupMember{Member(Client)}}
	AGWeb     = &cpv1beta2.AddressGroup{ObjectMeta: metav1.ObjectMeta{Name: "ag-web"}, GroupMembers: []cpv1beta2.GroupMember{Member(Web0), Member(Web1)}}

	tcp   = cpv1beta2.ProtocolTCP
	p80   = intstr.FromInt32(80)
	NPWeb = &cpv1beta2.NetworkPolicy{
		ObjectMeta:      metav1.ObjectMeta{Name: "uid-allow-client", Generation: 1},
		SourceRef:       &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.K8sNetworkPolicy, Namespace: "demo", Name: "allow-client"},
		AppliedToGroups: []string{ATGWeb.Name},
		Rules: []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionIn,
			From: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{AGClient.Name}}, Services: []cpv1beta2.Service{{Protocol: &tcp, Port: &p80}}}},
	}
	NPClient = &cpv1beta2.NetworkPolicy{
		ObjectMeta:      metav1.ObjectMeta{Name: "uid-client-egress", Generation: 3},
		SourceRef:       &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.K8sNetworkPolicy, Namespace: "demo", Name: "client-egress"},
		AppliedToGroups: []string{ATGClient.Name},
		Rules: []cpv1beta2.NetworkPolicyRule{
			{Direction: cpv1beta2.DirectionOut, To: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{AGWeb.Name}}},
			{Direction: cpv1beta2.DirectionIn},
		},
	}
	NPOther = &cpv1beta2.NetworkPolicy{
		ObjectMeta:      metav1.ObjectMeta{Name: "uid-deny-other", Generation: 1},
		SourceRef:       &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.K8sNetworkPolicy, Namespace: "default", Name: "deny-other"},
		AppliedToGroups: []string{ATGOther.Name},
		Rules:           []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionIn}},
	}
)

// Default is the cluster most tests read.
func Default() *Cluster {
	return &Cluster{
		Pods:     []*corev1.Pod{Web0, Web1, Client, Other},
		Policies: []*cpv1beta2.NetworkPolicy{NPWeb, NPClient, NPOther},
		ATGs:     []*cpv1beta2.AppliedToGroup{ATGWeb, ATGClient, ATGOther},
		AGs:      []*cpv1beta2.AddressGroup{AGClient, AGWeb},
		Realized: map[string]string{NPWeb.Name: "2/2", NPClient.Name: "0/1", NPOther.Name: "1/1"},
	}
}

func (c *Cluster) nodeOf(m cpv1beta2.GroupMember) string {
	for _, p := range c.Pods {
		if m.Pod != nil && p.Namespace == m.Pod.Namespace && p.Name == m.Pod.Name {
			return p.Spec.NodeName
		}
	}
	return ""
}

// policySpan is the Nodes of a policy's applied-to pods.
func (c *Cluster) policySpan(p *cpv1beta2.NetworkPolicy) sets.Set[string] {
	span := sets.New[string]()
	for _, g := range c.ATGs {
		if sets.New(query.AppliedToGroupsOf(p)...).Has(g.Name) {
			for _, m := range g.GroupMembers {
				span.Insert(c.nodeOf(m))
			}
		}
	}
	return span
}

// Clients are fake clientsets holding the cluster; the controlplane API
// evaluates nodeName=<node> as the real server does.
func (c *Cluster) Clients() *query.Clients {
	kubeObjs := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"pool": "a"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{"pool": "b"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
	}
	for _, p := range c.Pods {
		kubeObjs = append(kubeObjs, p)
	}
	kube := kubefake.NewClientset(append(kubeObjs, c.Extra...)...)
	var objs []runtime.Object
	for _, p := range c.Policies {
		objs = append(objs, p)
	}
	for _, g := range c.ATGs {
		objs = append(objs, g)
	}
	for _, g := range c.AGs {
		objs = append(objs, g)
	}
	antrea := antreafake.NewSimpleClientset(objs...)
	node := func(a k8stesting.Action) string {
		if l, ok := a.(k8stesting.ListAction); ok && l.GetListRestrictions().Fields != nil {
			if n, ok := l.GetListRestrictions().Fields.RequiresExactMatch(query.NodeNameField); ok {
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
		for _, p := range c.Policies {
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
		for _, g := range c.ATGs {
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
		for _, g := range c.AGs {
			for _, p := range c.Policies {
				if sets.New(query.AddressGroupsOf(p)...).Has(g.Name) && c.policySpan(p).Has(n) {
					list.Items = append(list.Items, *g)
					break
				}
			}
		}
		return true, list, nil
	})
	return &query.Clients{Kube: kube, Antrea: antrea,
		Realization: func(context.Context) (map[string]string, error) { return c.Realized, nil }}
}
