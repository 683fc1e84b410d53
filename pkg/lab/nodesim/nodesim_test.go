package nodesim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"antrea.io/antrea/pkg/ovs/ovsinstance"
	"antrea.io/antrea/pkg/testpod"
)

// TestMain lets the test binary play two more roles, so the integration test
// runs the simulator as its own process inside the node netns (as the lab
// does) and needs no separately built test pod program:
//
//	<test binary> nodesim CONFIG.json   runs Run with that Config
//	<test binary> serve ...             is antrea-testpod serve
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "nodesim":
			os.Exit(runSimulatorProcess(os.Args[2]))
		case "serve":
			os.Exit(testpod.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
		}
	}
	os.Exit(m.Run())
}

func runSimulatorProcess(configPath string) int {
	b, err := os.ReadFile(configPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var cfg Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// repoPath is a path relative to the repository root (three levels up).
func repoPath(rel string) string {
	abs, _ := filepath.Abs(filepath.Join("..", "..", "..", rel))
	return abs
}

// requireAssets returns the directories holding kube-apiserver + etcd and the
// reference CNI plugins, or skips the test.
func requireAssets(t *testing.T) (kubeAssets, cniBin string) {
	t.Helper()
	ovsinstance.RequireRoot(t)
	kubeAssets = os.Getenv("KUBEBUILDER_ASSETS")
	if kubeAssets == "" {
		kubeAssets = repoPath("_output/bin")
	}
	cniBin = repoPath("_output/cni/bin")
	for _, f := range []string{filepath.Join(kubeAssets, "etcd"), filepath.Join(kubeAssets, "kube-apiserver"),
		filepath.Join(cniBin, "bridge"), filepath.Join(cniBin, "host-local")} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("needs %s (run hack/install.sh)", f)
		}
	}
	return kubeAssets, cniBin
}

// startAPIServer starts etcd + kube-apiserver through envtest and returns a
// client and a kubeconfig file for the simulator, which reaches the API server
// through a relay on 127.0.0.1 of the node netns, as in the lab.
func startAPIServer(t *testing.T, assets, nodeNS string) (kubernetes.Interface, string) {
	t.Helper()
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	restCfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	user, err := env.AddUser(envtest.User{Name: "nodesim", Groups: []string{"system:masters"}}, restCfg)
	if err != nil {
		t.Fatalf("add user: %v", err)
	}
	relayAddr := startRelay(t, nodeNS, restCfg.Host)
	userCfg := user.Config()
	userCfg.Host = "https://" + relayAddr
	kc, err := kubeconfigFor(userCfg)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, path
}

