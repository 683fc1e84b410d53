package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/lab"
)

const podsPerTest = 4

// testPods creates a namespace with podsPerTest pods that the scheduler
// must spread over both nodes, and waits until each is Ready with an IP.
func testPods(t *testing.T, e *labEnv, ctx context.Context) (string, []corev1.Pod) {
	t.Helper()
	ns := fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1000000)
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		_ = e.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	// The namespace's default ServiceAccount comes from kube-controller-manager.
	waitFor(t, ctx, "ServiceAccount "+ns+"/default", func() (bool, string) {
		_, err := e.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	for i := range podsPerTest {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"app": "e2e"}},
			Spec: corev1.PodSpec{
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "e2e"}},
				}},
				Containers: []corev1.Container{{Name: "c", Image: "antrea-testpod"}},
			},
		}
		if _, err := e.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s/%s: %v", ns, pod.Name, err)
		}
	}
	var pods []corev1.Pod
	waitFor(t, ctx, "pods Ready with an IP", func() (bool, string) {
		list, err := e.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, p := range list.Items {
			if p.Status.PodIP != "" && podReady(&p) {
				ready++
			}
		}
		pods = list.Items
		return ready == podsPerTest, fmt.Sprintf("%d/%d ready", ready, podsPerTest)
	})
	return ns, pods
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (last: %s)", what, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func TestPodsSpreadOverNodesGetIPsFromTheirNodesPodCIDRAndReachEachOther(t *testing.T) {
	e := requireLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, pods := testPods(t, e, ctx)

	nodes, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cidrs := map[string]*net.IPNet{}
	for _, n := range nodes.Items {
		_, c, err := net.ParseCIDR(n.Spec.PodCIDR)
		if err != nil {
			t.Fatalf("node %s has no valid podCIDR %q", n.Name, n.Spec.PodCIDR)
		}
		cidrs[n.Name] = c
	}
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
		if c := cidrs[p.Spec.NodeName]; c == nil || !c.Contains(net.ParseIP(p.Status.PodIP)) {
			t.Errorf("pod %s IP %s is not in podCIDR %v of its node %s", p.Name, p.Status.PodIP, c, p.Spec.NodeName)
		}
	}
	if len(perNode) != 2 {
		t.Fatalf("the scheduler should spread the pods over both nodes, got %v", perNode)
	}

	t.Run("status lists every component alive and both nodes Ready", func(t *testing.T) {
		out, err := e.labCmd(ctx, "status")
		if err != nil {
			t.Fatalf("antrea-lab status: %v\n%s", err, out)
		}
		for _, want := range []string{"phase Ready", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
			"nodesim", "node-1", "node-2", e.opts.KubeconfigPath()} {
			if !strings.Contains(out, want) {
				t.Errorf("status should mention %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, " dead ") || strings.Contains(out, "NotReady") {
			t.Errorf("status shows a dead component or a NotReady node:\n%s", out)
		}
		rss, err := lab.TotalRSS(e.opts)
		if err != nil || rss == 0 {
			t.Errorf("total RSS of the lab: %d, %v", rss, err)
		}
		t.Logf("total RSS of the lab with %d pods: %d MiB", len(pods), rss>>20)
	})

	for _, proto := range []string{"tcp", "udp"} {
		for _, src := range pods {
			for _, dst := range pods {
				name := fmt.Sprintf("%s from %s on %s to %s on %s connects and %s answers", proto, src.Name, src.Spec.NodeName,
					dst.Name, dst.Spec.NodeName, dst.Name)
				t.Run(name, func(t *testing.T) {
					// Up to 3 attempts: the userspace datapath may lose the first
					// packet between two nodes right after they come up.
					var out string
					var err error
					for attempt := 0; attempt < 3; attempt++ {
						out, err = e.labCmd(ctx, "exec", "-n", ns, src.Name, "--", "antrea-testpod", "connect",
							"--protocol", proto, "--to", net.JoinHostPort(dst.Status.PodIP, "80"), "--timeout", "2s")
						if err == nil && strings.Contains(out, "connected") && strings.Contains(out, dst.Name) {
							return
						}
					}
					t.Fatalf("connect (3 attempts): %v: %s", err, out)
				})
			}
		}
	}
	t.Run("a port nobody serves is refused and exec passes the exit code through", func(t *testing.T) {
		out, err := e.labCmd(ctx, "exec", "-n", ns, pods[0].Name, "--", "antrea-testpod", "connect",
			"--protocol", "tcp", "--to", net.JoinHostPort(pods[1].Status.PodIP, "82"), "--timeout", "2s")
		exitErr, ok := err.(interface{ ExitCode() int })
		if !ok || exitErr.ExitCode() != 1 || !strings.Contains(out, "refused") {
			t.Fatalf("want refused with exit code 1, got %v: %s", err, out)
		}
	})
}

func TestDeletedPodsGetCNIDelTheirNetNSRemovedAndTheirIPsReleased(t *testing.T) {
	e := requireLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, pods := testPods(t, e, ctx)
	netns := map[string]string{}
	for _, p := range pods {
		netns[p.Name] = p.Annotations[lab.PodNetNSAnnotation]
		if netns[p.Name] == "" {
			t.Fatalf("pod %s has no %s annotation", p.Name, lab.PodNetNSAnnotation)
		}
		if got := allocatedIPs(t, e); !got[p.Status.PodIP] {
			t.Fatalf("host-local should hold IP %s of pod %s while it runs; holds %v", p.Status.PodIP, p.Name, got)
		}
	}
	for _, p := range pods {
		if err := e.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete pod %s: %v", p.Name, err)
		}
	}
	waitFor(t, ctx, "the pods to be gone from the API", func() (bool, string) {
		left := 0
		for _, p := range pods {
			if _, err := e.client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d pods left", left)
	})
	for _, p := range pods {
		if _, err := os.Stat(filepath.Join("/var/run/netns", netns[p.Name])); err == nil {
			t.Errorf("netns %s of deleted pod %s still exists", netns[p.Name], p.Name)
		}
		if got := allocatedIPs(t, e); got[p.Status.PodIP] {
			t.Errorf("IP %s of deleted pod %s is still allocated by host-local (no CNI DEL?)", p.Status.PodIP, p.Name)
		}
		if n := cachedCNIResults(t, e, p.Spec.NodeName, string(p.UID)); n != 0 {
			t.Errorf("libcni still caches %d results of deleted pod %s (no CNI DEL?)", n, p.Name)
		}
	}
}

// allocatedIPs lists the IPs host-local holds on every node: it keeps one file
// named by the IP under its dataDir, which the node simulator puts under the
// node's state dir.
func allocatedIPs(t *testing.T, e *labEnv) map[string]bool {
	t.Helper()
	ips := map[string]bool{}
	for _, n := range []string{lab.NodeName(1), lab.NodeName(2)} {
		cfg := e.opts.NodesimConfig(lab.NodeInfo{Name: n}, "")
		_ = filepath.WalkDir(cfg.StateDir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && net.ParseIP(d.Name()) != nil {
				ips[d.Name()] = true
			}
			return nil
		})
	}
	return ips
}

