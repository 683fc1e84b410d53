package antctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"antrea.io/antrea/pkg/antctl/query"
	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// antctl check cluster: can the nodes run Antrea? In local mode (inside the
// antrea-agent container, or any shell on a node with --local) it checks
// this node; from a laptop it runs a DaemonSet of the agent's image on every
// node (in kube-system, where it mounts the antrea-config ConfigMap like
// the agent), runs `antctl check cluster --local -o json` in each pod, prints
// every node's verdicts and deletes the DaemonSet, also on failure and
// Ctrl-C.

// Verdicts of a check.
const (
	verdictPass = "PASS"
	verdictWarn = "WARN"
	verdictFail = "FAIL"
	verdictSkip = "SKIP"
)

// checkResult is one check's verdict.
type checkResult struct {
	Node    string `json:"node,omitempty"`
	Check   string `json:"check"`
	Verdict string `json:"verdict"`
	Detail  string `json:"detail"`
	// Fix says what to do when the verdict is not PASS.
	Fix string `json:"fix,omitempty"`
}

// hostView is where the local checks look; tests point it elsewhere.
type hostView struct {
	procDir, sysDir, modulesDir, devDir string
	release                             string
	// addLink creates a link and deletes it again: can this kernel make it?
	addLink func(netlink.Link) error
	// ovsVersion reads ovs_version from OVSDB.
	ovsVersion func(ctx context.Context) (string, error)
	// lookPath finds a program (the OVS daemons when OVSDB is not up).
	lookPath func(string) (string, error)
}

func realHost(l *localNode) *hostView {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	return &hostView{procDir: "/proc", sysDir: "/sys", modulesDir: "/lib/modules", devDir: "/dev",
		release: unix.ByteSliceToString(uts.Release[:]),
		addLink: func(link netlink.Link) error {
			if err := netlink.LinkAdd(link); err != nil {
				return err
			}
			return netlink.LinkDel(link)
		},
		ovsVersion: l.ovsVersion,
		lookPath:   exec.LookPath,
	}
}

// kernelModule says whether a module is loaded, built in or can be loaded
// from /lib/modules/<release>.
func (h *hostView) kernelModule(name string) (state string, ok bool) {
	if _, err := os.Stat(filepath.Join(h.sysDir, "module", name)); err == nil {
		return "loaded", true
	}
	dir := filepath.Join(h.modulesDir, h.release)
	for _, f := range []string{"modules.builtin", "modules.dep"} {
		file, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			path, _, _ := strings.Cut(sc.Text(), ":")
			base := filepath.Base(path)
			for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
				if base == name+ext || base == strings.ReplaceAll(name, "_", "-")+ext {
					file.Close()
					if f == "modules.builtin" {
						return "built into the kernel", true
					}
					return "loadable (" + filepath.Join(dir, path) + ")", true
				}
			}
		}
		file.Close()
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Sprintf("not loaded, and %s cannot be read to tell whether it can be", dir), false
	}
	return "not loaded, not built in, not in " + dir, false
}

