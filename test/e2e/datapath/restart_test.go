package datapath

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// Issue 17 items 3 and 4: the control plane goes away (antrea-controller,
// kube-apiserver, etcd) or a node power-cycles while NetworkPolicy is in
// force. All take minutes: they run in TestRestarts under
// ANTREA_RELIABILITY=1 (make reliability), which also runs TestDatapath's
// long cases (the controller restart and the upgrade).

// envReliability gates the long cases (make reliability sets it).
const envReliability = "ANTREA_RELIABILITY"

// reliabilityLab brings up a Geneve lab of real nodes for a long case, which
// runs only under ANTREA_RELIABILITY (make reliability); why says what needs
// real nodes (kubelet + containerd).
func reliabilityLab(t *testing.T, why string) *env {
	t.Helper()
	if os.Getenv(envReliability) == "" {
		t.Skip(envReliability + " is not set (make reliability runs this)")
	}
	e := up(t, "geneve")
	if !e.Real() {
		t.Skip("needs real nodes (kubelet + containerd): " + why)
	}
	return e
}

// TestRestarts, on one Geneve lab of real nodes: antrea-controller scaled
// to 0 and back (as in TestDatapath), kube-apiserver stopped for 60 s, etcd
// stopped and started again on its data dir, and node-2
// rebooted. Each keeps the policy in force throughout, and the agents'
// resync after the outage writes no flow but those of the policy change
// made meanwhile.
func TestRestarts(t *testing.T) {
	e := reliabilityLab(t, "the controller is a Deployment, a reboot recreates sandboxes")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e.createPods(t, ctx, map[string]*corev1.Pod{
		"a1": pinned("node-1"),
		"a2": pinned("node-1"),
		"b1": pinned("node-2"),
		"b2": pinned("node-2"),
	})
	t.Run("antrea-controller down (scaled to 0 and back): the agents keep the policy and resync nothing unchanged", func(t *testing.T) {
		e.outageKeepsPolicy(t, ctx, e.controllerOutage(20*time.Second))
	})
	t.Run("kube-apiserver down for 60 s: the agents keep the policy and resync nothing unchanged", func(t *testing.T) {
		e.outageKeepsPolicy(t, ctx, e.apiserverOutage(60*time.Second))
	})
	t.Run("etcd stopped and started on its data dir: the agents keep the policy and resync nothing unchanged", func(t *testing.T) {
		e.outageKeepsPolicy(t, ctx, e.etcdOutage(15*time.Second))
	})
	t.Run("node-2 reboots: its pods come back networked, no IP leaks, no forbidden connection meanwhile", func(t *testing.T) {
		e.nodeReboot(t, ctx, "node-2")
	})
}

// outage is a component taken away and brought back.
type outage struct {
	name   string
	length time.Duration // from stopped to start asked
	stop   func(t *testing.T, ctx context.Context)
	// start brings the component back and returns once it serves again.
	start func(t *testing.T, ctx context.Context)
	// apiUp tells whether the Kubernetes API takes writes meanwhile (pods
	// can be created and the policy changed while the component is down).
	apiUp bool
}

// controllerOutage scales antrea-controller's Deployment to 0 and back to 1.
func (e *env) controllerOutage(length time.Duration) outage {
	scale := func(t *testing.T, ctx context.Context, n int) {
		t.Helper()
		if out, stderr, err := e.Kubectl(ctx, "-n", lab.AntreaNamespace, "scale", "deployment/"+lab.ControllerDeployment,
			"--replicas="+strconv.Itoa(n)); err != nil {
			t.Fatalf("kubectl scale: %v: %s%s", err, out, stderr)
		}
	}
	return outage{name: "antrea-controller", length: length, apiUp: true,
		stop: func(t *testing.T, ctx context.Context) {
			scale(t, ctx, 0)
			labtest.WaitFor(t, ctx, "no antrea-controller process on any node", func() error {
				for _, n := range e.Nodes {
					if procs, err := lab.NodeProcesses(e.Opts, n, "antrea-controll"); err != nil || len(procs) > 0 {
						return fmt.Errorf("%s: %v %v", n, procs, err)
					}
				}
				return nil
			})
		},
		start: func(t *testing.T, ctx context.Context) {
			scale(t, ctx, 1)
			if out, stderr, err := e.Kubectl(ctx, "-n", lab.AntreaNamespace, "rollout", "status",
				"deployment/"+lab.ControllerDeployment, "--timeout=120s"); err != nil {
				t.Fatalf("kubectl rollout status: %v: %s%s", err, out, stderr)
			}
		},
	}
}

