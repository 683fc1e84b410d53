package datapath

import (
	"context"
	"encoding/json"
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

// envIPFamily, set to "dual", brings TestDualStack's lab up (make
// conformance): `antrea-lab up --ip-family dual`, two real nodes whose
// pods have an IPv4 and an IPv6 address, over the IPv4 underlay
// (docs/ipv6.md); set to "ipv6", TestIPv6Only's: `antrea-lab up
// --ip-family ipv6`, an IPv6-only cluster. About two minutes each.
const envIPFamily = "ANTREA_E2E_IP_FAMILY"

// TestDualStack: on a dual-stack lab every node has a pod CIDR of each
// family and its gateway an address of each; pods on two nodes reach each
// other over IPv6 (ICMPv6 and TCP) as over IPv4, and a node reaches its
// own and a remote pod over IPv6; the nodes are dual-stack (an IPv4 and
// an IPv6 InternalIP), a NodePort answers on each node's IPv6 address
// from a pod and from a node, and a pod's IPv6 traffic to a host outside
// the cluster leaves from its node's IPv6 address; a dual-stack Service's
// IPv6 ClusterIP answers, and the cluster DNS answers AAAA for its name
// with it; a NetworkPolicy that isolates a pod denies IPv6
// as it denies IPv4, an ipBlock of the client's IPv6 address lets IPv6
// alone through, and a pod peer lets both families through.
func TestDualStack(t *testing.T) {
	if os.Getenv(envIPFamily) != lab.IPFamilyDual {
		t.Skipf("the dual-stack lab runs under %s=dual (make conformance)", envIPFamily)
	}
	opts := labtest.Options()
	opts.IPFamily = lab.IPFamilyDual
	e := upWith(t, opts, "geneve, dual-stack")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	for _, name := range e.Nodes {
		node, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(node.Spec.PodCIDRs) != 2 || net.ParseIP(trimCIDR(node.Spec.PodCIDRs[1])).To4() != nil {
			t.Fatalf("node %s: podCIDRs %v, want an IPv4 and an IPv6 one", name, node.Spec.PodCIDRs)
		}
		gw6 := gatewayOf(node.Spec.PodCIDRs[1])
		out, err := exec.CommandContext(ctx, "ip", "-n", lab.NodeNetNS(name), "-6", "-o", "addr", "show", "dev", "antrea-gw0").CombinedOutput()
		if err != nil || !slices.Contains(strings.Fields(string(out)), gw6+"/64") {
			t.Fatalf("node %s: antrea-gw0 lacks its IPv6 address %s/64: %v\n%s", name, gw6, err, out)
		}
	}
	e.createPods(t, ctx, map[string]*corev1.Pod{
		"a1": pinned("node-1"),
		"b1": pinned("node-2"),
	})
	ip6 := func(pod string) string {
		for _, ip := range e.pods[pod].Status.PodIPs {
			if net.ParseIP(ip.IP).To4() == nil {
				return ip.IP
			}
		}
		t.Fatalf("pod %s has no IPv6 address: %v", pod, e.pods[pod].Status.PodIPs)
		return ""
	}
	a6, b6 := ip6("a1"), ip6("b1")
	t.Run("pods on two nodes reach each other over IPv6 as over IPv4", func(t *testing.T) {
		for _, c := range []struct{ from, proto, to string }{
			{"a1", "icmp", b6}, {"a1", "tcp", b6}, {"b1", "tcp", a6}, {"a1", "udp", b6},
			{"a1", "tcp", e.ip("b1")},
			// The node's own IPv6 traffic: to its pod over the gateway's
			// subnet, to a remote pod by the route via the peer's pinned
			// IPv6 gateway (pkg/agent/route).
			{"node-1", "tcp", a6}, {"node-1", "tcp", b6},
		} {
			if err := e.probeEventually(ctx, c.from, c.proto, c.to); err != nil {
				t.Errorf("%s -> %s over %s: %v", c.from, c.to, c.proto, err)
			}
		}
	})
	t.Run("an IPv6 Traceflow across the nodes is delivered, the IPv4 one beside it", func(t *testing.T) {
		e.traceflowDelivered(t, ctx, "a1", "b1", "ipv6,tcp,tcp_dst=80", true)
		e.traceflowDelivered(t, ctx, "a1", "b1", "tcp,tcp_dst=80", false)
	})
	// A figure, not a judge (no assertion on it): one TCP stream across
	// the nodes over IPv4 and over IPv6, same pods, same run.
	t.Run("figure: a TCP stream across nodes, IPv6 next to IPv4", func(t *testing.T) {
		e.startIperfServer(t, ctx, "b1")
		for _, to := range []string{e.ip("b1"), b6} {
			mbits, err := e.iperfMbits(ctx, "a1", to)
			if err != nil {
				t.Fatalf("iperf3 a1 -> %s: %v", to, err)
			}
			t.Logf("figure: iperf3 TCP 3 s, a1 (node-1) -> b1 (node-2) at %s: %.0f Mbit/s", to, mbits)
		}
	})
	t.Run("a dual-stack Service's IPv6 ClusterIP answers", func(t *testing.T) {
		policy := corev1.IPFamilyPolicyRequireDualStack
		svc, err := e.Client.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web6"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"pod": "b1"}, IPFamilyPolicy: &policy,
				Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(svc.Spec.ClusterIPs) != 2 {
			t.Fatalf("Service web6: ClusterIPs %v, want one of each family", svc.Spec.ClusterIPs)
		}
		for _, vip := range svc.Spec.ClusterIPs {
			if err := e.probeEventuallyFor(ctx, 30*time.Second, "a1", "tcp", vip); err != nil {
				t.Errorf("a1 -> ClusterIP %s: %v", vip, err)
			}
		}
		// The cluster DNS answers the Service's name with its IPv6
		// ClusterIP (AAAA), asked from a1's network namespace by the dig
		// of the agnhost image's root filesystem (the host has none).
		dns, err := e.Client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rootfs := filepath.Join(filepath.Dir(e.Opts.KubeBinDir), "rootfs-agnhost")
		out, err := e.Exec(ctx, namespace, "a1", "chroot", rootfs, "dig", "+short", "+time=3", "@"+dns.Spec.ClusterIP,
			"web6."+namespace+".svc.cluster.local", "AAAA")
		if err != nil || !slices.Contains(strings.Fields(out), svc.Spec.ClusterIPs[1]) {
			t.Errorf("dig AAAA web6 from a pod = %q, %v; want %s", out, err, svc.Spec.ClusterIPs[1])
		}
	})
	t.Run("the nodes are dual-stack: NodePorts on their IPv6 addresses, pods' IPv6 traffic leaving from them", func(t *testing.T) {
		// Each node's InternalIPs: its IPv4 underlay address first, then
		// its IPv6 one (docs/ipv6.md: fd00:172:30:C::D for 172.30.C.D).
		node6 := map[string]string{}
		for _, name := range e.Nodes {
			node, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var internal []string
			for _, a := range node.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					internal = append(internal, a.Address)
				}
			}
			if len(internal) != 2 || net.ParseIP(internal[0]).To4() == nil || internal[1] != lab.UnderlayIPv6(internal[0]).String() {
				t.Fatalf("node %s: InternalIPs %v, want its IPv4 underlay address and then its IPv6 one", name, internal)
			}
			node6[name] = internal[1]
		}
		// A dual-stack NodePort Service whose endpoint is b1 (node-2),
		// reached on each node's IPv6 address: from a pod (to its own
		// node, and to the other node, where it arrives masqueraded) and
		// from a node (the node path's IPv6 DNAT).
		policy := corev1.IPFamilyPolicyRequireDualStack
		svc, err := e.Client.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "np6"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"pod": "b1"}, IPFamilyPolicy: &policy,
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
		// The outside host (not in the cluster) sees a pod's IPv6
		// connection come from the pod's node's IPv6 address.
		url := fmt.Sprintf("http://%s/clientip", net.JoinHostPort(lab.UnderlayIPv6(lab.OutsideIP().String()).String(), fmt.Sprint(lab.OutsideHTTPPort)))
		out, err := e.Exec(ctx, namespace, "a1", "curl", "-sS", "-g", "-m", "5", url)
		host, _, _ := net.SplitHostPort(strings.TrimSpace(out))
		if err != nil || host != node6["node-1"] {
			t.Errorf("curl %s from a1 (node-1): the outside host saw %q (%v), want node-1's IPv6 address %s", url, out, err, node6["node-1"])
		}
	})
	t.Run("a NetworkPolicy denies IPv6 as it denies IPv4", func(t *testing.T) {
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "b1-from-a1-ipv6-only"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b1"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
		if _, err := e.Client.NetworkingV1().NetworkPolicies(namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{b6, e.ip("b1")} {
			if err := e.denied(ctx, "a1", to); err != nil {
				t.Errorf("b1 isolated with no ingress rule: %v", err)
			}
		}
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: a6 + "/128"}}}}}
		if _, err := e.Client.NetworkingV1().NetworkPolicies(namespace).Update(ctx, np, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.probeEventuallyFor(ctx, 20*time.Second, "a1", "tcp", b6); err != nil {
			t.Errorf("an ipBlock of a1's IPv6 address should let a1 reach b1 over IPv6: %v", err)
		}
		if err := e.denied(ctx, "a1", e.ip("b1")); err != nil {
			t.Errorf("the ipBlock is IPv6 only: %v", err)
		}
		// A pod peer: a1's addresses of both families (its AddressGroup
		// member carries both), so a1 reaches b1 over each.
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a1"}}}}}}
		if _, err := e.Client.NetworkingV1().NetworkPolicies(namespace).Update(ctx, np, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{e.ip("b1"), b6} {
			if err := e.probeEventuallyFor(ctx, 20*time.Second, "a1", "tcp", to); err != nil {
				t.Errorf("a pod peer a1 should let a1 reach b1 at %s: %v", to, err)
			}
		}
	})
}

