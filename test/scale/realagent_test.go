package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab/simnodes"
	"antrea.io/antrea/test/labtest"
)

// probeNamespace holds the real node's two pods. It is labelled as a
// workload namespace, so the workload's cluster-wide ACNPs apply to them:
// the real node is in their span, as every workload Node is.
const probeNamespace = "scale-probe"

// agentCost is what the real node's agent costs at one moment.
type agentCost struct {
	RSSMiB float64 `json:"rssMiB"`
	Flows  int     `json:"flows"`
	// The lab's kube-apiserver, etcd and antrea-controller RSS at the
	// same moment.
	APIServerMiB, EtcdMiB, ControllerMiB float64
	// DenyMs and AllowMs: a NetworkPolicy isolating the server pod created
	// (deleted) -> the first connection from the client pod that is dropped
	// (that gets through), p50 and max over the rounds.
	DenyP50Ms, DenyMaxMs, AllowP50Ms, AllowMaxMs float64
}

// RealAgentResult is one run of TestARealAgentAtScale.
type RealAgentResult struct {
	SimNodes, Pods, K8sPolicies, ACNPs int
	// Empty: the cluster with only the real node's pods; Scale: with the
	// workload on the simulated Nodes.
	Empty, Scale agentCost
	// AgentCPUSeconds the real agent used while the workload was created
	// and its pods started (WorkloadSeconds long).
	AgentCPUSeconds, WorkloadSeconds float64
	// PeersInFlowsSeconds: the workload running -> the ACNPs' peers in
	// the real bridge's flows.
	PeersInFlowsSeconds float64
}