// apiserverOutage stops the lab's kube-apiserver (SIGTERM to the PID the
// supervisor started) and starts it again with the same flags.
func (e *env) apiserverOutage(length time.Duration) outage {
	return outage{name: "kube-apiserver", length: length,
		stop:  func(t *testing.T, ctx context.Context) { e.stopComponent(t, ctx, "kube-apiserver", false) },
		start: func(t *testing.T, ctx context.Context) { e.startComponent(t, ctx, "kube-apiserver") },
	}
}

// etcdOutage kills etcd (SIGKILL to its PID) and starts it again on the
// same data dir; kube-apiserver stays up and reconnects.
func (e *env) etcdOutage(length time.Duration) outage {
	return outage{name: "etcd", length: length,
		stop:  func(t *testing.T, ctx context.Context) { e.stopComponent(t, ctx, "etcd", true) },
		start: func(t *testing.T, ctx context.Context) { e.startComponent(t, ctx, "etcd") },
	}
}

func (e *env) stopComponent(t *testing.T, ctx context.Context, component string, kill bool) {
	t.Helper()
	out, err := lab.StopComponent(ctx, e.Opts, component, "", kill)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out)
}

// startComponent starts a control-plane daemon again and waits until
// kube-apiserver's /readyz (which checks etcd) answers ok.
func (e *env) startComponent(t *testing.T, ctx context.Context, component string) {
	t.Helper()
	out, err := lab.StartComponent(ctx, e.Opts, component, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out)
	labtest.WaitFor(t, ctx, "kube-apiserver /readyz", func() error {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := e.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		return err
	})
}

