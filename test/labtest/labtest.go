// Package labtest is the harness the test packages share to run against an
// antrea-lab: it finds this checkout's binaries, says why a lab cannot run
// here (a reason to skip), starts `antrea-lab up --foreground` as a child
// and waits until every node is Ready, hands out a Kubernetes client, stops
// the lab and runs `antrea-lab down`, and offers the helpers every lab test
// needs (polling, pod readiness, the test pod container, a pod's netns).
//
// One lab runs per machine (its namespaces and cgroups have fixed names), so
// test packages that start labs must not run in parallel (go test -p 1).
//
// Environment:
//   - ANTREA_BIN: directory of this project's binaries (default <checkout>/bin);
//   - ANTREA_LAB_KUBELET: real (default: kubelet + containerd + runc per
//     node) or sim (the node simulator) for the labs the tests start.
package labtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"antrea.io/antrea/pkg/lab"
)

const (
	// EnvBin overrides the directory of this project's binaries.
	EnvBin = "ANTREA_BIN"
	// EnvKubelet chooses real or simulated nodes for the labs tests start.
	EnvKubelet = "ANTREA_LAB_KUBELET"
	// EnvProxy chooses what realizes Services in the labs tests start
	// (antrea or kube-proxy: antrea-lab up --proxy).
	EnvProxy = "ANTREA_LAB_PROXY"
	// EnvFlowVisibility, when "1", starts the labs with --flow-visibility
	// (the agents' FlowExporter on, the Flow Aggregator deployed);
	// EnvFlowAggregator is its earlier name, still read.
	EnvFlowVisibility = "ANTREA_LAB_FLOW_VISIBILITY"
	EnvFlowAggregator = "ANTREA_LAB_FLOW_AGGREGATOR"
	// EnvUI, when "1", starts the labs with --ui (the web UI deployed).
	EnvUI = "ANTREA_LAB_UI"
	// StartTimeout bounds a lab's bring-up: the supervisor's own 5 minutes
	// plus building the lab's images when their inputs changed.
	StartTimeout = 7 * time.Minute
	// stopTimeout bounds the supervisor's orderly teardown before SIGKILL.
	stopTimeout = 90 * time.Second
)

// RepoRoot is the checkout the test runs in: the nearest directory above the
// working directory (a test package's) whose go.mod is this module's.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module antrea.io/antrea\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no antrea.io/antrea go.mod above the working directory")
		}
		dir = parent
	}
}

// Options are the options of a test lab of this checkout: its binaries
// (ANTREA_BIN overrides bin/), _output/ for the lab directory and the
// Kubernetes and CNI binaries, 2 nodes with the Antrea runtime and Geneve,
// and real nodes unless ANTREA_LAB_KUBELET says sim. Callers adjust the
// result, then Check it.
func Options() lab.Options {
	opts := lab.DefaultOptions()
	root, err := RepoRoot()
	if err != nil {
		root, _ = os.Getwd()
	}
	opts.BinDir = os.Getenv(EnvBin)
	if opts.BinDir == "" {
		opts.BinDir = filepath.Join(root, "bin")
	}
	opts.Dir = filepath.Join(root, "_output", "lab")
	opts.KubeBinDir = filepath.Join(root, "_output", "bin")
	opts.CNIBinDir = filepath.Join(root, "_output", "cni", "bin")
	opts.Nodes = 2
	opts.Encap = "geneve"
	opts.Runtime = lab.RuntimeAntrea
	opts.Kubelet = lab.KubeletReal
	if k := os.Getenv(EnvKubelet); k != "" {
		opts.Kubelet = lab.Kubelet(k)
	}
	if p := os.Getenv(EnvProxy); p != "" {
		opts.Proxy = lab.Proxy(p)
	}
	opts.FlowVisibility = os.Getenv(EnvFlowVisibility) == "1" || os.Getenv(EnvFlowAggregator) == "1"
	opts.UI = os.Getenv(EnvUI) == "1"
	return opts
}

