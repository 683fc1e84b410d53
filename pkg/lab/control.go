package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/util/procfs"
)

// The supervisor's control socket: what a test asks of a running lab that
// only the supervisor can do, because the daemons are its children. Stop a
// daemon and keep it stopped (a restartable one is not restarted), start it
// again with the same command line (etcd on the same data dir, kube-apiserver
// on the same flags), and reboot a real node. Requests are plain HTTP over a
// unix socket in the lab directory (root only: the directory's mode).

// controlSocketPath is where the supervisor listens for control requests.
func (o Options) controlSocketPath() string { return filepath.Join(o.Dir, "supervisor.sock") }

// StopComponent stops the daemons of component (on node, "" for the control
// plane's) with SIGTERM, SIGKILL after 10 s (kill: SIGKILL at once), and
// keeps them stopped until StartComponent. It returns the stopped processes.
func StopComponent(ctx context.Context, opts Options, component, node string, kill bool) (string, error) {
	return control(ctx, opts, "stop", url.Values{"component": {component}, "node": {node}, "kill": {strconv.FormatBool(kill)}})
}

// StartComponent starts again the daemons StopComponent stopped, with the
// same command lines, and returns the new processes. It does not wait for
// them to be ready.
func StartComponent(ctx context.Context, opts Options, component, node string) (string, error) {
	return control(ctx, opts, "start", url.Values{"component": {component}, "node": {node}})
}

// RebootNode reboots a real node as a power cycle would: every process of
// the node dies at once (kubelet, containerd, the containers with the
// agent's OVS and the pods, the container shims), what lives in the node's
// tmpfs directories is gone (/var/run/netns, /var/run/antrea,
// /var/run/openvswitch, /run/containerd, containerd's state and runc's root),
// the node's netns is deleted and made again (its links, routes and
// netfilter rules with it), then the node boots: its mounts, containerd and
// kubelet start on the same disk state (kubelet's and containerd's roots,
// /var/lib/antrea with the IPAM reservations, /var/lib/cni, the CNI config
// and plugins), and kubelet recreates the pods' sandboxes. down is how long
// the node stays off before it boots.
func RebootNode(ctx context.Context, opts Options, node string, down time.Duration) (string, error) {
	return control(ctx, opts, "reboot", url.Values{"node": {node}, "down": {down.String()}})
}

func control(ctx context.Context, opts Options, op string, q url.Values) (string, error) {
	sock := opts.controlSocketPath()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://supervisor/"+op+"?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: ask the lab supervisor (%s): %w", op, sock, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s", op, q.Encode(), strings.TrimSpace(string(body)))
	}
	return strings.TrimSpace(string(body)), nil
}

// serveControl listens on the control socket until the supervisor stops.
func (s *supervisor) serveControl() error {
	sock := s.opts.controlSocketPath()
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listen on the control socket %s: %w", sock, err)
	}
	mux := http.NewServeMux()
	handle := func(op string, f func(ctx context.Context, q url.Values) (string, error)) {
		mux.HandleFunc("POST /"+op, func(w http.ResponseWriter, r *http.Request) {
			out, err := f(r.Context(), r.URL.Query())
			if err != nil {
				klog.ErrorS(err, "Control request failed", "op", op, "query", r.URL.RawQuery)
				http.Error(w, err.Error(), http.StatusConflict)
				return
			}
			klog.InfoS("Control request done", "op", op, "query", r.URL.RawQuery, "result", out)
			fmt.Fprintln(w, out)
		})
	}
	handle("stop", func(_ context.Context, q url.Values) (string, error) {
		return s.stopComponent(q.Get("component"), q.Get("node"), q.Get("kill") == "true")
	})
	handle("start", func(_ context.Context, q url.Values) (string, error) {
		return s.startComponent(q.Get("component"), q.Get("node"))
	})
	handle("reboot", func(ctx context.Context, q url.Values) (string, error) {
		down, err := time.ParseDuration(q.Get("down"))
		if err != nil {
			return "", fmt.Errorf("down: %w", err)
		}
		return s.rebootNode(ctx, q.Get("node"), down)
	})
	s.control = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.control.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Control socket stopped", "socket", sock)
		}
	}()
	return nil
}

// liveDaemons are the running daemons of component on node.
func (s *supervisor) liveDaemons(component, node string) []*daemon {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*daemon
	for _, d := range s.daemons {
		if d.proc.Component == component && d.proc.Node == node && !d.exited() && !d.held {
			out = append(out, d)
		}
	}
	return out
}

