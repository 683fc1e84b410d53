package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"antrea.io/antrea/pkg/lab/simnodes"
)

// ProgressPrefix marks the supervisor's progress lines in its log, so that a
// detached `up` can echo them while it waits.
const ProgressPrefix = "antrea-lab: "

// supervisorArgs are the arguments of the detached supervisor `up` starts:
// every option it was given.
func supervisorArgs(opts Options) []string {
	return append(append([]string{"up", "--foreground"}, opts.UpArgs()...), opts.GlobalArgs()...)
}

// Up starts a supervisor in the background (`antrea-lab up --foreground` in
// its own session, logging to logs/supervisor.log), echoes its progress and
// returns once every node is Ready, or with the reason it failed.
func Up(ctx context.Context, opts Options, out io.Writer) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	if err := refuseIfRunning(opts); err != nil {
		return err
	}
	if err := checkFreeSpace(opts, freeBytes); err != nil {
		return err
	}
	if err := os.MkdirAll(opts.logDir(), 0o755); err != nil {
		return fmt.Errorf("create log dir %s: %w", opts.logDir(), err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the antrea-lab binary: %w", err)
	}
	logPath := opts.LogPath("supervisor", "")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("open supervisor log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(self, supervisorArgs(opts)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A session of its own: the supervisor outlives this command and the
	// terminal; `antrea-lab down` stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the lab supervisor: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(out, "%ssupervisor started (pid %d, log %s)\n", ProgressPrefix, cmd.Process.Pid, logPath)

	follow, err := os.Open(logPath)
	if err != nil {
		return fmt.Errorf("read supervisor log: %w", err)
	}
	defer follow.Close()
	reader := bufio.NewReader(follow)
	var partial string
	echo := func() {
		for {
			line, err := reader.ReadString('\n')
			partial += line
			if err != nil {
				return
			}
			if strings.HasPrefix(partial, ProgressPrefix) {
				fmt.Fprint(out, partial)
			}
			partial = ""
		}
	}
	deadline := time.After(startTimeout + time.Minute)
	for {
		echo()
		st, err := LoadState(opts.statePath())
		if err == nil && st != nil && st.Supervisor.PID == cmd.Process.Pid {
			switch st.Phase {
			case PhaseReady:
				fmt.Fprintln(out)
				return Status(ctx, opts, out)
			case PhaseFailed:
				<-exited
				echo()
				return fmt.Errorf("the lab failed to start: %s (logs in %s)", st.Message, opts.logDir())
			}
		}
		select {
		case err := <-exited:
			echo()
			return fmt.Errorf("the lab supervisor exited before the lab was ready (%v); see %s", err, logPath)
		case <-deadline:
			return fmt.Errorf("the lab was not ready after %s; see %s, and run `antrea-lab down`", startTimeout+time.Minute, logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Down stops a running lab (asking its supervisor for an orderly teardown
// first) and removes every netns, veth, process and file of it, also when the
// supervisor is gone.
func Down(ctx context.Context, opts Options, out io.Writer) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	st, err := LoadState(opts.statePath())
	if err != nil {
		return err
	}
	leftover := labNetNS()
	if st == nil && len(leftover) == 0 && len(LabCgroups()) == 0 {
		if _, err := os.Stat(opts.Dir); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(out, "no lab is running")
			return nil
		}
	}
	if st != nil && st.Supervisor.Alive() {
		fmt.Fprintf(out, "stopping the lab supervisor (pid %d)\n", st.Supervisor.PID)
		st.Supervisor.terminate(60 * time.Second)
		// It removed what it could; reread what is left.
		if again, err := LoadState(opts.statePath()); err == nil {
			st = again
		}
	} else if st != nil {
		fmt.Fprintf(out, "the supervisor (pid %d) is gone; removing what its state file lists\n", st.Supervisor.PID)
	}
	cleanup(ctx, opts, st, false)
	if rest := labNetNS(); len(rest) > 0 {
		return fmt.Errorf("lab network namespaces remain: %s", strings.Join(rest, ", "))
	}
	if rest := LabCgroups(); len(rest) > 0 {
		return fmt.Errorf("lab cgroups remain (a process in them would not die): %s", strings.Join(rest, ", "))
	}
	fmt.Fprintln(out, "lab is down: no lab netns, cgroup, mount, process or file remains")
	return nil
}

// hostClient is a client of the lab's API server through the relay.
func hostClient(opts Options) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.KubeconfigPath())
	if err != nil {
		return nil, fmt.Errorf("read lab kubeconfig %s: %w", opts.KubeconfigPath(), err)
	}
	cfg.Timeout = 5 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// Status prints the lab's components, nodes and where to find things.
func Status(ctx context.Context, opts Options, out io.Writer) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	st, err := LoadState(opts.statePath())
	if err != nil {
		return err
	}
	if st == nil {
		fmt.Fprintln(out, "no lab is running (start one with `antrea-lab up`)")
		if rest := labNetNS(); len(rest) > 0 {
			fmt.Fprintf(out, "leftover lab network namespaces: %s (run `antrea-lab down`)\n", strings.Join(rest, ", "))
		}
		return nil
	}
	alive := "running"
	if !st.Supervisor.Alive() {
		alive = "GONE (run `antrea-lab down` to clean up)"
	}
	fmt.Fprintf(out, "lab: phase %s, supervisor pid %d %s, %d nodes, runtime %s, traffic mode %s, encap %s, encryption %s, proxy %s\n",
		st.Phase, st.Supervisor.PID, alive, st.Options.Nodes, st.Options.Runtime, st.Options.trafficMode(), st.Options.Encap, st.Options.encryptionMode(), st.Options.Proxy)
	fmt.Fprintln(out, underlayLine(st))
	if st.Message != "" {
		fmt.Fprintf(out, "message: %s\n", st.Message)
	}
	if !st.ReadyAt.IsZero() {
		fmt.Fprintf(out, "ready %.1fs after start (%s)\n", st.ReadyAt.Sub(st.StartedAt).Seconds(), st.StartedAt.Format(time.RFC3339))
	}
	first, last := ExternalIPRange()
	fmt.Fprintf(out, "outside host: %s (netns %s; TCP/UDP %d answer \"outside\", http://%s:%d/clientip the client's address); free for external IPs: %s-%s\n",
		OutsideIP(), OutsideNetNS, OutsidePort, OutsideIP(), OutsideHTTPPort, first, last)
	fmt.Fprintf(out, "outside host's DNS zone: %s on %s:53 (CoreDNS forwards it; records in %s, read on every query)\n",
		OutsideZone, OutsideIP(), st.Options.OutsideZoneFile())
	fmt.Fprintf(out, "outside host's SFTP server: %s (user %s, password %s; uploads land in %s)\n",
		SFTPURL(), SFTPUser, SFTPPassword, st.Options.SFTPUploadDir())
	fmt.Fprintf(out, "router: BIRD at %s, AS %d (netns %s), peers with nodes in AS %d; its table: birdc -s %s show route all\n",
		RouterIP(), RouterASN, RouterNetNS, NodeASN, st.Options.RouterSocket())
	fmt.Fprintf(out, "client host: %s (netns %s), behind the router (%s), off the nodes' network: ip netns exec %s curl http://LB-IP/\n",
		ClientIP(), ClientNetNS, clientGatewayIP(), ClientNetNS)
	if st.Options.subnets() > 1 {
		fmt.Fprintf(out, "router forwards between the subnets (at %s); it routes no pod CIDR\n", routerLegs(st.Options.subnets()))
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tNODE\tPID\tSTATE\tRSS\tLOG")
	procs := append([]Process{st.Supervisor}, st.Processes...)
	var total uint64
	for _, p := range procs {
		state := "alive"
		if !p.Alive() {
			state = "dead"
		}
		rss := p.RSSBytes()
		total += rss
		node := p.Node
		if node == "" {
			node = "-"
		}
		logPath := p.Log
		if _, err := os.Stat(logPath); err != nil {
			logPath = "-" // a foreground supervisor logs to its terminal
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%dMiB\t%s\n", p.Component, node, p.PID, state, rss>>20, logPath)
	}
	pods := podProcesses(st)
	var podRSS uint64
	for _, p := range pods {
		podRSS += p.RSSBytes()
	}
	tw.Flush()
	fmt.Fprintf(out, "pod processes: %d (%d MiB); total RSS of the lab: %d MiB\n\n", len(pods), podRSS>>20, (total+podRSS)>>20)

	if c, err := hostClient(opts); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(out, "API server: unreachable through the relay: %v\n", err)
		} else {
			// Simulated Nodes (--sim-nodes) are counted, not listed.
			var real []corev1.Node
			for _, n := range nodes.Items {
				if n.Labels[simnodes.Label] != "true" {
					real = append(real, n)
				}
			}
			printNodes(out, real)
			if sim := len(nodes.Items) - len(real); sim > 0 {
				fmt.Fprintf(out, "simulated nodes: %d (label %s=true)\n", sim, simnodes.Label)
			}
		}
	}
	if a := st.Antrea; !a.AppliedAt.IsZero() {
		fmt.Fprintf(out, "\nAntrea: installed from %s (kubectl apply at %s", opts.AppliedManifest(), a.AppliedAt.Format(time.RFC3339))
		if !a.AgentsReadyAt.IsZero() && !a.ControllerReadyAt.IsZero() {
			fmt.Fprintf(out, "; agents ready after %.1fs, controller after %.1fs", a.AgentsReadyAt.Sub(a.AppliedAt).Seconds(),
				a.ControllerReadyAt.Sub(a.AppliedAt).Seconds())
		}
		fmt.Fprintf(out, "); its pods: kubectl -n %s get pods -l app=antrea -o wide\n", AntreaNamespace)
	}
	fmt.Fprintf(out, "\nkubeconfig: export KUBECONFIG=%s\n", st.Kubeconfig)
	fmt.Fprintf(out, "logs:       %s (antrea-lab logs COMPONENT [--node NODE])\n", opts.logDir())
	fmt.Fprintf(out, "tear down:  antrea-lab down\n")
	return nil
}

func printNodes(out io.Writer, nodes []corev1.Node) {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATUS\tINTERNAL-IP\tPOD-CIDR\tAGE")
	for _, n := range nodes {
		status := "NotReady"
		if nodeReady(&n) {
			status = "Ready"
		}
		ip := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP && ip == "" {
				ip = a.Address // the first (IPv4 in a dual-stack lab)
			} else if a.Type == corev1.NodeInternalIP {
				ip += "," + a.Address
			}
		}
		age := time.Since(n.CreationTimestamp.Time).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, status, ip, n.Spec.PodCIDR, age)
	}
	tw.Flush()
}