// traceflowDelivered runs bin/antctl traceflow from pod src to pod dst
// (of namespace) with -f flow, as a user does, and fails unless it
// Succeeded with the packet tunnelled from src's node and delivered to dst,
// traced over IPv6 when v6 (antctl says "(IPv6)" after the destination).
func (e *env) traceflowDelivered(t *testing.T, ctx context.Context, src, dst, flow string, v6 bool) {
	t.Helper()
	args := []string{"--kubeconfig", e.Opts.KubeconfigPath(), "traceflow", "-S", namespace + "/" + src, "-D", namespace + "/" + dst}
	if flow != "" {
		args = append(args, "-f", flow)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(e.Opts.BinDir, "antctl"), args...).CombinedOutput()
	t.Logf("$ antctl %s\n%s", strings.Join(args[2:], " "), out)
	if err != nil {
		t.Fatalf("antctl traceflow: %v", err)
	}
	dest := "destination: " + namespace + "/" + dst + "\n"
	if v6 {
		dest = "destination: " + namespace + "/" + dst + " (IPv6)\n"
	}
	for _, want := range []string{"phase: Succeeded", dest, "Forwarded   tunnel to ", "Delivered   pod " + namespace + "/" + dst} {
		if !strings.Contains(string(out), want) {
			t.Errorf("antctl traceflow -f %q: the output lacks %q", flow, want)
		}
	}
}