// simProcess is the simulator running as a child process in the node netns.
type simProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startSimulator(t *testing.T, netns string, cfg Config, logPath string) *simProcess {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(cfg.StateDir, "..", "nodesim.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "nodesim", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Forked from a thread inside the node netns, the simulator is born there.
	if err := ns.WithNetNSPath(netnsPath(netns), func(ns.NetNS) error { return cmd.Start() }); err != nil {
		t.Fatalf("start simulator: %v", err)
	}
	p := &simProcess{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

// stop ends the simulator by the PID we started; its pods keep running.
func (p *simProcess) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// eventually polls cond every 100ms until it holds or timeout ends.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if msg != "" {
			last = msg
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last: %s)", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// probeFrom runs a testpod probe from inside the named netns.
func probeFrom(t *testing.T, netns, protocol, to string) testpod.Result {
	t.Helper()
	var res testpod.Result
	err := ns.WithNetNSPath(netnsPath(netns), func(ns.NetNS) error {
		var err error
		res, err = testpod.Connect(context.Background(), testpod.ConnectConfig{Protocol: protocol, To: to, Timeout: time.Second})
		return err
	})
	if err != nil {
		t.Fatalf("probe %s %s from %s: %v", protocol, to, netns, err)
	}
	return res
}

func ipInNetNS(t *testing.T, netns string, f func() error) {
	t.Helper()
	if err := ns.WithNetNSPath(netnsPath(netns), func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func readState(t *testing.T, stateDir string, uid types.UID) *podState {
	t.Helper()
	b, err := os.ReadFile(statePath(stateDir, string(uid)))
	if err != nil {
		t.Fatalf("state of pod %s: %v", uid, err)
	}
	var s podState
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestSimulatorRunsPodsLikeKubelet(t *testing.T) {
	kubeAssets, cniBin := requireAssets(t)
	// Pod processes outlive a stopped simulator; as subreaper, this test
	// inherits them and reaps them, so no zombie is left behind.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	ctx := context.Background()
	nodeNS := ovsinstance.NewNetNS(t, "nodesim")
	client, kubeconfig := startAPIServer(t, kubeAssets, nodeNS)
	// An underlay link, so routes to the peer node's podCIDR have a next hop.
	ipInNetNS(t, nodeNS, func() error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "underlay0"}, PeerName: "underlay1"}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr("192.0.2.1/24")
		if err := netlink.AddrAdd(veth, addr); err != nil {
			return err
		}
		peer, err := netlink.LinkByName("underlay1")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(peer); err != nil {
			return err
		}
		return netlink.LinkSetUp(veth)
	})

	dir := t.TempDir()
	nodeName := "nodesim-node"
	cfg := Config{
		NodeName:       nodeName,
		Kubeconfig:     kubeconfig,
		NodeIP:         net.ParseIP("192.0.2.1"),
		CNIConfDir:     filepath.Join(dir, "net.d"),
		CNIBinDirs:     []string{cniBin},
		CNICacheDir:    filepath.Join(dir, "cni-cache"),
		PodNetNSPrefix: fmt.Sprintf("nodesim-pod-%d-", os.Getpid()),
		StateDir:       filepath.Join(dir, "state"),
		PodLogDir:      filepath.Join(dir, "logs"),
		TestPodBinary:  os.Args[0],
		ReferenceCNI:   true,
	}
	// Whatever happens, remove every pod netns and process, then reap.
	t.Cleanup(func() {
		states, _ := loadStates(cfg.StateDir)
		if err := Cleanup(ctx, cfg); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
		for _, s := range states {
			for _, c := range s.Containers {
				reap(c.PID)
			}
			if s.NetNS == "" {
				continue
			}
			if _, err := os.Stat(netnsPath(s.NetNS)); err == nil {
				t.Errorf("netns %s of pod %s is left after Cleanup", s.NetNS, s.key())
			}
		}
	})
	simLog := filepath.Join(dir, "nodesim.log")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(simLog)
			t.Logf("simulator log:\n%s", b)
		}
	})
	sim := startSimulator(t, nodeNS, cfg, simLog)
	top := t

	// Each step builds on the previous ones: stop at the first failure.
	ok := true
	step := func(name string, f func(t *testing.T)) {
		if ok {
			ok = t.Run(name, f)
		}
	}

	// The default ServiceAccount is what kube-controller-manager would make.
	if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	step("the node registers with its InternalIP and capacity and keeps a lease", func(t *testing.T) {
		eventually(t, 20*time.Second, "node registered", func() (bool, string) {
			n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != "192.0.2.1" {
				return false, fmt.Sprintf("addresses %v", n.Status.Addresses)
			}
			if n.Status.Allocatable.Pods().Value() == 0 {
				return false, "no pod capacity"
			}
			_, err = client.CoordinationV1().Leases(nodeLeaseNamespace).Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, "lease: " + err.Error()
			}
			return true, ""
		})
	})

	step("the podCIDR leads to the reference CNI config and a Ready node", func(t *testing.T) {
		// envtest has no controller-manager: play its podCIDR allocation.
		patch := []byte(`{"spec":{"podCIDR":"10.245.1.0/24","podCIDRs":["10.245.1.0/24"]}}`)
		if _, err := client.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "node Ready", func() (bool, string) {
			n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status == corev1.ConditionTrue, c.Message
				}
			}
			return false, "no Ready condition"
		})
		b, err := os.ReadFile(filepath.Join(cfg.CNIConfDir, ReferenceCNIConfFile))
		if err != nil || !strings.Contains(string(b), "10.245.1.0/24") {
			t.Fatalf("reference conflist: %v %s", err, b)
		}
	})

	step("another node's podCIDR is routed via its InternalIP", func(t *testing.T) {
		peer := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nodesim-peer"}, Spec: corev1.NodeSpec{PodCIDR: "10.245.2.0/24"}}
		peer, err := client.CoreV1().Nodes().Create(ctx, peer, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		peer.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.2"}}
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, peer, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "route to the peer's podCIDR", func() (bool, string) {
			gw := routeVia(t, nodeNS, "10.245.2.0/24")
			return gw == "192.0.2.2", "via " + gw
		})
	})

	podA := makePod("pod-a", corev1.Container{Name: "server", Image: "agnhost"})
	podB := makePod("pod-b", corev1.Container{Name: "server", Image: "agnhost", Ports: []corev1.ContainerPort{
		{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {ContainerPort: 5353, Protocol: corev1.ProtocolUDP}}})
	podC := makePod("pod-c", corev1.Container{Name: "sleeper", Image: "busybox", Command: []string{"sleep", "3600"}})
	// Its command leaves a process in a new session, out of reach of the
	// container's process group: the netns sweep must still stop it.
	podE := makePod("pod-e", corev1.Container{Name: "forker", Image: "busybox",
		Command: []string{"sh", "-c", "setsid sleep 3600 & exec sleep 3600"}})
	podH := makePod("pod-h", corev1.Container{Name: "server", Image: "agnhost", Ports: []corev1.ContainerPort{{ContainerPort: 9090}}})
	podH.Spec.HostNetwork = true
	pods := map[string]*corev1.Pod{}

	step("pods bound to the node become Running and Ready with an IP of the podCIDR", func(t *testing.T) {
		for _, p := range []*corev1.Pod{podA, podB, podC, podE, podH} {
			if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []*corev1.Pod{podA, podB, podC, podE, podH} {
			eventually(t, 30*time.Second, "pod "+p.Name+" Ready", func() (bool, string) {
				got, err := client.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				pods[p.Name] = got
				return got.Status.Phase == corev1.PodRunning && podReady(got) && got.Status.PodIP != "",
					fmt.Sprintf("phase %s podIP %q conditions %v", got.Status.Phase, got.Status.PodIP, got.Status.Conditions)
			})
			got := pods[p.Name]
			cs := got.Status.ContainerStatuses
			if len(cs) != 1 || cs[0].State.Running == nil || !cs[0].Ready {
				t.Fatalf("pod %s: container statuses %+v", p.Name, cs)
			}
			if got.Status.HostIP != "192.0.2.1" {
				t.Fatalf("pod %s: hostIP %s", p.Name, got.Status.HostIP)
			}
			if p.Spec.HostNetwork {
				if got.Status.PodIP != "192.0.2.1" {
					t.Fatalf("hostNetwork pod %s: podIP %s, want the node's IP", p.Name, got.Status.PodIP)
				}
				continue
			}
			_, cidr, _ := net.ParseCIDR("10.245.1.0/24")
			if !cidr.Contains(net.ParseIP(got.Status.PodIP)) {
				t.Fatalf("pod %s: podIP %s is not in the podCIDR", p.Name, got.Status.PodIP)
			}
			if nsName := got.Annotations[NetNSAnnotation]; !netnsExists(nsName) {
				t.Fatalf("pod %s: netns annotation %q names no netns", p.Name, nsName)
			}
		}
		// A settled pod is not rewritten: the status the simulator computes
		// equals what the API server stored, so there is no update loop.
		before, err := client.CoreV1().Pods("default").Get(ctx, "pod-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		after, err := client.CoreV1().Pods("default").Get(ctx, "pod-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if before.ResourceVersion != after.ResourceVersion {
			b1, _ := json.MarshalIndent(before, "", " ")
			b2, _ := json.MarshalIndent(after, "", " ")
			t.Fatalf("pod-a keeps being rewritten: resourceVersion %s then %s\nbefore: %s\nafter: %s", before.ResourceVersion, after.ResourceVersion, b1, b2)
		}
	})

	step("the pods' processes answer probes from the node with their names", func(t *testing.T) {
		tests := []struct {
			name     string
			protocol string
			pod      string
			port     string
			want     testpod.Verdict
			wantName string
		}{
			{"a pod without ports serves TCP 80", "tcp", "pod-a", "80", testpod.Connected, "pod-a"},
			{"a pod without ports serves UDP 81", "udp", "pod-a", "81", testpod.Connected, "pod-a"},
			{"a pod serves its declared TCP port", "tcp", "pod-b", "8080", testpod.Connected, "pod-b"},
			{"a pod serves its declared UDP port", "udp", "pod-b", "5353", testpod.Connected, "pod-b"},
			{"a pod with declared ports does not serve 80", "tcp", "pod-b", "80", testpod.Refused, ""},
			{"a pod with a command runs it instead of the server", "tcp", "pod-c", "80", testpod.Refused, ""},
			{"a hostNetwork pod serves on the node's IP", "tcp", "pod-h", "9090", testpod.Connected, "pod-h"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := probeFrom(t, nodeNS, tt.protocol, net.JoinHostPort(pods[tt.pod].Status.PodIP, tt.port))
				if res.Verdict != tt.want || res.Name != tt.wantName {
					t.Fatalf("got %q, want %s %s", res.String(), tt.want, tt.wantName)
				}
			})
		}
		if b, err := os.ReadFile(filepath.Join(cfg.PodLogDir, "default_pod-a_server.log")); err != nil || !strings.Contains(string(b), "Serving") {
			t.Fatalf("pod-a log: %v %q", err, b)
		}
	})

	step("a failed CNI ADD shows in pod status and events and is retried", func(t *testing.T) {
		broken := filepath.Join(cfg.CNIConfDir, "00-broken.conflist")
		if err := os.WriteFile(broken, []byte(`{"cniVersion":"1.0.0","name":"broken","plugins":[{"type":"no-such-plugin"}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(broken) })
		podD := makePod("pod-d", corev1.Container{Name: "server", Image: "agnhost"})
		if _, err := client.CoreV1().Pods("default").Create(ctx, podD, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "sandbox failure in status", func() (bool, string) {
			got, err := client.CoreV1().Pods("default").Get(ctx, "pod-d", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.PodReadyToStartContainers && c.Reason == "FailedCreatePodSandBox" && strings.Contains(c.Message, "no-such-plugin") {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%v", got.Status.Conditions)
		})
		eventually(t, 20*time.Second, "FailedCreatePodSandBox event", func() (bool, string) {
			evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pod-d"})
			if err != nil {
				return false, err.Error()
			}
			for _, e := range evs.Items {
				if e.Reason == "FailedCreatePodSandBox" && e.Type == corev1.EventTypeWarning {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d events", len(evs.Items))
		})
		if err := os.Remove(broken); err != nil {
			t.Fatal(err)
		}
		eventually(t, 40*time.Second, "pod-d Ready after the config is fixed", func() (bool, string) {
			got, err := client.CoreV1().Pods("default").Get(ctx, "pod-d", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return podReady(got) && got.Status.PodIP != "", fmt.Sprintf("%v", got.Status.Conditions)
		})
	})

	step("pods whose processes all exit finish with their exit code and release their sandbox", func(t *testing.T) {
		tests := []struct {
			name      string
			command   []string
			wantPhase corev1.PodPhase
			wantExit  int32
		}{
			{"pod-ok", []string{"true"}, corev1.PodSucceeded, 0},
			{"pod-fail", []string{"sh", "-c", "exit 3"}, corev1.PodFailed, 3},
		}
		for _, tt := range tests {
			t.Run(tt.name+" ends "+string(tt.wantPhase), func(t *testing.T) {
				p := makePod(tt.name, corev1.Container{Name: "once", Image: "busybox", Command: tt.command})
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				created, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var got *corev1.Pod
				eventually(t, 20*time.Second, "pod "+tt.name+" finished", func() (bool, string) {
					got, err = client.CoreV1().Pods("default").Get(ctx, tt.name, metav1.GetOptions{})
					if err != nil {
						return false, err.Error()
					}
					return got.Status.Phase == tt.wantPhase, string(got.Status.Phase)
				})
				cs := got.Status.ContainerStatuses
				if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != tt.wantExit {
					t.Fatalf("container statuses %+v, want terminated with exit code %d", cs, tt.wantExit)
				}
				eventually(t, 10*time.Second, "sandbox of "+tt.name+" released", func() (bool, string) {
					_, err := os.Stat(statePath(cfg.StateDir, string(created.UID)))
					return errors.Is(err, os.ErrNotExist) && !netnsExists(got.Annotations[NetNSAnnotation]), fmt.Sprint(err)
				})
				if _, err := os.Stat(filepath.Join(cfg.StateDir, "ipam", "lab-bridge", got.Status.PodIP)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("host-local still holds %s's IP %s: %v", tt.name, got.Status.PodIP, err)
				}
				if err := client.CoreV1().Pods("default").Delete(ctx, tt.name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				eventually(t, 10*time.Second, "pod "+tt.name+" gone", func() (bool, string) {
					_, err := client.CoreV1().Pods("default").Get(ctx, tt.name, metav1.GetOptions{})
					return apierrors.IsNotFound(err), fmt.Sprint(err)
				})
			})
		}
	})

	var beforeA *podState
	var killedPID int
	step("a restarted simulator adopts running pods and restarts a dead process", func(t *testing.T) {
		beforeA = readState(t, cfg.StateDir, pods["pod-a"].UID)
		beforeC := readState(t, cfg.StateDir, pods["pod-c"].UID)
		beforeB := readState(t, cfg.StateDir, pods["pod-b"].UID)
		sim.stop()
		// While it is down, pod-b's state is lost: its attachment must be
		// garbage-collected and the pod given a new sandbox.
		if err := os.Remove(statePath(cfg.StateDir, string(pods["pod-b"].UID))); err != nil {
			t.Fatal(err)
		}
		// While it is down, pod-c's process dies.
		killedPID = beforeC.Containers[0].PID
		if err := syscall.Kill(killedPID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Registered on the whole test, not this step, so it outlives the step.
		sim = startSimulator(top, nodeNS, cfg, simLog)
		eventually(t, 20*time.Second, "pod-c's process restarted", func() (bool, string) {
			got, err := client.CoreV1().Pods("default").Get(ctx, "pod-c", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			cs := got.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].Ready, fmt.Sprintf("%+v", cs)
		})
		reap(killedPID)
		eventually(t, 20*time.Second, "pod-b in a new sandbox", func() (bool, string) {
			got, err := client.CoreV1().Pods("default").Get(ctx, "pod-b", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if _, err := os.Stat(statePath(cfg.StateDir, string(got.UID))); err != nil {
				return false, err.Error()
			}
			after := readState(t, cfg.StateDir, got.UID)
			return podReady(got) && after.SandboxID != beforeB.SandboxID && got.Status.PodIP == after.IPs[0],
				fmt.Sprintf("ready %v podIP %s sandbox %s", podReady(got), got.Status.PodIP, after.SandboxID)
		})
		reap(beforeB.Containers[0].PID)
		if alive(beforeB.Containers[0].PID, beforeB.Containers[0].StartTicks) {
			t.Errorf("pod-b's old process %d survived its lost sandbox", beforeB.Containers[0].PID)
		}
		afterB := readState(t, cfg.StateDir, pods["pod-b"].UID)
		t.Logf("pod-b: IP %s in sandbox %.12s, after its state was lost IP %s in sandbox %.12s", beforeB.IPs[0], beforeB.SandboxID, afterB.IPs[0], afterB.SandboxID)
		if afterB.IPs[0] != beforeB.IPs[0] {
			if _, err := os.Stat(filepath.Join(cfg.StateDir, "ipam", "lab-bridge", beforeB.IPs[0])); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pod-b's old IP %s was not released by CNI GC: %v", beforeB.IPs[0], err)
			}
		}
		if res := probeFrom(t, nodeNS, "tcp", net.JoinHostPort(afterB.IPs[0], "8080")); res.Verdict != testpod.Connected || res.Name != "pod-b" {
			t.Fatalf("pod-b in its new sandbox: %s", res)
		}
		afterA := readState(t, cfg.StateDir, pods["pod-a"].UID)
		if afterA.NetNS != beforeA.NetNS || afterA.SandboxID != beforeA.SandboxID ||
			afterA.IPs[0] != beforeA.IPs[0] || afterA.Containers[0].PID != beforeA.Containers[0].PID {
			t.Fatalf("pod-a was not adopted: before %+v after %+v", beforeA, afterA)
		}
		got, err := client.CoreV1().Pods("default").Get(ctx, "pod-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.PodIP != beforeA.IPs[0] || !podReady(got) || got.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("pod-a status after restart: %+v", got.Status)
		}
		if res := probeFrom(t, nodeNS, "tcp", net.JoinHostPort(got.Status.PodIP, "80")); res.Verdict != testpod.Connected {
			t.Fatalf("pod-a after adoption: %s", res)
		}
	})

	step("deleting a pod stops it, runs CNI DEL, removes its netns and finishes the deletion", func(t *testing.T) {
		if err := client.CoreV1().Pods("default").Delete(ctx, "pod-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "pod-a gone", func() (bool, string) {
			_, err := client.CoreV1().Pods("default").Get(ctx, "pod-a", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		pid := beforeA.Containers[0].PID
		reap(pid)
		if alive(pid, beforeA.Containers[0].StartTicks) {
			t.Errorf("pod-a's process %d still runs", pid)
		}
		if netnsExists(beforeA.NetNS) {
			t.Errorf("pod-a's netns %s still exists", beforeA.NetNS)
		}
		if _, err := os.Stat(filepath.Join(cfg.StateDir, "ipam", "lab-bridge", beforeA.IPs[0])); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("host-local still holds pod-a's IP %s: %v", beforeA.IPs[0], err)
		}
		cached, _ := filepath.Glob(filepath.Join(cfg.CNICacheDir, "results", "*"+beforeA.SandboxID+"*"))
		if len(cached) != 0 {
			t.Errorf("libcni still caches pod-a's result: %v", cached)
		}
		if _, err := os.Stat(statePath(cfg.StateDir, string(pods["pod-a"].UID))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pod-a's state file is left: %v", err)
		}
	})

	step("a deleted node's podCIDR route is removed", func(t *testing.T) {
		if err := client.CoreV1().Nodes().Delete(ctx, "nodesim-peer", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "route removed", func() (bool, string) {
			gw := routeVia(t, nodeNS, "10.245.2.0/24")
			return gw == "", "via " + gw
		})
	})

	step("Cleanup stops every pod and removes every pod netns of the node", func(t *testing.T) {
		sim.stop()
		states, err := loadStates(cfg.StateDir)
		if err != nil || len(states) != 5 {
			t.Fatalf("states before Cleanup: %d (%v), want pod-b, pod-c, pod-d, pod-e, pod-h", len(states), err)
		}
		inE, err := processesInNetNS(netnsPath(pods["pod-e"].Annotations[NetNSAnnotation]))
		if err != nil || len(inE) != 2 {
			t.Fatalf("processes in pod-e's netns: %v (%v), want sleep and its escaped child", inE, err)
		}
		if err := Cleanup(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		for _, s := range states {
			for _, c := range s.Containers {
				reap(c.PID)
				if alive(c.PID, c.StartTicks) {
					t.Errorf("pod %s process %d still runs", s.key(), c.PID)
				}
			}
			if netnsExists(s.NetNS) {
				t.Errorf("pod %s netns %s still exists", s.key(), s.NetNS)
			}
		}
		for _, pid := range inE {
			reap(pid)
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
				t.Errorf("process %d of pod-e's netns survived Cleanup", pid)
			}
		}
		if left, _ := loadStates(cfg.StateDir); len(left) != 0 {
			t.Errorf("%d state files left", len(left))
		}
	})
}

func makePod(name string, c corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                     "nodesim-node",
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{c},
		},
	}
}

// routeVia returns the gateway of the route to dst in the netns ("" if none).
func routeVia(t *testing.T, netns, dst string) string {
	t.Helper()
	gw := ""
	ipInNetNS(t, netns, func() error {
		_, d, _ := net.ParseCIDR(dst)
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: d}, netlink.RT_FILTER_DST)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Gw != nil {
				gw = r.Gw.String()
			}
		}
		return nil
	})
	return gw
}

// reap collects a pod process that was reparented to this test (subreaper)
// once it has exited; it does nothing for a process that is not our child.
func reap(pid int) {
	if pid <= 0 {
		return
	}
	var ws syscall.WaitStatus
	for range 50 {
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if got == pid || err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startRelay listens on 127.0.0.1 inside the netns and forwards every
// connection to target (host:port or URL) in the test's own netns. A socket
// stays in the netns it was created in, so only the listener needs it.
func startRelay(t *testing.T, netns, target string) string {
	t.Helper()
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		target = u.Host
	}
	var l net.Listener
	err := ns.WithNetNSPath(netnsPath(netns), func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	if err != nil {
		t.Fatalf("relay listener in %s: %v", netns, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
	wg.Go(func() {
		var conns sync.WaitGroup
		defer conns.Wait()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer c.Close()
				up, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			})
		}
	})
	return l.Addr().String()
}

// kubeconfigFor writes a rest.Config as kubeconfig bytes.
func kubeconfigFor(cfg *rest.Config) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["lab"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["nodesim"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: "nodesim"}
	kc.CurrentContext = "lab"
	return clientcmd.Write(*kc)
}