// outageKeepsPolicy takes o away for o.length while NetworkPolicy isolates
// b1 (node-2, only a1 may connect) and a1 (node-1, only b1 may connect):
//   - a2's probes of b1 (every 10 ms) and of a1 (every 50 ms) connect 0
//     times from before the outage until after it; a1's probe of b1 keeps
//     connecting;
//   - while o is down, a pod is created and gets networked (when the API
//     takes writes; otherwise the refused create is logged);
//   - a policy change (a2 may reach b1 on TCP 81), made while o is down when
//     the API takes writes, else as soon as o is back, is realized: the time
//     from o back to a2 connecting is the figure;
//   - no flow that the bridge holds, identical, before and after the outage
//     was made again meanwhile (its OVS duration is older than the outage):
//     the agents' resync deleted and re-added nothing unchanged. The agents' OpenFlow write counters
//     (antrea_agent_ovs_flow_ops_count) across the outage are logged next to
//     those of the policy change alone and of the new pod.
func (e *env) outageKeepsPolicy(t *testing.T, ctx context.Context, o outage) {
	e.ensureOnlyFrom(t, ctx, "b1", "a1", "a2")
	e.ensureOnlyFrom(t, ctx, "a1", "b1", "a2")
	token := e.metricsToken(t, ctx)
	b81 := e.ip("b1") + ":81"

	// The reference: what the agents write for the change alone.
	change := ingressFrom("b1-81-from-a2", "b1", "a2", 81)
	before := e.flowOps(t, ctx, token)
	e.createPolicy(t, ctx, change)
	e.waitConnects(t, ctx, "a2", b81, true)
	time.Sleep(3 * time.Second) // every agent done writing
	ref := diffOps(e.flowOps(t, ctx, token), before)
	e.deletePolicy(t, ctx, change.Name)
	e.waitConnects(t, ctx, "a2", b81, false)
	time.Sleep(3 * time.Second)
	t.Logf("reference: the agents write %v for policy %s", ref, change.Name)

	before = e.flowOps(t, ctx, token)
	var watches []*flowWatch
	for _, n := range e.Nodes {
		watches = append(watches, e.watchFlows(t, n))
	}
	// Room for the stop, the start and the reconnect (the agents' watches
	// back off while the API server is away).
	window := o.length + 60*time.Second
	if !o.apiUp {
		window += 30 * time.Second
	}
	secs := fmt.Sprintf("%ds", int(window.Seconds()))
	forbidden := e.background(ctx, "a2", "antrea-testpod", "connect", "--to", e.ip("b1")+":80",
		"--timeout", "200ms", "--every", "10ms", "--for", secs)
	forbiddenLocal := e.background(ctx, "a2", "antrea-testpod", "connect", "--to", e.ip("a1")+":80",
		"--timeout", "200ms", "--every", "50ms", "--for", secs)
	allowed := e.background(ctx, "a1", "antrea-testpod", "connect", "--to", e.ip("b1")+":80",
		"--timeout", "200ms", "--every", "100ms", "--for", secs)
	// Each probe looks its pod up through the API server when it starts.
	time.Sleep(3 * time.Second)
	probesStart := time.Now()

	o.stop(t, ctx)
	down := time.Now()
	t.Logf("%s stopped %.1fs after the probes started", o.name, down.Sub(probesStart).Seconds())
	late := "during-" + strings.TrimPrefix(o.name, "kube-")
	podWrites := map[string]map[string]float64{} // the new pod's own flows
	if o.apiUp {
		beforePod := e.flowOps(t, ctx, token)
		p := pinned("node-1")
		p.Name, p.Namespace, p.Labels = late, namespace, map[string]string{"pod": late}
		if _, err := e.Client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods, err := labtest.WaitPodsUsable(ctx, e.Client, namespace, []string{late})
		if err != nil {
			t.Fatalf("the pod created while %s was down: %v", o.name, err)
		}
		e.pods[late] = pods[late]
		t.Logf("pod %s, created while %s was down, Ready %.1fs after the stop", late, o.name, time.Since(down).Seconds())
		e.waitConnects(t, ctx, late, e.ip("a2")+":80", true)
		podWrites = diffOps(e.flowOps(t, ctx, token), beforePod)
		t.Logf("the agents wrote %v for pod %s", podWrites, late)
		e.createPolicy(t, ctx, change)
		t.Cleanup(func() {
			_ = e.Client.CoreV1().Pods(namespace).Delete(context.Background(), late, metav1.DeleteOptions{})
		})
	} else {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		p := pinned("node-1")
		p.Name, p.Namespace = late, namespace
		_, err := e.Client.CoreV1().Pods(namespace).Create(cctx, p, metav1.CreateOptions{})
		cancel()
		if err == nil {
			t.Errorf("a pod was created while %s was down", o.name)
		} else {
			t.Logf("as expected no pod can be created while %s is down: %v", o.name, err)
		}
	}
	if rest := o.length - time.Since(down); rest > 0 {
		time.Sleep(rest)
	}
	o.start(t, ctx)
	back := time.Now()
	t.Logf("%s was down %.1fs; back (serving) %.1fs after the start was asked", o.name, back.Sub(down).Seconds(),
		back.Sub(down.Add(o.length)).Seconds())
	if !o.apiUp {
		e.createPolicy(t, ctx, change)
	}
	realized := e.waitConnects(t, ctx, "a2", b81, true)
	t.Logf("FIGURE %s: policy change realized %.2fs after %s was back (made %s)", o.name, realized.Sub(back).Seconds(), o.name,
		map[bool]string{true: "while it was down", false: "once it was back"}[o.apiUp])
	if time.Since(probesStart) > window-5*time.Second {
		t.Errorf("the outage outlasted the probes (%v)", window)
	}
	checkPolicyProbes(t, "while "+o.name+" was down and came back", forbidden, allowed)
	if out, err := forbiddenLocal.wait(); err != nil || !strings.Contains(out, "connected=0 ") || strings.Contains(out, "attempts=0 ") {
		t.Errorf("a2 -> a1 (forbidden, node-1) while %s was down: %v %s", o.name, err, out)
	} else {
		t.Logf("while %s was down: forbidden a2->a1: %s", o.name, strings.TrimSpace(out))
	}
	time.Sleep(3 * time.Second)
	got := diffOps(e.flowOps(t, ctx, token), before)
	extra := diffOps(diffOps(got, ref), podWrites)
	t.Logf("FIGURE %s: OpenFlow writes across the outage %v; the change alone %v, the new pod %v; resync writes beyond them %v",
		o.name, got, ref, podWrites, extra)
	// The counters also move for real changes made meanwhile (the
	// antrea Service loses and regains its endpoint with the controller):
	// the flows' ages tell which unchanged flows were made again.
	for _, w := range watches {
		rewrites, compared := w.rewrites(t, e)
		t.Logf("FIGURE %s: %s: of %d flows there, identical, before and after the outage, %d were made again meanwhile",
			o.name, w.node, compared, len(rewrites))
		if len(rewrites) > 0 {
			t.Errorf("%s: the agent made unchanged flows again after %s came back:\n%s", w.node, o.name, strings.Join(rewrites, "\n"))
		}
	}
	e.deletePolicy(t, ctx, change.Name)
	e.waitConnects(t, ctx, "a2", b81, false)
}

