package scale

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/simulator"
	"antrea.io/antrea/pkg/apiserver/apiservertest"
	"antrea.io/antrea/pkg/controller/app"
)

// agentConfig authenticates with a token of the manifest's antrea-agent
// ServiceAccount (the identity every real agent has; a TokenRequest), so
// the chart's RBAC is what allows the simulated agents' lists and watches,
// and antrea-controller checks the token itself (TokenReview) when the
// agents dial it directly.
func agentConfig(t testing.TB, ctx context.Context, cfg *rest.Config) *rest.Config {
	t.Helper()
	c, err := simulator.AsServiceAccount(ctx, cfg, "kube-system/antrea-agent")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// freePort reserves a loopback port and hands its listener back.
func freePort(t testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startControllerInProcess runs antrea-controller's app.Run in the test.
func startControllerInProcess(t testing.TB, ctx context.Context, cp *apiservertest.ControlPlane) {
	ln := freePort(t)
	port := ln.Addr().(*net.TCPAddr).Port
	cp.ApplyAntrea(t, ctx, port)
	opts := app.NewOptions()
	opts.Kubeconfig = cp.Kubeconfig
	opts.Workers = 2
	opts.APIServer.SecureServing.Listener = ln
	opts.APIServer.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	opts.APIServer.SecureServing.BindPort = port
	opts.APIServer.SecureServing.ServerCert.CertDirectory = filepath.Join(cp.Dir, "serving")
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx, opts) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("app.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("antrea-controller did not stop")
		}
	})
	cp.WaitAPIServiceAvailable(t, ctx)
}

// controllerProcess is antrea-controller run as a child process, so its
// CPU time and memory are its own.
type controllerProcess struct {
	bin, kubeconfig, certDir, logFile string
	port                              int
	cmd                               *exec.Cmd
	started                           bool
}

func (c *controllerProcess) start(t testing.TB) {
	// The first start of a run empties the log; a restart appends to it.
	flags := os.O_CREATE | os.O_APPEND | os.O_WRONLY
	if !c.started {
		flags |= os.O_TRUNC
	}
	c.started = true
	log, err := os.OpenFile(c.logFile, flags, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(c.bin, "--kubeconfig="+c.kubeconfig, "--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(c.port), "--cert-dir="+c.certDir, "--v=0")
	c.cmd.Stdout, c.cmd.Stderr = log, log
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", c.bin, err)
	}
	log.Close()
}

// stop ends the process (SIGTERM, then SIGKILL after 20 s) and waits.
func (c *controllerProcess) stop() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
	c.cmd = nil
}

// procStat is a process's CPU seconds (user+system) and RSS, peak RSS.
type procStat struct {
	CPUSeconds      float64
	RSSMiB, PeakMiB float64
}

func readProc(pid int) (procStat, error) {
	var s procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the command (which may hold spaces) start after ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	s.CPUSeconds = (utime + stime) / 100 // USER_HZ is 100 on Linux
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(st), "\n") {
		kv := strings.Fields(line)
		if len(kv) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(kv[1], 64)
		switch kv[0] {
		case "VmRSS:":
			s.RSSMiB = kb / 1024
		case "VmHWM:":
			s.PeakMiB = kb / 1024
		}
	}
	return s, nil
}

// childNamed finds a child process of this test by its command name
// (kube-apiserver and etcd, which envtest starts).
func childNamed(name string) int {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < 0 || s[open+1:closing] != name {
			continue
		}
		f := strings.Fields(s[closing+2:])
		if ppid, _ := strconv.Atoi(f[1]); ppid == self {
			return pid
		}
	}
	return 0
}

// heldBy is what an agent holds, in the recomputation's terms.
func heldBy(a *simulator.Agent) map[string]Expected {
	out := map[string]Expected{}
	for _, p := range a.State().Policies {
		out[p.Key()] = Expected{AppliedTo: sets.New(p.AppliedTo...), Peers: sets.New(p.Peers...)}
	}
	return out
}

// mismatches compares every agent with the expectation.
func mismatches(sim *simulator.Simulator, exp Expectation) []string {
	var out []string
	for _, a := range sim.Agents() {
		out = append(out, Diff(a.Node, exp[a.Node], heldBy(a))...)
	}
	return out
}

// waitConsistent waits until every agent holds what it should, logging
// every 5 s how many agents differ and how long one comparison took.
func waitConsistent(ctx context.Context, sim *simulator.Simulator, exp Expectation, timeout time.Duration) []string {
	start := time.Now()
	deadline, logged := start.Add(timeout), start
	for {
		t := time.Now()
		diffs := mismatches(sim, exp)
		if len(diffs) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return diffs
		}
		if time.Since(logged) > 5*time.Second {
			logged = time.Now()
			unsynced := 0
			for _, a := range sim.Agents() {
				if !a.Synced() {
					unsynced++
				}
			}
			klog.InfoS("Waiting for the agents to hold their span", "differences", len(diffs), "first", diffs[0],
				"agentsNotWatching", unsynced, "compareTook", time.Since(t), "waited", time.Since(start))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// withRate lifts client-go's default 5 requests/s for the bench's own
// writes (creating the workload is not what is measured).
func withRate(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 2000, 4000
	return c
}

// waitPodIP waits (at most 30 s) until the simulated kubelet gave a pod
// its IP.
func waitPodIP(ctx context.Context, kube kubernetes.Interface, ns, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.PodIP != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s/%s has no IP after 30 s (last error: %v)", ns, name, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// profile saves a CPU profile of seconds from the pprof endpoint at base
// (kube-apiserver's, or antrea-controller's own secure port) into
// dir/name.pprof, with cfg's credentials, in the background; wait for it
// with the returned function. Nothing is done when dir is "".
func profile(t testing.TB, cfg *rest.Config, base, dir, name string, seconds int) func() {
	if dir == "" {
		return func() {}
	}
	c := rest.CopyConfig(cfg)
	c.Host = base
	c.Timeout = time.Duration(seconds+30) * time.Second
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		t.Logf("no profile %s: %v", name, err)
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var resp *http.Response
		for try := 0; try < 20; try++ { // a restarted server listens after a few seconds
			if resp, err = client.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds)); err == nil {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			t.Logf("no profile %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err != nil {
			t.Logf("no profile %s: %v", name, err)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil || resp.StatusCode != 200 {
			t.Logf("profile %s: status %d, %v", name, resp.StatusCode, err)
		}
	}()
	return func() { <-done }
}
