package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/lab/simnodes"
	"antrea.io/antrea/pkg/testpod"
)

// startTimeout bounds how long `up` waits for every node to become Ready.
const startTimeout = 5 * time.Minute

// supervisor owns a running lab: its daemons are its children.
type supervisor struct {
	opts  Options
	store *stateStore

	mu       sync.Mutex
	daemons  []*daemon
	stopping bool

	dialer   *netnsDialer
	relay    *relay
	registry *http.Server
	control  *http.Server // the control socket (control.go)
	client   kubernetes.Interface
	creds    *credentials
	// logf reports progress to whoever started the lab.
	logf func(format string, args ...any)
}

// Supervise brings the lab up and keeps it running until ctx ends, then tears
// it down. It is `antrea-lab up --foreground`. progress receives one line per
// step; ready is closed once every node is Ready.
func Supervise(ctx context.Context, opts Options, progress func(format string, args ...any)) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	if progress == nil {
		progress = func(string, ...any) {}
	}
	if err := refuseIfRunning(opts); err != nil {
		return err
	}
	if err := os.MkdirAll(opts.logDir(), 0o755); err != nil {
		return fmt.Errorf("create log dir %s: %w", opts.logDir(), err)
	}
	becomeSubreaper()
	pid := os.Getpid()
	s := &supervisor{
		opts: opts,
		store: &stateStore{path: opts.statePath(), st: State{
			Supervisor: Process{Component: "supervisor", PID: pid, StartTime: processStartTime(pid),
				Log: opts.LogPath("supervisor", "")},
			Phase:      PhaseStarting,
			Options:    opts,
			Kubeconfig: opts.KubeconfigPath(),
			StartedAt:  time.Now(),
		}},
		logf: progress,
	}
	if err := s.store.update(func(*State) {}); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	err := s.serveControl()
	if err == nil {
		err = s.start(startCtx)
	}
	cancel()
	if err != nil {
		_ = s.store.update(func(st *State) { st.Phase, st.Message = PhaseFailed, err.Error() })
		progress("lab failed to start: %v", err)
		s.teardown(true)
		return err
	}
	if opts.SimNodes > 0 {
		go s.runSimNodes(ctx)
	}
	st := s.store.snapshot()
	progress("lab ready: %d nodes Ready %.1fs after start", len(st.Nodes), st.ReadyAt.Sub(st.StartedAt).Seconds())
	s.reapUntil(ctx)
	progress("stopping the lab")
	s.teardown(false)
	return nil
}

// reapUntil collects exited orphans (containerd shims of deleted pods) every
// few seconds until ctx ends, leaving alone the daemons' own zombies, which
// their exec.Cmd waits for.
func (s *supervisor) reapUntil(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		keep := make(map[int]bool, len(s.daemons))
		for _, d := range s.daemons {
			keep[d.proc.PID] = true
		}
		s.mu.Unlock()
		reapOrphansExcept(keep)
	}
}

// refuseIfRunning fails when a supervisor of this lab still runs, and removes
// the leftovers of a dead one.
func refuseIfRunning(opts Options) error {
	st, err := LoadState(opts.statePath())
	if err != nil {
		return err
	}
	if st != nil && st.Supervisor.Alive() && st.Supervisor.PID != os.Getpid() {
		return fmt.Errorf("a lab is already running (supervisor pid %d, phase %s, state %s); run `antrea-lab down` first",
			st.Supervisor.PID, st.Phase, opts.statePath())
	}
	if st != nil || len(labNetNS()) > 0 || len(LabCgroups()) > 0 {
		klog.InfoS("Removing leftovers of a previous lab", "state", opts.statePath())
		cleanup(context.Background(), opts, st, false)
	}
	return nil
}

// startOutsideDNS starts the outside host's DNS server for OutsideZone,
// its zone file written afresh with DefaultOutsideZone.
func (s *supervisor) startOutsideDNS() error {
	file := s.opts.OutsideZoneFile()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	if err := testpod.WriteZone(file, DefaultOutsideZone()); err != nil {
		return err
	}
	s.logf("starting the outside host's DNS server for %s on %s:53 (zone file %s)", OutsideZone, s.opts.outsideDNSIP(), file)
	_, err := s.startDaemon("outside-dns", "", OutsideNetNS, filepath.Join(s.opts.BinDir, "antrea-testpod"),
		"dns", "--zone", OutsideZone, "--file", file, "--addr", net.JoinHostPort(s.opts.outsideDNSIP().String(), "53"))
	return err
}

