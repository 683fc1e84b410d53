package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"sort"
	"strconv"
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

// TestServicesAndClusterDNSOnRealNodes uses Services as an application does:
// by ClusterIP and by DNS name from a pod, with endpoints on both nodes.
// What each answer must be comes from the API objects (the Service's
// ClusterIP, the endpoints' pod names), never from the data path.
func TestServicesAndClusterDNSOnRealNodes(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	agnhost := func(node string, args ...string) corev1.PodSpec {
		return corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent, Args: args}}}
	}
	ns, pods := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		switch name {
		case "web-1":
			return agnhost(e.Nodes[0], "netexec", "--http-port=8080", "--udp-port=8081")
		case "web-2":
			return agnhost(e.Nodes[1], "netexec", "--http-port=8080", "--udp-port=8081")
		}
		return agnhost(e.Nodes[0], "pause")
	}, "client", "web-1", "web-2")
	// createPods labels every pod app=e2e; the backends get role=web too.
	for _, name := range []string{"web-1", "web-2"} {
		p := pods[name]
		p.Labels["role"] = "web"
		p.Labels["pod"] = name
		if _, err := e.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	web := createService(t, ctx, e, ns, "web", map[string]string{"role": "web"}, corev1.ServicePort{
		Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)})
	empty := createService(t, ctx, e, ns, "empty", map[string]string{"role": "nobody"}, corev1.ServicePort{
		Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)})
	kubernetes, err := e.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dns, err := e.Client.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the lab has no kube-dns Service: %v", err)
	}
	if dns.Spec.ClusterIP != lab.ClusterDNS {
		t.Fatalf("kube-dns has ClusterIP %s, kubelet gives pods %s", dns.Spec.ClusterIP, lab.ClusterDNS)
	}
	inClient := func(argv ...string) (string, error) {
		stdout, stderr, err := e.Kubectl(ctx, append([]string{"exec", "-n", ns, "client", "--"}, argv...)...)
		if err != nil {
			return stdout, fmt.Errorf("kubectl exec client -- %s: %w\nstdout: %s\nstderr: %s", strings.Join(argv, " "), err, stdout, stderr)
		}
		return stdout, nil
	}
	// hostnames asks url n times, one connection each, and counts the answers.
	hostnames := func(url string, n int) (map[string]int, error) {
		out, err := inClient("sh", "-c", fmt.Sprintf("for i in $(seq %d); do curl -s -m 2 %s; echo; done", n, url))
		counts := map[string]int{}
		// One line per attempt, empty when it got no answer.
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			counts[strings.TrimSpace(l)]++
		}
		return counts, err
	}

	t.Run("a ClusterIP spreads connections over the endpoints on both nodes", func(t *testing.T) {
		labtest.WaitFor(t, ctx, "answers from both endpoints through "+web.Spec.ClusterIP, func() error {
			counts, err := hostnames("http://"+net.JoinHostPort(web.Spec.ClusterIP, "80")+"/hostname", 30)
			if err != nil {
				return err
			}
			if counts["web-1"]+counts["web-2"] != 30 || counts["web-1"] == 0 || counts["web-2"] == 0 {
				return fmt.Errorf("answers %v, want 30 from web-1 and web-2, both", counts)
			}
			return nil
		})
	})
	t.Run("cluster DNS resolves Services by name over UDP and TCP", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"dig", "+short", "+search", "kubernetes.default"}, kubernetes.Spec.ClusterIP},
			{[]string{"dig", "+short", "+tcp", "kubernetes.default.svc.cluster.local"}, kubernetes.Spec.ClusterIP},
			{[]string{"dig", "+short", "+search", "web." + ns}, web.Spec.ClusterIP},
			{[]string{"dig", "+short", "+search", "web"}, web.Spec.ClusterIP},
			{[]string{"getent", "hosts", "web." + ns + ".svc.cluster.local"}, web.Spec.ClusterIP},
		} {
			labtest.WaitFor(t, ctx, strings.Join(c.args, " "), func() error {
				out, err := inClient(c.args...)
				if err != nil {
					return err
				}
				if f := strings.Fields(out); len(f) == 0 || f[0] != c.want {
					return fmt.Errorf("%s answers %q, want %s", strings.Join(c.args, " "), out, c.want)
				}
				return nil
			})
		}
		// And by name, to the endpoints.
		counts, err := hostnames("http://web/hostname", 4)
		if err != nil || counts["web-1"]+counts["web-2"] != 4 {
			t.Errorf("curl http://web/hostname: %v, answers %v", err, counts)
		}
	})
	t.Run("a Service without endpoints refuses a connection at once", func(t *testing.T) {
		to := net.JoinHostPort(empty.Spec.ClusterIP, "80")
		// A TCP reset (AntreaProxy) or an ICMP error (kube-proxy's nftables
		// reject), not a timeout, once the proxy has programmed the Service.
		labtest.WaitFor(t, ctx, "a rejected connection to "+to, func() error {
			stdout, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, "client", "--", "/agnhost", "connect", "--timeout=5s", to)
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || !(strings.Contains(stderr, "REFUSED") || strings.Contains(stderr, "unreachable")) {
				return fmt.Errorf("agnhost connect %s: want REFUSED or unreachable, got %v\nstdout: %s\nstderr: %s", to, err, stdout, stderr)
			}
			return nil
		})
	})
	t.Run("NodePorts from outside the cluster: Local keeps the client's address, Cluster reaches an endpoint elsewhere", func(t *testing.T) {
		// The control plane's netns is a host on the nodes' network that is no
		// node: outside the cluster.
		outside := func(url string) (string, error) {
			out, err := exec.CommandContext(ctx, "ip", "netns", "exec", lab.ControlPlaneNetNS, "curl", "-s", "-m", "2", url).CombinedOutput()
			return strings.TrimSpace(string(out)), err
		}
		nodeIP := map[string]string{}
		for _, p := range []*corev1.Pod{pods["web-1"], pods["web-2"]} {
			nodeIP[p.Spec.NodeName] = p.Status.HostIP
		}
		withEndpoint, without := nodeIP[pods["web-1"].Spec.NodeName], nodeIP[pods["web-2"].Spec.NodeName]
		clientIP := lab.ControlPlaneIP().String()
		for _, policy := range []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyLocal, corev1.ServiceExternalTrafficPolicyCluster} {
			s, err := e.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "np-" + strings.ToLower(string(policy))},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ExternalTrafficPolicy: policy,
					Selector: map[string]string{"pod": "web-1"},
					Ports:    []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			np := strconv.Itoa(int(s.Spec.Ports[0].NodePort))
			// web-1's node answers. Under Local the endpoint sees the client;
			// under Cluster Kubernetes lets the proxy hide it (kube-proxy
			// masquerades, AntreaProxy keeps it for a local endpoint).
			labtest.WaitFor(t, ctx, fmt.Sprintf("%s NodePort on web-1's node from outside", policy), func() error {
				out, err := outside("http://" + net.JoinHostPort(withEndpoint, np) + "/clientip")
				if err != nil || out == "" {
					return fmt.Errorf("/clientip through %s:%s answers %q (%v)", withEndpoint, np, out, err)
				}
				if policy == corev1.ServiceExternalTrafficPolicyLocal && !strings.HasPrefix(out, clientIP+":") {
					return fmt.Errorf("Local: /clientip through %s:%s answers %q, want the client %s", withEndpoint, np, out, clientIP)
				}
				return nil
			})
			out, err := outside("http://" + net.JoinHostPort(without, np) + "/clientip")
			switch policy {
			case corev1.ServiceExternalTrafficPolicyLocal:
				// No endpoint on that node: the connection must not be served.
				if err == nil {
					t.Errorf("Local: the node without an endpoint (%s:%s) answered %q; it must not forward", without, np, out)
				}
			default:
				// Forwarded to the other node's endpoint, source-NATed so that
				// the reply comes back the same way.
				if err != nil || out == "" || strings.HasPrefix(out, clientIP+":") {
					t.Errorf("Cluster: /clientip through %s:%s answers %q (%v), want an address other than the client's %s", without, np, out, err, clientIP)
				}
			}
		}
	})
	t.Run("a NetworkPolicy on the endpoints applies to connections through the ClusterIP", func(t *testing.T) {
		// Ingress to the web pods only from pods labelled access=web: the
		// client, unlabelled, is refused by policy after the Service's DNAT.
		np := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "web-ingress"},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
					PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"access": "web"}}}}}},
			},
		}
		if _, err := e.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		url := "http://" + net.JoinHostPort(web.Spec.ClusterIP, "80") + "/hostname"
		labtest.WaitFor(t, ctx, "the client denied through the ClusterIP", func() error {
			counts, _ := hostnames(url, 4)
			if counts[""] != 4 {
				return fmt.Errorf("answers %v, want none (the policy denies the client)", sortedCounts(counts))
			}
			return nil
		})
		client, err := e.Client.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		client.Labels["access"] = "web"
		if _, err := e.Client.CoreV1().Pods(ns).Update(ctx, client, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		labtest.WaitFor(t, ctx, "the client allowed through the ClusterIP once labelled", func() error {
			counts, _ := hostnames(url, 10)
			if counts["web-1"]+counts["web-2"] != 10 {
				return fmt.Errorf("answers %v, want 10 from web-1 and web-2", sortedCounts(counts))
			}
			return nil
		})
		if err := e.Client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ClientIP session affinity sends every connection to one endpoint", func(t *testing.T) {
		timeout := int32(600)
		s, err := e.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}}
		if _, err := e.Client.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		labtest.WaitFor(t, ctx, "15 identical answers", func() error {
			counts, err := hostnames("http://"+net.JoinHostPort(web.Spec.ClusterIP, "80")+"/hostname", 15)
			if err != nil {
				return err
			}
			if len(counts) != 1 || (counts["web-1"] != 15 && counts["web-2"] != 15) {
				return fmt.Errorf("answers %v, want 15 from one endpoint", sortedCounts(counts))
			}
			return nil
		})
	})
}

func createService(t *testing.T, ctx context.Context, e *labEnv, ns, name string, selector map[string]string, ports ...corev1.ServicePort) *corev1.Service {
	t.Helper()
	s, err := e.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: ports},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service %s/%s: %v", ns, name, err)
	}
	return s
}

func sortedCounts(m map[string]int) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+strconv.Itoa(v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
