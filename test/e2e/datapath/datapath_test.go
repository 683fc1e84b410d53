// Package datapath tests Antrea's pod networking end to end on the lab, once
// with Geneve and once with VXLAN between the nodes: pod to pod on one node
// and across nodes, node to pod and pod to node, over TCP, UDP and ICMP; an
// established TCP stream that survives an antrea-agent restart; and flows that
// come back after ovs-vswitchd restarts. Everything is driven as a user would:
// the antrea-lab binary, kubectl-equivalent API calls, and probes run inside
// pod network namespaces with `antrea-lab exec`.
package datapath

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"antrea.io/antrea/pkg/lab"
)

type env struct {
	root, bin string
	opts      lab.Options
	client    kubernetes.Interface
	pods      map[string]*corev1.Pod // by name
	nodeIP    map[string]string      // node name -> underlay IP
	gwIP      map[string]string      // node name -> antrea-gw0 IP
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the lab creates network namespaces")
	}
	wd, _ := os.Getwd()
	e := &env{root: filepath.Join(wd, "..", "..", "..")}
	e.bin = os.Getenv("ANTREA_BIN")
	if e.bin == "" {
		e.bin = filepath.Join(e.root, "bin")
	}
	e.opts = lab.DefaultOptions()
	e.opts.BinDir = e.bin
	e.opts.Dir = filepath.Join(e.root, "_output", "lab")
	e.opts.KubeBinDir = filepath.Join(e.root, "_output", "bin")
	e.opts.CNIBinDir = filepath.Join(e.root, "_output", "cni", "bin")
	for _, f := range []string{"antrea-lab", "antrea-agent", "antrea-controller", "antrea-cni", "antrea-testpod"} {
		if _, err := os.Stat(filepath.Join(e.bin, f)); err != nil {
			t.Skipf("%s is missing (run make build)", f)
		}
	}
	if _, err := os.Stat(filepath.Join(e.opts.KubeBinDir, "kube-apiserver")); err != nil {
		t.Skip("Kubernetes binaries are missing (run hack/install.sh)")
	}
	return e
}

func (e *env) lab(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"--dir=" + e.opts.Dir, "--bin-dir=" + e.bin, "--kube-bin-dir=" + e.opts.KubeBinDir,
		"--cni-bin-dir=" + e.opts.CNIBinDir}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, "antrea-lab"), full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// up brings a 2-node Antrea lab up with the given encapsulation and takes it
// down when the test ends.
func (e *env) up(t *testing.T, encap string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := e.lab(ctx, "down"); err != nil {
		t.Fatalf("antrea-lab down: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpForFailure(t)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := e.lab(ctx, "down"); err != nil {
			t.Errorf("antrea-lab down: %v\n%s", err, out)
		}
	})
	start := time.Now()
	if out, err := e.lab(ctx, "up", "--nodes=2", "--runtime=antrea", "--encap="+encap); err != nil {
		t.Fatalf("antrea-lab up --encap %s: %v\n%s", encap, err, out)
	}
	t.Logf("lab (Antrea, %s) up in %.1fs", encap, time.Since(start).Seconds())
	cfg, err := clientcmd.BuildConfigFromFlags("", e.opts.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if e.client, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	st, err := lab.LoadState(e.opts.StatePath())
	if err != nil || st == nil {
		t.Fatalf("lab state: %v", err)
	}
	e.nodeIP, e.gwIP = map[string]string{}, map[string]string{}
	for _, n := range st.Nodes {
		e.nodeIP[n.Name] = n.IP
		node, err := e.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cidr := node.Spec.PodCIDR
		e.gwIP[n.Name] = strings.TrimSuffix(cidr, ".0/24") + ".1"
	}
}

func (e *env) dumpForFailure(t *testing.T) {
	for _, n := range []string{"node-1", "node-2"} {
		out, _ := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "dump-flows", filepath.Join(e.opts.NodeOVSDir(n), "br-int.mgmt")).CombinedOutput()
		t.Logf("flows of %s:\n%s", n, out)
		logs, _ := os.ReadFile(e.opts.LogPath("antrea-agent", n))
		if len(logs) > 3000 {
			logs = logs[len(logs)-3000:]
		}
		t.Logf("antrea-agent log of %s (tail):\n%s", n, logs)
	}
}

