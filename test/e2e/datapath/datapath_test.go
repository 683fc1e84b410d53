// Package datapath tests Antrea's pod networking end to end on the lab, with
// Geneve between the nodes and without a tunnel (noEncap; VXLAN and GRE under
// make conformance): pod to pod on one node
// and across nodes, node to pod and pod to node, over TCP, UDP and ICMP; an
// established TCP stream that survives an antrea-agent restart; flows,
// groups and meters that come back after ovs-vswitchd or ovsdb-server
// restarts, with no connection across a NetworkPolicy meanwhile
// (ovs_restart_test.go). make test runs the agent and ovs-vswitchd restarts
// with Geneve only. Under ANTREA_RELIABILITY=1 (make reliability) also the
// VXLAN and GRE restarts, the ovsdb-server restart and
// (Geneve, real nodes) the long cases: a controller restart
// under policy, an upgrade of Antrea by `kubectl apply` of a new manifest
// under a stream and a policy, and TestRestarts (restart_test.go: API server,
// etcd, node reboot). Everything is driven as a user would: the antrea-lab
// binary, kubectl-equivalent API calls, and probes run inside pod network
// namespaces with `antrea-lab exec`.
package datapath

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// namespace holds the test's pods.
const namespace = "datapath"

type env struct {
	*labtest.Lab
	pods   map[string]*corev1.Pod // by name
	nodeIP map[string]string      // node name -> underlay IP
	gwIP   map[string]string      // node name -> antrea-gw0 IP
	// killed is the process kill killed, by "component/node".
	killed map[string]lab.Process
	// token reads the agents' /metrics (metricsToken).
	token string
}

// up brings a 2-node Antrea lab up with the given encapsulation and takes it
// down when the test ends (after logging the lab's logs and flows if the test
// failed).
func up(t *testing.T, encap string) *env {
	t.Helper()
	opts := labtest.Options()
	if encap == "noEncap" || encap == lab.TrafficModeNetworkPolicyOnly {
		// noEncap: routed by the underlay, no tunnel; networkPolicyOnly:
		// chained after the lab's primary CNI (ptp), which the lab's
		// routes to the pod CIDRs carry between the nodes.
		opts.TrafficMode = encap
	} else {
		opts.Encap = encap
	}
	return upWith(t, opts, encap)
}

// upWith brings a lab up with opts (described as what in messages) and
// takes it down when the test ends, as up does.
func upWith(t *testing.T, opts lab.Options, encap string) *env {
	t.Helper()
	if reason := labtest.Check(&opts); reason != "" {
		t.Skip(reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), labtest.StartTimeout)
	defer cancel()
	if l := reuseLab(t, ctx, opts, encap); l != nil {
		return envOf(t, ctx, l)
	}
	// A lab left running (e.g. by make demo) holds the fixed namespaces.
	if out, err := labtest.Run(ctx, opts, "down"); err != nil {
		t.Fatalf("antrea-lab down: %v\n%s", err, out)
	}
	l, err := labtest.Start(ctx, opts)
	e := &env{Lab: l}
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpForFailure(t)
		}
		if err := l.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatalf("lab (encap %s, kubelet %s) did not come up: %v", encap, opts.Kubelet, err)
	}
	t.Logf("lab (Antrea, %s, kubelet %s) Ready %.1fs after antrea-lab up", encap, l.Opts.Kubelet, l.UpDuration.Seconds())
	return envOf(t, ctx, l)
}

// envReuse set to 1 makes TestDatapath's Geneve case use a running Ready lab
// of 2 real Geneve nodes (hack/test.sh's, which our conformance suite and
// upstream's e2e.test use after it: one lab start instead of two in make
// test) and leave it running, its namespace deleted.
const envReuse = "ANTREA_DATAPATH_REUSE_LAB"