// ingressFrom lets pod from reach pod target on TCP port.
func ingressFrom(name, target, from string, port int32) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": target}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod": from}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(port))}},
			}},
		},
	}
}

func (e *env) createPolicy(t *testing.T, ctx context.Context, np *networkingv1.NetworkPolicy) {
	t.Helper()
	labtest.WaitFor(t, ctx, "policy "+np.Name+" created", func() error {
		_, err := e.Client.NetworkingV1().NetworkPolicies(namespace).Create(ctx, np.DeepCopy(), metav1.CreateOptions{})
		return err
	})
}

func (e *env) deletePolicy(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if err := e.Client.NetworkingV1().NetworkPolicies(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// connects probes to (HOST:PORT, TCP) once from a pod's netns, entered
// directly (nsenter): it needs no API server.
func (e *env) connects(ctx context.Context, from, to string) bool {
	netns, err := labtest.PodNetNS(e.pods[from])
	if err != nil {
		return false
	}
	return exec.CommandContext(ctx, "nsenter", "--net="+netns, "--", filepath.Join(e.Opts.BinDir, "antrea-testpod"),
		"connect", "--to", to, "--timeout", "300ms").Run() == nil
}

// waitConnects probes every 50 ms until from connecting to to is want, and
// returns when it first was.
func (e *env) waitConnects(t *testing.T, ctx context.Context, from, to string, want bool) time.Time {
	t.Helper()
	var at time.Time
	labtest.WaitFor(t, ctx, fmt.Sprintf("%s -> %s connecting: %t", from, to, want), func() error {
		for i := 0; i < 40; i++ {
			if e.connects(ctx, from, to) == want {
				at = time.Now()
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("%s -> %s connecting is still %t", from, to, !want)
	})
	return at
}

// metricsToken is a token that may read the agents' /metrics. Its
// ClusterRoleBinding serves every later subtest: it goes with the lab.
func (e *env) metricsToken(t *testing.T, ctx context.Context) string {
	t.Helper()
	if e.token == "" {
		token, _, err := labtest.MetricsReaderToken(ctx, e.Client, namespace, "scraper")
		if err != nil {
			t.Fatal(err)
		}
		e.token = token
	}
	return e.token
}

// flowOps is antrea_agent_ovs_flow_ops_count by node and operation.
func (e *env) flowOps(t *testing.T, ctx context.Context, token string) map[string]map[string]float64 {
	t.Helper()
	out := map[string]map[string]float64{}
	for _, n := range e.Nodes {
		labtest.WaitFor(t, ctx, "the flow-ops counters of "+n, func() error {
			ops, err := labtest.CounterByLabel(ctx, labtest.AgentMetricsURL(e.nodeIP[n]), token,
				"antrea_agent_ovs_flow_ops_count", "operation")
			out[n] = ops
			return err
		})
	}
	return out
}

// diffOps is a - b, per node and operation.
func diffOps(a, b map[string]map[string]float64) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for node, ops := range a {
		out[node] = map[string]float64{}
		for op, v := range ops {
			out[node][op] = v - b[node][op]
		}
		for op, v := range b[node] {
			if _, ok := ops[op]; !ok {
				out[node][op] = -v
			}
		}
	}
	return out
}

// nodeReboot power-cycles node (lab.RebootNode: all its processes killed,
// its tmpfs directories emptied, its netns made anew, then containerd and
// kubelet started on the same disk state) while b1 and b2, its pods, let
// only a1 connect:
//   - a2 (another node) probes, every 20 ms during the whole reboot, b1's
//     and b2's addresses and the next addresses the node's IPAM would hand
//     out (the recreated sandboxes get new ones): 0 connections, and the
//     new addresses of b1 and b2 were among those probed;
//   - b1 and b2 come back Ready with a new sandbox and a1 reaches them: the
//     time from the reboot to both reachable is the figure;
//   - the node's IPAM holds exactly one reservation per running pod.
func (e *env) nodeReboot(t *testing.T, ctx context.Context, node string) {
	e.ensureOnlyFrom(t, ctx, "b1", "a1", "a2")
	e.ensureOnlyFrom(t, ctx, "b2", "a1", "a2")
	ipamDir := e.ipamDir(t, node)
	last, err := os.ReadFile(filepath.Join(ipamDir, "last_reserved_ip.0"))
	if err != nil {
		t.Fatal(err)
	}
	targets := []string{e.ip("b1"), e.ip("b2")}
	next, err := netip.ParseAddr(strings.TrimSpace(string(last)))
	if err != nil {
		t.Fatal(err)
	}
	for len(targets) < 14 {
		next = next.Next()
		if b := next.As4(); b[3] == 0 || b[3] == 1 || b[3] == 255 {
			continue // the network, the gateway, the broadcast
		}
		targets = append(targets, next.String())
	}
	const window = 150 * time.Second
	secs := fmt.Sprintf("%ds", int(window.Seconds()))
	var probes []*bgCmd
	for _, ip := range targets {
		probes = append(probes, e.background(ctx, "a2", "antrea-testpod", "connect", "--to", ip+":80",
			"--timeout", "200ms", "--every", "20ms", "--for", secs))
	}
	time.Sleep(time.Second)
	start := time.Now()
	out, err := lab.RebootNode(ctx, e.Opts, node, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out)
	old := map[string]string{"b1": e.ip("b1"), "b2": e.ip("b2")}
	labtest.WaitFor(t, ctx, "b1 and b2 Ready in new sandboxes and reachable from a1", func() error {
		for _, name := range []string{"b1", "b2"} {
			p, err := e.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := labtest.CheckPodUsable(p); err != nil {
				return err
			}
			if p.Status.PodIP == old[name] {
				return fmt.Errorf("%s still has its old address %s", name, old[name])
			}
			if !e.connects(ctx, "a1", p.Status.PodIP+":80") {
				return fmt.Errorf("a1 does not reach %s at %s", name, p.Status.PodIP)
			}
			e.pods[name] = p
		}
		return nil
	})
	t.Logf("FIGURE reboot: %s rebooted (off 5 s); b1 and b2 reachable from a1 %.1fs after the reboot began", node,
		time.Since(start).Seconds())
	for _, name := range []string{"b1", "b2"} {
		if !slices.Contains(targets, e.ip(name)) {
			t.Errorf("%s's new address %s was not among the probed %v: the check below misses it", name, e.ip(name), targets)
		}
		if e.connects(ctx, "a2", e.ip(name)+":80") {
			t.Errorf("after the reboot a2 reaches %s against the policy", name)
		}
	}
	if time.Since(start) > window-5*time.Second {
		t.Errorf("the reboot outlasted the probes (%v)", window)
	}
	total := 0
	for i, p := range probes {
		out, err := p.wait()
		if err != nil || strings.Contains(out, "attempts=0 ") {
			t.Errorf("probe a2 -> %s: %v %s", targets[i], err, out)
			continue
		}
		var attempts, connected int
		if _, err := fmt.Sscanf(out, "attempts=%d connected=%d", &attempts, &connected); err != nil {
			t.Errorf("probe a2 -> %s: %q: %v", targets[i], out, err)
		}
		total += connected
		if connected != 0 {
			t.Errorf("a2 connected to %s:80 %d times during the reboot (policy bypassed): %s", targets[i], connected, out)
		}
	}
	t.Logf("FIGURE reboot: forbidden connections from a2 to %d addresses of %s during the reboot: %d", len(targets), node, total)

	// One reservation per pod with an address on the node (kubelet's DELs
	// of the dead sandboxes may lag behind the new ADDs).
	var leaked int
	labtest.WaitFor(t, ctx, "the IPAM reservations of "+node+" to match its pods", func() error {
		held := ipamReservations(t, ipamDir)
		list, err := e.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err
		}
		var running []string
		for _, p := range list.Items {
			if !p.Spec.HostNetwork && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				running = append(running, p.Status.PodIP)
			}
		}
		slices.Sort(running)
		leaked = len(held) - len(running)
		if !slices.Equal(held, running) {
			return fmt.Errorf("reserved %v, pods have %v", held, running)
		}
		return nil
	})
	t.Logf("FIGURE reboot: leaked IPs on %s: %d", node, leaked)
}

// ipamDir is the directory of a node's host-local reservations (the agent's
// /var/lib/antrea/ipam/<network>).
func (e *env) ipamDir(t *testing.T, node string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(e.NodeHostPath(node, "/var/lib/antrea"), "ipam", "*", "last_reserved_ip.0"))
	if len(dirs) != 1 {
		t.Fatalf("want one IPAM network directory of %s, found %v", node, dirs)
	}
	return filepath.Dir(dirs[0])
}