// cachedCNIResults counts the result files libcni keeps for a pod's sandbox;
// DEL removes them. Cache file names hold the container ID, not the pod UID,
// so files are matched through their content, which records the pod's args.
func cachedCNIResults(t *testing.T, e *labEnv, node, uid string) int {
	t.Helper()
	cfg := e.opts.NodesimConfig(lab.NodeInfo{Name: node}, "")
	n := 0
	_ = filepath.WalkDir(cfg.CNICacheDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), uid) {
			n++
		}
		return nil
	})
	return n
}

func TestASecondUpIsRefusedWhileTheLabRuns(t *testing.T) {
	e := requireLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := e.labCmd(ctx, "up", "--nodes=1")
	if err == nil || !strings.Contains(out, "already running") {
		t.Fatalf("a second up should fail saying a lab is already running; got %v: %s", err, out)
	}
	st, err := lab.LoadState(e.opts.StatePath())
	if err != nil || st == nil || st.Phase != lab.PhaseReady || !st.Supervisor.Alive() {
		t.Fatalf("the running lab should be untouched by the refused up: %+v, %v", st, err)
	}
}

// TestDownCleansUpAfterTheSupervisorWasKilled runs last: it ends the shared lab.
func TestDownCleansUpAfterTheSupervisorWasKilled(t *testing.T) {
	e := requireLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Pods make pod netns and pod processes that down must find too.
	testPods(t, e, ctx)
	fp := recordFootprint(t, e)
	if len(fp.podPIDs) == 0 {
		t.Fatal("expected processes in the lab's namespaces before the kill")
	}
	if err := e.supervisor.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-e.waited
	out, err := e.labCmd(ctx, "down")
	if err != nil {
		t.Fatalf("antrea-lab down after SIGKILL: %v\n%s", err, out)
	}
	t.Logf("antrea-lab down:\n%s", out)
	assertNothingLeft(t, e, fp)
}

// TestUpThenDownLeavesNothing brings up a lab the way a user does (up
// returns, the supervisor keeps running) and checks an orderly down.
func TestUpThenDownLeavesNothing(t *testing.T) {
	e := requireLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Normally the shared lab is gone (the test above ends it); not when this
	// test runs alone.
	if out, err := e.labCmd(ctx, "down"); err != nil {
		t.Fatalf("antrea-lab down of the shared lab: %v\n%s", err, out)
	}
	e.before = takeSnapshot(e.opts.Dir)
	out, err := e.labCmd(ctx, "up", "--nodes=1")
	if err != nil {
		t.Fatalf("antrea-lab up: %v\n%s", err, out)
	}
	if !strings.Contains(out, "node-1") || !strings.Contains(out, "Ready") {
		t.Errorf("up should end with the status of a Ready node:\n%s", out)
	}
	fp := recordFootprint(t, e)
	out, err = e.labCmd(ctx, "down")
	if err != nil {
		t.Fatalf("antrea-lab down: %v\n%s", err, out)
	}
	// The detached supervisor was reparented to us (subreaper); give it a
	// moment to exit after down saw it gone, then reap it.
	waitFor(t, ctx, "the supervisor to exit", func() (bool, string) {
		reapZombieChildren()
		return procState(fp.state.Supervisor.PID) == 0, fmt.Sprintf("state %c", procState(fp.state.Supervisor.PID))
	})
	assertNothingLeft(t, e, fp)
}
