package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	crdv1alpha2 "antrea.io/antrea/pkg/apis/crd/v1alpha2"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// TestTrafficControlMirrorsAPodsTrafficOnItsNode: upstream's usage. A
// TrafficControl mirrors the egress of Pods app=tc-client to an OVS internal
// port; on the client's Node, a capture on that port (brought up in the
// Node's netns) sees the client's packets to a server on the other Node and
// none of the server's answers nor another Pod's traffic, while the client
// still gets its answers.
func TestTrafficControlMirrorsAPodsTrafficOnItsNode(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	crd, err := versioned.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("e2e-tc-%d", time.Now().UnixNano()%1000000)
	if err := labtest.CreateNamespace(ctx, e.Client, ns, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	pod := func(name, node string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{labtest.TestPodContainer("c", []int{80}, nil)}}}
	}
	for _, p := range []*corev1.Pod{
		pod("client", "node-1", map[string]string{"app": "tc-client"}),
		pod("other", "node-1", map[string]string{"app": "tc-other"}),
		pod("server", "node-2", nil),
	} {
		if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := labtest.WaitPodsUsable(ctx, e.Client, ns, []string{"client", "other", "server"})
	if err != nil {
		t.Fatal(err)
	}
	port := "tc-e2e0"
	tc := &crdv1alpha2.TrafficControl{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: crdv1alpha2.TrafficControlSpec{
		AppliedTo: crdv1alpha2.AppliedTo{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "tc-client"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		Direction: crdv1alpha2.DirectionEgress, Action: crdv1alpha2.ActionMirror,
		TargetPort: crdv1alpha2.TrafficControlPort{OVSInternal: &crdv1alpha2.OVSInternalPort{Name: port}}}}
	if _, err := crd.CrdV1alpha2().TrafficControls().Create(ctx, tc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = crd.CrdV1alpha2().TrafficControls().Delete(context.Background(), tc.Name, metav1.DeleteOptions{})
	})

	node := lab.NodeNetNS("node-1")
	labtest.WaitFor(t, ctx, "the agent of node-1 made port "+port, func() error {
		out, err := exec.CommandContext(ctx, "ip", "-n", node, "link", "set", port, "up").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	mirror := bridgetest.Sniff(t, &bridgetest.Pod{NS: node}, port)
	client, other, server := net.ParseIP(pods["client"].Status.PodIP), net.ParseIP(pods["other"].Status.PodIP), net.ParseIP(pods["server"].Status.PodIP)
	connect := func(from string) {
		t.Helper()
		out, err := e.Exec(ctx, ns, from, "antrea-testpod", "connect", "--protocol", "tcp",
			"--to", net.JoinHostPort(server.String(), "80"), "--timeout", "3s")
		if err != nil || !strings.Contains(out, "server") {
			t.Fatalf("%s connecting to server: %v: %s", from, err, out)
		}
	}
	// The flows follow the port in the same sync, but a connection may
	// start a moment before: asked until the capture sees one.
	labtest.WaitFor(t, ctx, "the mirror port sees the client's packets to the server", func() error {
		connect("client")
		if mirror.Count(client, server) == 0 {
			return fmt.Errorf("nothing client>server on %s yet", port)
		}
		return nil
	})
	connect("other")
	time.Sleep(300 * time.Millisecond)
	if got := mirror.Count(server, client) + mirror.Count(other, server) + mirror.Count(server, other); got != 0 {
		t.Errorf("the mirror of the client's egress saw %d packets that are not the client's (server>client %d, other>server %d)",
			got, mirror.Count(server, client), mirror.Count(other, server))
	}
	t.Logf("mirror port %s on node-1 saw %d packets client>server", port, mirror.Count(client, server))

	// Deleted, the TrafficControl's port goes from the Node.
	if err := crd.CrdV1alpha2().TrafficControls().Delete(ctx, tc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	labtest.WaitFor(t, ctx, "port "+port+" removed from node-1", func() error {
		if err := exec.CommandContext(ctx, "ip", "-n", node, "link", "show", port).Run(); err == nil {
			return fmt.Errorf("%s still there", port)
		}
		return nil
	})
}
