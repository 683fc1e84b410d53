package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"antrea.io/antrea/pkg/lab/images"
)

// A real node is what kind or kubeadm make: kubelet v1.37 and containerd v2
// with runc, pods as real containers from real images. Each node of the lab
// gets, besides its netns,
//   - a private mount namespace, held by `antrea-lab node-mounts` (a process
//     that makes the node's bind mounts and then waits): the kernel tunables
//     kubelet writes are shadowed by files (kubelet never changes the host's
//     sysctls), and the host paths that hostPath volumes and node agents use
//     (/opt/cni/bin, /etc/cni/net.d, /var/run/antrea, ...) are per node;
//   - a cgroup per controller, /sys/fs/cgroup/<controller>/antrea-lab-node-N,
//     which is kubelet's cgroupRoot (cgroup v1, cgroupfs driver);
//   - containerd, kubelet and antrea-agent started inside both namespaces.
// Everything the node makes lives in its directory, its mount namespace (gone
// with its last process) or its cgroups (removed by `down`).

// Kubelet selects what plays kubelet on the lab's nodes.
type Kubelet string

const (
	// KubeletReal runs kubelet + containerd + runc per node (the default).
	KubeletReal Kubelet = "real"
	// KubeletSim runs the node simulator: pods are host processes in a
	// netns, no images, no exec/logs through the API server.
	KubeletSim Kubelet = "sim"
)

const (
	// SandboxImage is the pause image kubelet 1.37 and containerd 2.4 pin.
	SandboxImage = "registry.k8s.io/pause:3.10.2"
	// RegistryPort is the port of the lab's image registry, served on the
	// control plane's underlay address (172.30.0.2:5000).
	RegistryPort = 5000
	// ClusterDNS is the address kubelet puts in pods' resolv.conf: the
	// tenth address of the Service range, as kubeadm and kind do.
	ClusterDNS = "10.96.0.10"
	// ClusterDNSv6 is ClusterDNS of an IPv6-only lab (in ServiceCIDRv6).
	ClusterDNSv6 = "fd00:10:96::a"
	// KubeletPort is where kubelet serves its API (exec, logs, port-forward).
	KubeletPort = 10250
)

// NodeHostPaths are the host paths a real node has of its own: its mount
// namespace binds each to a directory of the node (NodeHostPath), so that
// hostPath volumes, CNI files and agent sockets are per node as on a cluster.
var NodeHostPaths = []string{
	"/var/run/netns",
	"/opt/cni/bin",
	"/etc/cni/net.d",
	"/var/run/antrea",
	"/var/run/openvswitch",
	"/var/log/antrea",
	"/var/lib/cni",
	"/var/lib/antrea",
	"/run/containerd",
}

// shieldedSysctls are the kernel tunables kubelet sets on start (it checks
// them against what it needs): in the node's mount namespace each /proc/sys
// file is covered by a regular file holding the value kubelet wants, so the
// host's settings never change.
var shieldedSysctls = []struct{ path, value string }{
	{"/proc/sys/vm/overcommit_memory", "1"},
	{"/proc/sys/kernel/panic", "10"},
	{"/proc/sys/kernel/panic_on_oops", "1"},
	{"/proc/sys/kernel/keys/root_maxkeys", "1000000"},
	{"/proc/sys/kernel/keys/root_maxbytes", "25000000"},
}

// cgroupControllers are the cgroup v1 hierarchies kubelet and runc use.
var cgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd"}

// bindMount is one mount of a node's mount namespace.
type bindMount struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// Shared makes the mount a shared one (a peer group of its own inside
	// the node), so that mounts made under it later reach the containers
	// that mount it with HostToContainer propagation.
	Shared bool `json:"shared,omitempty"`
}

// sharedNodeHostPaths are the NodeHostPaths whose later sub-mounts the node's
// containers must see: containerd mounts each pod's netns in /var/run/netns,
// and antrea-agent (a container) opens them.
var sharedNodeHostPaths = map[string]bool{"/var/run/netns": true}

// nodeMountsConfig is what `antrea-lab node-mounts` reads.
type nodeMountsConfig struct {
	Binds []bindMount `json:"binds"`
	// Ready is written once every mount is made.
	Ready string `json:"ready"`
}

// NodeHostPath is where a real node keeps its own copy of the host path
// path (one of nodeHostPaths), which its mount namespace binds over path.
func (o Options) NodeHostPath(node, path string) string {
	if path == "/var/run/openvswitch" {
		return o.NodeOVSDir(node) // where the node's ovsdb-server puts db.sock
	}
	return filepath.Join(o.nodeDir(node), "host", strings.TrimPrefix(filepath.Clean(path), "/"))
}
func (o Options) containerdDir(node string) string {
	return filepath.Join(o.nodeDir(node), "containerd")
}