// TestARealAgentAtScale, run only when SCALE_REAL_AGENT=N (hack/bench/
// scale.sh with SCALE_REAL_AGENT set): a lab of one real node and N
// simulated Nodes (antrea-lab up --nodes 1 --sim-nodes N). A server and a
// client pod run on the real node. The real agent's RSS, its flows and how
// long a NetworkPolicy takes to change what the client's connections meet
// are measured in the empty cluster, then again after the scale workload
// (SCALE_PODS_PER_NODE pods per simulated Node, two K8s NetworkPolicies per
// namespace of SCALE_NAMESPACE_SIZE pods, SCALE_ACNPS cluster-wide ACNPs,
// which apply to the real node's pods too) is created and running: the
// agent receives its span only, so the two should be alike. Printed side by
// side with their ratio; appended as JSON to SCALE_OUT when set.
func TestARealAgentAtScale(t *testing.T) {
	simN := envInt(t, "SCALE_REAL_AGENT", 0)
	if simN == 0 {
		t.Skip("runs with SCALE_REAL_AGENT=N simulated Nodes (hack/bench/scale.sh)")
	}
	rounds := envInt(t, "SCALE_REAL_AGENT_ROUNDS", 5)
	w := Workload{Nodes: simN, PodsPerNode: envInt(t, "SCALE_PODS_PER_NODE", 10),
		NamespaceSize: envInt(t, "SCALE_NAMESPACE_SIZE", 20), ACNPs: envInt(t, "SCALE_ACNPS", 3), Seed: 1}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	opts := labtest.Options()
	opts.Nodes, opts.SimNodes = 1, simN
	if reason := labtest.Check(&opts); reason != "" {
		t.Skip(reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	st, err := labtest.WaitForNoLab(ctx, opts, false, t.Logf)
	if err != nil || st != nil {
		t.Fatalf("another lab is running (%v): this test brings up its own", err)
	}
	e, err := labtest.Start(ctx, opts)
	t.Cleanup(func() {
		if t.Failed() {
			e.DumpLogs(os.Stderr, 3000)
		}
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	node := e.Nodes[0]
	kube := kubernetes.NewForConfigOrDie(withRate(e.Config))
	crd := versioned.NewForConfigOrDie(withRate(e.Config))
	labtest.WaitFor(t, ctx, fmt.Sprintf("%d simulated Nodes", simN), func() error {
		l, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: simnodes.Label + "=true", ResourceVersion: "0"})
		if err != nil {
			return err
		}
		if len(l.Items) < simN {
			return fmt.Errorf("%d of %d", len(l.Items), simN)
		}
		return nil
	})

	// The real node's pods.
	if err := labtest.CreateNamespace(ctx, kube, probeNamespace, map[string]string{WorkloadLabel: "true", "role": "workload"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"server", "client"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{labtest.TestPodContainer("c", []int{80}, nil)}}}
		if _, err := kube.CoreV1().Pods(probeNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := labtest.WaitPodsUsable(ctx, kube, probeNamespace, []string{"server", "client"})
	if err != nil {
		t.Fatal(err)
	}
	path, err := labtest.PodNetNS(pods["client"])
	if err != nil {
		t.Fatal(err)
	}
	client, err := ns.GetNS(path)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := net.JoinHostPort(pods["server"].Status.PodIP, "80")
	agent := podPID(t, ctx, kube, "antrea-agent", node)
	controller := podPID(t, ctx, kube, "antrea-controller", "")
	apiserver, etcd := labPID(t, e.Opts.Dir, "kube-apiserver"), labPID(t, e.Opts.Dir, "etcd")
	sock := e.BridgeSocket(node)

	measure := func(phase string) agentCost {
		c := agentCost{RSSMiB: rssMiB(t, agent), Flows: flowCount(t, ctx, sock),
			APIServerMiB: rssMiB(t, apiserver), EtcdMiB: rssMiB(t, etcd), ControllerMiB: rssMiB(t, controller)}
		var deny, allow []time.Duration
		for r := range rounds {
			d, a := isolateAndFree(t, ctx, kube, client, server, fmt.Sprintf("%s-%d", phase, r))
			deny, allow = append(deny, d), append(allow, a)
		}
		c.DenyP50Ms, c.DenyMaxMs = p50Max(deny)
		c.AllowP50Ms, c.AllowMaxMs = p50Max(allow)
		t.Logf("%s: kube-apiserver RSS %.0f MiB, etcd %.0f MiB, antrea-controller %.0f MiB", phase, c.APIServerMiB, c.EtcdMiB, c.ControllerMiB)
		t.Logf("%s: agent RSS %.0f MiB, %d flows; policy -> first dropped connection p50 %.0f ms (max %.0f), deleted -> first one through p50 %.0f ms (max %.0f)",
			phase, c.RSSMiB, c.Flows, c.DenyP50Ms, c.DenyMaxMs, c.AllowP50Ms, c.AllowMaxMs)
		return c
	}
	res := RealAgentResult{SimNodes: simN, Pods: w.Pods(), K8sPolicies: 2 * w.Namespaces(), ACNPs: w.ACNPs}
	res.Empty = measure("empty cluster")

	cpu0 := cpuSeconds(t, agent)
	start := time.Now()
	if err := w.Create(ctx, kube, crd, 16); err != nil {
		t.Fatal(err)
	}
	// Each poll lists every workload pod: at 100,000 pods, one poll every
	// 10 s, not every 2 s, to leave kube-apiserver to the workload.
	poll := max(2*time.Second, time.Duration(w.Pods()/10000)*time.Second)
	if err := simnodes.WaitRunning(ctx, kube, WorkloadLabel+"=true", w.Pods(), poll); err != nil {
		t.Fatal(err)
	}
	res.WorkloadSeconds = time.Since(start).Seconds()
	res.AgentCPUSeconds = cpuSeconds(t, agent) - cpu0
	t.Logf("workload: %d pods on %d simulated Nodes, %d K8s NetworkPolicies, %d ACNPs, running after %.0f s; the real agent used %.1f CPU-s meanwhile",
		res.Pods, simN, res.K8sPolicies, res.ACNPs, res.WorkloadSeconds, res.AgentCPUSeconds)
	// The workload's ACNPs apply to the real node's pods: their peers (the
	// monitoring pods, on simulated Nodes) must reach the real bridge's
	// flows before the agent is measured. Bounded: 5 minutes.
	mon, err := kube.CoreV1().Pods(MonitoringNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer pcancel()
	labtest.WaitFor(t, pctx, "the ACNPs' peers in the real node's flows", func() error {
		flows, err := exec.CommandContext(pctx, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "unix:"+sock).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ovs-ofctl dump-flows: %v: %s", err, flows)
		}
		for _, p := range mon.Items {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(p.Status.PodIP) + `\b`).Match(flows) {
				return fmt.Errorf("%s/%s (%s) is in no flow", p.Namespace, p.Name, p.Status.PodIP)
			}
		}
		return nil
	})
	res.PeersInFlowsSeconds = time.Since(start).Seconds() - res.WorkloadSeconds
	t.Logf("the ACNPs' peers in the real node's flows %.1f s after the workload was running", res.PeersInFlowsSeconds)
	if podPID(t, ctx, kube, "antrea-agent", node) != agent {
		t.Fatal("the real node's antrea-agent restarted during the workload")
	}
	res.Scale = measure(fmt.Sprintf("%d pods", res.Pods))
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the real node's agent, empty cluster -> %d pods, %d K8s NetworkPolicies, %d ACNPs on %d simulated Nodes:\n",
		res.Pods, res.K8sPolicies, res.ACNPs, simN)
	fmt.Fprintf(&b, "%-44s %10s %10s %7s\n", "", "empty", "at scale", "ratio")
	row := func(name string, a, s float64) {
		fmt.Fprintf(&b, "%-44s %10.0f %10.0f %7s\n", name, a, s, ratio(s, a))
	}
	row("agent RSS, MiB", res.Empty.RSSMiB, res.Scale.RSSMiB)
	row("OpenFlow flows", float64(res.Empty.Flows), float64(res.Scale.Flows))
	row("policy created -> first drop, p50 ms", res.Empty.DenyP50Ms, res.Scale.DenyP50Ms)
	row("policy created -> first drop, max ms", res.Empty.DenyMaxMs, res.Scale.DenyMaxMs)
	row("policy deleted -> first connection, p50 ms", res.Empty.AllowP50Ms, res.Scale.AllowP50Ms)
	row("policy deleted -> first connection, max ms", res.Empty.AllowMaxMs, res.Scale.AllowMaxMs)
	row("kube-apiserver RSS, MiB", res.Empty.APIServerMiB, res.Scale.APIServerMiB)
	row("etcd RSS, MiB", res.Empty.EtcdMiB, res.Scale.EtcdMiB)
	row("antrea-controller RSS, MiB", res.Empty.ControllerMiB, res.Scale.ControllerMiB)
	fmt.Fprintf(&b, "workload running -> the ACNPs' peers in the real node's flows: %.1f s\n", res.PeersInFlowsSeconds)
	t.Log("\n" + b.String())
	if out := os.Getenv("SCALE_OUT"); out != "" {
		data, _ := json.Marshal(res)
		f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(append(data, '\n')); err != nil {
			t.Fatal(err)
		}
	}
}

// isolateAndFree creates a NetworkPolicy isolating the server pod (ingress,
// no rule) and times the first connection from the client that is dropped,
// then deletes it and times the first that gets through. Each probe is a
// new connection with a 30 ms timeout (the resolution of a
// "first one through": a connection refused by a policy is retried by TCP
// only after 1 s); a verdict holds once three probes
// in a row agree. Bounded: a minute per verdict.
func isolateAndFree(t *testing.T, ctx context.Context, kube kubernetes.Interface, client ns.NetNS, server, name string) (deny, allow time.Duration) {
	t.Helper()
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "isolate-" + strings.ReplaceAll(name, " ", "-")},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if _, err := firstVerdict(client, server, true, time.Minute); err != nil {
		t.Fatalf("before %s: %v", name, err)
	}
	start := time.Now()
	if _, err := kube.NetworkingV1().NetworkPolicies(probeNamespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	at, err := firstVerdict(client, server, false, time.Minute)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	deny = at.Sub(start)
	start = time.Now()
	if err := kube.NetworkingV1().NetworkPolicies(probeNamespace).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if at, err = firstVerdict(client, server, true, time.Minute); err != nil {
		t.Fatalf("%s deleted: %v", name, err)
	}
	return deny, at.Sub(start)
}

// firstVerdict probes server from client until three probes in a row
// connect (want true) or do not (false), and returns when the first of them
// started.
func firstVerdict(client ns.NetNS, server string, want bool, limit time.Duration) (time.Time, error) {
	var first time.Time
	err := client.Do(func(ns.NetNS) error {
		end := time.Now().Add(limit)
		streak := 0
		for time.Now().Before(end) {
			at := time.Now()
			c, err := net.DialTimeout("tcp", server, 30*time.Millisecond)
			if err == nil {
				c.Close()
			}
			if (err == nil) != want {
				streak = 0
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if streak == 0 {
				first = at
			}
			if streak++; streak == 3 {
				return nil
			}
		}
		return fmt.Errorf("connections to %s never settled on connected=%v within %s", server, want, limit)
	})
	return first, err
}

// podPID is the process of the kube-system pod with the label
// component=<component> (on node, when not empty): the one process named
// component in that pod's cgroup. Found through the pod's UID, so another
// lab's or helper's process of the same name is never taken.
func podPID(t *testing.T, ctx context.Context, kube kubernetes.Interface, component, node string) int {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: "component=" + component}
	if node != "" {
		opts.FieldSelector = "spec.nodeName=" + node
	}
	l, err := kube.CoreV1().Pods("kube-system").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range l.Items {
		for _, dir := range labtest.PodCgroups(string(p.UID)) {
			for _, pid := range labtest.CgroupPIDs(dir) {
				// One pod has a cgroup in each v1 hierarchy: a PID once.
				if cmd := labtest.Cmdline(pid); len(cmd) > 0 && filepath.Base(cmd[0]) == component && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
		}
	}
	if len(pids) != 1 {
		t.Fatalf("want the one %s process of the lab (node %q), found %v", component, node, pids)
	}
	return pids[0]
}

// labPID is the process named name whose command line names the lab's
// directory dir (kube-apiserver, etcd): another kube-apiserver on the
// machine is not the lab's.
func labPID(t *testing.T, dir, name string) int {
	t.Helper()
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmd := labtest.Cmdline(pid)
		if len(cmd) > 1 && filepath.Base(cmd[0]) == name &&
			slices.ContainsFunc(cmd[1:], func(a string) bool { return strings.Contains(a, dir+string(filepath.Separator)) }) {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		t.Fatalf("want the one %s of the lab in %s, found %v", name, dir, pids)
	}
	return pids[0]
}

func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	st, err := readProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.RSSMiB
}

func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	st, err := readProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.CPUSeconds
}

var flowCountRE = regexp.MustCompile(`flow_count=(\d+)`)

// flowCount is the number of flows of the bridge behind sock.
func flowCount(t *testing.T, ctx context.Context, sock string) int {
	t.Helper()
	out, err := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "dump-aggregate", "unix:"+sock).CombinedOutput()
	m := flowCountRE.FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("ovs-ofctl dump-aggregate %s: %v: %s", sock, err, out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func p50Max(d []time.Duration) (p50, max float64) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return ms(d[(len(d)-1)/2]), ms(d[len(d)-1])
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