// reuseLab attaches to the running lab under envReuse, or returns nil when
// none runs. A running lab of other options fails the test: the case would
// not test what it says.
func reuseLab(t *testing.T, ctx context.Context, opts lab.Options, encap string) *labtest.Lab {
	t.Helper()
	if os.Getenv(envReuse) != "1" || encap != "geneve" {
		return nil
	}
	st, err := labtest.WaitForNoLab(ctx, opts, true, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		return nil
	}
	l, err := labtest.Attach(opts)
	if err != nil {
		t.Fatal(err)
	}
	ran := st.Options
	if ran.Encap != "geneve" || ran.TrafficMode != opts.TrafficMode || ran.IPFamily != opts.IPFamily || ran.Encryption != opts.Encryption ||
		l.Opts.Kubelet != lab.KubeletReal || len(l.Nodes) < 2 {
		t.Fatalf("%s: the running lab is encap %q, traffic mode %q, IP family %q, encryption %q, kubelet %s, %d nodes; this case needs 2 real Geneve nodes as labtest.Options() makes them",
			envReuse, ran.Encap, ran.TrafficMode, ran.IPFamily, ran.Encryption, l.Opts.Kubelet, len(l.Nodes))
	}
	t.Logf("reusing the running lab (%d real nodes, Geneve); it stays up", len(l.Nodes))
	e := &env{Lab: l}
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpForFailure(t)
		}
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := l.Client.CoreV1().Namespaces().Delete(dctx, namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
			return
		}
		if err := labtest.WaitGone(dctx, "namespace "+namespace, func() error {
			_, err := l.Client.CoreV1().Namespaces().Get(dctx, namespace, metav1.GetOptions{})
			return err
		}); err != nil {
			t.Error(err)
		}
	})
	return l
}

// envOf reads the lab's node and gateway addresses.
func envOf(t *testing.T, ctx context.Context, l *labtest.Lab) *env {
	t.Helper()
	e := &env{Lab: l}
	st, err := lab.LoadState(l.Opts.StatePath())
	if err != nil || st == nil {
		t.Fatalf("lab state: %v", err)
	}
	e.nodeIP, e.gwIP = map[string]string{}, map[string]string{}
	for _, n := range st.Nodes {
		e.nodeIP[n.Name] = n.IP
		node, err := l.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.gwIP[n.Name] = strings.TrimSuffix(node.Spec.PodCIDR, ".0/24") + ".1"
	}
	return e
}

func (e *env) dumpForFailure(t *testing.T) {
	for _, n := range e.Nodes {
		out, _ := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "dump-flows", e.BridgeSocket(n)).CombinedOutput()
		t.Logf("flows of %s:\n%s", n, out)
	}
	t.Logf("lab logs:\n%s", e.LogTails(3000))
}

// createPods makes pods pinned to nodes and waits until they are Ready.
func (e *env) createPods(t *testing.T, ctx context.Context, specs map[string]*corev1.Pod) {
	t.Helper()
	if err := labtest.CreateNamespace(ctx, e.Client, namespace, nil); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, p := range specs {
		p.Name, p.Namespace = name, namespace
		p.Labels = map[string]string{"pod": name}
		if _, err := e.Client.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	pods, err := labtest.WaitPodsUsable(ctx, e.Client, namespace, names)
	if err != nil {
		t.Fatal(err)
	}
	e.pods = pods
}

// pinned is a test pod (TCP and UDP 80 and 81) bound to node.
func pinned(node string) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node,
		Containers: []corev1.Container{labtest.TestPodContainer("c", []int{80, 81}, []int{80, 81})}}}
}