// createPods makes pods pinned to nodes and waits until they are Ready.
func (e *env) createPods(t *testing.T, ctx context.Context, specs map[string]*corev1.Pod) {
	t.Helper()
	ns := "datapath"
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the default ServiceAccount", func() error {
		_, err := e.client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	for name, p := range specs {
		p.Name, p.Namespace = name, ns
		if _, err := e.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.pods = map[string]*corev1.Pod{}
	waitFor(t, ctx, "pods Running and Ready", func() error {
		for name := range specs {
			p, err := e.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.PodIP == "" || !ready(p) {
				return fmt.Errorf("pod %s not ready (%s)", name, p.Status.Phase)
			}
			e.pods[name] = p
		}
		return nil
	})
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitFor(t *testing.T, ctx context.Context, what string, f func() error) {
	t.Helper()
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func pinned(node string, containers ...corev1.Container) *corev1.Pod {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "c", Image: "antrea-testpod"}}
	}
	return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Containers: containers}}
}

// probe runs the test pod client (or ping for ICMP) from a pod, or from a
// node's network namespace when from is "node-N".
func (e *env) probe(ctx context.Context, from, proto, to string) error {
	var argv []string
	if proto == "icmp" {
		argv = []string{"ping", "-c", "1", "-W", "2", to}
	} else {
		argv = []string{filepath.Join(e.bin, "antrea-testpod"), "connect", "--protocol", proto, "--to", to + ":80", "--timeout", "2s"}
	}
	var cmd *exec.Cmd
	if strings.HasPrefix(from, "node-") {
		cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", "antrea-lab-" + from}, argv...)...)
	} else {
		full := append([]string{"--dir=" + e.opts.Dir, "exec", "-n", "datapath", from, "--"}, argv...)
		cmd = exec.CommandContext(ctx, filepath.Join(e.bin, "antrea-lab"), full...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -> %s %s: %v: %s", from, proto, to, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// probeEventually allows for the first packet lost while ARP and the tunnel
// neighbour resolve (ENVIRONMENT.md), nothing more.
func (e *env) probeEventually(ctx context.Context, from, proto, to string) error {
	var err error
	for i := 0; i < 3; i++ {
		if err = e.probe(ctx, from, proto, to); err == nil {
			return nil
		}
	}
	return err
}

func (e *env) ip(pod string) string { return e.pods[pod].Status.PodIP }

func TestDatapath(t *testing.T) {
	for _, encap := range []string{"geneve", "vxlan"} {
		t.Run(encap, func(t *testing.T) {
			e := newEnv(t)
			e.up(t, encap)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			e.createPods(t, ctx, map[string]*corev1.Pod{
				"a1":    pinned("node-1"),
				"a2":    pinned("node-1"),
				"b1":    pinned("node-2"),
				"iperf": pinned("node-2", corev1.Container{Name: "iperf", Image: "iperf3", Command: []string{"iperf3", "-s"}}),
			})
			t.Run("pods, nodes and protocols reach each other", func(t *testing.T) {
				cases := []struct{ name, from, to string }{
					{"pod to pod on one node", "a1", e.ip("a2")},
					{"pod to pod across nodes", "a1", e.ip("b1")},
					{"pod to pod across nodes, the other way", "b1", e.ip("a2")},
					{"node to its own pod", "node-1", e.ip("a1")},
					{"node to a remote pod", "node-1", e.ip("b1")},
				}
				for _, c := range cases {
					for _, proto := range []string{"tcp", "udp", "icmp"} {
						if err := e.probeEventually(ctx, c.from, proto, c.to); err != nil {
							t.Errorf("%s over %s: %v", c.name, proto, err)
						}
					}
				}
				for _, c := range []struct{ name, from, to string }{
					{"pod to its node's gateway", "a1", e.gwIP["node-1"]},
					{"pod to a remote node's gateway", "a1", e.gwIP["node-2"]},
					{"pod to a remote node's underlay IP", "b1", e.nodeIP["node-1"]},
				} {
					if err := e.probeEventually(ctx, c.from, "icmp", c.to); err != nil {
						t.Errorf("%s: %v", c.name, err)
					}
				}
			})
			t.Run("an established TCP stream survives an agent restart", func(t *testing.T) {
				e.streamSurvives(t, ctx, "antrea-agent")
			})
			t.Run("flows come back after ovs-vswitchd restarts", func(t *testing.T) {
				before := e.flowCount(t, "node-1")
				e.kill(t, "ovs-vswitchd", "node-1")
				waitFor(t, ctx, "node-1's flows to be replayed", func() error {
					if n := e.flowCount(t, "node-1"); n != before {
						return fmt.Errorf("%d flows, want %d", n, before)
					}
					return nil
				})
				if err := e.probeEventually(ctx, "a1", "tcp", e.ip("b1")); err != nil {
					t.Errorf("after the ovs-vswitchd restart: %v", err)
				}
				if err := e.probeEventually(ctx, "b1", "tcp", e.ip("a2")); err != nil {
					t.Errorf("after the ovs-vswitchd restart: %v", err)
				}
			})
		})
	}
}

// streamSurvives runs a 6-second iperf3 TCP stream from a1 (node-1) to the
// iperf pod (node-2) and restarts component on both nodes in the middle; the
// stream must complete without an error.
func (e *env) streamSurvives(t *testing.T, ctx context.Context, component string) {
	t.Helper()
	iperf := exec.CommandContext(ctx, filepath.Join(e.bin, "antrea-lab"), "--dir="+e.opts.Dir, "exec", "-n", "datapath", "a1", "--",
		"iperf3", "-c", e.ip("iperf"), "-t", "6", "-i", "1", "-b", "50M")
	var out bytes.Buffer
	iperf.Stdout, iperf.Stderr = &out, &out
	if err := iperf.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	for _, n := range []string{"node-1", "node-2"} {
		e.kill(t, component, n)
	}
	if err := iperf.Wait(); err != nil {
		t.Fatalf("the TCP stream broke while %s restarted: %v\n%s", component, err, out.String())
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, " 0.00 bits/sec") {
			t.Errorf("the stream stalled for a second while %s restarted:\n%s", component, out.String())
			break
		}
	}
	// The restarted agents must be ready again: a new pod gets networking.
	e.waitRestarted(t, ctx, component)
}

// kill sends SIGKILL to a lab daemon; the supervisor restarts it.
func (e *env) kill(t *testing.T, component, node string) {
	t.Helper()
	st, err := lab.LoadState(e.opts.StatePath())
	if err != nil || st == nil {
		t.Fatalf("lab state: %v", err)
	}
	for _, p := range st.Processes {
		if p.Component == component && p.Node == node && p.Alive() {
			if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed %s on %s (pid %d)", component, node, p.PID)
			return
		}
	}
	t.Fatalf("no running %s on %s", component, node)
}

func (e *env) waitRestarted(t *testing.T, ctx context.Context, component string) {
	t.Helper()
	waitFor(t, ctx, component+" restarted on every node", func() error {
		st, err := lab.LoadState(e.opts.StatePath())
		if err != nil || st == nil {
			return fmt.Errorf("state: %v", err)
		}
		for _, n := range []string{"node-1", "node-2"} {
			alive := false
			for _, p := range st.Processes {
				alive = alive || (p.Component == component && p.Node == n && p.Alive())
			}
			if !alive {
				return fmt.Errorf("%s not running on %s", component, n)
			}
		}
		return nil
	})
}

// flowCount is the number of flows on a node's br-int (0 while unreachable).
func (e *env) flowCount(t *testing.T, node string) int {
	out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "dump-flows", filepath.Join(e.opts.NodeOVSDir(node), "br-int.mgmt")).Output()
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "actions=") {
			n++
		}
	}
	return n
}
