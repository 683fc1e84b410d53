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

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// envHybrid turns on TestHybrid (make conformance): a 4-node lab over two
// underlay subnets takes minutes to come up, beyond make test's budget.
const envHybrid = "ANTREA_DATAPATH_HYBRID"

// TestHybrid judges trafficEncapMode hybrid on `antrea-lab up --nodes 4
// --subnets 2 --traffic-mode hybrid` (node-1, node-2 in 172.30.0.0/24,
// node-3, node-4 in 172.30.1.0/24, the router between): pods on every node
// reach each other; what crosses the wire is read by tcpdump and tshark on
// the underlay, never from our own flows: a same-subnet pair's packets
// cross the underlay bridge as plain IP between the pod IPs, a cross-subnet
// pair's cross the router only inside Geneve between the node IPs; the
// receiver sees the sender's pod IP on both paths; a NetworkPolicy denies
// across subnets; a ClusterIP Service works across subnets. It logs one
// iperf3 TCP stream on each path (the figure of docs/design/traffic-modes.md;
// not asserted).
func TestHybrid(t *testing.T) {
	if os.Getenv(envHybrid) == "" {
		t.Skipf("a 4-node lab over two subnets: set %s=1 (make conformance)", envHybrid)
	}
	needTools(t, "tcpdump", "tshark", "iperf3")
	opts := labtest.Options()
	opts.Nodes, opts.Subnets, opts.TrafficMode = 4, 2, "hybrid"
	e := upWith(t, opts, "hybrid over 2 subnets")
	st, err := lab.LoadState(e.Opts.StatePath())
	if err != nil || st == nil {
		t.Fatalf("lab state: %v", err)
	}
	for node, want := range map[string]int{"node-1": 1, "node-2": 1, "node-3": 2, "node-4": 2} {
		if got := st.SubnetOfNode(node); got != want {
			t.Fatalf("%s is in subnet %d, want %d", node, got, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e.createPods(t, ctx, map[string]*corev1.Pod{
		"p1": pinned("node-1"), "p2": pinned("node-2"), "p3": pinned("node-3"), "p4": pinned("node-4"),
	})
	pods := []string{"p1", "p2", "p3", "p4"}

	t.Run("pods on every node reach each other", func(t *testing.T) {
		for _, from := range pods {
			for _, to := range pods {
				if from == to {
					continue
				}
				if err := e.probeEventually(ctx, from, "tcp", e.ip(to)); err != nil {
					t.Errorf("%s -> %s: %v", from, to, err)
				}
			}
		}
	})

	t.Run("same subnet crosses the underlay routed, other subnet encapsulated, and the receiver sees the pod IP", func(t *testing.T) {
		dir := t.TempDir()
		caps := []*capture{
			// node-2's cable: p1 -> p2 (same subnet) must be plain IP.
			e.startCapture(t, ctx, dir, "wire-node-2", lab.UnderlayNetNS, lab.UnderlayPort("node-2"), ""),
			// The router's leg in subnet 2: p1 -> p3 must be Geneve only.
			e.startCapture(t, ctx, dir, "router-subnet-2", lab.RouterNetNS, lab.RouterInterface(2), ""),
			e.startCapture(t, ctx, dir, "pod-p2", podNetNS(t, e, "p2"), "eth0", "tcp port 80"),
			e.startCapture(t, ctx, dir, "pod-p3", podNetNS(t, e, "p3"), "eth0", "tcp port 80"),
		}
		for _, to := range []string{"p2", "p3"} {
			if err := e.probeEventually(ctx, "p1", "tcp", e.ip(to)); err != nil {
				t.Fatalf("p1 -> %s: %v", to, err)
			}
		}
		for _, c := range caps {
			c.stop(t)
		}
		p1, p2, p3 := e.ip("p1"), e.ip("p2"), e.ip("p3")
		n1, n3 := e.nodeIP["node-1"], e.nodeIP["node-3"]
		// Rows: the ip.src and ip.dst lists (outer then inner headers) and
		// the UDP port.
		wire := caps[0].rows(t, ctx)
		plain := count(wire, func(r row) bool { return r.src == p1 && r.dst == p2 && r.udp == "" })
		tunnelled := count(wire, func(r row) bool {
			return r.udp == "6081" && (strings.HasSuffix(r.src, ","+p1) || strings.HasSuffix(r.dst, ","+p1))
		})
		t.Logf("node-2's cable: %d plain packets p1 -> p2, %d Geneve packets carrying p1's", plain, tunnelled)
		if plain == 0 {
			t.Errorf("no unencapsulated packet %s -> %s on node-2's cable:\n%s", p1, p2, caps[0].text)
		}
		if tunnelled != 0 {
			t.Errorf("p1's packets in Geneve on node-2's cable (node-2 shares node-1's subnet):\n%s", caps[0].text)
		}
		router := caps[1].rows(t, ctx)
		inGeneve := count(router, func(r row) bool {
			return r.udp == "6081" && r.src == n1+","+p1 && r.dst == n3+","+p3
		})
		bare := count(router, func(r row) bool { return r.src == p1 || r.dst == p1 || r.src == p3 || r.dst == p3 })
		t.Logf("router's subnet-2 leg: %d Geneve packets %s -> %s carrying %s -> %s, %d bare pod packets", inGeneve, n1, n3, p1, p3, bare)
		if inGeneve == 0 {
			t.Errorf("no Geneve packet %s -> %s holding %s -> %s at the router:\n%s", n1, n3, p1, p3, caps[1].text)
		}
		if bare != 0 {
			t.Errorf("unencapsulated pod packets at the router:\n%s", caps[1].text)
		}
		for i, dst := range map[int]string{2: p2, 3: p3} {
			rows := caps[i].rows(t, ctx)
			fromP1 := count(rows, func(r row) bool { return r.src == p1 && r.dst == dst })
			other := count(rows, func(r row) bool { return r.dst == dst && r.src != p1 })
			if fromP1 == 0 || other != 0 {
				t.Errorf("%s: %d packets from %s, %d from another source (want the sender's pod IP only):\n%s", caps[i].name, fromP1, p1, other, caps[i].text)
			}
		}
	})

	t.Run("a ClusterIP Service works across subnets", func(t *testing.T) {
		vip := e.serviceTo(t, ctx, "to-p4", e.pods["p4"])
		for _, from := range []string{"p1", "p2", "p3"} {
			if err := e.probeEventually(ctx, from, "tcp", vip); err != nil {
				t.Errorf("%s -> %s (p4 on node-4): %v", from, vip, err)
			}
		}
	})

	t.Run("a NetworkPolicy denies across subnets", func(t *testing.T) {
		// p3 (subnet 2) takes TCP 80 from p4 (subnet 2) only.
		e.createPolicy(t, ctx, ingressFrom("p3-only-from-p4", "p3", "p4", 80))
		labtest.WaitFor(t, ctx, "p1 -> p3 denied", func() error {
			if e.probe(ctx, "p1", "tcp", e.ip("p3")) == nil {
				return fmt.Errorf("p1 still connects to p3")
			}
			return nil
		})
		for _, from := range []string{"p1", "p2"} {
			for i := 0; i < 3; i++ {
				if e.probe(ctx, from, "tcp", e.ip("p3")) == nil {
					t.Errorf("%s (subnet 1) connected to p3 (subnet 2) across the policy", from)
				}
			}
		}
		if err := e.probeEventually(ctx, "p4", "tcp", e.ip("p3")); err != nil {
			t.Errorf("p4 -> p3, which the policy allows: %v", err)
		}
		if err := e.probeEventually(ctx, "p1", "tcp", e.ip("p2")); err != nil {
			t.Errorf("p1 -> p2, which no policy selects: %v", err)
		}
	})

	// The figure: one TCP stream on each path, in one run.
	t.Run("iperf3 one TCP stream routed and encapsulated", func(t *testing.T) {
		for _, p := range []struct{ path, server, node string }{{"same subnet (routed)", "p2", "node-2"}, {"other subnet (Geneve)", "p4", "node-4"}} {
			e.startIperfServer(t, ctx, p.server)
			out, err := e.Exec(ctx, namespace, "p1", "iperf3", "-c", e.ip(p.server), "-t", "5", "-f", "m")
			if err != nil {
				t.Fatalf("iperf3 p1 -> %s: %v\n%s", p.server, err, out)
			}
			t.Logf("figure: iperf3 -c %s -t 5, pod p1 (node-1) -> %s (%s), %s: %s", e.ip(p.server), p.server, p.node, p.path, receiverLine(out))
		}
	})
}

// receiverLine is iperf3's receiver summary (its bitrate).
func receiverLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "receiver") {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return strings.TrimSpace(out)
}

func podNetNS(t *testing.T, e *env, pod string) string {
	t.Helper()
	ns, err := labtest.PodNetNS(e.pods[pod])
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// capture is a tcpdump writing a pcap file, in a netns.
type capture struct {
	name, file string
	cmd        *exec.Cmd
	done       chan error
	out        *syncBuffer
	text       string // tshark's rows, for messages
}

// startCapture runs tcpdump on iface in netns (a name under /var/run/netns
// or a path, as nsenter takes it) into dir/name.pcap and waits until it
// listens; the test's cleanup kills it by PID if stop was not called.
func (e *env) startCapture(t *testing.T, ctx context.Context, dir, name, netns, iface, filter string) *capture {
	t.Helper()
	path := netns
	if !strings.HasPrefix(netns, "/") {
		path = "/var/run/netns/" + netns
	}
	c := &capture{name: name, file: filepath.Join(dir, name+".pcap"), done: make(chan error, 1), out: &syncBuffer{}}
	// --immediate-mode: without it libpcap hands packets over a ring
	// block at a time, and the block of the last ones is lost on SIGINT.
	args := []string{"--net=" + path, "--", "tcpdump", "-Z", "root", "-n", "-U", "--immediate-mode", "-i", iface, "-w", c.file}
	if filter != "" {
		args = append(args, filter)
	}
	c.cmd = exec.Command("nsenter", args...)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("tcpdump %s: %v", name, err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = syscall.Kill(c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
		}
	})
	labtest.WaitFor(t, ctx, "tcpdump "+name+" to listen", func() error {
		if !strings.Contains(c.out.String(), "listening on") {
			return fmt.Errorf("not listening yet: %s", c.out.String())
		}
		return nil
	})
	return c
}

// stop ends the capture (SIGINT: tcpdump flushes its file).
func (c *capture) stop(t *testing.T) {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // the last packets' way to the file
	_ = syscall.Kill(c.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
	}
}

type row struct{ src, dst, udp string }

// rows reads the capture with tshark: per packet the ip.src and ip.dst
// lists (outer header first, then the encapsulated one's) and udp.dstport.
func (c *capture) rows(t *testing.T, ctx context.Context) []row {
	t.Helper()
	// Standard output only: tshark warns on standard error when run as root.
	cmd := exec.CommandContext(ctx, "tshark", "-r", c.file, "-T", "fields", "-e", "ip.src", "-e", "ip.dst", "-e", "udp.dstport")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v: %s", c.file, err, stderr.String())
	}
	c.text = string(out)
	var rows []row
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(l, "\t")
		if len(f) < 3 || f[0] == "" {
			continue
		}
		// A Geneve packet's inner TCP has no UDP port; keep the outer one.
		rows = append(rows, row{src: f[0], dst: f[1], udp: strings.Split(f[2], ",")[0]})
	}
	return rows
}

func count(rows []row, f func(row) bool) int {
	n := 0
	for _, r := range rows {
		if f(r) {
			n++
		}
	}
	return n
}

// needTools fails the test when a tool it runs on the wire is missing.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (hack/install.sh installs it)", tool)
		}
	}
}