func (s *supervisor) start(ctx context.Context) error {
	s.logf("creating network namespaces: underlay %s (%d subnet(s)), control plane %s, %d nodes", UnderlayNetNS, s.opts.subnets(), ControlPlaneNetNS, s.opts.Nodes)
	topo := &topology{store: s.store}
	nodes, err := topo.build(ctx, s.opts)
	if err != nil {
		return err
	}
	s.logf("starting the outside host's server on %s (TCP/UDP %d, HTTP %d: GET /clientip)", OutsideIP(), OutsidePort, OutsideHTTPPort)
	if _, err := s.startDaemon("outside-server", "", OutsideNetNS, filepath.Join(s.opts.BinDir, "antrea-testpod"),
		"serve", "--name", "outside", "--tcp", fmt.Sprint(OutsidePort), "--udp", fmt.Sprint(OutsidePort),
		"--http", fmt.Sprint(OutsideHTTPPort)); err != nil {
		return err
	}
	if err := s.startOutsideDNS(); err != nil {
		return err
	}
	if err := s.startSFTPServer(); err != nil {
		return err
	}
	s.logf("starting the router (BIRD, AS %d) on %s", RouterASN, RouterIP())
	if err := s.startRouter(); err != nil {
		return err
	}
	s.logf("making certificates and kubeconfigs")
	creds, err := s.writeCredentials(nodes)
	if err != nil {
		return err
	}
	s.creds = creds
	dialer, err := newNetNSDialer(ControlPlaneNetNS)
	if err != nil {
		return err
	}
	s.dialer = dialer
	if err := s.startControlPlane(ctx, creds); err != nil {
		return err
	}
	r, err := startRelay(fmt.Sprintf("127.0.0.1:%d", APIServerPort), net.JoinHostPort(controlPlaneIP().String(), fmt.Sprint(APIServerPort)), s.dialer)
	if err != nil {
		return err
	}
	s.relay = r
	if s.opts.Kubelet == KubeletReal {
		s.logf("building the lab's images where their inputs changed, serving them on %s", registryAddr())
		if err := EnsureImages(s.opts); err != nil {
			return err
		}
		if err := s.startRegistry(); err != nil {
			return err
		}
	}
	if s.opts.Runtime == RuntimeAntrea && s.opts.Kubelet == KubeletSim {
		s.logf("starting antrea-controller and registering the controlplane.antrea.io APIService")
		if err := s.startAntreaController(ctx, creds); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		s.logf("starting node %s (netns %s, underlay IP %s, runtime %s)", n.Name, n.NetNS, n.IP, s.opts.Runtime)
		if err := s.startNode(ctx, n, creds); err != nil {
			return err
		}
	}
	if s.opts.trafficMode() == TrafficModeNetworkPolicyOnly {
		s.logf("installing the primary CNI (ptp with host-local on each node's pod CIDR) and the network's routes to the pods")
		if err := s.installPrimaryCNI(ctx, nodes); err != nil {
			return err
		}
	}
	if s.opts.Runtime == RuntimeAntrea && s.opts.Kubelet == KubeletReal {
		s.logf("installing Antrea: kubectl apply -f %s (with the lab's overlay)", s.opts.SourceManifest())
		if err := s.installAntrea(ctx, len(nodes)); err != nil {
			return err
		}
		if s.opts.Proxy == ProxyKube {
			s.logf("installing kube-proxy (nftables mode) for Services; AntreaProxy is disabled")
			if err := s.installKubeProxy(ctx, len(nodes)); err != nil {
				return err
			}
		}
		s.logf("installing cluster DNS: CoreDNS as kube-dns (%s)", s.opts.clusterDNS())
		if err := s.installKubeDNS(ctx); err != nil {
			return err
		}
		if s.opts.FlowVisibility {
			s.logf("installing the Flow Aggregator: kubectl apply -f %s", filepath.Join(s.opts.manifestDir(), FlowAggregatorManifestName))
			if err := s.installFlowAggregator(ctx); err != nil {
				return err
			}
		}
		if s.opts.UI {
			s.logf("installing the web UI: kubectl apply -f %s", filepath.Join(s.opts.manifestDir(), UIManifestName))
			if err := s.installUI(ctx); err != nil {
				return err
			}
		}
	}
	s.logf("waiting for %d nodes to be Ready", len(nodes))
	if err := s.waitNodesReady(ctx, len(nodes)); err != nil {
		return err
	}
	if s.opts.SimNodes > 0 {
		s.logf("adding %d simulated nodes (sim-node-NNNNN, pod CIDRs from %s, no containers)", s.opts.SimNodes, simnodes.DefaultCIDR)
		if err := s.addSimNodes(ctx); err != nil {
			return err
		}
	}
	return s.store.update(func(st *State) { st.Phase, st.ReadyAt = PhaseReady, time.Now() })
}