// localChecks runs the preflight checks of this node.
func localChecks(ctx context.Context, conf *agentconfig.AgentConfig, h *hostView) []checkResult {
	var out []checkResult
	add := func(check, verdict, detail, fix string) {
		out = append(out, checkResult{Check: check, Verdict: verdict, Detail: detail, Fix: fix})
	}
	netdev := conf.OVSDatapathType == agentconfig.DatapathNetdev

	// Open vSwitch.
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	v, err := h.ovsVersion(vctx)
	cancel()
	switch {
	case err == nil && v != "":
		add("ovs", verdictPass, fmt.Sprintf("Open vSwitch %s answers on %s", v, filepath.Join(conf.OVSRunDir, "db.sock")), "")
	default:
		var have []string
		for _, p := range []string{"ovsdb-server", "ovs-vswitchd"} {
			if path, err := h.lookPath(p); err == nil {
				have = append(have, path)
			}
		}
		if len(have) == 2 {
			add("ovs", verdictWarn, fmt.Sprintf("OVSDB does not answer on %s (%s); the daemons are installed (%s)",
				filepath.Join(conf.OVSRunDir, "db.sock"), rootCause(err), strings.Join(have, ", ")),
				"the antrea-ovs container starts them (start_ovs); check it: kubectl -n kube-system logs ds/antrea-agent -c antrea-ovs")
		} else {
			add("ovs", verdictFail, fmt.Sprintf("OVSDB does not answer on %s (%s) and ovsdb-server/ovs-vswitchd are not installed here",
				filepath.Join(conf.OVSRunDir, "db.sock"), rootCause(err)),
				"run Antrea's agent image, whose antrea-ovs container runs Open vSwitch, or install openvswitch-switch")
		}
	}

	// Datapath.
	mod, modOK := h.kernelModule("openvswitch")
	if netdev {
		tun := filepath.Join(h.devDir, "net", "tun")
		if _, err := os.Stat(tun); err != nil {
			add("datapath", verdictFail, "ovsDatapathType netdev (userspace) needs "+tun+" for the bridge's internal ports, and it is missing",
				"load the tun module (modprobe tun) or give the OVS container the device")
		} else {
			add("datapath", verdictPass, fmt.Sprintf("ovsDatapathType netdev: OVS's userspace datapath, no kernel module needed (the openvswitch module is %s); %s exists", mod, tun), "")
		}
	} else {
		if modOK {
			add("datapath", verdictPass, "ovsDatapathType system: the openvswitch kernel module is "+mod, "")
		} else {
			add("datapath", verdictFail, "ovsDatapathType system needs the openvswitch kernel module, which is "+mod,
				"install the kernel's openvswitch module (e.g. linux-modules-extra-"+h.release+") and modprobe openvswitch, or set ovsDatapathType: netdev in antrea-agent.conf")
		}
	}

	// Tunnels.
	encap := conf.EncapMode() == agentconfig.EncapModeEncap
	for _, tt := range []string{agentconfig.TunnelGeneve, agentconfig.TunnelVXLAN, agentconfig.TunnelGRE} {
		name := "tunnel-" + tt
		module := tt
		if tt == agentconfig.TunnelGRE {
			module = "ip_gre"
		}
		used := encap && conf.TunnelType == tt
		var link netlink.Link
		attrs := netlink.LinkAttrs{Name: "antctl-chk-" + tt[:3]}
		switch tt {
		case agentconfig.TunnelGeneve:
			link = &netlink.Geneve{LinkAttrs: attrs, FlowBased: true}
		case agentconfig.TunnelVXLAN:
			link = &netlink.Vxlan{LinkAttrs: attrs, FlowBased: true, Port: 4789}
		default:
			// The kernel datapath's GRE port is a flow-based gretap; the
			// library picks ip6gretap unless Local is an IPv4 address, and
			// sends no address for a flow-based one.
			link = &netlink.Gretap{LinkAttrs: attrs, FlowBased: true, Local: net.IPv4zero}
		}
		err := h.addLink(link)
		switch {
		case err == nil && used:
			add(name, verdictPass, fmt.Sprintf("a %s netdev can be created (tunnelType %s is in use)", tt, tt), "")
		case err == nil:
			add(name, verdictPass, fmt.Sprintf("a %s netdev can be created (not in use: tunnelType %s)", tt, conf.TunnelType), "")
		case netdev:
			add(name, verdictPass, fmt.Sprintf("no %s netdev here (%v), and none is needed: the netdev datapath encapsulates in userspace", tt, err), "")
		case !used:
			add(name, verdictWarn, fmt.Sprintf("a %s netdev cannot be created (%v); not in use (tunnelType %s)", tt, err, conf.TunnelType),
				"needed only to switch tunnelType to "+tt+": modprobe "+module)
		case errors.Is(err, syscall.EPERM):
			add(name, verdictFail, fmt.Sprintf("creating a %s netdev was refused (%v): run the check with CAP_NET_ADMIN (the agent container is privileged)", tt, err),
				"run antctl check cluster from the antrea-agent container or as root")
		default:
			add(name, verdictFail, fmt.Sprintf("tunnelType %s is in use and a %s netdev cannot be created (%v)", tt, tt, err),
				"load the "+module+" kernel module (modprobe "+module+"), or set tunnelType to a type the kernel has")
		}
	}

	// Conntrack.
	ctCount := filepath.Join(h.procDir, "sys", "net", "netfilter", "nf_conntrack_count")
	b, ctErr := os.ReadFile(ctCount)
	ctMod, _ := h.kernelModule("nf_conntrack")
	switch {
	case ctErr == nil && netdev:
		add("conntrack", verdictPass, fmt.Sprintf("OVS's userspace conntrack tracks pod traffic; netfilter conntrack (for the node's NodePort path) holds %s entries", strings.TrimSpace(string(b))), "")
	case ctErr == nil:
		add("conntrack", verdictPass, fmt.Sprintf("nf_conntrack is up (%s entries): OVS's ct() uses it with the system datapath", strings.TrimSpace(string(b))), "")
	case netdev:
		add("conntrack", verdictWarn, "OVS's userspace conntrack tracks pod traffic, but netfilter conntrack is not up ("+ctMod+"): NodePort traffic to the node cannot be DNATed",
			"modprobe nf_conntrack")
	default:
		add("conntrack", verdictFail, "the system datapath's ct() needs nf_conntrack, which is "+ctMod,
			"modprobe nf_conntrack (and nf_nat), or use a kernel that has them")
	}
	return out
}

type checkClusterOptions struct {
	*options
	local   bool
	output  string
	image   string
	timeout time.Duration
}

func newCheckCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check cluster|installation",
		Short: "Check that nodes can run Antrea (cluster) or that a running Antrea works (installation)",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0], "check")
		},
	}
	cmd.AddCommand(newCheckClusterCommand(o), newCheckInstallationCommand(o))
	return cmd
}

func newCheckClusterCommand(o *options) *cobra.Command {
	c := &checkClusterOptions{options: o}
	cmd := &cobra.Command{
		Use:   "cluster [--local] [-o table|json]",
		Short: "Preflight: OVS and its version, datapath and kernel module, tunnels, conntrack, per node",
		Long: `Check whether nodes can run Antrea: Open vSwitch present and its version, the datapath
type (netdev or system) and whether the kernel has what it needs (the openvswitch
module, /dev/net/tun), whether geneve, vxlan and gretap netdevs can be created, and conntrack.
Each check has a verdict (PASS, WARN, FAIL) and, when it is not PASS, the fix.

In local mode (in the antrea-agent container, or --local on a node) it checks this
node with the agent's conf file (defaults without one). From a laptop it runs the
agent's image as a DaemonSet on every node (kube-system, with the antrea-config
ConfigMap mounted as the agent has it), runs the local check in each pod and deletes
the DaemonSet again, also on failure or Ctrl-C. It exits 1 when a check fails.`,
		Example: `  antctl check cluster
  ` + localModeHowTo + ` check cluster`,
		Args: cobra.NoArgs,
		RunE: c.run,
	}
	cmd.Flags().BoolVar(&c.local, "local", false, "Check this machine (implied in the antrea-agent container)")
	cmd.Flags().StringVarP(&c.output, "output", "o", outputTable, "Output format: table or json")
	// --test-image is upstream antctl's name (pkg/antctl/raw/check/cluster/command.go).
	cmd.Flags().StringVar(&c.image, "test-image", "", "The image of the checker pods (default: the antrea-agent DaemonSet's)")
	cmd.Flags().StringVar(&c.image, "image", "", "The image of the checker pods (the same as --test-image)")
	_ = cmd.Flags().MarkHidden("image")
	cmd.Flags().DurationVarP(&c.timeout, "timeout", "t", 3*time.Minute, "How long to wait for the checker pods")
	return cmd
}

func (c *checkClusterOptions) run(cmd *cobra.Command, _ []string) error {
	if c.output != outputTable && c.output != outputJSON {
		return fmt.Errorf("unknown output format %q%s; want table or json", c.output, didYouMean(c.output, []string{outputTable, outputJSON}))
	}
	var results []checkResult
	if c.local || c.options.local() {
		conf, err := c.agentConfig()
		if errors.Is(err, errNotLocal) {
			conf, err = agentconfig.Defaults(), nil
		}
		if err != nil {
			return err
		}
		results = localChecks(cmd.Context(), conf, realHost(&localNode{conf: conf}))
		node := c.env.NodeName
		if node == "" {
			node, _ = os.Hostname()
		}
		for i := range results {
			results[i].Node = node
		}
	} else {
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		var err error
		if results, err = c.remote(ctx); err != nil {
			return err
		}
	}
	if err := printChecks(c.env.Out, c.output, results); err != nil {
		return err
	}
	for _, r := range results {
		if r.Verdict == verdictFail {
			return fmt.Errorf("check cluster: %d check(s) failed", countVerdict(results, verdictFail))
		}
	}
	return nil
}

