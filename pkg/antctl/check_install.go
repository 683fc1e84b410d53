package antctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	agenttypes "antrea.io/antrea/pkg/agent/types"
)

// antctl check installation: does a running Antrea connect pods? It makes
// its own Namespace with a server pod (agnhost netexec) and a client pod on
// the server's node and one on another node (agnhost pause), a ClusterIP
// Service in front of the server, and checks with `agnhost connect`
// run in the clients: pod to pod on one node and across nodes, pod to the
// Service's ClusterIP, the Service's DNS name, and a NetworkPolicy (deny
// all ingress to the server: refused; then allow the clients: connects).
// The Namespace (and so everything in it) is deleted at the end, also on
// failure and Ctrl-C.

// DefaultCheckImage is the test pods' image: upstream's agnhost, which the
// lab serves.
const DefaultCheckImage = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"

const (
	checkServerPort = 8080
	checkSvcPort    = 80
	checkRoleLabel  = "antctl-check-role"
)

type checkInstallOptions struct {
	*options
	image   string
	output  string
	timeout time.Duration
	// connectTimeout bounds each connection check's wait for its outcome.
	connectTimeout time.Duration
	keep           bool
	// antreaNS is where Antrea runs (upstream's -n/--namespace of this command).
	antreaNS string
	// runFilter selects the checks by name (a regular expression).
	runFilter string
}

// installChecks are the checks of check installation, in the order they run.
var installChecks = []string{"encryption", "pod-to-pod (same node)", "pod-to-pod (across nodes)", "pod-to-Service", "DNS",
	"networkpolicy-deny", "networkpolicy-allow"}

func newCheckInstallationCommand(o *options) *cobra.Command {
	c := &checkInstallOptions{options: o}
	cmd := &cobra.Command{
		Use:   "installation [--test-image IMAGE] [--run REGEX] [-o table|json]",
		Short: "Deploy test pods and check pod-to-pod (one node, across nodes), Service, DNS and NetworkPolicy",
		Long: `Check that a running Antrea connects pods. antctl creates a Namespace
antctl-check-XXXXX with a server pod, a client pod on the server's node and one on
another node, and a ClusterIP Service in front of the server, then checks from the
clients (agnhost connect): pod to pod on one node, pod to pod across nodes, pod to the
Service's ClusterIP, the Service's DNS name (cluster DNS), and a NetworkPolicy: a
deny-all ingress policy on the server must refuse the clients, then a policy allowing
them must let them in again. It prints one line per check and deletes the Namespace
with everything in it, also on failure and Ctrl-C. It exits 1 when a check fails.

--run REGEX runs only the checks whose names match it (` + "`" + `"networkpolicy"` + "`" + `: both policy
checks). -n names the Namespace Antrea runs in: antctl first checks that the
antrea-agent DaemonSet is there.`,
		Example: `  antctl check installation
  antctl check installation --run 'pod-to-pod|Service' -o json`,
		Args: cobra.NoArgs,
		RunE: c.run,
	}
	// Upstream antctl's flags (pkg/antctl/raw/check/installation/command.go), then ours.
	cmd.Flags().StringVarP(&c.antreaNS, "namespace", "n", antreaNamespace, "The Namespace Antrea runs in")
	cmd.Flags().StringVar(&c.runFilter, "run", "", "Run only the checks whose names match this regular expression")
	cmd.Flags().StringVar(&c.image, "test-image", DefaultCheckImage, "The test pods' image (agnhost: netexec, pause, connect)")
	cmd.Flags().StringVar(&c.image, "image", DefaultCheckImage, "The test pods' image (the same as --test-image)")
	_ = cmd.Flags().MarkHidden("image")
	cmd.Flags().StringVarP(&c.output, "output", "o", outputTable, "Output format: table or json")
	cmd.Flags().DurationVarP(&c.timeout, "timeout", "t", 2*time.Minute, "How long to wait for the test pods")
	cmd.Flags().DurationVar(&c.connectTimeout, "connect-timeout", 30*time.Second, "How long each check may retry until it sees the expected outcome (a new pod's flows or a policy take a moment to reach the nodes)")
	cmd.Flags().BoolVar(&c.keep, "keep", false, "Keep the test Namespace (to look at it after a failure)")
	_ = cmd.Flags().MarkHidden("keep")
	return cmd
}