// connectEventually connects over TCP from a pod, or from a node's network
// namespace ("node-N"), to addr (host:port) until it succeeds or d passes.
func (e *env) connectEventually(ctx context.Context, d time.Duration, from, addr string) error {
	argv := []string{filepath.Join(e.Opts.BinDir, "antrea-testpod"), "connect", "--protocol", "tcp", "--to", addr, "--timeout", "2s"}
	deadline := time.Now().Add(d)
	for {
		var out []byte
		var err error
		if strings.HasPrefix(from, "node-") {
			out, err = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", lab.NetNSPrefix + from}, argv...)...).CombinedOutput()
		} else {
			var s string
			s, err = e.Exec(ctx, namespace, from, argv...)
			out = []byte(s)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s -> %s: %v: %s", from, addr, err, strings.TrimSpace(string(out)))
		}
		time.Sleep(time.Second)
	}
}

// iperfMbits runs a 3-second iperf3 TCP stream from a pod's network
// namespace to addr (an iperf3 server there) and returns what the
// receiver got, in Mbit/s.
func (e *env) iperfMbits(ctx context.Context, from, addr string) (float64, error) {
	netns, err := labtest.PodNetNS(e.pods[from])
	if err != nil {
		return 0, err
	}
	out, err := exec.CommandContext(ctx, "nsenter", "--net="+netns, "--", "iperf3", "-c", addr, "-t", "3", "-J").Output()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("iperf3 -J output: %v", err)
	}
	return r.End.SumReceived.BitsPerSecond / 1e6, nil
}

// probeEventuallyFor probes until it succeeds or d passes (a policy or
// Service the agents realize meanwhile).
func (e *env) probeEventuallyFor(ctx context.Context, d time.Duration, from, proto, to string) error {
	deadline := time.Now().Add(d)
	for {
		err := e.probe(ctx, from, proto, to)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

// denied waits (up to 20 s, while the agents realize a policy) until TCP
// from a pod to an address fails, then checks it keeps failing.
func (e *env) denied(ctx context.Context, from, to string) error {
	deadline := time.Now().Add(20 * time.Second)
	for e.probe(ctx, from, "tcp", to) == nil {
		if time.Now().After(deadline) {
			return &deniedError{from: from, to: to}
		}
		time.Sleep(time.Second)
	}
	for i := 0; i < 2; i++ {
		if e.probe(ctx, from, "tcp", to) == nil {
			return &deniedError{from: from, to: to}
		}
	}
	return nil
}

type deniedError struct{ from, to string }

func (d *deniedError) Error() string { return d.from + " still reaches " + d.to + " over TCP" }

func trimCIDR(cidr string) string {
	ip, _, _ := net.ParseCIDR(cidr)
	return ip.String()
}

// gatewayOf is a pod CIDR's first address, which antrea-gw0 holds.
func gatewayOf(cidr string) string {
	_, n, _ := net.ParseCIDR(cidr)
	ip := append(net.IP(nil), n.IP...)
	ip[len(ip)-1]++
	return ip.String()
}
