package traceflow

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/antctl"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	tfcontroller "antrea.io/antrea/pkg/controller/traceflow"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// TestTraceflowWithAnAPIServerAndAntctl: a real kube-apiserver (envtest)
// serving the Traceflow CRD of the chart, the antrea-controller's Traceflow
// controller and two agents on two real OVS nodes, all through real
// clients; antctl traceflow as a user runs it. It prints what the user
// sees (docs/traceflow.md quotes it) and the latency from create to
// Succeeded through the API server.
func TestTraceflowWithAnAPIServerAndAntctl(t *testing.T) {
	ovsinstance.RequireRoot(t)
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = "../../../_output/bin"
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		t.Skipf("needs kube-apiserver and etcd in %s (hack/install.sh)", assets)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets,
		CRDInstallOptions: envtest.CRDInstallOptions{Paths: []string{"../../../build/charts/antrea/crds/crd.antrea.io_traceflows.yaml"},
			ErrorIfPathMissing: true}}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	// The components' clients as in the cluster: client-go's default rate
	// limit (5 requests/s, burst 10), unless the test says otherwise.
	if os.Getenv("TRACEFLOW_TEST_DEFAULT_QPS") != "" {
		cfg.QPS, cfg.Burst = 0, 0
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crd, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	u := bridgetest.NewUnderlay(t)
	// Dual-stack nodes and pods: Traceflows without a header trace IPv4,
	// with -f ipv6 (or to an IPv6 address) IPv6.
	n1 := newAgentNode(t, u, "node-1", "10.10.1.0/24", "10.10.1.1", "fd00:10:244:1::1/64", "192.168.77.11/24", ovsconfig.GeneveTunnel)
	n2 := newAgentNode(t, u, "node-2", "10.10.2.0/24", "10.10.2.1", "fd00:10:244:2::1/64", "192.168.77.12/24", ovsconfig.GeneveTunnel)
	for _, p := range [][2]*agentNode{{n1, n2}, {n2, n1}} {
		if err := p[0].flows.InstallNodeFlows(p[1].name, p[1].br.PodCIDR, p[1].br.GatewayIP, p[1].br.NodeIP); err != nil {
			t.Fatal(err)
		}
		if err := p[0].flows.InstallNodeFlows(p[1].name, p[1].br.PodCIDRv6, p[1].br.GatewayIPv6, p[1].br.NodeIP); err != nil {
			t.Fatal(err)
		}
		p[0].br.ConnectPeer(t, p[1].br)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addPod := func(n *agentNode, name, cidr, cidr6 string) *bridgetest.Pod {
		p, obj := n.addPod(t, "demo", name, cidr, cidr6)
		obj.Spec.Containers = []corev1.Container{{Name: "c", Image: "agnhost"}}
		created, err := kube.CoreV1().Pods("demo").Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status = obj.Status
		if _, err := kube.CoreV1().Pods("demo").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	addPod(n1, "client", "10.10.1.2/24", "fd00:10:244:1::2/64")
	addPod(n1, "web-0", "10.10.1.3/24", "fd00:10:244:1::3/64")
	web1 := addPod(n2, "web-1", "10.10.2.3/24", "fd00:10:244:2::3/64")

	names := rules{11: {"AntreaClusterNetworkPolicy:deny-client", "drop-client"}}
	for _, n := range []*agentNode{n1, n2} {
		disp := agentof.NewPacketInDispatcher(n.br.OF)
		go disp.Run(ctx)
		f := crdinformers.NewSharedInformerFactory(crd, 0)
		c := NewController(Config{NodeName: n.name, Client: crd, Kube: kube, Informer: f.Crd().V1beta1().Traceflows(),
			Flows: n.flows, IO: disp, Interfaces: n.store, Rules: names,
			Ports: Ports{Gateway: bridgetest.GatewayOFPort, Tunnel: bridgetest.TunnelOFPort}, GatewayMAC: n.br.GatewayMAC})
		f.Start(ctx.Done())
		go c.Run(ctx)
	}
	kf := informers.NewSharedInformerFactory(kube, 0)
	cf := crdinformers.NewSharedInformerFactory(crd, 0)
	ctrl := tfcontroller.NewController(crd, cf.Crd().V1beta1().Traceflows(), kf.Core().V1().Pods().Informer(),
		kf.Core().V1().Namespaces().Informer(), kf.Core().V1().Services().Informer())
	kf.Start(ctx.Done())
	cf.Start(ctx.Done())
	go ctrl.Run(ctx)

	antctlRun := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		cmd := antctl.NewCommand(antctl.Env{Out: &out, Err: &errb,
			Clients: func() (*antctl.Clients, error) { return &antctl.Clients{Kube: kube, Antrea: crd}, nil }})
		cmd.SetArgs(append(args, "--config-dir", t.TempDir()))
		err := cmd.ExecuteContext(ctx)
		if err != nil {
			return out.String() + "antctl: " + err.Error() + "\n", err
		}
		return out.String(), nil
	}

	t.Run("across nodes", func(t *testing.T) {
		out, err := antctlRun("traceflow", "-S", "demo/client", "-D", "demo/web-1", "-f", "tcp,tcp_dst=80")
		t.Logf("$ antctl traceflow -S demo/client -D demo/web-1 -f tcp,tcp_dst=80\n%s", out)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"phase: Succeeded", "node-1 (Sender)", "tunnel to 192.168.77.12", "node-2 (Receiver)",
			"Received", "Delivered   pod demo/web-1, ttl 62"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
	})

	t.Run("on one node, drawn as SVG", func(t *testing.T) {
		out, err := antctlRun("traceflow", "-S", "demo/client", "-D", "demo/web-0", "-o", "svg")
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			XMLName xml.Name `xml:"svg"`
		}
		if err := xml.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("-o svg: %v\n%s", err, out)
		}
		if dir := os.Getenv("TRACEFLOW_SVG_DIR"); dir != "" {
			_ = os.WriteFile(filepath.Join(dir, "traceflow-one-node.svg"), []byte(out), 0o644)
		}
	})

	t.Run("dropped on the receiver by a named rule", func(t *testing.T) {
		rule := &agentof.PolicyRule{ID: 11, Key: "deny-client 0/", Direction: agentof.DirectionIngress,
			Peers: []netip.Prefix{netip.MustParsePrefix("10.10.1.2/32")}, AppliedTo: []uint32{web1.OFPort},
			Action: agentof.ActionDrop, Tier: agentof.TierAntrea, Priority: 30000}
		if err := n2.writer.Install(ctx, rule); err != nil {
			t.Fatal(err)
		}
		if _, err := n2.br.Appctl("revalidator/purge"); err != nil {
			t.Fatal(err)
		}
		out, err := antctlRun("traceflow", "-S", "demo/client", "-D", "demo/web-1", "-f", "tcp,tcp_dst=80")
		t.Logf("$ antctl traceflow -S demo/client -D demo/web-1 -f tcp,tcp_dst=80\n%s", out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "policy AntreaClusterNetworkPolicy:deny-client rule drop-client") {
			t.Errorf("the drop is not named")
		}
		if dir := os.Getenv("TRACEFLOW_SVG_DIR"); dir != "" {
			svg, _ := antctlRun("traceflow", "-S", "demo/client", "-D", "demo/web-1", "-o", "svg")
			_ = os.WriteFile(filepath.Join(dir, "traceflow-dropped.svg"), []byte(svg), 0o644)
		}
		if err := n2.writer.Uninstall(ctx, 11); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("over IPv6 across nodes", func(t *testing.T) {
		for _, args := range [][]string{
			{"traceflow", "-S", "demo/client", "-D", "demo/web-1", "-f", "ipv6,tcp,tcp_dst=80"},
			{"traceflow", "-S", "demo/client", "-D", "fd00:10:244:2::3"},
		} {
			out, err := antctlRun(args...)
			t.Logf("$ antctl %s\n%s", strings.Join(args, " "), out)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"phase: Succeeded", "node-1 (Sender)", "tunnel to 192.168.77.12", "node-2 (Receiver)",
				"Delivered   pod demo/web-1, ttl 62"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q", want)
				}
			}
		}
	})

	t.Run("IPv6 refused naming the fields", func(t *testing.T) {
		out, err := antctlRun("traceflow", "-S", "demo/client", "-D", "10.10.2.3", "-f", "ipv6")
		t.Logf("$ antctl traceflow -S demo/client -D 10.10.2.3 -f ipv6\n%s", out)
		if err == nil || !strings.Contains(out, "destination 10.10.2.3 is IPv4, but spec.packet.ipv6Header makes the packet IPv6") {
			t.Fatalf("%v: %s", err, out)
		}
		// The API server refuses both headers (the CRD's CEL rule); the
		// controller a destination IP of the other family.
		tfs := crd.CrdV1beta1().Traceflows()
		both := &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: "both-headers"}, Spec: crdv1beta1.TraceflowSpec{
			Source: crdv1beta1.Source{Namespace: "demo", Pod: "client"}, Destination: crdv1beta1.Destination{IP: "fd00:10:244:2::3"},
			Packet: crdv1beta1.Packet{IPHeader: &crdv1beta1.IPHeader{Protocol: 6}, IPv6Header: &crdv1beta1.IPv6Header{}}}}
		if _, err := tfs.Create(ctx, both, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "ipHeader and ipv6Header are exclusive") {
			t.Fatalf("both headers: %v, want the API server's refusal", err)
		} else {
			t.Logf("kubectl create of a Traceflow with both headers: %v", err)
		}
		other := &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: "other-family"}, Spec: crdv1beta1.TraceflowSpec{
			Source: crdv1beta1.Source{Namespace: "demo", Pod: "client"}, Destination: crdv1beta1.Destination{IP: "10.10.2.3"},
			Packet: crdv1beta1.Packet{IPv6Header: &crdv1beta1.IPv6Header{}}}}
		if _, err := tfs.Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tfs.Delete(ctx, other.Name, metav1.DeleteOptions{}) }()
		for i := 0; ; i++ {
			got, err := tfs.Get(ctx, other.Name, metav1.GetOptions{})
			if err == nil && got.Status.Phase == crdv1beta1.TraceflowFailed {
				if want := "spec.destination.ip 10.10.2.3 is IPv4, but spec.packet.ipv6Header makes the packet IPv6"; got.Status.Reason != want {
					t.Fatalf("reason %q, want %q", got.Status.Reason, want)
				}
				break
			}
			if i > 250 {
				t.Fatalf("the controller did not fail the Traceflow: %+v", got.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		out, err := antctlRun("traceflow", "-S", "demo/clinet", "-D", "demo/web-1")
		t.Logf("$ antctl traceflow -S demo/clinet -D demo/web-1\n%s", out)
		if err == nil || !strings.Contains(out, `source Pod demo/clinet not found (did you mean "client"?)`) {
			t.Fatalf("%v: %s", err, out)
		}
	})

	t.Run("latency from create to Succeeded through the API server", func(t *testing.T) {
		tfs := crd.CrdV1beta1().Traceflows()
		var lat []time.Duration
		for i := 0; i < 10; i++ {
			name := fmt.Sprintf("lat-%d", i)
			w, err := tfs.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := tfs.Create(ctx, &crdv1beta1.Traceflow{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: crdv1beta1.TraceflowSpec{
				Source: crdv1beta1.Source{Namespace: "demo", Pod: "client"}, Destination: crdv1beta1.Destination{Namespace: "demo", Pod: "web-1"}}},
				metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var d time.Duration
			for ev := range w.ResultChan() {
				if tf, ok := ev.Object.(*crdv1beta1.Traceflow); ok && ev.Type != watch.Error {
					if tf.Status.Phase == crdv1beta1.TraceflowSucceeded {
						d = time.Since(start)
						break
					}
					if tf.Status.Phase == crdv1beta1.TraceflowFailed {
						t.Fatalf("%s failed: %s", name, tf.Status.Reason)
					}
				}
			}
			w.Stop()
			if d == 0 {
				t.Fatalf("%s: the watch ended first", name)
			}
			lat = append(lat, d)
			_ = tfs.Delete(ctx, name, metav1.DeleteOptions{})
		}
		slices.Sort(lat)
		t.Logf("kube-apiserver (envtest) + two real OVS nodes: create -> Succeeded across nodes, %d runs: p50 %v, min %v, max %v",
			len(lat), lat[len(lat)/2], lat[0], lat[len(lat)-1])
	})
}