// Check validates opts (filling defaults) and returns why a lab with them
// cannot run on this machine, or "" when it can.
func Check(opts *lab.Options) string {
	if os.Geteuid() != 0 {
		return "lab tests need root (the lab creates network namespaces and cgroups)"
	}
	if err := opts.Validate(); err != nil {
		return err.Error()
	}
	need := []string{
		filepath.Join(opts.BinDir, "antrea-lab"), filepath.Join(opts.BinDir, "antrea-testpod"),
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"} {
		need = append(need, filepath.Join(opts.KubeBinDir, b))
	}
	var tools []string
	if opts.Runtime == lab.RuntimeAntrea {
		for _, b := range []string{"antrea-agent", "antrea-controller", "antrea-cni"} {
			need = append(need, filepath.Join(opts.BinDir, b))
		}
		tools = append(tools, "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl")
	}
	switch opts.Kubelet {
	case lab.KubeletReal:
		need = append(need, filepath.Join(opts.BinDir, "antrea-pause"),
			// The agnhost image is built from this rootfs (hack/install.sh).
			filepath.Join(filepath.Dir(opts.KubeBinDir), "rootfs-agnhost"))
		for _, b := range []string{"kubelet", "containerd", "containerd-shim-runc-v2", "runc", "agnhost"} {
			need = append(need, filepath.Join(opts.KubeBinDir, b))
		}
		tools = append(tools, "nsenter", "unshare")
	case lab.KubeletSim:
		if opts.Runtime == lab.RuntimeReferenceCNI {
			need = append(need, filepath.Join(opts.CNIBinDir, "bridge"), filepath.Join(opts.CNIBinDir, "host-local"))
		}
	}
	for _, f := range need {
		if _, err := os.Stat(f); err != nil {
			return fmt.Sprintf("%s is missing (run make build and hack/install.sh)", f)
		}
	}
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Sprintf("%s is not on PATH (run hack/install.sh)", t)
		}
	}
	return ""
}

// Flags are the global antrea-lab flags that point it at opts' directories;
// they go before the subcommand.
func Flags(opts lab.Options) []string { return opts.GlobalArgs() }

// UpFlags are the flags of `antrea-lab up` that select opts' lab.
func UpFlags(opts lab.Options) []string { return opts.UpArgs() }

// Run runs `antrea-lab <args>` on opts' lab and returns its combined output.
func Run(ctx context.Context, opts lab.Options, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(opts.BinDir, "antrea-lab"), append(Flags(opts), args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Lab is a running lab: started by this process (Start), whose supervisor is
// then a child to stop, or found running (Attach), which is left alone.
type Lab struct {
	Opts lab.Options
	// Client talks to the lab's API server through its host relay.
	Client kubernetes.Interface
	// Config is Client's configuration (for other clients).
	Config *rest.Config
	// Nodes are the lab's node names, in order.
	Nodes []string
	// UpDuration is how long the lab took to be Ready (Start only).
	UpDuration time.Duration

	supervisor *exec.Cmd // `antrea-lab up --foreground`; nil when attached
	waited     chan struct{}
	logPath    string // the supervisor's output
}

// Start brings up a lab with opts as a child `antrea-lab up --foreground`
// and returns once every node is Ready. The returned Lab is never nil: on an
// error, DumpLogs tells why and Stop removes what was made. The calling
// process becomes a child subreaper, so that the daemons of a supervisor
// that dies are reparented to it (PID 1 does not reap here) and ReapZombies
// can collect them.
func Start(ctx context.Context, opts lab.Options) (*Lab, error) {
	l := &Lab{Opts: opts}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return l, fmt.Errorf("become a child subreaper: %w", err)
	}
	logf, err := os.CreateTemp("", "antrea-lab-test-*.log")
	if err != nil {
		return l, err
	}
	l.logPath = logf.Name()
	start := time.Now()
	args := append(append(Flags(opts), "up", "--foreground"), UpFlags(opts)...)
	l.supervisor = exec.Command(filepath.Join(opts.BinDir, "antrea-lab"), args...)
	l.supervisor.Stdout, l.supervisor.Stderr = logf, logf
	// Its own process group: a ^C of the test reaches it through us only.
	l.supervisor.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := l.supervisor.Start(); err != nil {
		logf.Close()
		l.supervisor = nil
		return l, fmt.Errorf("start antrea-lab up --foreground: %w", err)
	}
	l.waited = make(chan struct{})
	go func() {
		_ = l.supervisor.Wait()
		logf.Close()
		close(l.waited)
	}()
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := lab.LoadState(opts.StatePath())
		if err == nil && st != nil && st.Supervisor.PID == l.supervisor.Process.Pid {
			if st.Phase == lab.PhaseReady {
				break
			}
			if st.Phase == lab.PhaseFailed {
				return l, fmt.Errorf("the lab failed to start: %s (supervisor output %s)", st.Message, l.logPath)
			}
		}
		select {
		case <-l.waited:
			return l, fmt.Errorf("antrea-lab up --foreground exited before the lab was Ready (output %s)", l.logPath)
		case <-ctx.Done():
			return l, fmt.Errorf("the lab was not Ready after %s: %w (supervisor output %s)", time.Since(start).Round(time.Second), ctx.Err(), l.logPath)
		case <-tick.C:
		}
	}
	l.UpDuration = time.Since(start)
	return l, l.connect()
}

