package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// TestNodeNetworkPolicy applies upstream's two examples of
// docs/antrea-node-network-policy.md, unchanged but for the Nodes'
// hostnames, to the lab's first node. restrict-http-to-node (port 80 of the
// Node, which a hostNetwork pod serves, allowed from 10.10.0.0/16, dropped
// from anywhere else): the lab's pods are in 10.10.0.0/16, so a pod on that
// node, reaching the port from its own address through the gateway, stays
// allowed; a pod on the other node (masqueraded to that node's address),
// the other node itself and the lab's outside host are dropped.
// egress-drop-node-to-node drops the first node's connections to port 22 of
// the other node (a hostNetwork pod serves it there), and nothing else.
// Then a deny-all Node policy (every packet in and out): the node stays
// Ready (kubelet renews its Lease) and kubectl exec into its pods works,
// while everything else to and from it is dropped. It takes about a
// minute (pods, policy realization, a Lease renewal): run with
// ANTREA_E2E_NODE_POLICY=1 (make conformance does).
func TestNodeNetworkPolicy(t *testing.T) {
	if os.Getenv("ANTREA_E2E_NODE_POLICY") != "1" {
		t.Skip("set ANTREA_E2E_NODE_POLICY=1 (make conformance does): about a minute")
	}
	e := requireReal(t)
	if len(e.Nodes) < 2 {
		t.Skip("needs two nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	node, other := e.Nodes[0], e.Nodes[1]
	ns, pods := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		spec := corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}}}
		switch name {
		case "server":
			// The Node's own port 80.
			spec.HostNetwork = true
			spec.Containers[0].Args = []string{"netexec", "--http-port=80"}
		case "remote":
			spec.NodeName = other
		case "otherhost":
			// The other Node itself, serving its port 22 (upstream's
			// second example drops the first Node's connections to it).
			spec.NodeName, spec.HostNetwork = other, true
			spec.Containers[0].Args = []string{"netexec", "--http-port=22", "--udp-port=8082"}
		}
		return spec
	}, "server", "local", "remote", "otherhost")
	nodeIP, otherIP := pods["server"].Status.HostIP, pods["remote"].Status.HostIP

	// curl runs curl in a pod: "ok" (an HTTP answer), "refused" (exit 7)
	// or "timeout" (exit 28).
	curl := func(pod, url string) string {
		_, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, pod, "--", "curl", "-s", "-k", "-o", "/dev/null", "-m", "2", url)
		var exitErr *exec.ExitError
		switch {
		case err == nil:
			return "ok"
		case errors.As(err, &exitErr) && exitErr.ExitCode() == 7:
			return "refused"
		case errors.As(err, &exitErr) && exitErr.ExitCode() == 28:
			return "timeout"
		}
		return fmt.Sprintf("error %v: %s", err, stderr)
	}
	// fromOutside is curl from the lab's outside host (on the nodes'
	// network, no node, not the API server).
	fromOutside := func(url string) string {
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", lab.OutsideNetNS, "curl", "-s", "-o", "/dev/null", "-m", "2", url).CombinedOutput()
		var exitErr *exec.ExitError
		switch {
		case err == nil:
			return "ok"
		case errors.As(err, &exitErr) && exitErr.ExitCode() == 7:
			return "refused"
		case errors.As(err, &exitErr) && exitErr.ExitCode() == 28:
			return "timeout"
		}
		return fmt.Sprintf("error %v: %s", err, out)
	}
	port80 := "http://" + net.JoinHostPort(nodeIP, "80") + "/hostname"
	// The node's own connection out: the other node's kubelet answers
	// (401) when reachable.
	nodeOut := "https://" + net.JoinHostPort(otherIP, "10250") + "/healthz"
	otherSSH := "http://" + net.JoinHostPort(otherIP, "22") + "/hostname"
	expect := func(what string, want map[string]string) {
		t.Helper()
		stepCtx, stepCancel := context.WithTimeout(ctx, 60*time.Second)
		defer stepCancel()
		start := time.Now()
		err := labtest.Poll(stepCtx, what, func() error {
			got := map[string]string{
				"local pod->node:80":  curl("local", port80),
				"remote pod->node:80": curl("remote", port80),
				"node->other kubelet": curl("server", nodeOut),
				"outside->node:80":    fromOutside(port80),
				"other node->node:80": curl("otherhost", port80),
				"node->other node:22": curl("server", otherSSH),
			}
			for k, w := range want {
				if got[k] != w {
					return fmt.Errorf("got %v, want %v", got, want)
				}
			}
			return nil
		})
		if err != nil {
			out, _ := nodeTable(ctx, node)
			t.Fatalf("%v\nthe node's table:\n%s", err, out)
		}
		t.Logf("%s: as wanted after %v", what, time.Since(start).Round(time.Millisecond))
	}
	everyone := map[string]string{"local pod->node:80": "ok", "remote pod->node:80": "ok", "node->other kubelet": "ok", "outside->node:80": "ok",
		"other node->node:80": "ok", "node->other node:22": "ok"}
	expect("without policy", everyone)

	apply := func(name, yaml string) {
		t.Helper()
		file := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _, _ = e.Kubectl(context.Background(), "delete", "acnp", name, "--ignore-not-found") })
		if stdout, stderr, err := e.Kubectl(ctx, "apply", "-f", file); err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, stdout, stderr)
		}
		labtest.WaitFor(t, ctx, "acnp "+name+" Realized on its node", func() error {
			stdout, stderr, err := e.Kubectl(ctx, "get", "acnp", name, "-o",
				"jsonpath={.status.phase} {.status.currentNodesRealized}/{.status.desiredNodesRealized}")
			if err != nil {
				return fmt.Errorf("%v: %s", err, stderr)
			}
			if stdout != "Realized 1/1" {
				return fmt.Errorf("status %q, want Realized 1/1 (the one node selected)", stdout)
			}
			return nil
		})
	}
	apply("restrict-http-to-node", fmt.Sprintf(`apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata:
  name: restrict-http-to-node
spec:
  priority: 5
  tier: application
  appliedTo:
    - nodeSelector:
        matchLabels:
          kubernetes.io/hostname: %s
  ingress:
    - name: allow-cidr
      action: Allow
      from:
        - ipBlock:
            cidr: 10.10.0.0/16
      ports:
        - protocol: TCP
          port: 80
    - name: drop-other
      action: Drop
      ports:
        - protocol: TCP
          port: 80
`, node))
	expect("restrict-http-to-node", map[string]string{"local pod->node:80": "ok", "remote pod->node:80": "timeout", "node->other kubelet": "ok", "outside->node:80": "timeout",
		"other node->node:80": "timeout", "node->other node:22": "ok"})

	// Upstream's second example, unchanged but for the hostnames: the
	// Node's own connections to port 22 of the other Node are dropped,
	// the rest of its traffic to it is not.
	apply("egress-drop-node-to-node", fmt.Sprintf(`apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata:
  name: egress-drop-node-to-node
spec:
  priority: 5
  tier: application
  appliedTo:
    - nodeSelector:
        matchLabels:
          kubernetes.io/hostname: %s
  egress:
    - name: drop-22
      action: Drop
      to:
        - nodeSelector:
            matchLabels:
              kubernetes.io/hostname: %s
        - ipBlock:
            cidr: 192.168.77.0/24
        - ipBlock:
            cidr: 10.10.0.0/24
      ports:
        - protocol: TCP
          port: 22
`, node, other))
	expect("egress-drop-node-to-node", map[string]string{"node->other node:22": "timeout", "node->other kubelet": "ok", "local pod->node:80": "ok"})

	apply("deny-all-node", fmt.Sprintf(`apiVersion: crd.antrea.io/v1beta1
kind: ClusterNetworkPolicy
metadata:
  name: deny-all-node
spec:
  priority: 1
  tier: securityops
  appliedTo:
    - nodeSelector:
        matchLabels:
          kubernetes.io/hostname: %s
  ingress:
    - name: drop-all-in
      action: Drop
  egress:
    - name: drop-all-out
      action: Drop
`, node))
	realized := time.Now()
	// kubectl exec reaches the node's kubelet from the API server (always
	// allowed); the policy denies everything else, the local pod included.
	expect("deny-all", map[string]string{"local pod->node:80": "timeout", "remote pod->node:80": "timeout", "node->other kubelet": "timeout", "outside->node:80": "timeout",
		"other node->node:80": "timeout", "node->other node:22": "timeout"})

	// The node stays Ready: kubelet renews its Lease after the deny-all is
	// in place (every 10 s) and the Ready condition stays true.
	labtest.WaitFor(t, ctx, "node "+node+" renewing its Lease under the deny-all policy", func() error {
		l, err := e.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.After(realized.Add(time.Second)) {
			return fmt.Errorf("lease renewed at %v, the policy was realized at %v", l.Spec.RenewTime, realized)
		}
		n, err := e.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				return fmt.Errorf("node %s Ready=%s: %s", node, c.Status, c.Message)
			}
		}
		return nil
	})
	if stdout, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, "local", "--", "true"); err != nil {
		t.Errorf("kubectl exec into a pod of the node under the deny-all policy: %v\n%s%s", err, stdout, stderr)
	}

	for _, name := range []string{"deny-all-node", "restrict-http-to-node", "egress-drop-node-to-node"} {
		if stdout, stderr, err := e.Kubectl(ctx, "delete", "acnp", name); err != nil {
			t.Fatalf("kubectl delete acnp: %v\n%s%s", err, stdout, stderr)
		}
	}
	expect("without the policies", everyone)
	if out, err := nodeTable(ctx, node); err == nil && strings.Contains(out, "drop-all") {
		t.Errorf("the deleted policies' rules are still in the node's table:\n%s", out)
	}
}

// nodeTable lists the node's netfilter table (from its netns).
func nodeTable(ctx context.Context, node string) (string, error) {
	out, err := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+lab.NodeNetNS(node), "nft", "list", "table", "inet", "antrea").CombinedOutput()
	return string(out), err
}