// installCheck is one run's objects.
type installCheck struct {
	kube    kubernetes.Interface
	ex      podExec
	ns      string
	image   string
	timeout time.Duration
	// connectTimeout bounds connectUntil.
	connectTimeout time.Duration
	say            func(format string, args ...any)
	// filter selects the checks; nil runs them all.
	filter *regexp.Regexp
}

// selected says whether --run selects the check.
func (ic *installCheck) selected(check string) bool {
	return ic.filter == nil || ic.filter.MatchString(check)
}

func (c *checkInstallOptions) run(cmd *cobra.Command, _ []string) error {
	if c.output != outputTable && c.output != outputJSON {
		return fmt.Errorf("unknown output format %q%s; want table or json", c.output, didYouMean(c.output, []string{outputTable, outputJSON}))
	}
	var run *regexp.Regexp
	if c.runFilter != "" {
		var err error
		if run, err = regexp.Compile(c.runFilter); err != nil {
			return fmt.Errorf("--run: %w", err)
		}
		n := 0
		for _, name := range installChecks {
			if run.MatchString(name) {
				n++
			}
		}
		if n == 0 {
			return fmt.Errorf("--run %q selects no check; the checks are %s", c.runFilter, strings.Join(installChecks, ", "))
		}
	}
	cl, err := c.getClients()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := cl.Kube.AppsV1().DaemonSets(c.antreaNS).Get(ctx, agentDaemonSet, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no %s DaemonSet in Namespace %s: is Antrea installed there? (-n names its Namespace)", agentDaemonSet, c.antreaNS)
		}
		return fmt.Errorf("DaemonSet %s/%s: %w", c.antreaNS, agentDaemonSet, err)
	}
	ic := &installCheck{kube: cl.Kube, ex: execInPod(c.options), ns: "antctl-check-" + rand.String(5), image: c.image,
		timeout: c.timeout, connectTimeout: c.connectTimeout, say: func(format string, args ...any) { fmt.Fprintf(c.env.Err, format+"\n", args...) },
		filter: run}
	results, err := ic.run(ctx, c.keep)
	if err != nil {
		return err
	}
	if err := printChecks(c.env.Out, c.output, results); err != nil {
		return err
	}
	if n := countVerdict(results, verdictFail); n > 0 {
		return fmt.Errorf("check installation: %d check(s) failed", n)
	}
	return nil
}

