package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// TestHostPortsOnRealNodes exposes pods through every hostPort form kubelet
// passes to CNI (runtimeConfig.portMappings): hostIP unset, the node's IP,
// 127.0.0.1; TCP and UDP; the same port with different protocols and
// hostIPs (the upstream Conformance spec "HostPort validates that there is
// no conflict between pods with same hostPort but different hostIP and
// protocol"), probed from a hostNetwork pod on the pods' node and from one
// on the other node. Each answer is the pod's hostname (agnhost netexec),
// so each probe says which mapping the node applied.
func TestHostPortsOnRealNodes(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	node, other := e.Nodes[0], e.Nodes[1]
	nodeIP := internalIP(t, ctx, e, node)
	const port, anyPort = 54323, 54324
	agnhost := func(ports []corev1.ContainerPort, args ...string) corev1.PodSpec {
		return corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "agnhost", Image: lab.AgnhostImage,
			ImagePullPolicy: corev1.PullIfNotPresent, Args: args, Ports: ports}}}
	}
	hostPort := func(proto corev1.Protocol, hostIP string, host, container int32) corev1.ContainerPort {
		return corev1.ContainerPort{Protocol: proto, HostIP: hostIP, HostPort: host, ContainerPort: container}
	}
	prober := func(on string) corev1.PodSpec {
		return corev1.PodSpec{NodeName: on, HostNetwork: true, Containers: []corev1.Container{{Name: "agnhost", Image: lab.AgnhostImage,
			ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}}}
	}
	ns, _ := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		switch name {
		case "loopback-tcp":
			return agnhost([]corev1.ContainerPort{hostPort(corev1.ProtocolTCP, "127.0.0.1", port, 8080)}, "netexec", "--http-port=8080")
		case "nodeip-tcp":
			return agnhost([]corev1.ContainerPort{hostPort(corev1.ProtocolTCP, nodeIP, port, 8080)}, "netexec", "--http-port=8080")
		case "nodeip-udp":
			return agnhost([]corev1.ContainerPort{hostPort(corev1.ProtocolUDP, nodeIP, port, 8081)}, "netexec", "--http-port=8080", "--udp-port=8081")
		case "any":
			return agnhost([]corev1.ContainerPort{hostPort(corev1.ProtocolTCP, "", anyPort, 8080), hostPort(corev1.ProtocolUDP, "", anyPort, 8081)},
				"netexec", "--http-port=8080", "--udp-port=8081")
		case "host-same":
			return prober(node)
		}
		return prober(other)
	}, "loopback-tcp", "nodeip-tcp", "nodeip-udp", "any", "host-same", "host-other")

	// ask sends one request from a hostNetwork pod: HTTP GET /hostname
	// over TCP, "hostName" over UDP; "" when nothing answered.
	ask := func(from, proto, host string, p int) string {
		addr := net.JoinHostPort(host, fmt.Sprint(p))
		argv := []string{"curl", "-s", "-m", "2", "http://" + addr + "/hostname"}
		if proto == "udp" {
			argv = []string{"sh", "-c", fmt.Sprintf("echo hostName | nc -w 1 -u %s %d", host, p)}
		}
		stdout, _, err := e.Kubectl(ctx, append([]string{"exec", "-n", ns, from, "--"}, argv...)...)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(stdout)
	}
	for _, c := range []struct {
		from, proto, host string
		port              int
		want              string
	}{
		{"host-same", "tcp", "127.0.0.1", port, "loopback-tcp"},
		{"host-same", "tcp", nodeIP, port, "nodeip-tcp"},
		{"host-same", "udp", nodeIP, port, "nodeip-udp"},
		{"host-same", "tcp", "127.0.0.1", anyPort, "any"},
		{"host-same", "tcp", nodeIP, anyPort, "any"},
		{"host-same", "udp", nodeIP, anyPort, "any"},
		{"host-other", "tcp", nodeIP, port, "nodeip-tcp"},
		{"host-other", "udp", nodeIP, port, "nodeip-udp"},
		{"host-other", "tcp", nodeIP, anyPort, "any"},
		{"host-other", "udp", nodeIP, anyPort, "any"},
	} {
		name := fmt.Sprintf("%s reaches %s %s:%d (%s)", c.from, c.proto, c.host, c.port, c.want)
		t.Run(name, func(t *testing.T) {
			labtest.WaitFor(t, ctx, name, func() error {
				if got := ask(c.from, c.proto, c.host, c.port); got != c.want {
					return fmt.Errorf("answer %q, want %q", got, c.want)
				}
				return nil
			})
		})
	}

	t.Run("a deleted pod's hostPort stops answering", func(t *testing.T) {
		if err := e.Client.CoreV1().Pods(ns).Delete(ctx, "nodeip-tcp", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		labtest.WaitFor(t, ctx, "no answer on "+nodeIP+" after DEL", func() error {
			if got := ask("host-other", "tcp", nodeIP, port); got != "" {
				return fmt.Errorf("%s:%d still answers %q", nodeIP, port, got)
			}
			return nil
		})
		// The other forms of the same port are untouched.
		if got := ask("host-same", "tcp", "127.0.0.1", port); got != "loopback-tcp" {
			t.Errorf("127.0.0.1:%d answers %q after deleting nodeip-tcp, want loopback-tcp", port, got)
		}
	})
}

// internalIP is the InternalIP of a node.
func internalIP(t *testing.T, ctx context.Context, e *labEnv, name string) string {
	t.Helper()
	n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP", name)
	return ""
}