// rootCause is the last part of a chain of "context: cause" messages.
func rootCause(err error) string {
	if err == nil {
		return "no version"
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

func countVerdict(rs []checkResult, v string) int {
	n := 0
	for _, r := range rs {
		if r.Verdict == v {
			n++
		}
	}
	return n
}

func printChecks(w interface{ Write([]byte) (int, error) }, format string, rs []checkResult) error {
	if format == outputJSON {
		return writeObject(w, outputJSON, rs)
	}
	nodes := false
	for _, r := range rs {
		nodes = nodes || r.Node != ""
	}
	t := &table{header: []string{"CHECK", "RESULT", "DETAIL", "FIX"}}
	if nodes {
		t.header = append([]string{"NODE"}, t.header...)
	}
	for _, r := range rs {
		if nodes {
			t.add(r.Node, r.Check, r.Verdict, r.Detail, r.Fix)
		} else {
			t.add(r.Check, r.Verdict, r.Detail, r.Fix)
		}
	}
	return t.write(w)
}

const checkerLabel = "antctl-check"

// remote runs the local check on every node through a DaemonSet of the
// agent's image.
func (c *checkClusterOptions) remote(ctx context.Context) (results []checkResult, err error) {
	cl, err := c.getClients()
	if err != nil {
		return nil, err
	}
	kube := cl.Kube
	image := c.image
	if image == "" {
		ds, err := kube.AppsV1().DaemonSets(antreaNamespace).Get(ctx, agentDaemonSet, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("the antrea-agent DaemonSet names the image to check with (or give --test-image): %w", err)
		}
		for _, ct := range ds.Spec.Template.Spec.Containers {
			if ct.Name == "antrea-agent" {
				image = ct.Image
			}
		}
		if image == "" {
			return nil, fmt.Errorf("the antrea-agent DaemonSet has no antrea-agent container: give --test-image")
		}
	}
	name := "antctl-check-cluster-" + rand.String(5)
	ds := checkerDaemonSet(name, image)
	if _, err := kube.AppsV1().DaemonSets(antreaNamespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating DaemonSet %s/%s: %w", antreaNamespace, name, err)
	}
	fmt.Fprintf(c.env.Err, "Running the checks on every node (DaemonSet %s/%s)...\n", antreaNamespace, name)
	defer func() {
		// Cleanup outlives a cancelled ctx (Ctrl-C).
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if derr := kube.AppsV1().DaemonSets(antreaNamespace).Delete(cctx, name, metav1.DeleteOptions{
			PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); derr != nil && !apierrors.IsNotFound(derr) {
			fmt.Fprintf(c.env.Err, "antctl: could not delete DaemonSet %s/%s: %v (delete it yourself)\n", antreaNamespace, name, derr)
			return
		}
		// Foreground deletion: the DaemonSet goes once its pods are gone.
		if werr := wait.PollUntilContextCancel(cctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := kube.AppsV1().DaemonSets(antreaNamespace).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); werr != nil {
			fmt.Fprintf(c.env.Err, "antctl: DaemonSet %s/%s is still being deleted\n", antreaNamespace, name)
		}
	}()
	var pods []corev1.Pod
	sel := labels.Set{checkerLabel: name}.String()
	werr := wait.PollUntilContextTimeout(ctx, time.Second, c.timeout, true, func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().DaemonSets(antreaNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		list, err := kube.CoreV1().Pods(antreaNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		pods = nil
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				pods = append(pods, p)
			}
		}
		return d.Status.DesiredNumberScheduled > 0 && int(d.Status.DesiredNumberScheduled) == len(pods), nil
	})
	if werr != nil {
		if ctx.Err() != nil {
			return nil, errInterrupted
		}
		fmt.Fprintf(c.env.Err, "antctl: only %d checker pod(s) ran within %s; the nodes without one are reported as failed\n", len(pods), c.timeout)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Spec.NodeName < pods[j].Spec.NodeName })
	ex := execInPod(c.options)
	seen := map[string]bool{}
	for _, p := range pods {
		seen[p.Spec.NodeName] = true
		out, err := execOutput(ctx, ex, antreaNamespace, p.Name, "check", "antctl", "check", "cluster", "--local", "-o", "json")
		var rs []checkResult
		if jerr := json.Unmarshal([]byte(out), &rs); jerr != nil || len(rs) == 0 {
			if err == nil {
				err = jerr
			}
			results = append(results, checkResult{Node: p.Spec.NodeName, Check: "checker", Verdict: verdictFail,
				Detail: fmt.Sprintf("the check did not run in pod %s: %v", p.Name, err), Fix: "kubectl -n kube-system describe pod " + p.Name})
			continue
		}
		for i := range rs {
			rs[i].Node = p.Spec.NodeName
		}
		results = append(results, rs...)
	}
	if names, err := query.NodeNames(ctx, kube); err == nil {
		sort.Strings(names)
		for _, n := range names {
			if !seen[n] {
				results = append(results, checkResult{Node: n, Check: "checker", Verdict: verdictFail,
					Detail: "no checker pod ran on this node", Fix: "kubectl -n kube-system get pods -l " + sel + " -o wide (taints, image pulls)"})
			}
		}
	}
	return results, nil
}

func checkerDaemonSet(name, image string) *appsv1.DaemonSet {
	lbl := map[string]string{checkerLabel: name}
	hostPath := func(vol, path string) corev1.Volume {
		return corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: antreaNamespace, Labels: lbl},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{
					HostNetwork:                   true,
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					NodeSelector:                  map[string]string{"kubernetes.io/os": "linux"},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{
						Name: "check", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"sleep", "3600"},
						Env:             []corev1.EnvVar{{Name: nodeNameEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "antrea-config", MountPath: defaultConfigDir, ReadOnly: true},
							{Name: "host-var-run-openvswitch", MountPath: "/var/run/openvswitch"},
							{Name: "host-lib-modules", MountPath: "/lib/modules", ReadOnly: true},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "antrea-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: antreaConfigMap}}}},
						hostPath("host-var-run-openvswitch", "/var/run/openvswitch"),
						hostPath("host-lib-modules", "/lib/modules"),
					},
				},
			},
		},
	}
}