// run deploys, checks and cleans up.
func (ic *installCheck) run(ctx context.Context, keep bool) (results []checkResult, err error) {
	nodes, err := ic.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var ready []string
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = append(ready, n.Name)
			}
		}
	}
	sort.Strings(ready)
	if len(ready) == 0 {
		return nil, errors.New("no Ready, schedulable Node to run the test pods on")
	}
	if ic.selected("encryption") {
		results = append(results, encryptionCheck(nodes.Items))
	}
	if _, err := ic.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ic.ns,
		Labels: map[string]string{"app": "antctl-check"}}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating Namespace %s: %w", ic.ns, err)
	}
	ic.say("Deploying the test pods in Namespace %s...", ic.ns)
	defer func() {
		if keep {
			ic.say("Kept Namespace %s (--keep); delete it with: kubectl delete namespace %s", ic.ns, ic.ns)
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		derr := ic.kube.CoreV1().Namespaces().Delete(cctx, ic.ns, metav1.DeleteOptions{})
		if derr != nil && !apierrors.IsNotFound(derr) {
			ic.say("antctl: could not delete Namespace %s: %v (delete it yourself)", ic.ns, derr)
			return
		}
		ic.say("Deleted Namespace %s and everything in it.", ic.ns)
	}()
	nodeA, nodeB := ready[0], ""
	if len(ready) > 1 {
		nodeB = ready[1]
	}
	pods := []*corev1.Pod{ic.pod("server", "server", nodeA, "netexec", fmt.Sprintf("--http-port=%d", checkServerPort)),
		ic.pod("client-local", "client", nodeA, "pause")}
	if nodeB != "" {
		pods = append(pods, ic.pod("client-remote", "client", nodeB, "pause"))
	}
	for _, p := range pods {
		if _, err := ic.kube.CoreV1().Pods(ic.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating pod %s/%s: %w", ic.ns, p.Name, err)
		}
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "server"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{checkRoleLabel: "server"},
		Ports:    []corev1.ServicePort{{Port: checkSvcPort, TargetPort: intstr.FromInt32(checkServerPort), Protocol: corev1.ProtocolTCP}},
	}}
	svc, err = ic.kube.CoreV1().Services(ic.ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating Service %s/server: %w", ic.ns, err)
	}
	running := map[string]*corev1.Pod{}
	werr := wait.PollUntilContextTimeout(ctx, time.Second, ic.timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := ic.kube.CoreV1().Pods(ic.ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if got.Status.Phase == corev1.PodRunning && got.Status.PodIP != "" && podIsReady(got) {
				running[p.Name] = got
			}
		}
		return len(running) == len(pods), nil
	})
	if werr != nil {
		if ctx.Err() != nil {
			return nil, errInterrupted
		}
		var missing []string
		for _, p := range pods {
			if running[p.Name] == nil {
				missing = append(missing, p.Name)
			}
		}
		return nil, fmt.Errorf("test pods %s not running within %s (image %s; kubectl -n %s describe pods)", strings.Join(missing, ", "), ic.timeout, ic.image, ic.ns)
	}
	server := running["server"]
	serverAddr := fmt.Sprintf("%s:%d", server.Status.PodIP, checkServerPort)
	svcAddr := fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, checkSvcPort)
	dnsName := fmt.Sprintf("server.%s.svc.cluster.local:%d", ic.ns, checkSvcPort)
	remote := "client-remote"
	if nodeB == "" {
		remote = ""
	}
	add := func(check, verdict, detail, fix string) {
		if ic.selected(check) {
			results = append(results, checkResult{Check: check, Verdict: verdict, Detail: detail, Fix: fix})
		}
	}
	expect := func(check, client, dest, what, fix string) {
		if !ic.selected(check) {
			return
		}
		took, err := ic.connectUntil(ctx, client, dest, true)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			add(check, verdictFail, fmt.Sprintf("%s: %v", what, err), fix)
			return
		}
		add(check, verdictPass, fmt.Sprintf("%s (%s)", what, took.Round(time.Millisecond)), "")
	}
	flowsHow := "kubectl -n kube-system exec <agent pod of the node> -c antrea-agent -- antctl get ovsflows -p <pod> -n " + ic.ns
	expect("pod-to-pod (same node)", "client-local", serverAddr,
		fmt.Sprintf("client-local → server %s on %s", serverAddr, nodeA), "see docs/troubleshooting.md; "+flowsHow)
	if remote != "" {
		expect("pod-to-pod (across nodes)", remote, serverAddr,
			fmt.Sprintf("client-remote on %s → server %s on %s", nodeB, serverAddr, nodeA), "check the tunnel between the nodes (antctl check cluster; antctl traceflow)")
	} else {
		add("pod-to-pod (across nodes)", verdictSkip, "one schedulable Node only", "")
		remote = "client-local"
	}
	expect("pod-to-Service", remote, svcAddr, fmt.Sprintf("%s → ClusterIP %s of Service server", remote, svcAddr),
		"AntreaProxy (or kube-proxy) realizes ClusterIPs: antctl get ovsflows -T ServiceLB")
	expect("DNS", "client-local", dnsName, fmt.Sprintf("client-local → %s through cluster DNS", dnsName),
		"check the kube-dns pods and Service in kube-system, and the pods' /etc/resolv.conf")

	if ctx.Err() != nil {
		return nil, errInterrupted
	}
	// NetworkPolicy: deny, then allow.
	np := ic.kube.NetworkingV1().NetworkPolicies(ic.ns)
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-ingress-to-server"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{checkRoleLabel: "server"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
	}}
	if !ic.selected("networkpolicy-deny") {
		// --run leaves it out
	} else if _, err := np.Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		add("networkpolicy-deny", verdictFail, "creating NetworkPolicy deny-ingress-to-server: "+err.Error(), "")
	} else if took, err := ic.connectUntil(ctx, "client-local", serverAddr, false); err != nil {
		add("networkpolicy-deny", verdictFail, "deny-ingress-to-server isolates server, yet client-local still connects: "+err.Error(),
			"antctl get networkpolicy -n "+ic.ns+"; antctl get ovsflows -N "+ic.ns+"/deny-ingress-to-server")
	} else {
		add("networkpolicy-deny", verdictPass, fmt.Sprintf("deny-ingress-to-server: client-local → server refused (enforced after %s)", took.Round(time.Millisecond)), "")
	}
	port := intstr.FromInt32(checkServerPort)
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-clients-to-server"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{checkRoleLabel: "server"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{checkRoleLabel: "client"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port}},
		}},
	}}
	if !ic.selected("networkpolicy-allow") {
		// --run leaves it out
	} else if _, err := np.Create(ctx, allow, metav1.CreateOptions{}); err != nil {
		add("networkpolicy-allow", verdictFail, "creating NetworkPolicy allow-clients-to-server: "+err.Error(), "")
	} else {
		expect("networkpolicy-allow", remote, serverAddr, "allow-clients-to-server: "+remote+" → server allowed again",
			"antctl get networkpolicy -n "+ic.ns+" (REALIZED); antctl query endpoint -n "+ic.ns+" -p server")
	}
	if ctx.Err() != nil {
		return nil, errInterrupted
	}
	return results, nil
}