func (s *supervisor) stopComponent(component, node string, kill bool) (string, error) {
	ds := s.liveDaemons(component, node)
	if len(ds) == 0 {
		return "", fmt.Errorf("no running %s daemon on %q", component, node)
	}
	var pids []string
	for _, d := range ds {
		s.mu.Lock()
		d.held = true // daemonExited does not restart it
		s.mu.Unlock()
		grace := 10 * time.Second
		if kill {
			grace = 0
		}
		d.stop(grace)
		pids = append(pids, strconv.Itoa(d.proc.PID))
	}
	return "stopped " + component + " pid " + strings.Join(pids, ","), nil
}

func (s *supervisor) startComponent(component, node string) (string, error) {
	s.mu.Lock()
	var held []*daemon
	for _, d := range s.daemons {
		if d.proc.Component == component && d.proc.Node == node && d.held && !d.restarted {
			held = append(held, d)
			d.restarted = true
		}
	}
	s.mu.Unlock()
	if len(held) == 0 {
		return "", fmt.Errorf("no stopped %s daemon on %q to start", component, node)
	}
	var pids []string
	for _, d := range held {
		nd, err := s.startDaemonWith(d.proc.Component, d.proc.Node, d.proc.NetNS, d.enter, d.bin, d.args...)
		if err != nil {
			return "", err
		}
		pids = append(pids, strconv.Itoa(nd.proc.PID))
	}
	return "started " + component + " pid " + strings.Join(pids, ","), nil
}

// rebootNode is RebootNode (real nodes only).
func (s *supervisor) rebootNode(ctx context.Context, name string, down time.Duration) (string, error) {
	if s.opts.Kubelet != KubeletReal {
		return "", errors.New("reboot needs real nodes (--kubelet=real)")
	}
	var n NodeInfo
	for _, ni := range s.store.snapshot().Nodes {
		if ni.Name == name {
			n = ni
		}
	}
	if n.Name == "" {
		return "", fmt.Errorf("the lab has no node %q", name)
	}
	start := time.Now()
	// Power off: the node's daemons, then whatever else lives on it.
	for _, c := range []string{"kubelet", "containerd", "node-mounts"} {
		if _, err := s.stopComponent(c, n.Name, true); err != nil {
			return "", err
		}
	}
	// A NIC keeps its MAC across a reboot.
	mac, err := linkMAC(ctx, n.NetNS, "eth0")
	if err != nil {
		return "", err
	}
	killed := s.killNodeLeftovers(n)
	// Whatever else runs in the node's netns (a container shim, a command
	// someone entered it with) dies with the power too.
	for _, p := range pidsInNetNS(n.NetNS) {
		p.terminate(0)
		killed++
	}
	oldNS, _ := procfs.NetNSOf(netnsPath(n.NetNS))
	// tmpfs is empty after a reboot.
	for _, dir := range []string{
		s.opts.NodeHostPath(n.Name, "/var/run/netns"), s.opts.NodeHostPath(n.Name, "/var/run/antrea"),
		s.opts.NodeHostPath(n.Name, "/var/run/openvswitch"), s.opts.NodeHostPath(n.Name, "/run/containerd"),
		filepath.Join(s.opts.containerdDir(n.Name), "state"), filepath.Join(s.opts.containerdDir(n.Name), "runc"),
	} {
		if err := emptyDir(dir); err != nil {
			return "", err
		}
	}
	if err := deleteNetNS(ctx, n.NetNS); err != nil {
		return "", err
	}
	time.Sleep(down)
	// Power on: the netns with its uplink, then the node as at `up`.
	if err := s.remakeNodeNetNS(ctx, n, mac); err != nil {
		return "", fmt.Errorf("%w (processes still in the old netns: %v)", err, pidsInNetNSOf(oldNS))
	}
	holder, err := s.startNodeMounts(ctx, n)
	if err != nil {
		return "", err
	}
	enter := []string{"nsenter", "-t", strconv.Itoa(holder), "-m", "-n", "--"}
	if err := s.startContainerd(ctx, n, enter); err != nil {
		return "", err
	}
	if err := s.startKubelet(n, s.creds, enter); err != nil {
		return "", err
	}
	return fmt.Sprintf("rebooted %s: %d leftover processes killed, off %.1fs, kubelet started %.1fs after the power-off",
		n.Name, killed, down.Seconds(), time.Since(start).Seconds()), nil
}

