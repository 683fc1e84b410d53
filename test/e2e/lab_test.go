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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

const podsPerTest = 4

// testPods creates a namespace with podsPerTest test pods serving TCP and UDP
// 80 and 81 that the scheduler must spread over both nodes, and waits until
// each is Ready with an IP.
func testPods(t *testing.T, e *labEnv, ctx context.Context) (string, []corev1.Pod) {
	t.Helper()
	var names []string
	for i := range podsPerTest {
		names = append(names, fmt.Sprintf("p%d", i))
	}
	ns, byName := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		return corev1.PodSpec{
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "e2e"}},
			}},
			Containers: []corev1.Container{labtest.TestPodContainer("c", []int{80, 81}, []int{80, 81})},
		}
	}, names...)
	var pods []corev1.Pod
	for _, n := range names {
		pods = append(pods, *byName[n])
	}
	return ns, pods
}

// createPods creates a namespace (deleted when the test ends) and in it a pod
// per name, labelled app=e2e, with the spec spec(name); it waits until each
// is Ready with an IP and a netns.
func createPods(t *testing.T, e *labEnv, ctx context.Context, spec func(name string) corev1.PodSpec, names ...string) (string, map[string]*corev1.Pod) {
	t.Helper()
	ns := fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1000000)
	if err := labtest.CreateNamespace(ctx, e.Client, ns, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	return ns, createPodsIn(t, e, ctx, ns, spec, names...)
}

// createPodsIn is createPods in an existing namespace.
func createPodsIn(t *testing.T, e *labEnv, ctx context.Context, ns string, spec func(name string) corev1.PodSpec, names ...string) map[string]*corev1.Pod {
	t.Helper()
	for _, name := range names {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "e2e"}},
			Spec:       spec(name),
		}
		if _, err := e.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s/%s: %v", ns, pod.Name, err)
		}
	}
	pods, err := labtest.WaitPodsUsable(ctx, e.Client, ns, names)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

func TestPodsSpreadOverNodesGetIPsFromTheirNodesPodCIDRAndReachEachOther(t *testing.T) {
	e := requireLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, pods := testPods(t, e, ctx)

	nodes, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
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
		out, err := e.Cmd(ctx, "status")
		if err != nil {
			t.Fatalf("antrea-lab status: %v\n%s", err, out)
		}
		want := []string{"phase Ready", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
			"node-1", "node-2", e.Opts.KubeconfigPath()}
		if e.Real() {
			want = append(want, "kubelet", "containerd", "node-mounts")
		} else {
			want = append(want, "nodesim")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("status should mention %q:\n%s", w, out)
			}
		}
		if strings.Contains(out, " dead ") || strings.Contains(out, "NotReady") {
			t.Errorf("status shows a dead component or a NotReady node:\n%s", out)
		}
		rss, err := lab.TotalRSS(e.Opts)
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
					var out, first string
					var err error
					for attempt := 0; attempt < 3; attempt++ {
						out, err = e.Exec(ctx, ns, src.Name, "antrea-testpod", "connect",
							"--protocol", proto, "--to", net.JoinHostPort(dst.Status.PodIP, "80"), "--timeout", "2s")
						if err == nil && strings.Contains(out, "connected") && strings.Contains(out, dst.Name) {
							return
						}
						if attempt == 0 {
							// Taken while the loss is fresh.
							first = e.UnderlayState(ctx, src.Status.PodIP, dst.Status.PodIP)
						}
					}
					t.Logf("underlay state after the first failed attempt:\n%s", first)
					t.Logf("underlay state after the last attempt:\n%s", e.UnderlayState(ctx, src.Status.PodIP, dst.Status.PodIP))
					t.Fatalf("connect (3 attempts): %v: %s", err, out)
				})
			}
		}
	}
	// The outside host is no node: pod traffic to it leaves the cluster,
	// masqueraded to the address of the pod's node, which it reports.
	nodeIPs := map[string]string{}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				nodeIPs[n.Name] = a.Address
			}
		}
	}
	for _, src := range pods {
		t.Run(fmt.Sprintf("%s on %s reaches the outside host, which sees the address of %s", src.Name, src.Spec.NodeName, src.Spec.NodeName), func(t *testing.T) {
			url := fmt.Sprintf("http://%s/clientip", net.JoinHostPort(lab.OutsideIP().String(), fmt.Sprint(lab.OutsideHTTPPort)))
			out, err := e.Exec(ctx, ns, src.Name, "curl", "-sS", "-m", "5", url)
			if err != nil {
				t.Fatalf("curl %s: %v: %s", url, err, out)
			}
			host, _, err := net.SplitHostPort(strings.TrimSpace(out))
			if err != nil || host != nodeIPs[src.Spec.NodeName] {
				t.Errorf("the outside host saw %q, want the address %s of node %s", out, nodeIPs[src.Spec.NodeName], src.Spec.NodeName)
			}
		})
	}
	t.Run("a port nobody serves is refused and exec passes the exit code through", func(t *testing.T) {
		out, err := e.Exec(ctx, ns, pods[0].Name, "antrea-testpod", "connect",
			"--protocol", "tcp", "--to", net.JoinHostPort(pods[1].Status.PodIP, "82"), "--timeout", "2s")
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 || !strings.Contains(out, "refused") {
			t.Fatalf("want refused with exit code 1, got %v: %s", err, out)
		}
	})
}

