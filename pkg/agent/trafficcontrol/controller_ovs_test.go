package trafficcontrol

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	crdv1alpha2 "antrea.io/antrea/pkg/apis/crd/v1alpha2"
	crdfake "antrea.io/antrea/pkg/client/clientset/versioned/fake"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
)

// The controller on a real node: a TrafficControl selecting Pod a by label
// mirrors a's egress to an OVS internal port it creates (a capture on that
// port sees exactly a's packets); a change of the TrafficControl's target
// moves the port; a target that cannot be made (a device that does not
// exist) is a Warning Event naming targetPort; deleting the
// TrafficControl removes its flows and the ports it made.
func TestTheControllerMirrorsTheSelectedPodsToThePortItMakes(t *testing.T) {
	br := bridgetest.New(t)
	flows, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := flows.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayMAC: br.GatewayMAC, PodCIDR: br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	conn, err := ovsconfig.Connect(ctx, br.DBEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	bridge := ovsconfig.NewOVSBridge(conn, ovsconfig.BridgeConfig{Name: "br-int", DatapathType: ovsconfig.OVSDatapathNetdev})

	kube := kubefake.NewSimpleClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "test"}}})
	crd := crdfake.NewSimpleClientset()
	store := interfacestore.NewInterfaceStore()
	pods := map[string]*bridgetest.Pod{}
	for i, name := range []string{"web", "a", "b"} {
		p := br.AddPod(t, name, "10.10.1."+string(rune('3'+i))+"/24")
		if err := flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		iface := interfacestore.NewContainerInterface(p.HostIF, "c-"+name, name, "default", "eth0", p.MAC, []net.IP{p.IP}, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(p.OFPort)}
		store.AddInterface(iface)
		if _, err := kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Labels: map[string]string{"app": name}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods[name] = p
	}
	web, a, b := pods["web"], pods["a"], pods["b"]
	web.ServeWho(t, 8080)

	kf := informers.NewSharedInformerFactory(kube, 0)
	cf := crdinformers.NewSharedInformerFactory(crd, 0)
	recorder := record.NewFakeRecorder(16)
	var purges atomic.Int32
	purge := func(context.Context) error { purges.Add(1); br.PurgeDatapath(t); return nil }
	c := NewController(Config{TrafficControls: cf.Crd().V1alpha2().TrafficControls().Informer(),
		Pods: kf.Core().V1().Pods().Informer(), Namespaces: kf.Core().V1().Namespaces().Informer(),
		Interfaces: store, Bridge: bridge, Flows: flows, Purge: purge, Recorder: recorder})
	kf.Start(ctx.Done())
	cf.Start(ctx.Done())
	go c.Run(ctx)

	tc := &crdv1alpha2.TrafficControl{ObjectMeta: metav1.ObjectMeta{Name: "mirror-a"}, Spec: crdv1alpha2.TrafficControlSpec{
		AppliedTo: crdv1alpha2.AppliedTo{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}},
		Direction: crdv1alpha2.DirectionEgress, Action: crdv1alpha2.ActionMirror,
		TargetPort: crdv1alpha2.TrafficControlPort{OVSInternal: &crdv1alpha2.OVSInternalPort{Name: "tap0"}}}}
	if _, err := crd.CrdV1alpha2().TrafficControls().Create(ctx, tc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPort := func(name string, present bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := bridge.GetPortData(ctx, name)
			if (err == nil) == present {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("port %s present=%v: want %v (%v)", name, err == nil, present, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitPort("tap0", true)
	bridgetest.Run(t, "ip", "-n", br.NetNS(), "link", "set", "tap0", "up")
	node := &bridgetest.Pod{NS: br.NetNS()}
	mirror := bridgetest.Sniff(t, node, "tap0")
	addr := net.JoinHostPort(web.IP.String(), "8080")
	// The flows come with the port, in the same sync: a's exchanges are
	// seen on tap0 once it is there (asked until the capture sees one).
	deadline := time.Now().Add(10 * time.Second)
	for mirror.Count(a.IP, web.IP) == 0 {
		if answer, err := a.AskWho(t, "tcp4", addr, 2*time.Second); err != nil || !strings.HasPrefix(answer, "web") {
			t.Fatalf("a asked web with its egress mirrored: %q, %v", answer, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("tap0 never saw a's packets to web\nflows:\n%s", strings.Join(br.DumpFlows(t), "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if answer, err := b.AskWho(t, "tcp4", addr, 2*time.Second); err != nil || !strings.HasPrefix(answer, "web") {
		t.Fatalf("b asked web: %q, %v", answer, err)
	}
	time.Sleep(200 * time.Millisecond)
	if got := mirror.Count(b.IP, web.IP) + mirror.Count(web.IP, a.IP) + mirror.Count(web.IP, b.IP); got != 0 {
		t.Errorf("tap0 saw %d packets that are not a's egress", got)
	}

	// A Pod event that changes no TrafficControl's ports (b relabelled,
	// still unselected) writes nothing and purges no datapath cache.
	before := purges.Load()
	pb, err := kube.CoreV1().Pods("default").Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pb.Labels["tier"] = "back"
	if _, err := kube.CoreV1().Pods("default").Update(ctx, pb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if got := purges.Load(); got != before {
		t.Errorf("a Pod event that changes no TrafficControl purged the datapath cache %d times", got-before)
	}

	// A device that does not exist: a Warning Event naming targetPort, and
	// no flow of this TrafficControl.
	tc.Spec.TargetPort = crdv1alpha2.TrafficControlPort{Device: &crdv1alpha2.NetworkDevice{Name: "nosuchdev0"}}
	if _, err := crd.CrdV1alpha2().TrafficControls().Update(ctx, tc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, "Warning TargetPortError targetPort:") || !strings.Contains(e, "nosuchdev0") {
			t.Errorf("event %q, want a Warning TargetPortError naming targetPort and the device", e)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no Event for a target device that does not exist")
	}
	waitPort("tap0", false)
	waitPort("nosuchdev0", false)
	for _, f := range br.DumpFlows(t) {
		if strings.Contains(f, "cookie=0x100000004,") {
			t.Errorf("a TrafficControl flow stayed while its target cannot be made: %s", f)
		}
	}

	// A GRE tunnel to a collector: one port, named by its parameters.
	key := int32(7)
	tc.Spec.TargetPort = crdv1alpha2.TrafficControlPort{GRE: &crdv1alpha2.GRETunnel{RemoteIP: "192.168.77.50", Key: &key}}
	if _, err := crd.CrdV1alpha2().TrafficControls().Update(ctx, tc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec, err := specOf(tc.Spec.TargetPort)
	if err != nil {
		t.Fatal(err)
	}
	waitPort(spec.name, true)
	if p, _ := bridge.GetPortData(ctx, spec.name); p.IFType != "gre" || p.Options["remote_ip"] != "192.168.77.50" || p.Options["key"] != "7" {
		t.Errorf("the GRE target port is %+v", p)
	}

	if err := crd.CrdV1alpha2().TrafficControls().Delete(ctx, tc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPort(spec.name, false)
	for _, f := range br.DumpFlows(t) {
		if strings.Contains(f, "cookie=0x100000004,") {
			t.Errorf("a TrafficControl flow stayed after its TrafficControl was deleted: %s", f)
		}
	}
}