// ipamReservations are the addresses reserved in dir (a file per address).
func ipamReservations(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, err := netip.ParseAddr(e.Name()); err == nil {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// flowWatch tells a flow rewritten while it watched (deleted and added
// again: OVS restarts its duration) from one left alone, among the flows a
// node's br-int holds, identical, when it starts and when it ends. (A modify
// to the same content keeps the duration: it is not seen.)
type flowWatch struct {
	node  string
	start time.Time
	// before maps each flow's flowKey to its age (duration) at start.
	before map[string]time.Duration
}

func (e *env) watchFlows(t *testing.T, node string) *flowWatch {
	t.Helper()
	return &flowWatch{node: node, start: time.Now(), before: e.flowAges(t, node)}
}

// rewrites returns the flows held, identical, at start and now whose age is
// less than the time since start (made again meanwhile), and how many flows
// were compared.
func (w *flowWatch) rewrites(t *testing.T, e *env) (rewritten []string, compared int) {
	t.Helper()
	elapsed := time.Since(w.start)
	for k, age := range e.flowAges(t, w.node) {
		if _, ok := w.before[k]; !ok {
			continue
		}
		// AntreaProxy's endpoint flows (DNAT to an endpoint) follow real
		// changes made during the outage: the antrea Service loses its
		// endpoint while antrea-controller is down and gets it back, so
		// its endpoint flows are removed and made again. The resync
		// invariant is about every other flow.
		if strings.Contains(k, "nat(dst=") {
			continue
		}
		compared++
		if age < elapsed-time.Second {
			rewritten = append(rewritten, fmt.Sprintf("%s (age %.1fs, watched %.1fs)", k, age.Seconds(), elapsed.Seconds()))
		}
	}
	if compared == 0 {
		t.Errorf("%s: no flow was there both before and after", w.node)
	}
	return rewritten, compared
}

// flowAges is the flows of a node's br-int as flowKeys, with their ages.
func (e *env) flowAges(t *testing.T, node string) map[string]time.Duration {
	t.Helper()
	out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "dump-flows", e.BridgeSocket(node)).CombinedOutput()
	if err != nil {
		t.Fatalf("dump-flows of %s: %v: %s", node, err, out)
	}
	ages := map[string]time.Duration{}
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.Contains(l, " actions=") {
			continue
		}
		var age time.Duration
		if _, rest, ok := strings.Cut(l, "duration="); ok {
			d, _, _ := strings.Cut(rest, ",")
			age, _ = time.ParseDuration(d)
		}
		ages[flowKey(l)] = age
	}
	return ages
}

// flowKey is a flow's table, match and actions, without what differs
// between a dump-flows line and a flow-monitor event (event, reason,
// cookie, counters).
func flowKey(line string) string {
	i := strings.Index(line, " actions=")
	head, actions := line[:i], line[i:]
	var table string
	var kept []string
	for _, f := range strings.FieldsFunc(head, func(r rune) bool { return r == ' ' || r == ',' }) {
		name, _, _ := strings.Cut(f, "=")
		switch name {
		case "table":
			table = f
		case "event", "reason", "cookie", "duration", "n_packets", "n_bytes", "idle_age", "hard_age":
		default:
			kept = append(kept, f)
		}
	}
	return table + " " + strings.Join(kept, ",") + actions
}