// daemonExited logs a daemon that ended while the lab was meant to run.
func (s *supervisor) daemonExited(d *daemon) {
	s.mu.Lock()
	stopping, held := s.stopping, d.held
	s.mu.Unlock()
	if stopping {
		return
	}
	if held {
		klog.InfoS("Daemon stopped on request", "component", d.proc.Component, "node", d.proc.Node, "pid", d.proc.PID)
		return
	}
	klog.ErrorS(d.err, "Daemon exited", "component", d.proc.Component, "node", d.proc.Node, "pid", d.proc.PID, "log", d.proc.Log)
	if !restartable[d.proc.Component] {
		return
	}
	go func() {
		time.Sleep(restartDelay)
		s.mu.Lock()
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			return
		}
		nd, err := s.startDaemonWith(d.proc.Component, d.proc.Node, d.proc.NetNS, d.enter, d.bin, d.args...)
		if err != nil {
			klog.ErrorS(err, "Could not restart daemon", "component", d.proc.Component, "node", d.proc.Node)
			return
		}
		klog.InfoS("Restarted daemon", "component", d.proc.Component, "node", d.proc.Node, "pid", nd.proc.PID)
	}()
}

// apiClient is a client of the API server that dials inside the cp netns, so
// it works before (and without) the relay.
func (s *supervisor) apiClient(creds *credentials) (kubernetes.Interface, error) {
	c, err := kubernetes.NewForConfig(s.restConfig(creds))
	if err != nil {
		return nil, fmt.Errorf("API server client: %w", err)
	}
	return c, nil
}

// restConfig is the admin's client configuration, dialing inside the cp netns.
func (s *supervisor) restConfig(creds *credentials) *rest.Config {
	return &rest.Config{
		Host: "https://" + net.JoinHostPort(controlPlaneIP().String(), fmt.Sprint(APIServerPort)),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   creds.pki.CA.CertPEM,
			CertData: creds.admin.CertPEM,
			KeyData:  creds.admin.KeyPEM,
		},
		Dial:    s.dialer.DialContext,
		Timeout: 10 * time.Second,
	}
}