// Attach returns the lab that is running with opts' directory; Stop leaves
// it running.
func Attach(opts lab.Options) (*Lab, error) {
	l := &Lab{Opts: opts}
	return l, l.connect()
}

// connect makes the client and reads the nodes from the state file.
func (l *Lab) connect() error {
	st, err := lab.LoadState(l.Opts.StatePath())
	if err != nil || st == nil {
		return fmt.Errorf("read the lab state %s: %v", l.Opts.StatePath(), err)
	}
	// The lab's options as it was started (an attached lab may differ).
	l.Opts.Nodes, l.Opts.Encap, l.Opts.Runtime, l.Opts.Kubelet, l.Opts.Proxy = st.Options.Nodes, st.Options.Encap, st.Options.Runtime, st.Options.Kubelet, st.Options.Proxy
	if l.Opts.Kubelet == "" {
		l.Opts.Kubelet = lab.KubeletSim // a state file from before real nodes
	}
	l.Nodes = nil
	for _, n := range st.Nodes {
		l.Nodes = append(l.Nodes, n.Name)
	}
	if len(l.Nodes) == 0 {
		return errors.New("the lab state lists no node")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.Opts.KubeconfigPath())
	if err != nil {
		return fmt.Errorf("read the lab kubeconfig: %w", err)
	}
	// Tests poll and probe alongside their API calls; client-go's default
	// 5 QPS would throttle them for nothing.
	cfg.QPS, cfg.Burst = 50, 100
	l.Config = cfg
	l.Client, err = kubernetes.NewForConfig(cfg)
	return err
}

// Real tells whether the lab's nodes run kubelet and containerd.
func (l *Lab) Real() bool { return l.Opts.Kubelet == lab.KubeletReal }

// Started tells whether this process started the lab (and Stop ends it).
func (l *Lab) Started() bool { return l.supervisor != nil }

// SupervisorPID is the PID of the supervisor this process started (0 if none).
func (l *Lab) SupervisorPID() int {
	if l.supervisor == nil || l.supervisor.Process == nil {
		return 0
	}
	return l.supervisor.Process.Pid
}

// KillSupervisor sends SIGKILL to the supervisor this process started and
// waits until it is gone: its daemons and pods stay behind for `down`.
func (l *Lab) KillSupervisor() error {
	if l.supervisor == nil {
		return errors.New("this process did not start the lab")
	}
	if err := l.supervisor.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-l.waited
	return nil
}

