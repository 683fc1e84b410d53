package networkpolicy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

func nodePortService(ns, name string, typ v1.ServiceType, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{Type: typ, Ports: ports}}
}

// serviceMembers prints an AppliedToGroup's members per Node as
// "node: service ns/name port-name:nodePort/protocol ...".
func serviceMembers(s controlplane.GroupMemberSet) []string {
	out := []string{}
	for _, m := range s {
		if m.Service == nil {
			out = append(out, "not a Service: "+controlplane.MemberKey(m))
			continue
		}
		line := "service " + m.Service.Namespace + "/" + m.Service.Name
		for _, p := range m.Ports {
			line += fmt.Sprintf(" %s:%d/%s", p.Name, p.Port, p.Protocol)
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

// A ClusterNetworkPolicy applied to a NodePort Service (upstream's
// docs/antrea-network-policy.md, "Apply to NodePort Service"): its
// AppliedToGroup's member is the Service itself, on every Node (a NodePort
// is served on every Node, so upstream spans the group to all Nodes); the
// member carries the Service's NodePorts, which agents match. The group
// follows the Service (ports, type, deletion) and the Nodes.
func TestPolicyAppliedToANodePortServiceSpansEveryNode(t *testing.T) {
	kube, crd := nativeCluster()
	e := newNativeEnv(t, kube, crd)
	key := "service=x/web"
	web := nodePortService("x", "web", v1.ServiceTypeNodePort,
		v1.ServicePort{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080},
		v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053})
	e.mustCreate(t, web)
	e.mustCreate(t, newACNP("deny-outside", "securityops", 5, crdv1beta1.ClusterNetworkPolicySpec{
		AppliedTo: []crdv1beta1.AppliedTo{{Service: &crdv1beta1.NamespacedName{Namespace: "x", Name: "web"}}},
		Ingress: []crdv1beta1.Rule{{Action: action(crdv1beta1.RuleActionDrop),
			From: []crdv1beta1.NetworkPolicyPeer{{IPBlock: &crdv1beta1.IPBlock{CIDR: "192.0.2.0/24"}}}}},
	}))

	// group checks that every Node in nodes has exactly the member want
	// (nil: the group has no member anywhere), and that the group and the
	// policy span those Nodes.
	group := func(nodes []string, want ...string) func() error {
		return func() error {
			g, ok := e.appliedToGroup(key)
			if !ok {
				return fmt.Errorf("no AppliedToGroup %q", key)
			}
			got := map[string][]string{}
			for node, s := range memberSets(g) {
				got[node] = serviceMembers(s)
			}
			wantByNode := map[string][]string{}
			for _, n := range nodes {
				wantByNode[n] = want
			}
			if fmt.Sprint(got) != fmt.Sprint(wantByNode) {
				return fmt.Errorf("members by Node = %v, want %v", got, wantByNode)
			}
			if !g.SpanMeta.NodeNames.Equal(sets.New(nodes...)) {
				return fmt.Errorf("group span = %v, want %v", sets.List(g.SpanMeta.NodeNames), nodes)
			}
			p, ok := e.internal(controlplane.AntreaClusterNetworkPolicy, "", "deny-outside")
			if !ok {
				return fmt.Errorf("no internal policy")
			}
			if !slices.Equal(p.AppliedToGroups, []string{groupName(key)}) {
				return fmt.Errorf("policy applied to %v, want [%s]", p.AppliedToGroups, groupName(key))
			}
			if !p.SpanMeta.NodeNames.Equal(sets.New(nodes...)) {
				return fmt.Errorf("policy span = %v, want %v", sets.List(p.SpanMeta.NodeNames), nodes)
			}
			rules := strings.Join(renderNative(p.Rules, e.nameToKey()), "\n")
			if want := "In#0 Drop from=[] ips=[192.0.2.0/24] services=all"; rules != want {
				return fmt.Errorf("rules = %q, want %q", rules, want)
			}
			return nil
		}
	}
	all := []string{"n1", "n2", "n3"}
	e.eventually(t, group(all, "service x/web http:30080/TCP dns:30053/UDP"))

	t.Run("a changed NodePort changes the member", func(t *testing.T) {
		web.Spec.Ports[0].NodePort = 30081
		e.mustUpdate(t, web)
		e.eventually(t, group(all, "service x/web http:30081/TCP dns:30053/UDP"))
	})
	t.Run("a new Node gets the member", func(t *testing.T) {
		e.mustCreate(t, newNode("n4", nil, "172.18.0.4"))
		e.eventually(t, group(append(slices.Clone(all), "n4"), "service x/web http:30081/TCP dns:30053/UDP"))
	})
	t.Run("a Service without NodePorts is no member: the policy applies to nothing", func(t *testing.T) {
		web.Spec.Type = v1.ServiceTypeClusterIP
		for i := range web.Spec.Ports {
			web.Spec.Ports[i].NodePort = 0
		}
		e.mustUpdate(t, web)
		e.eventually(t, group(nil))
	})
	t.Run("a LoadBalancer Service's NodePorts are its member's", func(t *testing.T) {
		web.Spec.Type = v1.ServiceTypeLoadBalancer
		web.Spec.Ports[0].NodePort = 31000
		e.mustUpdate(t, web)
		e.eventually(t, group(append(slices.Clone(all), "n4"), "service x/web http:31000/TCP"))
	})
	t.Run("a deleted Service leaves the group empty", func(t *testing.T) {
		if err := e.client.CoreV1().Services("x").Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.eventually(t, group(nil))
	})
	t.Run("a Service created again is the member again", func(t *testing.T) {
		e.mustCreate(t, nodePortService("x", "web", v1.ServiceTypeNodePort, v1.ServicePort{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30090}))
		e.eventually(t, group(append(slices.Clone(all), "n4"), "service x/web http:30090/TCP"))
	})
	t.Run("a deleted policy leaves no group", func(t *testing.T) {
		if err := e.crd.CrdV1beta1().ClusterNetworkPolicies().Delete(e.ctx, "deny-outside", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.eventually(t, func() error {
			if _, ok := e.appliedToGroup(key); ok {
				return fmt.Errorf("the Service group of a deleted policy is still stored")
			}
			e.c.mu.Lock()
			defer e.c.mu.Unlock()
			if e.c.serviceGroupKeys.Len() != 0 {
				return fmt.Errorf("Service group keys left: %v", sets.List(e.c.serviceGroupKeys))
			}
			return nil
		})
	})
}