// TestKubectlExecIntoAPodOfARealNodeConnectsAcrossNodesAndKubectlLogsShowsItsOutput
// goes through the API server to the node's kubelet and containerd, as
// kubectl does on any cluster: exec runs the image's own binary in the
// container, logs reads what the container printed.
func TestKubectlExecIntoAPodOfARealNodeConnectsAcrossNodesAndKubectlLogsShowsItsOutput(t *testing.T) {
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, pods := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		if name == "client" {
			return corev1.PodSpec{NodeName: e.Nodes[0], Containers: []corev1.Container{{
				Name: "agnhost", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}}}
		}
		return corev1.PodSpec{NodeName: e.Nodes[1], Containers: []corev1.Container{labtest.TestPodContainer("server", []int{80}, nil)}}
	}, "client", "server")
	client, server := pods["client"], pods["server"]
	if client.Spec.NodeName == server.Spec.NodeName {
		t.Fatalf("client and server should be on different nodes, both are on %s", client.Spec.NodeName)
	}

	t.Run("agnhost connect from the client reaches the server on the other node", func(t *testing.T) {
		to := net.JoinHostPort(server.Status.PodIP, "80")
		var stdout, stderr string
		var err error
		// The first packet between nodes may be lost while neighbours resolve.
		for attempt := 0; attempt < 3; attempt++ {
			stdout, stderr, err = e.Kubectl(ctx, "exec", "-n", ns, "client", "--", "/agnhost", "connect", "--timeout=2s", to)
			if err == nil {
				return
			}
		}
		t.Fatalf("kubectl exec client -- /agnhost connect --timeout=2s %s (3 attempts): %v\nstdout: %s\nstderr: %s", to, err, stdout, stderr)
	})
	t.Run("agnhost connect to a port nobody serves fails with its exit code", func(t *testing.T) {
		to := net.JoinHostPort(server.Status.PodIP, "82")
		stdout, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, "client", "--", "/agnhost", "connect", "--timeout=2s", to)
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() == 0 || !strings.Contains(stderr, "REFUSED") {
			t.Fatalf("want a non-zero exit code and REFUSED, got %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
		}
	})
	t.Run("kubectl exec runs the image's own shell", func(t *testing.T) {
		stdout, stderr, err := e.Kubectl(ctx, "exec", "-n", ns, "client", "--", "sh", "-c", "hostname; test -x /agnhost && echo has-agnhost")
		if err != nil || !strings.Contains(stdout, "client") || !strings.Contains(stdout, "has-agnhost") {
			t.Fatalf("kubectl exec client -- sh -c ...: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
		}
	})
	t.Run("kubectl logs shows what the server printed", func(t *testing.T) {
		// antrea-testpod serve logs one line when it listens.
		labtest.WaitFor(t, ctx, "the server's log line", func() error {
			stdout, stderr, err := e.Kubectl(ctx, "logs", "-n", ns, "server")
			if err != nil {
				return fmt.Errorf("kubectl logs: %v: %s", err, stderr)
			}
			if !strings.Contains(stdout, "Serving") || !strings.Contains(stdout, `name="server"`) {
				return fmt.Errorf("log lacks the Serving line naming the pod: %q", stdout)
			}
			return nil
		})
	})
}

// podTrace is what a running pod holds on its node, read before it is
// deleted so that the test can check each item is released.
type podTrace struct {
	pod corev1.Pod
	// netnsPath and netnsID are the pod's netns (a /proc/<pid>/ns/net of a
	// real node's pod, a /var/run/netns entry of a simulated one).
	netnsPath, netnsID string
	// procs are the pod's processes: those in its cgroups on a real node,
	// those in its netns on a simulated one.
	procs []process
	// cgroups are the pod's cgroups (real nodes).
	cgroups []string
}

