package networkpolicy

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// An egress rule's toServices (upstream's ACNP field, "toServices: [{name,
// namespace}]") on a real node with AntreaProxy: it meets the client's
// connections to the named Service's ClusterIP, not those to another
// Service with the same endpoint, nor the endpoint reached by its pod IP;
// a Service created after the policy is matched once it exists, and one
// deleted is no longer.
func TestAToServicesRuleMatchesTheServicesClusterIPsOnly(t *testing.T) {
	svc := func(name, clusterIP string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.ServiceSpec{
			ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	}
	nn := newNodePathNode(t, nil, svc("web", "10.96.0.10"), webSlice("web"), svc("other", "10.96.0.11"), webSlice("other"))
	ctx, br, flows := nn.ctx, nn.br, nn.flows
	client := br.AddPod(t, "client", "10.10.1.4/24")
	if err := flows.InstallPodFlows(client.HostIF, []net.IP{client.IP}, client.MAC, client.OFPort); err != nil {
		t.Fatal(err)
	}
	iface := interfacestore.NewContainerInterface(client.HostIF, "c-client", "client", "default", "eth0", client.MAC, []net.IP{client.IP}, 0)
	iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(client.OFPort)}
	nn.store.AddInterface(iface)

	n := &policyNode{br: br, client: newClient(&cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-client"},
		GroupMembers: []cpv1beta2.GroupMember{member("default", "client", "10.10.1.4")}})}
	c := NewController("node-1", n.client, flows, nn.store, Options{Services: NewServiceLookup(nn.informers.Core().V1().Services())})
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { nn.cancel(); <-done })

	web, other, late, direct := "10.96.0.10:80", "10.96.0.11:80", "10.96.0.12:80", "10.10.1.3:8080"
	expect := func(why string, want map[string]string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			got := map[string]string{}
			ok := true
			for addr, w := range want {
				got[addr] = dialOutcome(t, client, addr, time.Second)
				ok = ok && got[addr] == w
			}
			if ok {
				t.Logf("%s: %v", why, got)
				return
			}
			if time.Now().After(deadline) {
				table := flows.Pipeline().Table(agentof.AntreaPolicyEgressRuleTable).ID
				t.Fatalf("%s: want %v, got %v\nAntreaPolicyEgressRule:\n%s", why, want, got, strings.Join(br.DumpFlows(t, fmt.Sprintf("table=%d", table)), "\n"))
			}
		}
	}
	expect("without policy the client reaches both Services and the endpoint", map[string]string{web: "web", other: "web", direct: "web"})

	rule := cpv1beta2.NetworkPolicyRule{Name: "no-web", Direction: cpv1beta2.DirectionOut, Action: ptr(drop),
		To: cpv1beta2.NetworkPolicyPeer{ToServices: []cpv1beta2.ServiceReference{{Namespace: "default", Name: "web"}, {Namespace: "default", Name: "late"}}}}
	n.set(t, antreaPolicy("no-web", tierSecurityOps, 5, "atg-client", rule))
	expect("a Drop toServices web drops web's ClusterIP only", map[string]string{web: "timeout", other: "web", direct: "web"})

	// Service late, named by the rule before it existed.
	if _, err := nn.k8s.CoreV1().Services("default").Create(context.Background(), svc("late", "10.96.0.12"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nn.k8s.DiscoveryV1().EndpointSlices("default").Create(context.Background(), webSlice("late"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The rule's flows name late's ClusterIP (a timeout alone could be
	// AntreaProxy not serving it yet; the last step shows it does).
	table := flows.Pipeline().Table(agentof.AntreaPolicyEgressRuleTable).ID
	ruleFlows := func(why string, matched, unmatched string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			dump := strings.Join(br.DumpFlows(t, fmt.Sprintf("table=%d", table)), "\n")
			if strings.Contains(dump, "ct_nw_dst="+matched+",") && !strings.Contains(dump, "ct_nw_dst="+unmatched+",") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: want %s matched and %s not:\n%s", why, matched, unmatched, dump)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ruleFlows("late created", "10.96.0.12", "10.96.0.11")
	expect("a Service the rule names is matched once it exists", map[string]string{late: "timeout", web: "timeout", other: "web"})

	// web deleted is gone from AntreaProxy too: its ClusterIP answers
	// nothing either way, so the rule's flows are what shows it.
	if err := nn.k8s.CoreV1().Services("default").Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ruleFlows("web deleted", "10.96.0.12", "10.96.0.10")

	n.set(t)
	expect("without the policy the client reaches the Services again", map[string]string{late: "web", other: "web", direct: "web"})
}
