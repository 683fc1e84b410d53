package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"antrea.io/antrea/pkg/agent/simulator"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab/simnodes"
)

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: not a number", name, v)
	}
	return n
}

// TestScale is the scale bench (hack/bench/scale.sh; docs/scale.md), run
// only when SCALE_NODES is set: a real kube-apiserver (envtest), the
// antrea-controller binary (ANTREA_CONTROLLER_BIN) as a child process,
// SCALE_NODES simulated Nodes with SCALE_PODS_PER_NODE pods each, and one
// simulated agent per Node. It measures the controller, what each agent
// receives, how long changes take to reach the last agent that needs them
// and a controller restart, checks every agent against the recomputation,
// and appends a Result to SCALE_OUT.
func TestScale(t *testing.T) {
	nodes := envInt(t, "SCALE_NODES", 0)
	if nodes == 0 {
		t.Skip("the scale bench runs with SCALE_NODES=N (hack/bench/scale.sh)")
	}
	bin := os.Getenv("ANTREA_CONTROLLER_BIN")
	if bin == "" {
		t.Fatal("ANTREA_CONTROLLER_BIN: the antrea-controller binary to run")
	}
	w := Workload{Nodes: nodes, PodsPerNode: envInt(t, "SCALE_PODS_PER_NODE", 10),
		NamespaceSize: envInt(t, "SCALE_NAMESPACE_SIZE", 20), ACNPs: envInt(t, "SCALE_ACNPS", 3), Seed: 1}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	changes := envInt(t, "SCALE_CHANGES", 10)
	cp := apiservertest.Start(t)
	// Cleanups run last first: the agents and the kubelet stop (cancel,
	// then their end is awaited) before kube-apiserver does.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	var running sync.WaitGroup
	t.Cleanup(func() { cancel(); running.Wait() })
	ln := freePort(t)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cp.ApplyAntrea(t, ctx, port)
	ctrl := &controllerProcess{bin: bin, kubeconfig: cp.Kubeconfig, certDir: filepath.Join(cp.Dir, "serving"),
		logFile: filepath.Join(os.TempDir(), fmt.Sprintf("antrea-scale-controller-%d.log", nodes)), port: port}
	ctrl.start(t)
	t.Cleanup(ctrl.stop)
	cp.WaitAPIServiceAvailable(t, ctx)
	t.Logf("controller log: %s", ctrl.logFile)

	kube := kubernetes.NewForConfigOrDie(withRate(cp.Config))
	crd := versioned.NewForConfigOrDie(withRate(cp.Config))
	start := time.Now()
	if err := simnodes.EnsureNodes(ctx, kube, simnodes.DefaultCIDR, nodes); err != nil {
		t.Fatal(err)
	}
	kubelet := simnodes.NewKubelet(kube)
	running.Add(1)
	go func() { defer running.Done(); _ = kubelet.Run(ctx, 8) }()
	if err := w.Create(ctx, kube, crd, 16); err != nil {
		t.Fatal(err)
	}
	if err := simnodes.WaitRunning(ctx, kube, WorkloadLabel+"=true", w.Pods(), time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d nodes, %d pods running after %s", nodes, w.Pods(), time.Since(start).Round(time.Second))

	names := make([]string, nodes)
	for i := range names {
		names[i] = simnodes.NodeName(i)
	}
	sim, err := simulator.New(agentConfig(t, ctx, cp.Config), names)
	if err != nil {
		t.Fatal(err)
	}
	// SCALE_PPROF_DIR: CPU profiles of the controller and kube-apiserver
	// while the agents sync and after the restart.
	pprofDir := os.Getenv("SCALE_PPROF_DIR")
	ctrlURL := fmt.Sprintf("https://127.0.0.1:%d", port)
	adminInsecure := rest.CopyConfig(cp.Config)
	adminInsecure.TLSClientConfig.Insecure, adminInsecure.TLSClientConfig.CAData, adminInsecure.TLSClientConfig.CAFile = true, nil, ""
	waitProfiles := []func(){
		profile(t, adminInsecure, ctrlURL, pprofDir, fmt.Sprintf("controller-sync-%d", nodes), 20),
		profile(t, cp.Config, cp.Config.Host, pprofDir, fmt.Sprintf("apiserver-sync-%d", nodes), 20),
	}
	simStart := time.Now()
	running.Add(1)
	go func() { defer running.Done(); sim.Run(ctx) }()
	exp, err := Recompute(ctx, kube, crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if diffs := waitConsistent(ctx, sim, exp, 10*time.Minute); len(diffs) > 0 {
		t.Fatalf("after the initial sync %d differences, first: %s", len(diffs), strings.Join(diffs[:min(5, len(diffs))], "\n"))
	}
	res := Result{Nodes: nodes, Pods: w.Pods(), K8sPolicies: 2 * w.Namespaces(), ACNPs: w.ACNPs,
		InitialSyncSeconds: time.Since(simStart).Seconds(), Latency: map[string]Percentiles{}, Date: time.Now().UTC().Format(time.RFC3339)}
	t.Logf("every agent holds its span %s after the agents started", time.Since(simStart).Round(time.Millisecond))

	// Changes, one at a time: each is timed to the last agent of its span
	// having it (the span recomputed after the change).
	r := rand.New(rand.NewSource(2))
	var lat = map[string][]time.Duration{}
	timeChange := func(kind string, change func() error, got func(simulator.Record) bool, affected func(Expectation) []string) {
		t0 := time.Now()
		if err := change(); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		e, err := Recompute(ctx, kube, crd)
		if err != nil {
			t.Fatal(err)
		}
		exp = e
		byNode := map[string]*simulator.Agent{}
		for _, a := range sim.Agents() {
			byNode[a.Node] = a
		}
		waiting := affected(exp)
		var last time.Duration
		deadline := time.Now().Add(30 * time.Second)
		for len(waiting) > 0 && time.Now().Before(deadline) {
			var still []string
			for _, n := range waiting {
				i := slices.IndexFunc(byNode[n].Since(t0), got)
				if i < 0 {
					still = append(still, n)
					continue
				}
				if d := byNode[n].Since(t0)[i].At.Sub(t0); d > last {
					last = d
				}
			}
			waiting = still
			if len(waiting) > 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if len(waiting) > 0 {
			t.Errorf("%s: %d agents did not receive it in 30 s: %v", kind, len(waiting), waiting[:min(5, len(waiting))])
			return
		}
		lat[kind] = append(lat[kind], last)
	}
	nodesWith := func(key string) func(Expectation) []string {
		return func(e Expectation) []string {
			var out []string
			for n, byPolicy := range e {
				if _, ok := byPolicy[key]; ok {
					out = append(out, n)
				}
			}
			return out
		}
	}
	for i := 0; i < changes; i++ {
		ns := NamespaceName(r.Intn(w.Namespaces()))
		name := fmt.Sprintf("extra-%d", i)
		key := "K8sNetworkPolicy/" + ns + "/" + name
		timeChange("policy-add", func() error {
			_, err := kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, WebFrom(ns, name, int32(8000+i)), metav1.CreateOptions{})
			return err
		}, func(rec simulator.Record) bool { return rec.Source == key }, nodesWith(key))

		if w.ACNPs > 0 {
			acnpKey := "AntreaClusterNetworkPolicy//scale-acnp-0"
			timeChange("acnp-change", func() error {
				p, err := crd.CrdV1beta1().ClusterNetworkPolicies().Get(ctx, "scale-acnp-0", metav1.GetOptions{})
				if err != nil {
					return err
				}
				port := intstr.FromInt32(int32(10000 + i))
				p.Spec.Ingress[0].Ports[0].Port = &port
				_, err = crd.CrdV1beta1().ClusterNetworkPolicies().Update(ctx, p, metav1.UpdateOptions{})
				return err
			}, func(rec simulator.Record) bool { return rec.Source == acnpKey && rec.Type == simulator.Modified },
				nodesWith(acnpKey))
		}

		podNS := NamespaceName(r.Intn(w.Namespaces()))
		pod := Pod{Namespace: podNS, Name: fmt.Sprintf("extra-client-%d", i), Node: simnodes.NodeName(r.Intn(nodes)),
			Labels: map[string]string{"app": "client", WorkloadLabel: "true"}}
		member := pod.Namespace + "/" + pod.Name
		timeChange("pod-add", func() error {
			if _, err := kube.CoreV1().Pods(pod.Namespace).Create(ctx, PodObject(pod), metav1.CreateOptions{}); err != nil {
				return err
			}
			// The pod event is its IP: wait for the simulated kubelet.
			return waitPodIP(ctx, kube, pod.Namespace, pod.Name)
		}, func(rec simulator.Record) bool { return slices.Contains(rec.Added, member) },
			func(e Expectation) []string {
				var out []string
				for n, byPolicy := range e {
					for _, x := range byPolicy {
						if x.Peers.Has("pod:"+member) || x.AppliedTo.Has("pod:"+member) {
							out = append(out, n)
							break
						}
					}
				}
				return out
			})
	}
	for k, d := range lat {
		res.Latency[k] = percentiles(d)
	}
	if diffs := waitConsistent(ctx, sim, exp, 2*time.Minute); len(diffs) > 0 {
		res.Mismatches = len(diffs)
		t.Errorf("after the changes %d differences, first: %s", len(diffs), strings.Join(diffs[:min(5, len(diffs))], "\n"))
	}

	// What each agent received, start to here.
	var msgs []int
	var kib, wire []float64
	for _, a := range sim.Agents() {
		recs := a.Records()
		total := 0
		for _, rec := range recs {
			total += rec.Bytes
		}
		msgs = append(msgs, len(recs))
		kib = append(kib, float64(total)/1024)
		wire = append(wire, float64(a.WireBytes())/1024)
	}
	res.MsgsMedian, res.MsgsMax = medianMax(msgs)
	res.KiBMedian, res.KiBMax = medianMax(kib)
	res.WireKiBMedian, res.WireKiBMax = medianMax(wire)
	if st, err := readProc(ctrl.cmd.Process.Pid); err == nil {
		res.ControllerCPUSeconds, res.ControllerRSSMiB, res.ControllerPeakMiB = st.CPUSeconds, st.RSSMiB, st.PeakMiB
	}
	if pid := childNamed("kube-apiserver"); pid > 0 {
		st, _ := readProc(pid)
		res.APIServerRSSMiB = st.RSSMiB
	}
	if pid := childNamed("etcd"); pid > 0 {
		st, _ := readProc(pid)
		res.EtcdRSSMiB = st.RSSMiB
	}

	// Controller restart: every agent's watches break; time until all are
	// open again and every agent holds its span.
	ctrl.stop()
	restart := time.Now()
	ctrl.start(t)
	time.Sleep(time.Second) // the agents notice the broken watches
	for _, wait := range waitProfiles {
		wait()
	}
	waitProfiles = []func(){
		profile(t, adminInsecure, ctrlURL, pprofDir, fmt.Sprintf("controller-restart-%d", nodes), 20),
		profile(t, cp.Config, cp.Config.Host, pprofDir, fmt.Sprintf("apiserver-restart-%d", nodes), 20),
	}
	if err := sim.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if diffs := waitConsistent(ctx, sim, exp, 5*time.Minute); len(diffs) > 0 {
		res.Mismatches += len(diffs)
		t.Errorf("after a controller restart %d differences, first: %s", len(diffs), strings.Join(diffs[:min(5, len(diffs))], "\n"))
	}
	res.RestartSyncSeconds = time.Since(restart).Seconds()
	if pprofDir != "" {
		// kube-apiserver's own counters (API Priority and Fairness: queued,
		// rejected and executing requests per priority level).
		if b, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx); err == nil {
			_ = os.WriteFile(filepath.Join(pprofDir, fmt.Sprintf("apiserver-metrics-%d.txt", nodes)), b, 0o644)
		}
	}
	for _, wait := range waitProfiles {
		wait()
	}

	if secs := envInt(t, "SCALE_CHURN_SECONDS", 0); secs > 0 {
		churn(t, ctx, kube, crd, sim, ctrl, w, &res, secs, envInt(t, "SCALE_CHURN_RATE", 20), r)
	}

	t.Logf("\n%s", Table([]Result{res}))
	if out := os.Getenv("SCALE_OUT"); out != "" {
		b, _ := json.Marshal(res)
		f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
}

// TestScaleReport prints the table of every size in SCALE_REPORT (a
// results file of TestScale) and draws the curves into SCALE_SVG.
func TestScaleReport(t *testing.T) {
	in := os.Getenv("SCALE_REPORT")
	if in == "" {
		t.Skip("reports a scale bench's results: SCALE_REPORT=results file (hack/bench/scale.sh)")
	}
	rs, err := ReadResults(in)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Print(Table(rs))
	if out := os.Getenv("SCALE_SVG"); out != "" {
		if err := os.WriteFile(out, SVG(rs), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Println("curves:", out)
	}
}

// churn runs secs seconds of changes at rate pod operations a second (a
// third each: create a pod on a random Node and Namespace, delete one the
// churn created, flip one's app label between web and client), one ACNP
// change a second, then a Node joins with 3 pods and leaves; it records the
// achieved rate, the controller's CPU per second of churn, and the time
// from the end to every agent holding its span (recomputed from the API).
func churn(t *testing.T, ctx context.Context, kube kubernetes.Interface, crd versioned.Interface, sim *simulator.Simulator,
	ctrl *controllerProcess, w Workload, res *Result, secs, rate int, r *rand.Rand) {
	cpu0, _ := readProc(ctrl.cmd.Process.Pid)
	var made []Pod
	ops := 0
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	start := time.Now()
	for i := 0; time.Since(start) < time.Duration(secs)*time.Second; i++ {
		<-tick.C
		var err error
		switch op := r.Intn(3); {
		case op == 0 || len(made) == 0:
			app := []string{"web", "client"}[r.Intn(2)]
			p := Pod{Namespace: NamespaceName(r.Intn(w.Namespaces())), Name: fmt.Sprintf("churn-%d", i),
				Node: simnodes.NodeName(r.Intn(w.Nodes)), Labels: map[string]string{"app": app, WorkloadLabel: "true"}}
			if _, err = kube.CoreV1().Pods(p.Namespace).Create(ctx, PodObject(p), metav1.CreateOptions{}); err == nil {
				made = append(made, p)
			}
		case op == 1:
			k := r.Intn(len(made))
			p := made[k]
			made = append(made[:k], made[k+1:]...)
			err = kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		default:
			p := made[r.Intn(len(made))]
			app := "web"
			if p.Labels["app"] == "web" {
				app = "client"
			}
			p.Labels["app"] = app
			patch := fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, app)
			_, err = kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, k8stypes.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
		if err != nil {
			t.Fatalf("churn: %v", err)
		}
		ops++
		if w.ACNPs > 0 && i%rate == 0 {
			pol, err := crd.CrdV1beta1().ClusterNetworkPolicies().Get(ctx, "scale-acnp-0", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			port := intstr.FromInt32(int32(20000 + i%1000))
			pol.Spec.Ingress[0].Ports[0].Port = &port
			if _, err := crd.CrdV1beta1().ClusterNetworkPolicies().Update(ctx, pol, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	elapsed := time.Since(start)
	// A Node joins with 3 pods, then leaves (its pods deleted first, as
	// the pod garbage collector would).
	if err := simnodes.EnsureNodes(ctx, kube, simnodes.DefaultCIDR, w.Nodes+1); err != nil {
		t.Fatal(err)
	}
	joined := simnodes.NodeName(w.Nodes)
	for k := 0; k < 3; k++ {
		p := Pod{Namespace: NamespaceName(k % w.Namespaces()), Name: fmt.Sprintf("joined-%d", k), Node: joined,
			Labels: map[string]string{"app": "client", WorkloadLabel: "true"}}
		if _, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, PodObject(p), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := waitPodIP(ctx, kube, p.Namespace, p.Name); err != nil {
			t.Fatal(err)
		}
		if err := kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := kube.CoreV1().Nodes().Delete(ctx, joined, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	exp, err := Recompute(ctx, kube, crd)
	if err != nil {
		t.Fatal(err)
	}
	if diffs := waitConsistent(ctx, sim, exp, 5*time.Minute); len(diffs) > 0 {
		res.Mismatches += len(diffs)
		t.Errorf("after the churn %d differences, first: %s", len(diffs), strings.Join(diffs[:min(5, len(diffs))], "\n"))
	}
	res.ChurnSettleSeconds = time.Since(end).Seconds()
	res.ChurnOpsPerSecond = float64(ops) / elapsed.Seconds()
	if cpu1, err := readProc(ctrl.cmd.Process.Pid); err == nil {
		res.ChurnCPUPerSecond = (cpu1.CPUSeconds - cpu0.CPUSeconds) / time.Since(start).Seconds()
	}
	t.Logf("churn: %d pod operations in %s (%.0f/s), a Node joined and left; every agent holds its span %.1fs after the end",
		ops, elapsed.Round(time.Millisecond), res.ChurnOpsPerSecond, res.ChurnSettleSeconds)
}