// encryptionCheck reports how pod traffic between nodes is encrypted, from
// what each agent publishes in its Node's annotations: with
// trafficEncryptionMode wireGuard, its public key and the WireGuard backend
// it chose at start (kernel: the kernel's module; userspace: wireguard-go
// behind a TUN device, where the kernel has no WireGuard). Every node or
// none must have a key: a node without one is no peer of the others.
func encryptionCheck(nodes []corev1.Node) checkResult {
	r := checkResult{Check: "encryption"}
	var with, without, parts []string
	for _, n := range nodes {
		key := n.Annotations[agenttypes.NodeWireGuardPublicKeyAnnotation]
		if key == "" {
			without = append(without, n.Name)
			continue
		}
		with = append(with, n.Name)
		backend := n.Annotations[agenttypes.NodeWireGuardBackendAnnotation]
		if backend == "" {
			backend = "backend not reported"
		}
		if len(key) > 8 {
			key = key[:8] + "…"
		}
		parts = append(parts, fmt.Sprintf("%s %s (key %s)", n.Name, backend, key))
	}
	sort.Strings(parts)
	sort.Strings(without)
	switch {
	case len(with) == 0:
		r.Verdict, r.Detail = verdictSkip, "pod traffic between nodes is not encrypted (no Node publishes a WireGuard key: trafficEncryptionMode none)"
	case len(without) == 0:
		r.Verdict, r.Detail = verdictPass, "WireGuard on every node: "+strings.Join(parts, ", ")
	default:
		r.Verdict = verdictFail
		r.Detail = fmt.Sprintf("WireGuard on %s, but %s publish no key: the others hold their pods' traffic (no peer)",
			strings.Join(parts, ", "), strings.Join(without, ", "))
		r.Fix = "check those nodes' antrea-agent logs and their trafficEncryptionMode (every agent must run wireGuard)"
	}
	return r
}

// errInterrupted ends a check cut short (Ctrl-C): the deferred cleanup runs.
var errInterrupted = errors.New("interrupted")

// connectUntil runs agnhost connect from client to dest until the outcome
// is the wanted one (connects, or fails) or connectTimeout (30 s) has
// passed: a policy or a new pod's flows take a moment to reach the nodes. It
// returns how long it took, or the last outcome.
func (ic *installCheck) connectUntil(ctx context.Context, client, dest string, wantOK bool) (time.Duration, error) {
	start := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, ic.connectTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := execOutput(ctx, ic.ex, ic.ns, client, "agnhost", "/agnhost", "connect", "--timeout=3s", "--protocol=tcp", dest)
		if wantOK {
			last = err
			return err == nil, nil
		}
		if err == nil {
			last = errors.New("connected")
			return false, nil
		}
		// Denied is agnhost's TIMEOUT or REFUSED, not a failed exec.
		if msg := err.Error(); strings.Contains(msg, "TIMEOUT") || strings.Contains(msg, "REFUSED") {
			return true, nil
		}
		last = err
		return false, nil
	})
	if ctx.Err() != nil {
		return time.Since(start), errInterrupted
	}
	if err != nil {
		if last == nil {
			last = err
		}
		return time.Since(start), last
	}
	return time.Since(start), nil
}

func (ic *installCheck) pod(name, role, node string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{checkRoleLabel: role}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "agnhost", Image: ic.image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: append([]string{"/agnhost"}, args...),
			}},
		},
	}
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
