package datapath

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// TestIPv6Only (ANTREA_E2E_IP_FAMILY=ipv6, make conformance): on an
// IPv6-only lab (`antrea-lab up --ip-family ipv6`) every Node has one pod
// CIDR and one InternalIP, both IPv6, and its gateway no IPv4 address;
// pods have one address, IPv6; pods on two nodes reach each other (ICMPv6,
// TCP, UDP) through a Geneve tunnel over the IPv6 underlay (the peers'
// flows set tun_ipv6_dst to the peer's IPv6 InternalIP), a node reaches
// its own and a remote pod; a Service's IPv6 ClusterIP answers and the
// cluster DNS answers AAAA (and no A) for its name; a NodePort answers on
// each node's IPv6 address from a pod and from a node; a NetworkPolicy
// isolating a pod denies, an ipBlock of the client's /128 allows.
// About two minutes.
func TestIPv6Only(t *testing.T) {
	if os.Getenv(envIPFamily) != lab.IPFamilyV6 {
		t.Skipf("the IPv6-only lab runs under %s=ipv6 (make conformance)", envIPFamily)
	}
	opts := labtest.Options()
	opts.IPFamily = lab.IPFamilyV6
	e := upWith(t, opts, "geneve, IPv6-only")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	node6 := map[string]string{}
	for _, name := range e.Nodes {
		node, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(node.Spec.PodCIDRs) != 1 || net.ParseIP(trimCIDR(node.Spec.PodCIDRs[0])).To4() != nil {
			t.Fatalf("node %s: podCIDRs %v, want one IPv6 CIDR", name, node.Spec.PodCIDRs)
		}
		var internal []string
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		if len(internal) != 1 || internal[0] != lab.UnderlayIPv6(e.nodeIP[name]).String() {
			t.Fatalf("node %s: InternalIPs %v, want its IPv6 underlay address alone (%s)", name, internal, lab.UnderlayIPv6(e.nodeIP[name]))
		}
		node6[name] = internal[0]
		gw6 := gatewayOf(node.Spec.PodCIDRs[0])
		out, err := exec.CommandContext(ctx, "ip", "-n", lab.NodeNetNS(name), "-o", "addr", "show", "dev", "antrea-gw0").CombinedOutput()
		if err != nil || !slices.Contains(strings.Fields(string(out)), gw6+"/64") || strings.Contains(string(out), " inet ") {
			t.Fatalf("node %s: antrea-gw0 should hold %s/64 and no IPv4 address: %v\n%s", name, gw6, err, out)
		}
	}
	e.createPods(t, ctx, map[string]*corev1.Pod{
		"a1": pinned("node-1"),
		"b1": pinned("node-2"),
	})
	for _, p := range []string{"a1", "b1"} {
		if ips := e.pods[p].Status.PodIPs; len(ips) != 1 || net.ParseIP(ips[0].IP).To4() != nil {
			t.Fatalf("pod %s: podIPs %v, want one IPv6 address", p, ips)
		}
	}
	a6, b6 := e.ip("a1"), e.ip("b1")
	t.Run("pods on two nodes reach each other through the tunnel over IPv6", func(t *testing.T) {
		flows, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "dump-flows", e.BridgeSocket("node-1")).CombinedOutput()
		if err != nil || !strings.Contains(string(flows), node6["node-2"]+"->tun_ipv6_dst") {
			t.Errorf("node-1 has no flow into the tunnel to node-2's IPv6 address %s: %v\n%s", node6["node-2"], err, flows)
		}
		for _, c := range []struct{ from, proto, to string }{
			{"a1", "icmp", b6}, {"a1", "tcp", b6}, {"b1", "tcp", a6}, {"a1", "udp", b6},
			{"node-1", "tcp", a6}, {"node-1", "tcp", b6},
		} {
			if err := e.probeEventually(ctx, c.from, c.proto, c.to); err != nil {
				t.Errorf("%s -> %s over %s: %v", c.from, c.to, c.proto, err)
			}
		}
	})
	t.Run("a Traceflow between IPv6-only pods is IPv6's without -f ipv6, delivered", func(t *testing.T) {
		e.traceflowDelivered(t, ctx, "a1", "b1", "", true)
	})
	// A figure, not a judge: one TCP stream across the nodes.
	t.Run("figure: a TCP stream across nodes over the IPv6 tunnel", func(t *testing.T) {
		e.startIperfServer(t, ctx, "b1")
		mbits, err := e.iperfMbits(ctx, "a1", b6)
		if err != nil {
			t.Fatalf("iperf3 a1 -> %s: %v", b6, err)
		}
		t.Logf("figure: iperf3 TCP 3 s, a1 (node-1) -> b1 (node-2) at %s, Geneve over IPv6: %.0f Mbit/s", b6, mbits)
	})
	t.Run("a Service's IPv6 ClusterIP answers and the cluster DNS answers AAAA", func(t *testing.T) {
		svc, err := e.Client.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web6"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"pod": "b1"},
				Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(svc.Spec.ClusterIPs) != 1 || net.ParseIP(svc.Spec.ClusterIP).To4() != nil {
			t.Fatalf("Service web6: ClusterIPs %v, want one IPv6 address", svc.Spec.ClusterIPs)
		}
		if err := e.probeEventuallyFor(ctx, 30*time.Second, "a1", "tcp", svc.Spec.ClusterIP); err != nil {
			t.Errorf("a1 -> ClusterIP %s: %v", svc.Spec.ClusterIP, err)
		}
		dns, err := e.Client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rootfs := filepath.Join(filepath.Dir(e.Opts.KubeBinDir), "rootfs-agnhost")
		name := "web6." + namespace + ".svc.cluster.local"
		dig := func(qtype string) (string, error) {
			return e.Exec(ctx, namespace, "a1", "chroot", rootfs, "dig", "+short", "+time=3", "@"+dns.Spec.ClusterIP, name, qtype)
		}
		if out, err := dig("AAAA"); err != nil || !slices.Contains(strings.Fields(out), svc.Spec.ClusterIP) {
			t.Errorf("dig AAAA %s @%s from a pod = %q, %v; want %s", name, dns.Spec.ClusterIP, out, err, svc.Spec.ClusterIP)
		}
		if out, err := dig("A"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("dig A %s from a pod = %q, %v; want no IPv4 answer", name, out, err)
		}
	})
	t.Run("a NodePort answers on each node's IPv6 address", func(t *testing.T) {
		svc, err := e.Client.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "np6"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"pod": "b1"},
				Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		port := fmt.Sprint(svc.Spec.Ports[0].NodePort)
		for _, c := range []struct{ from, to string }{
			{"a1", node6["node-1"]}, {"a1", node6["node-2"]}, {"node-1", node6["node-1"]}, {"node-1", node6["node-2"]},
		} {
			if err := e.connectEventually(ctx, 30*time.Second, c.from, net.JoinHostPort(c.to, port)); err != nil {
				t.Errorf("%s -> the NodePort on %s: %v", c.from, c.to, err)
			}
		}
	})
	t.Run("a NetworkPolicy denies, an IPv6 ipBlock allows", func(t *testing.T) {
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "b1-isolated"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b1"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
		if _, err := e.Client.NetworkingV1().NetworkPolicies(namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.denied(ctx, "a1", b6); err != nil {
			t.Errorf("b1 isolated with no ingress rule: %v", err)
		}
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: a6 + "/128"}}}}}
		if _, err := e.Client.NetworkingV1().NetworkPolicies(namespace).Update(ctx, np, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.probeEventuallyFor(ctx, 20*time.Second, "a1", "tcp", b6); err != nil {
			t.Errorf("an ipBlock of a1's IPv6 address should let a1 reach b1: %v", err)
		}
	})
}