// ContainerdSocket is a real node's CRI endpoint (for crictl/ctr from the host).
func (o Options) ContainerdSocket(node string) string {
	return filepath.Join(o.containerdDir(node), "containerd.sock")
}
func (o Options) kubeletDir(node string) string { return filepath.Join(o.nodeDir(node), "kubelet") }

// nodeCgroup is the name of a node's cgroup in every hierarchy.
func nodeCgroup(node NodeInfo) string { return node.NetNS }

// startRealNode starts a real node: cgroups, mount namespace, containerd and
// kubelet. Antrea comes later, from its manifest (installAntrea).
func (s *supervisor) startRealNode(ctx context.Context, n NodeInfo, c *credentials) error {
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc", "kubelet"} {
		if _, err := os.Stat(filepath.Join(s.opts.KubeBinDir, b)); err != nil {
			return fmt.Errorf("%s of node %s is missing (run hack/install.sh): %w", b, n.Name, err)
		}
	}
	if err := s.makeNodeCgroups(n); err != nil {
		return err
	}
	holder, err := s.startNodeMounts(ctx, n)
	if err != nil {
		return err
	}
	// Every daemon of the node shares its netns and mount namespace.
	enter := []string{"nsenter", "-t", strconv.Itoa(holder), "-m", "-n", "--"}
	if err := s.startContainerd(ctx, n, enter); err != nil {
		return err
	}
	return s.startKubelet(n, c, enter)
}

// makeNodeCgroups creates the node's cgroup in every hierarchy (cpuset needs
// its cpus and mems filled before anything can join it).
func (s *supervisor) makeNodeCgroups(n NodeInfo) error {
	name := nodeCgroup(n)
	for _, ctrl := range cgroupControllers {
		root := filepath.Join(cgroupFS, ctrl)
		if _, err := os.Stat(root); err != nil {
			continue // a hierarchy this machine does not mount
		}
		dir := filepath.Join(root, name)
		if _, err := os.Stat(dir); err == nil {
			return fmt.Errorf("cgroup %s is left over from an earlier lab: run `antrea-lab down` (or rmdir it once it holds no process)", dir)
		}
		if err := s.store.update(func(st *State) { st.Cgroups = append(st.Cgroups, dir) }); err != nil {
			return err
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s of node %s: %w", dir, n.Name, err)
		}
		if ctrl == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(root, f))
				if err != nil {
					return fmt.Errorf("read %s: %w", filepath.Join(root, f), err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("set %s of node %s: %w", f, n.Name, err)
				}
			}
		}
	}
	return nil
}

// startNodeMounts starts the holder of the node's mount namespace and waits
// until its mounts are made. It returns the holder's PID.
func (s *supervisor) startNodeMounts(ctx context.Context, n NodeInfo) (int, error) {
	dir := s.opts.nodeDir(n.Name)
	cfg := nodeMountsConfig{Ready: filepath.Join(dir, "mounts.ready")}
	// Left by the node's previous boot (RebootNode).
	if err := os.Remove(cfg.Ready); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	for _, sc := range shieldedSysctls {
		if _, err := os.Stat(sc.path); err != nil {
			continue // a tunable this kernel lacks: nothing to shield
		}
		f := filepath.Join(dir, "sysctl", strings.ReplaceAll(strings.TrimPrefix(sc.path, "/proc/sys/"), "/", "."))
		if err := writeFile(f, sc.value+"\n"); err != nil {
			return 0, err
		}
		cfg.Binds = append(cfg.Binds, bindMount{Source: f, Target: sc.path})
	}
	for _, p := range NodeHostPaths {
		src := s.opts.NodeHostPath(n.Name, p)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return 0, fmt.Errorf("create %s of node %s: %w", src, n.Name, err)
		}
		if err := s.ensureMountPoint(p); err != nil {
			return 0, err
		}
		cfg.Binds = append(cfg.Binds, bindMount{Source: src, Target: p, Shared: sharedNodeHostPaths[p]})
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return 0, err
	}
	path := filepath.Join(dir, "mounts.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return 0, fmt.Errorf("write mounts of node %s: %w", n.Name, err)
	}
	self, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("find the antrea-lab binary: %w", err)
	}
	// setns into the node netns (not `ip netns exec`, which remounts /sys
	// and hides the cgroup hierarchies), then a new mount namespace that
	// receives the host's mounts but sends none back.
	d, err := s.startDaemonWith("node-mounts", n.Name, n.NetNS,
		[]string{"nsenter", "--net=" + netnsPath(n.NetNS), "--", "unshare", "--mount", "--propagation", "slave", "--"},
		self, "node-mounts", "--config", path)
	if err != nil {
		return 0, err
	}
	if err := d.waitUntil(ctx, "the mounts of node "+n.Name, func(context.Context) bool {
		_, err := os.Stat(cfg.Ready)
		return err == nil
	}); err != nil {
		return 0, err
	}
	return d.proc.PID, nil
}