// Stop ends a lab this process started: SIGTERM to the supervisor (an
// orderly teardown), SIGKILL after 90 seconds, then `antrea-lab down` for
// whatever is left, then the zombies are reaped. An attached lab is left
// running.
func (l *Lab) Stop() error {
	if l.supervisor == nil {
		return nil
	}
	select {
	case <-l.waited:
	default:
		_ = l.supervisor.Process.Signal(syscall.SIGTERM)
		select {
		case <-l.waited:
		case <-time.After(stopTimeout):
			_ = l.supervisor.Process.Kill()
			<-l.waited
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := Run(ctx, l.Opts, "down")
	ReapZombies()
	if err != nil {
		return fmt.Errorf("antrea-lab down: %w: %s", err, out)
	}
	if l.logPath != "" {
		os.Remove(l.logPath)
	}
	return nil
}

// Cmd runs `antrea-lab <args>` on this lab.
func (l *Lab) Cmd(ctx context.Context, args ...string) (string, error) {
	return Run(ctx, l.Opts, args...)
}

// Exec runs a host command inside a pod's netns (`antrea-lab exec`).
func (l *Lab) Exec(ctx context.Context, namespace, pod string, argv ...string) (string, error) {
	return l.Cmd(ctx, append([]string{"exec", "-n", namespace, pod, "--"}, argv...)...)
}

// Kubectl runs the lab's kubectl with the lab's kubeconfig and returns its
// standard output and standard error.
func (l *Lab) Kubectl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(l.Opts.KubeBinDir, "kubectl"),
		append([]string{"--kubeconfig=" + l.Opts.KubeconfigPath()}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// OVSDir is the run directory of a node's OVS instance (db.sock, br-int.mgmt).
func (l *Lab) OVSDir(node string) string { return l.Opts.NodeOVSDir(node) }

// BridgeSocket is the OpenFlow management socket of a node's br-int, for
// `ovs-ofctl ... unix:SOCKET`.
func (l *Lab) BridgeSocket(node string) string { return filepath.Join(l.OVSDir(node), "br-int.mgmt") }

// NodeHostPath is where a real node's own copy of a host path lives (its
// mount namespace binds /var/lib/antrea there, ...).
func (l *Lab) NodeHostPath(node, path string) string { return l.Opts.NodeHostPath(node, path) }

// DumpLogs writes the tail (tailBytes) of every component log of the lab and
// of the supervisor's output to w: what to read when bring-up or a test failed.
func (l *Lab) DumpLogs(w io.Writer, tailBytes int) {
	files, _ := filepath.Glob(filepath.Join(l.Opts.LogDir(), "*.log"))
	slices.Sort(files)
	// On real nodes Antrea runs as containers: kubelet keeps their logs.
	for _, c := range []string{"install-cni", "antrea-agent", "antrea-ovs", "antrea-controller"} {
		files = append(files, lab.AntreaContainerLogs(l.Opts, c, "")...)
	}
	if l.logPath != "" {
		files = append(files, l.logPath)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if len(data) > tailBytes {
			data = data[len(data)-tailBytes:]
		}
		fmt.Fprintf(w, "----- %s (last %d bytes)\n%s\n", f, tailBytes, data)
	}
}

// LogTails is DumpLogs into a string, for t.Log.
func (l *Lab) LogTails(tailBytes int) string {
	var b strings.Builder
	l.DumpLogs(&b, tailBytes)
	return b.String()
}

// WaitForNoLab waits until the machine runs no lab and no `antrea-lab up`
// (another test package may bring labs up and down in a row); a lab whose
// supervisor is gone is taken down. With reuse, a Ready lab is returned
// rather than waited for. logf reports why it waits.
func WaitForNoLab(ctx context.Context, opts lab.Options, reuse bool, logf func(format string, args ...any)) (*lab.State, error) {
	for {
		st, err := lab.LoadState(opts.StatePath())
		if err != nil {
			return nil, err
		}
		switch {
		case st == nil:
			pids := labUpProcesses()
			if len(pids) == 0 {
				// Free only if it stays free: a package may be between
				// two labs.
				if err := sleep(ctx, 3*time.Second); err != nil {
					return nil, err
				}
				if again, _ := lab.LoadState(opts.StatePath()); again == nil && len(labUpProcesses()) == 0 {
					return nil, nil
				}
				continue
			}
			logf("antrea-lab up is running (pids %v); waiting for it to end", pids)
			if err := sleep(ctx, 10*time.Second); err != nil {
				return nil, fmt.Errorf("antrea-lab up processes %v kept running: %w", pids, err)
			}
		case !st.Supervisor.Alive():
			logf("removing an abandoned lab (supervisor pid %d is gone)", st.Supervisor.PID)
			dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			out, err := Run(dctx, opts, "down")
			cancel()
			if err != nil {
				return nil, fmt.Errorf("antrea-lab down: %w: %s", err, out)
			}
		case reuse && st.Phase == lab.PhaseReady:
			return st, nil
		default:
			logf("another lab is up (supervisor pid %d, phase %s); waiting for it to go away", st.Supervisor.PID, st.Phase)
			if err := sleep(ctx, 30*time.Second); err != nil {
				return nil, fmt.Errorf("another lab (supervisor pid %d, phase %s) stayed up: %w", st.Supervisor.PID, st.Phase, err)
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// labUpProcesses lists the PIDs of `antrea-lab up` commands on the machine
// (read from /proc; nothing is signalled).
func labUpProcesses() []int {
	var out []int
	for _, pid := range allPIDs() {
		if pid == os.Getpid() {
			continue
		}
		argv := Cmdline(pid)
		if len(argv) > 1 && filepath.Base(argv[0]) == "antrea-lab" && slices.Contains(argv[1:], "up") {
			out = append(out, pid)
		}
	}
	return out
}

// Cmdline is a process's argv (nil when it is gone or a kernel thread).
func Cmdline(pid int) []string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(raw) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
}

// UnderlayState is each node's view of the others on the underlay, taken now:
// ovs-vswitchd's tunnel neighbour cache, the kernel's IPv4 neighbours and
// links of the node's netns, OVS's route table, its drop, tunnel and
// conntrack counters, and the datapath flows that push a tunnel header (their
// outer Ethernet destination is the neighbour OVS used) or drop; and for the
// addresses ips (a lost connection's ends), every datapath flow and OVS
// conntrack entry that names one (or covers it with a masked field). It is
// what to read when a connection across nodes was lost.
func (l *Lab) UnderlayState(ctx context.Context, ips ...string) string {
	var b strings.Builder
	run := func(title string, name string, args ...string) {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		fmt.Fprintf(&b, "--- %s\n%s", title, out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	for _, n := range l.Nodes {
		ctl := filepath.Join(l.OVSDir(n), "ovs-vswitchd.ctl")
		netns := "--net=/run/netns/" + lab.NetNSPrefix + n
		fmt.Fprintf(&b, "===== %s at %s\n", n, time.Now().Format("15:04:05.000"))
		run("tnl/neigh/show", "ovs-appctl", "-t", ctl, "tnl/neigh/show")
		run("ip -4 neigh", "nsenter", netns, "ip", "-4", "neigh", "show")
		run("ip -br link", "nsenter", netns, "ip", "-br", "link", "show")
		run("ovs/route/show", "ovs-appctl", "-t", ctl, "ovs/route/show")
		out, _ := exec.CommandContext(ctx, "ovs-appctl", "-t", ctl, "coverage/show").CombinedOutput()
		fmt.Fprintf(&b, "--- coverage counters of drops, tunnels, neighbours and conntrack\n")
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "drop") || strings.Contains(line, "tnl") || strings.Contains(line, "neigh") ||
				strings.Contains(line, "conntrack") || strings.Contains(line, "route") {
				fmt.Fprintln(&b, line)
			}
		}
		out, _ = exec.CommandContext(ctx, "ovs-appctl", "-t", ctl, "dpctl/dump-flows").CombinedOutput()
		flows := strings.Split(string(out), "\n")
		fmt.Fprintf(&b, "--- datapath flows pushing a tunnel header or dropping\n")
		for _, line := range flows {
			if strings.Contains(line, "tnl_push") || strings.HasSuffix(line, "actions:drop") {
				fmt.Fprintln(&b, line)
			}
		}
		if len(ips) == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- datapath flows naming %s\n", strings.Join(ips, " or "))
		for _, line := range flows {
			if namesAny(line, ips) {
				fmt.Fprintln(&b, line)
			}
		}
		out, _ = exec.CommandContext(ctx, "ovs-appctl", "-t", ctl, "dpctl/dump-conntrack").CombinedOutput()
		fmt.Fprintf(&b, "--- conntrack entries naming %s\n", strings.Join(ips, " or "))
		for _, line := range strings.Split(string(out), "\n") {
			if namesAny(line, ips) {
				fmt.Fprintln(&b, line)
			}
		}
	}
	return b.String()
}

// namesAny tells whether an ovs-appctl dpctl line names one of the addresses
// as a field's value (src=10.0.0.1, ct_nw_dst=10.0.0.1) or covers it with a
// masked one (dst=10.0.0.0/255.255.255.252: a megaflow whose wildcards take
// in an address that had no flow of its own when it was cached): 10.0.0.1
// does not name 10.0.0.10.
func namesAny(line string, ips []string) bool {
	for _, m := range dpctlAddr.FindAllStringSubmatch(line, -1) {
		v, err := netip.ParseAddr(m[1])
		if err != nil || !v.Is4() {
			continue
		}
		mask := netip.MustParseAddr("255.255.255.255")
		if m[2] != "" {
			if mask, err = netip.ParseAddr(m[2]); err != nil || !mask.Is4() {
				continue
			}
		}
		for _, ip := range ips {
			a, err := netip.ParseAddr(ip)
			if err == nil && a.Is4() && masked(a, mask) == masked(v, mask) {
				return true
			}
		}
	}
	return false
}

// dpctlAddr is a field's IPv4 value in a dpctl line, with its mask if any,
// ending the value (a comma, a parenthesis, a space or the line's end).
var dpctlAddr = regexp.MustCompile(`=(\d{1,3}(?:\.\d{1,3}){3})(?:/(\d{1,3}(?:\.\d{1,3}){3}))?(?:[,) ]|$)`)

func masked(a, mask netip.Addr) [4]byte {
	x, m := a.As4(), mask.As4()
	for i := range x {
		x[i] &= m[i]
	}
	return x
}