// probe runs the test pod client (or ping for ICMP) from a pod, or from a
// node's network namespace when from is "node-N".
func (e *env) probe(ctx context.Context, from, proto, to string) error {
	var argv []string
	if proto == "icmp" {
		argv = []string{"ping", "-c", "1", "-W", "2", to}
	} else {
		argv = []string{filepath.Join(e.Opts.BinDir, "antrea-testpod"), "connect", "--protocol", proto, "--to", net.JoinHostPort(to, "80"), "--timeout", "2s"}
	}
	var out []byte
	var err error
	if strings.HasPrefix(from, "node-") {
		out, err = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", lab.NetNSPrefix + from}, argv...)...).CombinedOutput()
	} else {
		var s string
		s, err = e.Exec(ctx, namespace, from, argv...)
		out = []byte(s)
	}
	if err != nil {
		return fmt.Errorf("%s -> %s %s: %v: %s", from, proto, to, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// probeEventually allows for the first packet lost while ARP and the tunnel
// neighbour resolve (ENVIRONMENT.md), nothing more. When every attempt
// fails the error is a *probeFailure holding the underlay state taken right
// after the first failed attempt, while the loss was fresh.
func (e *env) probeEventually(ctx context.Context, from, proto, to string) error {
	var err error
	var state string
	for i := 0; i < 3; i++ {
		if err = e.probe(ctx, from, proto, to); err == nil {
			return nil
		}
		if i == 0 {
			state = e.UnderlayState(ctx, e.addressOf(from), to)
		}
	}
	return &probeFailure{err: err, stateAtFirstFailure: state}
}

// probeFailure is a probe that failed every attempt.
type probeFailure struct {
	err                 error
	stateAtFirstFailure string
}

func (p *probeFailure) Error() string { return p.err.Error() }

// addressOf is the IP of a pod, or the underlay IP of a node ("node-N").
func (e *env) addressOf(from string) string {
	if ip, ok := e.nodeIP[from]; ok {
		return ip
	}
	return e.ip(from)
}

func (e *env) ip(pod string) string { return e.pods[pod].Status.PodIP }

// envEncaps lists the tunnel types TestDatapath brings a lab up with, or
// noEncap for a lab without a tunnel, or networkPolicyOnly for Antrea
// chained after the lab's ptp, comma-separated (default "geneve":
// make test; make conformance runs VXLAN, GRE, noEncap and networkPolicyOnly labs, about a
// minute each: the tunnels pkg/agent/traceflow's two-node test crosses in
// make test, and noEncap's routed path, which pkg/agent/route's tests and
// the datapath's own tests on real OVS check in make test).
const envEncaps = "ANTREA_DATAPATH_ENCAPS"

func TestDatapath(t *testing.T) {
	encaps := []string{"geneve"}
	if v := os.Getenv(envEncaps); v != "" {
		encaps = strings.Split(v, ",")
	}
	for _, encap := range encaps {
		t.Run(encap, func(t *testing.T) {
			e := up(t, encap)
			ctx, cancel := context.WithTimeout(context.Background(), 11*time.Minute)
			defer cancel()
			e.createPods(t, ctx, map[string]*corev1.Pod{
				"a1":    pinned("node-1"),
				"a2":    pinned("node-1"),
				"b1":    pinned("node-2"),
				"iperf": pinned("node-2"),
			})
			e.startIperfServer(t, ctx, "iperf")
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
							if f, ok := err.(*probeFailure); ok {
								t.Logf("underlay state after the first failed attempt:\n%s", f.stateAtFirstFailure)
							}
							// Taken now: the dump at the end comes after the restarts.
							t.Logf("underlay state after the last attempt:\n%s", e.UnderlayState(ctx, e.addressOf(c.from), c.to))
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
			// The restarts do not depend on the tunnel type: with VXLAN
			// and GRE they run under make reliability, and their labs
			// check the connectivity above and a ClusterIP.
			restarts := encap == "geneve" || long(t)
			// Without a tunnel, the agent restart (its policy also shows
			// that pod traffic between nodes keeps its source) runs under
			// make reliability; make test checks noEncap's connectivity
			// and a ClusterIP.
			if restarts {
				t.Run("an agent restart keeps the stream and the policy, and networks a pod made meanwhile", func(t *testing.T) {
					e.agentRestartUnderPolicy(t, ctx)
				})
			}
			if encap == "geneve" && e.Real() && long(t) {
				t.Run("a controller restart keeps the policy, networks a pod made meanwhile, realizes a change made meanwhile and rewrites no flow", func(t *testing.T) {
					e.outageKeepsPolicy(t, ctx, e.controllerOutage(20*time.Second))
					e.deletePolicy(t, ctx, "a1-only-from-b1")
				})
			}
			// A Service to b1 (the lab's kube-dns and kubernetes Services
			// are there too): its group must come back with the flows.
			vip := e.serviceTo(t, ctx, "to-b1", e.pods["b1"])
			if err := e.probeEventually(ctx, "a1", "tcp", vip); err != nil {
				t.Fatalf("through a ClusterIP: %v", err)
			}
			if !restarts {
				return
			}
			// ovs-vswitchd comes back in about 8 s here.
			t.Run("flows, groups and meters come back after ovs-vswitchd restarts, and no connection crosses the policy meanwhile", func(t *testing.T) {
				e.ovsRestartUnderPolicy(t, ctx, "ovs-vswitchd", vip, 20*time.Second)
			})
			// A second restart of the antrea-ovs container waits out
			// kubelet's 10-s back-off: about 40 s in all. Once, with
			// Geneve, under make reliability.
			if encap == "geneve" && e.Real() && long(t) {
				t.Run("the same after ovsdb-server restarts", func(t *testing.T) {
					e.ovsRestartUnderPolicy(t, ctx, "ovsdb-server", vip, 35*time.Second)
				})
			}
			if encap == "geneve" && e.Real() && long(t) {
				t.Run("an upgrade keeps the TCP stream and never lets a forbidden connection through", func(t *testing.T) {
					e.testUpgrade(t, ctx)
				})
			}
		})
	}
}

// long says whether the long cases (minutes each: the controller restart,
// the upgrade) run: under ANTREA_RELIABILITY (make reliability), not in make
// test, which keeps the short ones.
func long(t *testing.T) bool {
	if os.Getenv(envReliability) == "" {
		t.Logf("the controller restart and upgrade cases run under %s=1 (make reliability)", envReliability)
		return false
	}
	return true
}

// syncBuffer is a bytes.Buffer that a command writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startIperfServer runs the host's iperf3 server inside the pod's netns (the
// pod's own image has no iperf3; entering its netns is what `antrea-lab
// exec` does) until the test ends, and waits until it listens.
func (e *env) startIperfServer(t *testing.T, ctx context.Context, pod string) {
	t.Helper()
	netns, err := labtest.PodNetNS(e.pods[pod])
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command("nsenter", "--net="+netns, "--", "iperf3", "--server", "--forceflush")
	var out syncBuffer
	srv.Stdout, srv.Stderr = &out, &out
	// Not in our process group: a ^C of the test must not leave it behind
	// unwaited, the cleanup below kills it by PID.
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := srv.Start(); err != nil {
		t.Fatalf("start iperf3 --server in pod %s (netns %s): %v", pod, netns, err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(srv.Process.Pid, syscall.SIGKILL)
		<-done
	})
	labtest.WaitFor(t, ctx, "iperf3 to listen in pod "+pod, func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("iperf3 --server exited: %v: %s", err, out.String())
		default:
		}
		if !strings.Contains(out.String(), "Server listening") {
			return errors.New("not listening yet: " + out.String())
		}
		return nil
	})
}

// streamSurvives runs a 6-second iperf3 TCP stream from a1 (node-1) to the
// iperf pod (node-2) and restarts component on both nodes in the middle; the
// stream must complete without an error.
func (e *env) streamSurvives(t *testing.T, ctx context.Context, component string, whileDown ...func()) {
	t.Helper()
	iperf := exec.CommandContext(ctx, filepath.Join(e.Opts.BinDir, "antrea-lab"), append(labtest.Flags(e.Opts),
		"exec", "-n", namespace, "a1", "--", "iperf3", "-c", e.ip("iperf"), "-t", "6", "-i", "1", "-b", "50M")...)
	var out bytes.Buffer
	iperf.Stdout, iperf.Stderr = &out, &out
	if err := iperf.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	for _, n := range []string{"node-1", "node-2"} {
		e.kill(t, component, n)
	}
	for _, f := range whileDown {
		f()
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

// agentRestartUnderPolicy kills the agent on both nodes while NetworkPolicy
// lets only a1 reach b1 (issue 17 item 1): the established iperf stream
// survives; a2's probe of b1, one every 10 ms for the whole restart,
// connects 0 times (the flows stay in OVS while the agent is down and are
// adopted, not rewritten, by the new one); a1 keeps connecting; and a pod
// created while the agents are down starts once they are back, networked.
func (e *env) agentRestartUnderPolicy(t *testing.T, ctx context.Context) {
	t.Helper()
	e.ensureB1OnlyFromA1(t, ctx)
	const window = "25s"
	forbidden := e.background(ctx, "a2", "antrea-testpod", "connect", "--to", e.ip("b1")+":80",
		"--timeout", "200ms", "--every", "10ms", "--for", window)
	allowed := e.background(ctx, "a1", "antrea-testpod", "connect", "--to", e.ip("b1")+":80",
		"--timeout", "200ms", "--every", "100ms", "--for", window)
	time.Sleep(time.Second)
	start := time.Now()
	e.streamSurvives(t, ctx, "antrea-agent", func() {
		// Made while both agents are down: kubelet's CNI ADD waits for the
		// agent, then the pod starts.
		late := pinned("node-1")
		late.Name, late.Namespace, late.Labels = "late", namespace, map[string]string{"pod": "late"}
		if _, err := e.Client.CoreV1().Pods(namespace).Create(ctx, late, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	})
	t.Logf("agents killed and back (new processes, ready) %.1fs after the kill", time.Since(start).Seconds())
	pods, err := labtest.WaitPodsUsable(ctx, e.Client, namespace, []string{"late"})
	if err != nil {
		t.Fatalf("the pod created while the agents were down: %v", err)
	}
	e.pods["late"] = pods["late"]
	if err := e.probeEventually(ctx, "late", "tcp", e.ip("a2")); err != nil {
		t.Errorf("the pod created while the agents were down has no network: %v", err)
	}
	checkPolicyProbes(t, "while the agents restarted", forbidden, allowed)
}

// kill sends SIGKILL to a process of a node (antrea-agent, ovs-vswitchd):
// on real nodes a container's process, which kubelet restarts (antrea-ovs's
// start_ovs exits when ovs-vswitchd dies); on simulated nodes a daemon of the
// supervisor, which restarts it. It remembers the PID for waitRestarted.
func (e *env) kill(t *testing.T, component, node string) {
	t.Helper()
	procs, err := lab.NodeProcesses(e.Opts, node, component)
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 1 {
		t.Fatalf("want one %s on %s, found %d", component, node, len(procs))
	}
	p := procs[0]
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if e.killed == nil {
		e.killed = map[string]lab.Process{}
	}
	e.killed[component+"/"+node] = p
	t.Logf("killed %s on %s (pid %d)", component, node, p.PID)
}

// waitRestarted waits until component runs again, as a new process, on every
// node where kill killed it.
func (e *env) waitRestarted(t *testing.T, ctx context.Context, component string) {
	t.Helper()
	labtest.WaitFor(t, ctx, component+" restarted on every node", func() error {
		for _, n := range []string{"node-1", "node-2"} {
			procs, err := lab.NodeProcesses(e.Opts, n, component)
			if err != nil {
				return err
			}
			old := e.killed[component+"/"+n]
			restarted := false
			for _, p := range procs {
				restarted = restarted || p.PID != old.PID || p.StartTime != old.StartTime
			}
			if !restarted {
				return fmt.Errorf("%s not running again on %s", component, n)
			}
		}
		return nil
	})
}

// flowCount is the number of flows on a node's br-int (0 while unreachable).
// serviceTo makes a selector-less Service (TCP 80) whose EndpointSlice holds
// pod, and returns its ClusterIP.
func (e *env) serviceTo(t *testing.T, ctx context.Context, name string, pod *corev1.Pod) string {
	t.Helper()
	svc, err := e.Client.CoreV1().Services(namespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP,
			Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready, port, portName, proto := true, int32(80), "tcp", corev1.ProtocolTCP
	_, err = e.Client.DiscoveryV1().EndpointSlices(namespace).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{pod.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &pod.Spec.NodeName}},
		Ports: []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// groupCount is the number of OpenFlow groups on a node's br-int (-1 while
// unreachable).
func (e *env) groupCount(node string) int { return e.ofctlCount(node, "dump-groups", "group_id=") }

// ofctlCount counts marker in the output of ovs-ofctl cmd on a node's
// br-int (-1 while unreachable).
func (e *env) ofctlCount(node, cmd, marker string) int {
	out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", cmd, e.BridgeSocket(node)).Output()
	if err != nil {
		return -1
	}
	return strings.Count(string(out), marker)
}

func (e *env) flowCount(node string) int {
	out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "dump-flows", e.BridgeSocket(node)).Output()
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
