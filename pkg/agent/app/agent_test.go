package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"antrea.io/antrea/pkg/agent/nodeportlocal"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/ipfix"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// inOwnNetNS marks the test process re-run in a network namespace of its own.
const inOwnNetNS = "ANTREA_APP_TEST_NETNS"

// The whole agent, in a network namespace of its own with a real OVS
// (netdev) and a real kube-apiserver (no antrea-controller): with proxyAll
// it brings the node up, installs its flows, the node path, the agent API
// and kube-proxy's health port, and serves the CNI; asked to stop, every
// part returns and the CNI socket is gone. Started again on the same OVS
// without proxyAll and with its API port taken, it removes the node path,
// fails, naming the part, and stops what it started.
func TestTheAgentStartsServesAndStopsOnARealNode(t *testing.T) {
	ovsinstance.RequireRoot(t)
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join("..", "..", "..", "_output", "bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			t.Skipf("no %s in %s (run hack/install.sh or set KUBEBUILDER_ASSETS)", b, assets)
		}
	}
	if raceDetector {
		// libovsdb v0.7.0's Echo reads its reply after its ctx ended while
		// the read loop may still decode the late answer into it (the
		// monitor's OVS version probe, through ovsconfig's sync, when the
		// agent stops): a race outside the agent's code.
		t.Skip("libovsdb's Echo races with its read loop when its ctx ends first (ovsconfig.Connection.sync)")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	if os.Getenv(inOwnNetNS) == "" {
		// The agent changes its network namespace (bridges, addresses,
		// nftables): the test runs again in a new one.
		cmd := exec.Command("unshare", "-n", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
		abs, err := filepath.Abs(assets)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(os.Environ(), inOwnNetNS+"=1", "KUBEBUILDER_ASSETS="+abs)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the test in its own network namespace: %v\n%s", err, out)
		}
		if testing.Verbose() {
			t.Logf("the test in its own network namespace:\n%s", out)
		}
		return
	}

	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "eth0", "type", "veth", "peer", "name", "peer0"},
		{"addr", "add", "192.168.77.1/24", "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"link", "set", "peer0", "up"},
		{"route", "add", "default", "via", "192.168.77.2"}, // kube-apiserver advertises the default route's address
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	if testing.Verbose() {
		env.ControlPlane.GetAPIServer().Err = os.Stderr
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: "antrea-agent", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	kubeconfigFile := filepath.Join(tmp, "kubeconfig")
	if err := os.WriteFile(kubeconfigFile, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := kubernetes.NewForConfigOrDie(cfg)
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.77.1"}}
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "ovs-") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	in, err := ovsinstance.Start(ctx, ovsinstance.Config{Dir: dir})
	if err != nil {
		t.Fatalf("start OVS: %v", err)
	}
	t.Cleanup(in.Stop)

	o := NewOptions()
	o.NodeName, o.Kubeconfig, o.OVSRunDir = "n1", kubeconfigFile, dir
	o.DatapathType, o.TunnelType = "netdev", "geneve"
	o.CNISocket, o.IPAMDataDir = filepath.Join(tmp, "cni.sock"), filepath.Join(tmp, "ipam")
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.APIPort = free.Addr().(*net.TCPAddr).Port
	free.Close()
	// proxyAll: the node path and kube-proxy's health port are parts too.
	free, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.ProxyAll, o.ProxyHealthzAddress = true, netip.MustParseAddrPort(free.Addr().String())
	free.Close()
	// The FlowExporter too, to a collector on loopback: it sends its
	// templates as soon as it runs.
	collector, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer collector.Close()
	o.FlowExporter = &FlowExporterOptions{Collector: agentconfig.CollectorAddr{Host: "127.0.0.1",
		Port: collector.LocalAddr().(*net.UDPAddr).Port, Transport: "udp"}, Poll: time.Second, Active: time.Second, Idle: time.Second}

	// NodePortLocal: a backend Pod of an annotated Service on this node
	// (no container: its status says it runs at 10.244.1.5).
	o.NodePortLocal = &nodeportlocal.PortRange{First: 61000, Last: 61009}
	if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	web, err := client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "web"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web.Status.PodIP, web.Status.PodIPs = "10.244.1.5", []corev1.PodIP{{IP: "10.244.1.5"}}
	if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web",
		Annotations: map[string]string{nodeportlocal.EnabledAnnotation: "true"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, o) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(o.CNISocket); err == nil {
			break
		}
		select {
		case err := <-done:
			stop()
			t.Fatalf("the agent stopped before it served the CNI: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("the agent did not serve the CNI at %s within 2 minutes", o.CNISocket)
		}
	}
	flows, err := in.Ofctl("dump-flows", "br-int")
	if err != nil || strings.Count(flows, "\n") < 10 {
		t.Errorf("br-int has no pipeline once the CNI serves: %v\n%s", err, flows)
	}
	// The agent API and kube-proxy's health port, set up before the CNI
	// server, answer.
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, url := range []string{"https://127.0.0.1:" + strconv.Itoa(o.APIPort) + "/healthz", "http://" + o.ProxyHealthzAddress.String() + "/healthz"} {
		eventually(t, func() error {
			resp, err := insecure.Get(url)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s answered %s", url, resp.Status)
			}
			return nil
		})
	}
	eventually(t, func() error {
		out, err := exec.Command("nft", "list", "table", "inet", "antrea").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "nodeport-prerouting") {
			return fmt.Errorf("no node path in the node's netfilter table with proxyAll: %v\n%s", err, out)
		}
		return nil
	})
	eventually(t, func() error {
		p, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := `[{"podPort":8080,"nodeIP":"192.168.77.1","nodePort":61000,"protocol":"tcp","protocols":["tcp"],"ipFamily":"IPv4"}]`
		if got := p.Annotations[nodeportlocal.PodAnnotation]; got != want {
			return fmt.Errorf("NodePortLocal: the Pod's annotation is %q, want %s", got, want)
		}
		out, err := exec.Command("nft", "list", "map", "inet", "antrea", "nodeportlocal-v4").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "tcp . 61000") || !strings.Contains(string(out), ": 10.244.1.5 . 8080") {
			return fmt.Errorf("NodePortLocal: no DNAT of 61000 to the Pod: %v\n%s", err, out)
		}
		return nil
	})
	if l, err := net.Listen("tcp4", "0.0.0.0:61000"); err == nil {
		l.Close()
		t.Error("NodePortLocal: another process could bind the node port 61000 the agent maps")
	}
	_ = collector.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 65536)
	if n, _, err := collector.ReadFrom(buf); err != nil {
		t.Errorf("the FlowExporter sent nothing to its collector: %v", err)
	} else if m, err := ipfix.NewSession().Decode(buf[:n]); err != nil || len(m.Templates) != 2 {
		t.Errorf("the FlowExporter's first message is not its two templates: %v %+v", err, m)
	}
	if out, err := in.Vsctl("get", "Bridge", "br-int", "ipfix"); err != nil || strings.TrimSpace(out) == "[]" {
		t.Errorf("br-int has no IPFIX export (the FlowExporter's counts) while it runs: %v %s", err, out)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the agent asked to stop returned %v, want nil", err)
		}
	case <-time.After(stopTimeout + 5*time.Second):
		t.Fatal("the agent did not stop")
	}
	if _, err := os.Stat(o.CNISocket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the CNI socket is still there after the agent stopped: %v", err)
	}

	if out, err := in.Vsctl("get", "Bridge", "br-int", "ipfix"); err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("br-int's IPFIX export outlived the FlowExporter: %v %s", err, out)
	}
	// A stopped agent leaves the NodePortLocal rules: a restart does not
	// interrupt the mappings (the next run restores them from the annotation).
	if out, err := exec.Command("nft", "list", "map", "inet", "antrea", "nodeportlocal-v4").CombinedOutput(); err != nil || !strings.Contains(string(out), ": 10.244.1.5 . 8080") {
		t.Errorf("NodePortLocal: the mapping went with the stopped agent: %v\n%s", err, out)
	}

	// Again, without proxyAll and NodePortLocal and with the API port taken.
	o.ProxyAll, o.ProxyHealthzAddress, o.FlowExporter, o.NodePortLocal = false, netip.AddrPort{}, nil, nil
	taken, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	o.APIPort = taken.Addr().(*net.TCPAddr).Port
	start := time.Now()
	err = Run(ctx, o)
	if err == nil || !strings.HasPrefix(err.Error(), "agent API: ") || !strings.Contains(err.Error(), strconv.Itoa(o.APIPort)) {
		t.Fatalf("the agent whose API port is taken returned %v, want an error of the part agent API", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("the agent took %s to fail", d)
	}
	if _, err := os.Stat(o.CNISocket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the CNI served although the agent failed before it: %v", err)
	}
	if out, err := exec.Command("nft", "list", "table", "inet", "antrea").CombinedOutput(); err != nil || strings.Contains(string(out), "nodeport-prerouting") {
		t.Errorf("the node path of the run with proxyAll stayed: %v\n%s", err, out)
	}
	if out, err := exec.Command("nft", "list", "table", "inet", "antrea").CombinedOutput(); err != nil || strings.Contains(string(out), "nodeportlocal") {
		t.Errorf("the NodePortLocal rules of the run with it stayed: %v\n%s", err, out)
	}
}

// eventually fails t unless check passes within 10 s.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Error(err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
