package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// TestEveryServicePathReachesEveryEndpointOverTCPAndUDP sends connections
// through one Service, over TCP and UDP, from every kind of client a node
// has: a pod on the endpoints' nodes (one on each), a hostNetwork pod (the
// node's own network namespace: what the node's processes see) and an
// endpoint itself (hairpin), to the ClusterIP and to the NodePort of both
// nodes. From each, new connections must reach both endpoints, the one on
// the client's node and the one on the other: upstream's Networking specs
// (pod-Service, node-Service, endpoint-Service, nodePort: udp) fail when one
// of them is never chosen, as it was for UDP (issue 34). The endpoints are
// known from the API objects (pod names), never from the data path.
//
// It runs in `make conformance` (ANTREA_E2E_SERVICE_PATHS=1), not in make
// test, for time: 24 cases of up to 30 connections through kubectl exec.
// (On 2026-12-06 one run saw UDP replies from a pod to the other node's
// NodePort arrive four times over, "web-1web-1web-1web-1"; a later lab
// answered each of 8 datagrams once on all 12 UDP paths by hand, and the
// cause was not found.)
func TestEveryServicePathReachesEveryEndpointOverTCPAndUDP(t *testing.T) {
	if os.Getenv("ANTREA_E2E_SERVICE_PATHS") != "1" {
		t.Skip("runs in make conformance (ANTREA_E2E_SERVICE_PATHS=1): 24 cases, several minutes")
	}
	e := requireReal(t)
	if len(e.Nodes) < 2 {
		t.Skipf("needs two nodes, the lab has %d", len(e.Nodes))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	spec := func(node string, hostNetwork bool, args ...string) corev1.PodSpec {
		return corev1.PodSpec{NodeName: node, HostNetwork: hostNetwork, Containers: []corev1.Container{{
			Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent, Args: args}}}
	}
	ns, pods := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		switch name {
		case "web-1":
			return spec(e.Nodes[0], false, "netexec", "--http-port=8080", "--udp-port=8081")
		case "web-2":
			return spec(e.Nodes[1], false, "netexec", "--http-port=8080", "--udp-port=8081")
		case "client-1":
			return spec(e.Nodes[0], false, "pause")
		case "client-2":
			return spec(e.Nodes[1], false, "pause")
		}
		return spec(e.Nodes[0], true, "pause") // host-1
	}, "web-1", "web-2", "client-1", "client-2", "host-1")
	for _, name := range []string{"web-1", "web-2"} {
		p := pods[name]
		p.Labels["role"] = "paths"
		if _, err := e.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := e.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "paths"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"role": "paths"},
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 90, TargetPort: intstr.FromInt32(8081)},
			}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeIP := map[string]string{}
	for _, p := range pods {
		nodeIP[p.Spec.NodeName] = p.Status.HostIP
	}
	type target struct {
		what  string
		proto corev1.Protocol
		addr  string
	}
	var targets []target
	for _, sp := range svc.Spec.Ports {
		targets = append(targets, target{"ClusterIP", sp.Protocol, net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(sp.Port)))})
		for i, node := range e.Nodes[:2] {
			targets = append(targets, target{fmt.Sprintf("NodePort of node %d", i+1), sp.Protocol, net.JoinHostPort(nodeIP[node], strconv.Itoa(int(sp.NodePort)))})
		}
	}
	// until runs, in the client, one new connection after another (a new
	// source port each) until both endpoints answered or tries ran out,
	// one answer a line (empty when none came).
	const tries = 30
	until := func(ctx context.Context, client string, tg target) (map[string]int, error) {
		var one string
		host, port, _ := net.SplitHostPort(tg.addr)
		if tg.proto == corev1.ProtocolUDP {
			one = fmt.Sprintf("echo hostname | nc -u -w 1 %s %s", host, port)
		} else {
			one = fmt.Sprintf("curl -s -m 2 http://%s/hostname", tg.addr)
		}
		script := fmt.Sprintf(`seen=; for i in $(seq %d); do a=$(%s); echo "$a"; case " $seen " in *" $a "*) ;; *) [ -n "$a" ] && seen="$seen $a" ;; esac; [ $(echo $seen | wc -w) -ge 2 ] && break; done`, tries, one)
		stdout, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, client, "--", "sh", "-c", script)
		counts := map[string]int{}
		for _, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
			counts[strings.TrimSpace(l)]++
		}
		if err != nil {
			return counts, fmt.Errorf("kubectl exec %s: %w (stderr %s)", client, err, stderr)
		}
		return counts, nil
	}
	for _, client := range []string{"client-1", "client-2", "host-1", "web-1"} {
		for _, tg := range targets {
			name := fmt.Sprintf("from %s (%s) to the %s over %s", client, pods[client].Spec.NodeName, tg.what, tg.proto)
			t.Run(name, func(t *testing.T) {
				// A deadline per case, so one path that never answers
				// fails alone instead of using up the others' time.
				ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
				defer cancel()
				// The first attempt may come before the proxy programmed
				// the Service or a neighbour resolved: wait for the first
				// answer, then judge a fresh round.
				labtest.WaitFor(t, ctx, name+": a first answer", func() error {
					counts, err := until(ctx, client, tg)
					if err != nil {
						return err
					}
					if counts["web-1"]+counts["web-2"] == 0 {
						return fmt.Errorf("no answer from %s: %s", tg.addr, sortedCounts(counts))
					}
					return nil
				})
				counts, err := until(ctx, client, tg)
				if err != nil {
					t.Fatal(err)
				}
				for answer := range counts {
					if answer != "" && answer != "web-1" && answer != "web-2" {
						t.Errorf("%s: an answer that is no endpoint's one name (a duplicated datagram?): %q", tg.addr, answer)
					}
				}
				if counts["web-1"] == 0 || counts["web-2"] == 0 {
					t.Errorf("%s: %d new connections should reach both endpoints (web-1 on %s, web-2 on %s), answers: %s",
						tg.addr, tries, e.Nodes[0], e.Nodes[1], sortedCounts(counts))
				}
			})
		}
	}
}