// killNodeLeftovers kills (SIGKILL) every process in the node's cgroups (its
// containers) and the container shims of its containerd (they run beside
// containerd, not in the node's cgroups), and waits until they are gone.
func (s *supervisor) killNodeLeftovers(n NodeInfo) int {
	var procs []Process
	for _, dir := range s.store.snapshot().Cgroups {
		if filepath.Base(dir) != nodeCgroup(n) {
			continue
		}
		for _, pid := range CgroupPIDs(dir) {
			procs = append(procs, Process{Component: "container", PID: pid, StartTime: processStartTime(pid)})
		}
	}
	sock := s.opts.ContainerdSocket(n.Name)
	pids, _ := procfs.PIDs()
	for _, pid := range pids {
		argv, err := procfs.Cmdline(pid)
		if err != nil {
			continue
		}
		if filepath.Base(argv[0]) != "containerd-shim-runc-v2" {
			continue
		}
		// Its -address is the node's containerd, or it works in a bundle of
		// the node's containerd state.
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if slices.Contains(argv, sock) || strings.HasPrefix(cwd, s.opts.containerdDir(n.Name)+"/") {
			procs = append(procs, Process{Component: "containerd-shim", PID: pid, StartTime: processStartTime(pid)})
		}
	}
	for _, p := range procs {
		p.terminate(0)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range procs {
		for p.Alive() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return len(procs)
}

// remakeNodeNetNS makes a node's netns again as topology.build made it
// (the state already lists it and its veth), its eth0 with the MAC it had.
func (s *supervisor) remakeNodeNetNS(ctx context.Context, n NodeInfo, mac string) error {
	// The old veth goes with the old netns, once nothing holds that.
	port := "v-" + n.Name
	deadline := time.Now().Add(3 * time.Second)
	for run(ctx, "ip", "-n", UnderlayNetNS, "link", "show", port) == nil {
		if time.Now().After(deadline) {
			// Something (a copy of its mount in another mount namespace)
			// keeps the old netns: unplug the cable from the switch side.
			klog.InfoS("The old netns of a rebooted node outlived its deletion; deleting its underlay port", "node", n.Name, "port", port)
			if err := run(ctx, "ip", "-n", UnderlayNetNS, "link", "del", port); err != nil {
				return err
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	steps := [][]string{{"ip", "netns", "add", n.NetNS}, {"ip", "-n", n.NetNS, "link", "set", "lo", "up"}}
	attach := attachCommands(subnetBridge(n.subnet()), n.NetNS, port, "eth0", fmt.Sprintf("%s/%d", n.IP, subnetPrefix(n.subnet()).Bits()))
	// The MAC before the link comes up (attach's first command makes it).
	steps = append(steps, attach[0], []string{"ip", "-n", n.NetNS, "link", "set", "eth0", "address", mac})
	steps = append(steps, attach[1:]...)
	v6 := n.IPv6 != ""
	if v6 {
		steps = append(steps, ipv6AddrCommand(n.NetNS, "eth0", netip.MustParseAddr(n.IP)))
	}
	steps = append(steps, nodeForwardingCommands(n.NetNS, v6)...)
	steps = append(steps, routeCommands(n.NetNS, n.subnet(), s.opts.subnets())...)
	steps = append(steps, v6RouteCommands(v6, n.NetNS, n.subnet(), s.opts.subnets())...)
	for _, st := range steps {
		if err := run(ctx, st[0], st[1:]...); err != nil {
			return fmt.Errorf("make netns %s of node %s again: %w", n.NetNS, n.Name, err)
		}
	}
	return nil
}

// pidsInNetNSOf lists the processes (PID and command) in netns ns.
func pidsInNetNSOf(ns procfs.NetNSID) []string {
	var out []string
	pids, _ := procfs.PIDsInNetNS(ns)
	for _, pid := range pids {
		argv, _ := procfs.Cmdline(pid)
		out = append(out, fmt.Sprintf("%d %q", pid, strings.Join(argv, " ")))
	}
	return out
}

// linkMAC is the MAC address of link in netns.
func linkMAC(ctx context.Context, netns, link string) (string, error) {
	out, err := exec.CommandContext(ctx, "ip", "-n", netns, "-o", "link", "show", link).Output()
	if err != nil {
		return "", fmt.Errorf("read the MAC of %s in netns %s: %w", link, netns, err)
	}
	f := strings.Fields(string(out))
	for i := range f[:max(len(f)-1, 0)] {
		if f[i] == "link/ether" {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("no MAC in %q", out)
}

// emptyDir removes what dir holds (not dir itself: it may be a mount target).
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("empty %s: %w", dir, err)
		}
	}
	return nil
}