func (s *supervisor) waitNodesReady(ctx context.Context, want int) error {
	var last string
	for {
		nodes, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			ready := 0
			for _, n := range nodes.Items {
				if nodeReady(&n) && n.Spec.PodCIDR != "" {
					ready++
				}
			}
			msg := fmt.Sprintf("%d/%d nodes Ready with a podCIDR", ready, want)
			if msg != last {
				klog.InfoS("Waiting for nodes", "ready", ready, "want", want)
				last = msg
			}
			if ready == want {
				if err := routePodCIDRsFromControlPlane(ctx, nodes.Items); err != nil {
					return err
				}
				break
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for nodes to be Ready (%s): %w; see the nodesim logs in %s", last, ctx.Err(), s.opts.logDir())
		case <-time.After(250 * time.Millisecond):
		}
	}
	// Pods need the default ServiceAccount, which kube-controller-manager creates.
	for {
		_, err := s.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			klog.V(2).InfoS("Waiting for the default ServiceAccount", "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for ServiceAccount default/default: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// teardown stops every daemon (newest first, so nodes go before the API
// server) and removes everything the lab made. keepLogs leaves the logs of a
// lab that failed to start for the user to read.
func (s *supervisor) teardown(keepLogs bool) {
	_ = s.store.update(func(st *State) { st.Phase = PhaseStopping })
	s.mu.Lock()
	s.stopping = true
	daemons := append([]*daemon(nil), s.daemons...)
	s.mu.Unlock()
	if s.control != nil {
		_ = s.control.Close()
	}
	if s.relay != nil {
		_ = s.relay.Close()
	}
	for i := len(daemons) - 1; i >= 0; i-- {
		d := daemons[i]
		klog.InfoS("Stopping daemon", "component", d.proc.Component, "node", d.proc.Node, "pid", d.proc.PID)
		d.stop(10 * time.Second)
	}
	s.stopRegistry()
	if s.dialer != nil {
		_ = s.dialer.Close()
	}
	st := s.store.snapshot()
	cleanup(context.Background(), s.opts, &st, keepLogs)
	// Every daemon has been waited for: what is left are orphans we inherited.
	reapOrphans()
}

// httpGetInNetNS is a plain HTTP GET dialed inside the cp netns (etcd health).
func (s *supervisor) httpGetInNetNS(ctx context.Context, url string) error {
	client := &http.Client{Transport: &http.Transport{DialContext: s.dialer.DialContext}, Timeout: 2 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// cleanup removes what a lab made: its processes (recorded ones, and any
// process living in one of its namespaces), its namespaces (recorded ones and
// any with the lab's prefix, which includes pod namespaces), the files it
// recorded and its directory.
func cleanup(ctx context.Context, opts Options, st *State, keepLogs bool) {
	var netnsList []string
	if st != nil {
		for i := len(st.Processes) - 1; i >= 0; i-- {
			st.Processes[i].terminate(5 * time.Second)
		}
		netnsList = append(netnsList, st.NetNS...)
	}
	seen := map[string]bool{}
	for _, n := range netnsList {
		seen[n] = true
	}
	// Pods' namespaces come first so their veths go before the nodes' bridges.
	var all []string
	for _, n := range labNetNS() {
		if !seen[n] {
			all = append(all, n)
		}
	}
	for i := len(netnsList) - 1; i >= 0; i-- {
		all = append(all, netnsList[i])
	}
	for _, n := range all {
		for _, p := range pidsInNetNS(n) {
			klog.InfoS("Stopping process left in a lab netns", "pid", p.PID, "netns", n)
			p.terminate(2 * time.Second)
		}
	}
	// Containers of real nodes live in netns that containerd made; their
	// cgroups find them (kubelet and containerd are stopped by now).
	var cgroups []string
	if st != nil {
		cgroups = append(cgroups, st.Cgroups...)
	}
	cgroups = append(cgroups, LabCgroups()...)
	removeCgroups(cgroups)
	for _, n := range all {
		if err := deleteNetNS(ctx, n); err != nil {
			klog.ErrorS(err, "Could not delete lab netns", "netns", n)
		}
	}
	if st != nil {
		for i := len(st.MountPoints) - 1; i >= 0; i-- {
			// Only empty directories: the lab made them as mount targets.
			if err := os.Remove(st.MountPoints[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				klog.ErrorS(err, "Could not remove a mount point the lab made", "path", st.MountPoints[i])
			}
		}
		for _, f := range st.Files {
			if err := os.RemoveAll(f); err != nil {
				klog.ErrorS(err, "Could not remove lab file", "path", f)
			}
		}
	}
	removeLabDir(opts.Dir, keepLogs)
}

// removeLabDir removes the lab directory, or all but its logs.
func removeLabDir(dir string, keepLogs bool) {
	if dir == "" || filepath.Dir(dir) == dir {
		return // never the root
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	for _, e := range entries {
		if keepLogs && e.Name() == "logs" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			klog.ErrorS(err, "Could not remove lab file", "path", filepath.Join(dir, e.Name()))
		}
	}
	if !keepLogs {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			klog.ErrorS(err, "Could not remove lab dir", "path", dir)
		}
	}
}

// routePodCIDRsFromControlPlane routes each node's pod CIDR from the control
// plane's netns to that node, as a cluster's control-plane machines reach
// pods (kube-apiserver's pods/proxy and services/proxy, which upstream's e2e
// specs read results through, dial pod IPs; webhooks and aggregated APIs
// served by pods too). The node forwards between the underlay and its pods.
func routePodCIDRsFromControlPlane(ctx context.Context, nodes []corev1.Node) error {
	for _, n := range nodes {
		// The node's first InternalIP of each family: a dual-stack lab's
		// node has an IPv6 one too (underlay6.go), through which its IPv6
		// pod CIDR is routed.
		ips := map[bool]string{}
		for _, a := range n.Status.Addresses {
			if _, ok := ips[strings.Contains(a.Address, ":")]; a.Type == corev1.NodeInternalIP && !ok {
				ips[strings.Contains(a.Address, ":")] = a.Address
			}
		}
		for _, cidr := range n.Spec.PodCIDRs {
			ip := ips[strings.Contains(cidr, ":")]
			if ip == "" {
				continue
			}
			if err := run(ctx, "ip", "-n", ControlPlaneNetNS, "route", "replace", cidr, "via", ip); err != nil {
				return fmt.Errorf("route node %s's pod CIDR from the control plane: %w", n.Name, err)
			}
		}
	}
	return nil
}