// podProcesses lists the processes of the lab's pods: those in pod
// namespaces of simulated nodes, and on real nodes the containers (in the
// nodes' cgroups) and their containerd shims (in the node netns, not started
// by the supervisor).
func podProcesses(st *State) []Process {
	var out []Process
	for _, n := range labNetNS() {
		if strings.HasPrefix(n, PodNetNSPrefix) {
			out = append(out, pidsInNetNS(n)...)
		}
	}
	for _, dir := range nodeCgroupDirs("pids") {
		for _, pid := range CgroupPIDs(dir) {
			out = append(out, Process{Component: "container", PID: pid, StartTime: processStartTime(pid)})
		}
	}
	if st != nil && st.Options.Kubelet == KubeletReal {
		daemons := map[int]bool{}
		for _, p := range st.Processes {
			daemons[p.PID] = true
		}
		for _, n := range st.Nodes {
			for _, p := range pidsInNetNS(n.NetNS) {
				if !daemons[p.PID] {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// TotalRSS is the resident memory of every live process of the lab: the
// supervisor, its daemons and the pods' processes.
func TotalRSS(opts Options) (uint64, error) {
	st, err := LoadState(opts.statePath())
	if err != nil || st == nil {
		return 0, err
	}
	var total uint64
	for _, p := range append(append([]Process{st.Supervisor}, st.Processes...), podProcesses(st)...) {
		total += p.RSSBytes()
	}
	return total, nil
}

// PodNetNSPath returns the path of a pod's network namespace, which host
// tools can enter (nsenter --net=PATH, setns): on a real node the netns of the
// pod's processes, found through the pod's cgroup; on a simulated node the
// netns its simulator recorded in the pod's annotation.
func PodNetNSPath(ctx context.Context, opts Options, namespace, pod string) (string, error) {
	c, err := hostClient(opts)
	if err != nil {
		return "", err
	}
	p, err := c.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get pod %s/%s: %w", namespace, pod, err)
	}
	return NetNSPathOfPod(p)
}

// NetNSPathOfPod is PodNetNSPath for a pod object at hand.
func NetNSPathOfPod(p *corev1.Pod) (string, error) {
	if netns := p.Annotations[PodNetNSAnnotation]; netns != "" {
		if !strings.HasPrefix(netns, PodNetNSPrefix) || strings.ContainsAny(netns, "/\x00") {
			return "", fmt.Errorf("pod %s/%s: annotation %s=%q is not a lab pod netns", p.Namespace, p.Name, PodNetNSAnnotation, netns)
		}
		return netnsPath(netns), nil
	}
	pid, err := podProcess(p.UID)
	if err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return fmt.Sprintf("/proc/%d/ns/net", pid), nil
}

// podProcess finds a process of the pod with this UID in its cgroups.
func podProcess(uid types.UID) (int, error) {
	dirs := PodCgroups(string(uid))
	if len(dirs) == 0 {
		return 0, fmt.Errorf("no cgroup pod%s on any node (not started yet, or not a lab pod)", uid)
	}
	for _, dir := range dirs {
		for _, pid := range CgroupPIDs(dir) {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process in cgroups %v yet (is the pod running?)", dirs)
}

// PodCgroups lists the cgroups of the pod with this UID on the lab's real
// nodes, in every hierarchy: kubelet's cgroupfs layout names them pod<UID>,
// under <node cgroup>/kubepods[/<QoS class>].
func PodCgroups(uid string) []string {
	var out []string
	for _, node := range LabCgroups() {
		for _, qos := range []string{"", "burstable", "besteffort"} {
			dir := filepath.Join(node, "kubepods", qos, "pod"+uid)
			if _, err := os.Stat(dir); err == nil {
				out = append(out, dir)
			}
		}
	}
	return out
}

// nodeCgroupDirs lists the real nodes' cgroups in one hierarchy.
func nodeCgroupDirs(controller string) []string {
	var out []string
	for _, d := range LabCgroups() {
		if filepath.Base(filepath.Dir(d)) == controller {
			out = append(out, d)
		}
	}
	return out
}

// Exec runs argv from the host's filesystem inside the pod's netns, with the
// given stdio; our binaries (antrea-testpod) are on its PATH. It returns the
// command's exit code. (For a command of the pod's own image, kubectl exec.)
func Exec(ctx context.Context, opts Options, namespace, pod string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("exec: no command given")
	}
	netns, err := PodNetNSPath(ctx, opts, namespace, pod)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + netns, "--"}, argv...)...)
	cmd.Env = append(os.Environ(), "PATH="+opts.BinDir+":"+os.Getenv("PATH"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("exec in pod %s/%s (netns %s): %w", namespace, pod, netns, err)
	}
	return 0, nil
}

// Logs copies a component's log to out. node selects the node of a per-node
// component (a name like node-1, or just its number). On real nodes the
// components of Antrea's manifest (antrea-agent, antrea-ovs, install-cni,
// antrea-controller) are containers: their logs are read from kubelet's pod
// log files, the newest container first (as `kubectl logs`), without the CRI
// timestamp prefix.
func Logs(opts Options, component, node string, out io.Writer) error {
	if node != "" && !strings.HasPrefix(node, "node-") {
		node = "node-" + node
	}
	if files := AntreaContainerLogs(opts, component, node); len(files) > 0 {
		return copyCRILog(files[len(files)-1], out)
	}
	path := opts.LogPath(component, node)
	f, err := os.Open(path)
	if err != nil {
		entries, _ := os.ReadDir(opts.logDir())
		var names []string
		for _, e := range entries {
			if !e.IsDir() {
				names = append(names, strings.TrimSuffix(e.Name(), filepath.Ext(e.Name())))
			}
		}
		names = append(names, antreaContainers...)
		return fmt.Errorf("no log for %s (available: %s): %w", filepath.Base(path), strings.Join(names, ", "), err)
	}
	defer f.Close()
	_, err = io.Copy(out, f)
	return err
}

// antreaContainers are the containers of Antrea's manifest.
var antreaContainers = []string{"antrea-agent", "antrea-ovs", "install-cni", "antrea-controller"}

// AntreaContainerLogs returns kubelet's log files of the container named
// component in Antrea's pods on node (every node if empty), oldest first.
func AntreaContainerLogs(opts Options, component, node string) []string {
	if !slices.Contains(antreaContainers, component) {
		return nil
	}
	nodes := "node-*"
	if node != "" {
		nodes = node
	}
	files, _ := filepath.Glob(filepath.Join(opts.Dir, "nodes", nodes, "kubelet", "pod-logs",
		AntreaNamespace+"_antrea-*", component, "*.log"))
	sort.Slice(files, func(i, j int) bool {
		fi, errI := os.Stat(files[i])
		fj, errJ := os.Stat(files[j])
		if errI != nil || errJ != nil {
			return files[i] < files[j]
		}
		return fi.ModTime().Before(fj.ModTime())
	})
	return files
}

// copyCRILog copies a CRI log file ("<time> <stream> <P|F> <text>" lines)
// to out as the container wrote it.
func copyCRILog(path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 4)
		if len(fields) < 4 {
			fmt.Fprintln(out, sc.Text())
			continue
		}
		if fields[2] == "P" {
			fmt.Fprint(out, fields[3])
		} else {
			fmt.Fprintln(out, fields[3])
		}
	}
	return sc.Err()
}