func TestDeletedPodsGetCNIDelTheirNetNSRemovedAndTheirIPsReleased(t *testing.T) {
	e := requireLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, pods := testPods(t, e, ctx)
	var traces []podTrace
	for _, p := range pods {
		tr := podTrace{pod: p}
		var err error
		if tr.netnsPath, err = labtest.PodNetNS(&p); err != nil {
			t.Fatal(err)
		}
		if tr.netnsID, err = labtest.NetNSID(tr.netnsPath); err != nil {
			t.Fatalf("netns %s of pod %s: %v", tr.netnsPath, p.Name, err)
		}
		var pids []int
		if e.Real() {
			tr.cgroups = labtest.PodCgroups(string(p.UID))
			if len(tr.cgroups) == 0 {
				t.Fatalf("pod %s has no cgroup pod%s on a lab node", p.Name, p.UID)
			}
			for _, c := range tr.cgroups {
				pids = append(pids, labtest.CgroupPIDs(c)...)
			}
		} else {
			pids = labtest.PIDsInNetNS(tr.netnsPath)
		}
		for _, pid := range pids {
			tr.procs = append(tr.procs, newProcess(pid))
		}
		if len(tr.procs) == 0 {
			t.Fatalf("pod %s has no process (netns %s, cgroups %v)", p.Name, tr.netnsPath, tr.cgroups)
		}
		// What the checks below look for must be there while the pod runs,
		// or their passing after the delete would prove nothing.
		if got := allocatedIPs(e); !got[p.Status.PodIP] {
			t.Fatalf("IPAM should hold IP %s of pod %s while it runs; holds %v", p.Status.PodIP, p.Name, got)
		}
		if n := cachedCNIResults(e, p.Spec.NodeName, &p); n == 0 {
			t.Fatalf("libcni should cache the ADD result of running pod %s in %s", p.Name, cniCacheDir(e, p.Spec.NodeName))
		}
		if e.Opts.Runtime == lab.RuntimeAntrea {
			if port, err := ovsPortOf(ctx, e, &p); err != nil || port == "" {
				t.Fatalf("running pod %s should have an OVS port on %s: %q, %v", p.Name, p.Spec.NodeName, port, err)
			}
		}
		traces = append(traces, tr)
	}
	for _, p := range pods {
		if err := e.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete pod %s: %v", p.Name, err)
		}
	}
	labtest.WaitFor(t, ctx, "the pods to be gone from the API", func() error {
		left := 0
		for _, p := range pods {
			if _, err := e.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d pods left", left)
		}
		return nil
	})
	// The node may finish the teardown (kubelet's housekeeping removes pod
	// cgroups every few seconds) after the API object is gone.
	for _, tr := range traces {
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		err := labtest.Poll(wctx, "pod "+tr.pod.Name+" released by its node", func() error {
			if left := leftovers(ctx, e, tr); len(left) > 0 {
				return errors.New(strings.Join(left, "; "))
			}
			return nil
		})
		wcancel()
		if err != nil {
			t.Errorf("deleted pod %s (node %s, IP %s): %v", tr.pod.Name, tr.pod.Spec.NodeName, tr.pod.Status.PodIP, err)
		}
	}
}

// leftovers lists what of a deleted pod its node still holds.
func leftovers(ctx context.Context, e *labEnv, tr podTrace) []string {
	var out []string
	p := &tr.pod
	for _, proc := range tr.procs {
		if labtest.Exists(proc.pid, proc.start) {
			out = append(out, fmt.Sprintf("process %d %q still exists (state %c)", proc.pid, proc.what, labtest.ProcState(proc.pid)))
		}
	}
	for _, c := range tr.cgroups {
		if pids := labtest.CgroupPIDs(c); len(pids) > 0 {
			out = append(out, fmt.Sprintf("cgroup %s still holds processes %v", c, pids))
		}
	}
	if !e.Real() {
		if _, err := os.Stat(tr.netnsPath); err == nil {
			out = append(out, fmt.Sprintf("netns %s still exists", tr.netnsPath))
		}
	}
	for _, u := range labtest.NetNSUsers(tr.netnsID) {
		out = append(out, "netns "+tr.netnsID+": "+u)
	}
	if allocatedIPs(e)[p.Status.PodIP] {
		out = append(out, fmt.Sprintf("IP %s is still allocated (no CNI DEL?)", p.Status.PodIP))
	}
	if n := cachedCNIResults(e, p.Spec.NodeName, p); n != 0 {
		out = append(out, fmt.Sprintf("libcni still caches %d results (no CNI DEL?)", n))
	}
	if e.Opts.Runtime == lab.RuntimeAntrea {
		if port, err := ovsPortOf(ctx, e, p); err != nil || port != "" {
			out = append(out, fmt.Sprintf("OVS port %q is still on br-int (%v)", port, err))
		}
	}
	return out
}