// ensureMountPoint creates a bind target that the host lacks (an empty
// directory, recorded so that `down` removes it) and its missing parents.
func (s *supervisor) ensureMountPoint(path string) error {
	real, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err == nil {
		path = filepath.Join(real, filepath.Base(path))
	}
	var missing []string
	for p := path; p != "/"; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		missing = append(missing, p)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if err := s.store.update(func(st *State) { st.MountPoints = append(st.MountPoints, p) }); err != nil {
			return err
		}
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create mount point %s: %w", p, err)
		}
	}
	return nil
}

// containerdConfig is containerd's config.toml (version 3) for a node: its
// own root, state and socket; runc with a per-node root; the CRI plugin with
// the lab's CNI paths, the pinned pause image and the lab registry as the
// mirror of every registry host.
func (o Options) containerdConfig(node string) string {
	dir := o.containerdDir(node)
	return fmt.Sprintf(`# containerd of lab node %[1]s, written by antrea-lab.
version = 3
root = %[2]q
state = %[3]q

[grpc]
  address = %[4]q

[ttrpc]
  address = %[5]q

[debug]
  level = "info"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[6]q
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = %[7]q

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # No CAP_SYS_RESOURCE here: containers may only raise their OOM score.
  restrict_oom_score_adj = true
  # Pod netns mounts in /var/run/netns as on any node: there the node's
  # mount namespace binds a directory of its own, shared with the containers
  # that mount it (antrea-agent opens the netns paths the CNI ADD names).
  netns_mounts_under_state_dir = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %[8]q
        Root = %[9]q
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[10]q, %[11]q]
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
`, node, filepath.Join(dir, "root"), filepath.Join(dir, "state"), o.ContainerdSocket(node),
		o.ContainerdSocket(node)+".ttrpc", SandboxImage, filepath.Join(dir, "certs.d"),
		filepath.Join(o.KubeBinDir, "runc"), filepath.Join(dir, "runc"), "/opt/cni/bin", o.CNIBinDir)
}

// startContainerd writes the node's containerd config and registry mirrors,
// starts containerd and waits for its socket.
func (s *supervisor) startContainerd(ctx context.Context, n NodeInfo, enter []string) error {
	dir := s.opts.containerdDir(n.Name)
	cfgPath := filepath.Join(dir, "config.toml")
	if err := writeFile(cfgPath, s.opts.containerdConfig(n.Name)); err != nil {
		return err
	}
	if err := images.WriteHostsDir(filepath.Join(dir, "certs.d"), registryAddr()); err != nil {
		return fmt.Errorf("registry mirrors of node %s: %w", n.Name, err)
	}
	d, err := s.startDaemonWith("containerd", n.Name, n.NetNS, enter, filepath.Join(s.opts.KubeBinDir, "containerd"), "--config", cfgPath)
	if err != nil {
		return err
	}
	sock := s.opts.ContainerdSocket(n.Name)
	return d.waitUntil(ctx, "containerd's socket of node "+n.Name, func(ctx context.Context) bool {
		var dl net.Dialer
		c, err := dl.DialContext(ctx, "unix", sock)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// kubeletConfig is the KubeletConfiguration of a node: cgroup v1 with the
// cgroupfs driver under the node's cgroup, no host-wide side effects (no OOM
// score, no swap check, no eviction, no image GC), serving TLS with a
// certificate of the lab CA and authenticating the API server's client
// certificate, authorizing through the API server.
func (o Options) kubeletConfig(n NodeInfo, files nodeKubeletFiles) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":                   "kubelet.config.k8s.io/v1beta1",
		"kind":                         "KubeletConfiguration",
		"failCgroupV1":                 false,
		"cgroupDriver":                 "cgroupfs",
		"cgroupRoot":                   "/" + nodeCgroup(n),
		"cgroupsPerQOS":                true,
		"enforceNodeAllocatable":       []string{"pods"},
		"oomScoreAdj":                  0,
		"failSwapOn":                   false,
		"evictionHard":                 map[string]string{},
		"mergeDefaultEvictionSettings": false,
		"imageGCHighThresholdPercent":  100,
		"imageGCLowThresholdPercent":   99,
		"protectKernelDefaults":        false,
		"serializeImagePulls":          false,
		"containerRuntimeEndpoint":     "unix://" + o.ContainerdSocket(n.Name),
		"podLogsDir":                   filepath.Join(o.kubeletDir(n.Name), "pod-logs"),
		"staticPodPath":                filepath.Join(o.kubeletDir(n.Name), "manifests"),
		"address":                      n.kubeletAddress(),
		"port":                         KubeletPort,
		"readOnlyPort":                 0,
		"healthzBindAddress":           "127.0.0.1",
		"tlsCertFile":                  files.servingCert,
		"tlsPrivateKeyFile":            files.servingKey,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": files.clientCA},
		},
		"authorization": map[string]any{"mode": "Webhook"},
		"clusterDNS":    []string{o.clusterDNS()},
		"clusterDomain": "cluster.local",
		"resolvConf":    files.resolvConf,
		// false breaks /stats/summary (kubectl top, e2e's resource checks).
		"localStorageCapacityIsolation": true,
	}
	return yaml.Marshal(cfg)
}

