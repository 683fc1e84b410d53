package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

// TestAntreaPolicyAppliedToANodePortService applies upstream's example of
// docs/antrea-network-policy.md, "Apply to NodePort Service" (an ACNP in
// securityops whose appliedTo is a NodePort Service, dropping an ipBlock),
// unchanged but for names and the CIDR, on the lab's real nodes: the
// control plane's netns, a host on the nodes' network that is no node, is
// the client inside the ipBlock; a pod on another node than the endpoint's
// is a client outside it (its connection to the NodePort leaves its node
// masqueraded to that node's address). What each must see follows from the
// doc: the rule applies to that Service's NodePort traffic from external
// clients, only to sources in its ipBlock; other Services are unaffected.
func TestAntreaPolicyAppliedToANodePortService(t *testing.T) {
	e := requireReal(t)
	if e.Opts.Proxy == lab.ProxyKube {
		t.Skip("policies applied to NodePort Services need AntreaProxy with proxyAll (upstream's restriction 1); the lab runs kube-proxy")
	}
	if len(e.Nodes) < 2 {
		t.Skip("needs two nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns, pods := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		spec := corev1.PodSpec{NodeName: e.Nodes[1], Containers: []corev1.Container{{
			Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}}}
		if name == "web" {
			spec.NodeName = e.Nodes[0]
			spec.Containers[0].Args = []string{"netexec", "--http-port=8080"}
		}
		return spec
	}, "web", "client")
	nodePortOf := func(name string) string {
		t.Helper()
		s, err := e.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"role": "web"},
				Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return strconv.Itoa(int(s.Spec.Ports[0].NodePort))
	}
	// The Services select web alone (createPods labels every pod app=e2e).
	web := pods["web"]
	web.Labels["role"] = "web"
	if _, err := e.Client.CoreV1().Pods(ns).Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	webNP, otherNP := nodePortOf("web-np"), nodePortOf("other-np")
	// web's node, and the other node, which forwards to web (through the
	// tunnel): the policy applies on every node.
	nodeIP, otherNodeIP := pods["web"].Status.HostIP, pods["client"].Status.HostIP
	cpIP := lab.ControlPlaneIP().String()

	// fromOutside connects from the control plane's netns: "web" (the
	// answer's hostname), "refused" (curl 7) or "timeout" (curl 28).
	fromOutside := func(node, port string) string {
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", lab.ControlPlaneNetNS, "curl", "-s", "-m", "2",
			"http://"+net.JoinHostPort(node, port)+"/hostname").CombinedOutput()
		var exitErr *exec.ExitError
		switch {
		case err == nil:
			return strings.TrimSpace(string(out))
		case errors.As(err, &exitErr) && exitErr.ExitCode() == 7:
			return "refused"
		case errors.As(err, &exitErr) && exitErr.ExitCode() == 28:
			return "timeout"
		}
		return fmt.Sprintf("error %v: %s", err, out)
	}
	fromPod := func(port string) string {
		stdout, _, err := e.Kubectl(ctx, "exec", "-n", ns, "client", "--", "curl", "-s", "-m", "2", "http://"+net.JoinHostPort(nodeIP, port)+"/hostname")
		if err != nil {
			return "no answer"
		}
		return strings.TrimSpace(stdout)
	}
	expect := func(what string, want map[string]string) {
		t.Helper()
		start := time.Now()
		// Each step has its own bound, so a failure reports what the
		// clients last saw, and the nodes' flows.
		stepCtx, stepCancel := context.WithTimeout(ctx, 90*time.Second)
		defer stepCancel()
		err := labtest.Poll(stepCtx, what, func() error {
			got := map[string]string{
				"outside->web-np":            fromOutside(nodeIP, webNP),
				"outside->web-np@other-node": fromOutside(otherNodeIP, webNP),
				"outside->other-np":          fromOutside(nodeIP, otherNP),
				"pod->web-np":                fromPod(webNP),
			}
			for k, w := range want {
				if got[k] != w {
					return fmt.Errorf("got %v, want %v", got, want)
				}
			}
			return nil
		})
		if err != nil {
			var flows strings.Builder
			for _, n := range e.Nodes {
				out, _ := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "unix:"+e.BridgeSocket(n)).CombinedOutput()
				fmt.Fprintf(&flows, "%s:\n%s\n", n, out)
			}
			t.Fatalf("%v\nflows:\n%s", err, flows.String())
		}
		t.Logf("%s: as wanted after %v", what, time.Since(start).Round(time.Millisecond))
	}
	everyone := map[string]string{"outside->web-np": "web", "outside->web-np@other-node": "web", "outside->other-np": "web", "pod->web-np": "web"}
	expect("without policy every client reaches both NodePorts", everyone)

	name := "nodeport-" + ns
	apply := func(action string) {
		t.Helper()
		yaml := fmt.Sprintf(`apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata:
  name: %s
spec:
  priority: 5
  tier: securityops
  appliedTo:
    - service:
        name: web-np
        namespace: %s
  ingress:
    - action: %s
      from:
        - ipBlock:
            cidr: %s/32
`, name, ns, action, cpIP)
		file := filepath.Join(t.TempDir(), "acnp.yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if stdout, stderr, err := e.Kubectl(ctx, "apply", "-f", file); err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, stdout, stderr)
		}
		labtest.WaitFor(t, ctx, "acnp "+name+" Realized on every node", func() error {
			stdout, stderr, err := e.Kubectl(ctx, "get", "acnp", name, "-o",
				"jsonpath={.status.phase} {.status.currentNodesRealized}/{.status.desiredNodesRealized} {.status.observedGeneration}/{.metadata.generation}")
			if err != nil {
				return fmt.Errorf("%v: %s", err, stderr)
			}
			if want := fmt.Sprintf("Realized %d/%d", len(e.Nodes), len(e.Nodes)); !strings.HasPrefix(stdout, want) {
				return fmt.Errorf("status %q, want %s (the Service's NodePort is on every node)", stdout, want)
			}
			if f := strings.Fields(stdout); len(f) != 3 || strings.Split(f[2], "/")[0] != strings.Split(f[2], "/")[1] {
				return fmt.Errorf("status %q is of an older generation", stdout)
			}
			return nil
		})
	}
	t.Cleanup(func() { _, _, _ = e.Kubectl(context.Background(), "delete", "acnp", name, "--ignore-not-found") })

	apply("Drop")
	expect("Drop: the outside client in the ipBlock times out on web-np only; the pod's node, outside the ipBlock, still connects",
		map[string]string{"outside->web-np": "timeout", "outside->web-np@other-node": "timeout", "outside->other-np": "web", "pod->web-np": "web"})
	apply("Reject")
	expect("Reject: the outside client in the ipBlock is refused on web-np",
		map[string]string{"outside->web-np": "refused", "outside->web-np@other-node": "refused", "outside->other-np": "web", "pod->web-np": "web"})
	if stdout, stderr, err := e.Kubectl(ctx, "delete", "acnp", name); err != nil {
		t.Fatalf("kubectl delete acnp: %v\n%s%s", err, stdout, stderr)
	}
	expect("without the policy every client reaches both NodePorts again", everyone)
}