// ipamDirs are where the nodes' IPAM keeps its reservations, one file named
// by each allocated IP: host-local's dataDir (reference CNI) or the agent's
// IPAM data dir (Antrea), under the node simulator's state dir; on a real
// node the agent's /var/lib/antrea/ipam, which its mount namespace binds to
// the node's directory.
func ipamDirs(e *labEnv) []string {
	var dirs []string
	for _, n := range e.Nodes {
		if e.Real() {
			dirs = append(dirs, filepath.Join(e.NodeHostPath(n, "/var/lib/antrea"), "ipam"))
		} else {
			dirs = append(dirs, e.Opts.NodesimConfig(lab.NodeInfo{Name: n}, "").StateDir)
		}
	}
	return dirs
}

// allocatedIPs lists the IPs the nodes' IPAM holds.
func allocatedIPs(e *labEnv) map[string]bool {
	ips := map[string]bool{}
	for _, dir := range ipamDirs(e) {
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && net.ParseIP(d.Name()) != nil {
				ips[d.Name()] = true
			}
			return nil
		})
	}
	return ips
}

// cniCacheDir is where libcni caches the results of a node's ADDs: the node
// simulator's cache dir, or libcni's default /var/lib/cni, which containerd
// uses and a real node's mount namespace binds to the node's directory.
func cniCacheDir(e *labEnv, node string) string {
	if e.Real() {
		return e.NodeHostPath(node, "/var/lib/cni")
	}
	return e.Opts.NodesimConfig(lab.NodeInfo{Name: node}, "").CNICacheDir
}

// cachedCNIResults counts the result files libcni keeps for a pod's sandbox;
// DEL removes them. Cache file names hold the sandbox ID, not the pod, so
// files are matched through their content, which records the pod's CNI_ARGS
// (its UID, or its namespace and name).
func cachedCNIResults(e *labEnv, node string, p *corev1.Pod) int {
	n := 0
	_ = filepath.WalkDir(cniCacheDir(e, node), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		s := string(data)
		if strings.Contains(s, string(p.UID)) ||
			(strings.Contains(s, `"K8S_POD_NAMESPACE","`+p.Namespace+`"`) && strings.Contains(s, `"K8S_POD_NAME","`+p.Name+`"`)) {
			n++
		}
		return nil
	})
	return n
}

// ovsPortOf returns the name of the br-int port the agent made for the pod
// (found by the pod-name and pod-namespace external_ids it records), "" if
// there is none.
func ovsPortOf(ctx context.Context, e *labEnv, p *corev1.Pod) (string, error) {
	db := "unix:" + filepath.Join(e.OVSDir(p.Spec.NodeName), "db.sock")
	out, err := exec.CommandContext(ctx, "ovs-vsctl", "--db="+db, "--bare", "--columns=name", "find", "Port",
		"external_ids:pod-name="+p.Name, "external_ids:pod-namespace="+p.Namespace).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ovs-vsctl find Port on %s: %v: %s", p.Spec.NodeName, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// createExternalIPPool creates the ExternalIPPool name of first-last for the
// test and removes it when the test ends: release first (it deletes what
// holds the pool's IPs: the Services, an Egress), then the pool, retried
// while the webhook still refuses it (IPs in use). A pool left behind would
// overlap the next test's and is an error. A nodeSelector given limits the
// pool to those Nodes.
func createExternalIPPool(t *testing.T, ctx context.Context, crd versioned.Interface, name, first, last string, release func(), nodeSelector ...metav1.LabelSelector) {
	t.Helper()
	pool := &crdv1beta1.ExternalIPPool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: crdv1beta1.ExternalIPPoolSpec{IPRanges: []crdv1beta1.IPRange{{Start: first, End: last}}}}
	for _, s := range nodeSelector {
		pool.Spec.NodeSelector = s
	}
	if _, err := crd.CrdV1beta1().ExternalIPPools().Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if release != nil {
			release()
		}
		var err error
		for i := 0; i < 300; i++ {
			if err = crd.CrdV1beta1().ExternalIPPools().Delete(context.Background(), name, metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("ExternalIPPool %s is left behind: %v", name, err)
	})
}

// deleteServices deletes every Service of namespace (their LoadBalancer IPs
// go back to their pools).
func deleteServices(e *labEnv, namespace string) {
	ctx := context.Background()
	svcs, err := e.Client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, s := range svcs.Items {
		_ = e.Client.CoreV1().Services(namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
	}
}