// nodeKubeletFiles are the files a node's kubelet reads.
type nodeKubeletFiles struct {
	servingCert, servingKey string
	clientCA                string
	resolvConf              string
}

// startKubelet writes the node's kubelet configuration and starts kubelet.
// It registers the Node itself; readiness follows once the node's CNI
// configuration exists (antrea-agent writes it).
func (s *supervisor) startKubelet(n NodeInfo, c *credentials, enter []string) error {
	dir := s.opts.kubeletDir(n.Name)
	kf := c.kubelets[n.Name]
	kf.resolvConf = filepath.Join(dir, "resolv.conf")
	// Pods of dnsPolicy Default and hostNetwork pods read this; the lab has
	// no upstream resolver (only the cluster DNS, for ClusterFirst pods).
	if err := writeFile(kf.resolvConf, "# antrea-lab: nodes have no upstream DNS resolver\noptions ndots:1\n"); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		return err
	}
	data, err := s.opts.kubeletConfig(n, kf)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := writeFile(cfgPath, string(data)); err != nil {
		return err
	}
	_, err = s.startDaemonWith("kubelet", n.Name, n.NetNS, enter, filepath.Join(s.opts.KubeBinDir, "kubelet"),
		"--config="+cfgPath,
		"--kubeconfig="+c.kubeconfigs[n.Name],
		"--hostname-override="+n.Name,
		"--node-ip="+nodeIPFlag(n),
		"--root-dir="+filepath.Join(dir, "root"),
		"--cert-dir="+filepath.Join(dir, "pki"),
		"--v=1")
	return err
}

// writeFile writes data to path, creating its directory.
func writeFile(path, data string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create dir of %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// cgroupFS is where the cgroup hierarchies are mounted.
const cgroupFS = "/sys/fs/cgroup"

// CgroupPIDs lists every process in the cgroup dir or below it, each once.
func CgroupPIDs(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// removeCgroups kills every process left in the lab's cgroups (containers
// whose kubelet and containerd are gone) and removes the cgroups, children
// first. A cgroup holding an exiting process is retried for a while.
func removeCgroups(dirs []string) {
	for _, dir := range dirs {
		for _, pid := range CgroupPIDs(dir) {
			p := Process{Component: "container", PID: pid, StartTime: processStartTime(pid)}
			klog.V(2).InfoS("Killing process left in a lab cgroup", "pid", pid, "cgroup", dir)
			p.terminate(0)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, dir := range dirs {
		for {
			err := removeCgroupTree(dir)
			if err == nil || time.Now().After(deadline) {
				if err != nil {
					klog.ErrorS(err, "Could not remove lab cgroup", "cgroup", dir, "pids", CgroupPIDs(dir))
				}
				break
			}
			for _, pid := range CgroupPIDs(dir) {
				(&Process{PID: pid, StartTime: processStartTime(pid)}).terminate(0)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// removeCgroupTree removes dir and its child cgroups, deepest first.
func removeCgroupTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// LabCgroups lists cgroups with the lab's prefix in any hierarchy,
// including those the lab did not create itself (runc also makes the pods'
// cgroups in the hybrid unified hierarchy).
func LabCgroups() []string {
	var out []string
	hierarchies, _ := os.ReadDir(cgroupFS)
	for _, h := range hierarchies {
		ctrl := h.Name()
		entries, _ := os.ReadDir(filepath.Join(cgroupFS, ctrl))
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), NetNSPrefix) {
				out = append(out, filepath.Join(cgroupFS, ctrl, e.Name()))
			}
		}
	}
	return out
}

// nodeIPFlag is kubelet's --node-ip: the node's IPv4 address, and its IPv6
// one after it in a dual-stack lab (a dual-stack node, IPv4 first as the
// cluster's families are); its IPv6 address alone in an IPv6-only lab.
func nodeIPFlag(n NodeInfo) string {
	if n.IPv6Only {
		return n.IPv6
	}
	if n.IPv6 != "" {
		return n.IP + "," + n.IPv6
	}
	return n.IP
}

// kubeletAddress is where kubelet serves: the node's InternalIP.
func (n NodeInfo) kubeletAddress() string {
	if n.IPv6Only {
		return n.IPv6
	}
	return n.IP
}
