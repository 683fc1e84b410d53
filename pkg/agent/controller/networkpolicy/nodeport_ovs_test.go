package networkpolicy

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/agent/dpcache"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// serviceMember is what antrea-controller sends for a policy applied to a
// NodePort Service: the Service, with its NodePorts.
func serviceMember(ns, name string, nodePorts ...int32) cpv1beta2.GroupMember {
	m := cpv1beta2.GroupMember{Service: &cpv1beta2.ServiceReference{Namespace: ns, Name: name}}
	for _, p := range nodePorts {
		m.Ports = append(m.Ports, cpv1beta2.NamedPort{Port: p, Protocol: cpv1beta2.ProtocolTCP})
	}
	return m
}

func ingressFromCIDR(action cpv1beta2.RuleAction, cidr string) cpv1beta2.NetworkPolicyRule {
	p := netip.MustParsePrefix(cidr)
	return cpv1beta2.NetworkPolicyRule{Direction: cpv1beta2.DirectionIn, Action: &action,
		From: cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{{CIDR: cpv1beta2.IPNet{IP: p.Addr().AsSlice(), PrefixLength: int32(p.Bits())}}}}}
}

// An Antrea ClusterNetworkPolicy applied to a NodePort Service (upstream's
// docs/antrea-network-policy.md, "Apply to NodePort Service": ingress rules
// with ipBlock sources, enforced on traffic from external clients to the
// Service's NodePort) on a real node: the pipeline, AntreaProxy with
// proxyAll and the node path, this policy controller; two hosts outside
// the cluster on the underlay, 192.168.77.100 and 192.168.77.200, connect
// to NodePorts of the node's address. Services web (NodePort 30080) and
// other (30081) have the same endpoint, a pod of the node. Each step sets
// the policies and checks what both clients see on both NodePorts.
func TestPolicyAppliedToANodePortServiceOnARealNode(t *testing.T) {
	svc := func(name, clusterIP string, nodePort int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: nodePort}}}}
	}
	nn := newNodePathNode(t, map[string]string{"inside": "192.168.77.100/24", "outside": "192.168.77.200/24"},
		svc("web", "10.96.0.10", 30080), webSlice("web"), svc("other", "10.96.0.11", 30081), webSlice("other"))
	ctx, cancel, br, flows, store := nn.ctx, nn.cancel, nn.br, nn.flows, nn.store
	inside, outside := nn.hosts["inside"], nn.hosts["outside"] // in 192.168.77.64/26; in 192.168.77.192/26

	// The policy controller, as newPolicyNode runs it: a narrowing write
	// purges the datapath cache; Reject answers through packet-in.
	n := &policyNode{br: br, client: newClient(&cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-svc-web"},
		GroupMembers: []cpv1beta2.GroupMember{serviceMember("default", "web", 30080)}})}
	packets := agentof.NewPacketInDispatcher(br.OF)
	go packets.Run(ctx)
	purger := dpcache.New(dpcache.AppctlPurge(br.Dir()))
	c := NewController("node-1", n.client, flows, store, Options{
		OnNarrowed: func() {
			if err := purger.Sync(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("purge the datapath cache: %v", err)
			}
		},
		PacketIns: &PacketIns{IO: packets, Parser: flows, AuditLogDir: t.TempDir()},
	})
	ctlDone := make(chan struct{})
	go func() { c.Run(ctx); close(ctlDone) }()
	t.Cleanup(func() { cancel(); <-ctlDone })

	webPort, otherPort := net.JoinHostPort(br.NodeIP.String(), "30080"), net.JoinHostPort(br.NodeIP.String(), "30081")
	node := br.NodeHost("node-1")
	type probe struct {
		from *bridgetest.Pod
		addr string
	}
	expect := func(why string, want map[probe]string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			got := map[string]string{}
			ok := true
			for pr, w := range want {
				o := dialOutcome(t, pr.from, pr.addr, time.Second)
				got[pr.from.Name+"->"+pr.addr] = o
				ok = ok && o == w
			}
			if ok {
				t.Logf("%s: %v", why, got)
				return
			}
			if time.Now().After(deadline) {
				wantByName := map[string]string{}
				for pr, w := range want {
					wantByName[pr.from.Name+"->"+pr.addr] = w
				}
				t.Fatalf("%s: want %v, got %v\nflows:\n%s", why, wantByName, got, strings.Join(br.DumpFlows(t), "\n"))
			}
		}
	}
	everyoneReaches := map[probe]string{{inside, webPort}: "web", {outside, webPort}: "web", {inside, otherPort}: "web", {outside, otherPort}: "web"}
	expect("without policy both clients reach both NodePorts", everyoneReaches)

	n.set(t, antreaPolicy("deny-outside", tierSecurityOps, 5, "atg-svc-web", ingressFromCIDR(drop, "192.168.77.192/26")))
	expect("a Drop applied to web drops the client in its ipBlock on web's NodePort only; the node itself is trusted", map[probe]string{
		{inside, webPort}: "web", {outside, webPort}: "timeout", {inside, otherPort}: "web", {outside, otherPort}: "web", {node, webPort}: "web"})
	ruleTable := flows.Pipeline().Table(agentof.AntreaPolicyIngressRuleTable).ID
	t.Logf("AntreaPolicyIngressRule:\n%s", strings.Join(br.DumpFlows(t, fmt.Sprintf("table=%d", ruleTable)), "\n"))
	// ofproto/trace is no oracle here: its simulated conntrack NATs the
	// packet but leaves the connection's tuple (ct_nw_dst, ct_tp_dst) unset
	// after the recirculation, so a trace shows this SYN passing the rule
	// (its megaflow says ct_nw_proto=0) while the datapath drops it, as the
	// connections above show.

	n.set(t, antreaPolicy("deny-outside", tierSecurityOps, 5, "atg-svc-web", ingressFromCIDR(reject, "192.168.77.192/26")))
	expect("a Reject answers the client with a TCP reset from the NodePort", map[probe]string{
		{inside, webPort}: "web", {outside, webPort}: "refused", {outside, otherPort}: "web"})

	n.set(t, antreaPolicy("allow-outside", tierSecurityOps, 5, "atg-svc-web", ingressFromCIDR(allow, "192.168.77.192/26")),
		antreaPolicy("drop-all", tierApplication, 1, "atg-svc-web", ingressFromCIDR(drop, "0.0.0.0/0")))
	expect("an Allow in securityops is final over a Drop of everyone in application", map[probe]string{
		{inside, webPort}: "timeout", {outside, webPort}: "web", {inside, otherPort}: "web"})

	n.set(t, antreaPolicy("drop-all", tierApplication, 1, "atg-svc-web", ingressFromCIDR(allow, "192.168.77.64/26"), ingressFromCIDR(drop, "0.0.0.0/0")))
	expect("in one policy the first rule wins", map[probe]string{
		{inside, webPort}: "web", {outside, webPort}: "timeout", {outside, otherPort}: "web"})

	// The Service's NodePort changed to 30081's (the controller sends the
	// member again with its new ports): the rules follow.
	atgGVR := cpv1beta2.SchemeGroupVersion.WithResource("appliedtogroups")
	if err := n.client.Tracker().Update(atgGVR, &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-svc-web"},
		GroupMembers: []cpv1beta2.GroupMember{serviceMember("default", "web", 30081)}}, ""); err != nil {
		t.Fatal(err)
	}
	expect("the rules follow the member's NodePorts", map[probe]string{
		{inside, webPort}: "web", {outside, webPort}: "web", {inside, otherPort}: "web", {outside, otherPort}: "timeout"})

	n.set(t)
	expect("without policies both clients reach both NodePorts again", everyoneReaches)
}
