package networkpolicy

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/agent/proxy"
	"antrea.io/antrea/pkg/agent/route"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// inNodeNS runs f in the node's netns (the node path's nftables and routes).
func inNodeNS(t *testing.T, br *bridgetest.Bridge, f func() error) error {
	t.Helper()
	nodeNS, err := ns.GetNS("/var/run/netns/" + br.NetNS())
	if err != nil {
		t.Fatal(err)
	}
	defer nodeNS.Close()
	return nodeNS.Do(func(ns.NetNS) error { return f() })
}

// nodePathNode is a real node of the NodePort policy tests: br-int with this
// agent's pipeline, a pod web (10.10.1.3, serving its name on 8080) in the
// interface store with the gateway (as the agent's store holds it), the
// node's masquerade and node path, and AntreaProxy with proxyAll serving the
// given Services and EndpointSlices; hosts of the underlay outside the
// cluster, by name. It all stops when the test ends; a test that runs more
// on ctx stops it first with cancel.
type nodePathNode struct {
	ctx    context.Context
	cancel context.CancelFunc
	br     *bridgetest.Bridge
	flows  *agentof.Client
	store  interfacestore.InterfaceStore
	web    *bridgetest.Pod
	hosts  map[string]*bridgetest.Pod
	// k8s and informers are the Services' and EndpointSlices' clientset
	// and the informers AntreaProxy runs on.
	k8s       *k8sfake.Clientset
	informers informers.SharedInformerFactory
	// packets dispatches the bridge's packet-ins (AntreaProxy's and a
	// policy controller's).
	packets *agentof.PacketInDispatcher
}

func newNodePathNode(t *testing.T, hosts map[string]string, objects ...runtime.Object) *nodePathNode {
	t.Helper()
	u := bridgetest.NewUnderlay(t)
	br := bridgetest.NewNode(t, bridgetest.NodeOptions{PodCIDR: "10.10.1.0/24", GatewayIP: "10.10.1.1", Underlay: u, NodeIP: "192.168.77.11/24"})
	n := &nodePathNode{br: br, hosts: map[string]*bridgetest.Pod{}}
	for name, cidr := range hosts {
		n.hosts[name] = u.AddHost(t, name, cidr)
	}
	flows, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	n.flows = flows
	br.SetReplay(func(ctx context.Context, conn *binding.Conn) error { return flows.Replay(ctx, conn) })
	ctx, cancel := context.WithCancel(context.Background())
	n.ctx, n.cancel = ctx, cancel
	t.Cleanup(cancel)
	if err := flows.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayMAC: br.GatewayMAC, TunnelOFPort: bridgetest.TunnelOFPort, PodCIDR: br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	if err := inNodeNS(t, br, func() error {
		return nodenet.EnsureMasquerade(context.Background(), netip.MustParsePrefix(br.PodCIDR.String()), "antrea-gw0")
	}); err != nil {
		t.Fatal(err)
	}
	n.web = br.AddPod(t, "web", "10.10.1.3/24")
	n.web.ServeWho(t, 8080)
	if err := flows.InstallPodFlows(n.web.HostIF, []net.IP{n.web.IP}, n.web.MAC, n.web.OFPort); err != nil {
		t.Fatal(err)
	}
	n.store = interfacestore.NewInterfaceStore()
	iface := interfacestore.NewContainerInterface(n.web.HostIF, "c-web", "web", "default", "eth0", n.web.MAC, []net.IP{n.web.IP}, 0)
	iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(n.web.OFPort)}
	n.store.AddInterface(iface)
	// A rejected packet from outside the node came in through the gateway.
	gw := interfacestore.NewGatewayInterface("antrea-gw0", br.GatewayMAC, []net.IP{br.GatewayIP})
	gw.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: bridgetest.GatewayOFPort}
	n.store.AddInterface(gw)

	path, err := route.NewNodePath(route.NodePathConfig{GatewayName: "antrea-gw0", GatewayIP: netip.MustParseAddr("10.10.1.1"),
		PodCIDR: netip.MustParsePrefix("10.10.1.0/24"), ResyncPeriod: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pathDone := make(chan struct{})
	go func() { defer close(pathDone); _ = inNodeNS(t, br, func() error { return path.Run(ctx) }) }()
	n.k8s = k8sfake.NewClientset(objects...)
	f := informers.NewSharedInformerFactory(n.k8s, 0)
	n.informers = f
	packets := agentof.NewPacketInDispatcher(br.OF)
	n.packets = packets
	go packets.Run(ctx)
	p, err := proxy.NewWithConfig(proxy.Config{NodeName: "node-1", Packets: packets, ProxyAll: true, NodePath: path},
		f.Core().V1().Services(), f.Discovery().V1().EndpointSlices(), flows)
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	proxyDone := make(chan struct{})
	go func() { _ = p.Run(ctx); close(proxyDone) }()
	t.Cleanup(func() { cancel(); <-proxyDone; <-pathDone; f.Shutdown() })
	return n
}

// webSlice is the EndpointSlice of Service svc: web, TCP 8080, on node-1.
func webSlice(svc string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.10.1.3"}, NodeName: ptr("node-1")}}}
}

// outcome connects from c to addr: who answered, or "timeout"/the error.
func outcome(t *testing.T, c *bridgetest.Pod, addr string) string {
	t.Helper()
	answer, err := c.AskWho(t, "tcp4", addr, 2*time.Second)
	if err != nil {
		return "no answer: " + err.Error()
	}
	who, _ := bridgetest.Answerer(answer)
	return who
}

// Ingress NetworkPolicy trusts the node alone, not every packet from the
// gateway: an outside client reaching a pod through a NodePort under
// externalTrafficPolicy Local keeps its address, and an ipBlock peer decides.
// One node on an underlay runs the pipeline, the proxy with proxyAll, the
// node path and this policy controller; two hosts outside the cluster,
// 192.168.77.100 inside the rule's ipBlock 192.168.77.96/28, 192.168.77.200
// outside it, connect to NodePort 30082 of the node's address.
func TestIngressPolicyMatchesOutsideClientsOfANodePort(t *testing.T) {
	// AntreaProxy with the node path: NodePort 30082, externalTrafficPolicy
	// Local, its endpoint web on this node.
	n := newNodePathNode(t, map[string]string{"allowed": "192.168.77.100/24", "denied": "192.168.77.200/24"},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.12", ClusterIPs: []string{"10.96.0.12"},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: 30082}}}},
		webSlice("web"))
	ctx, br, flows, store := n.ctx, n.br, n.flows, n.store
	allowed, denied := n.hosts["allowed"], n.hosts["denied"]

	nodePort := net.JoinHostPort(br.NodeIP.String(), "30082")
	for _, c := range []*bridgetest.Pod{allowed, denied} {
		deadline := time.Now().Add(15 * time.Second)
		for got := ""; got != "web"; got = outcome(t, c, nodePort) {
			if time.Now().After(deadline) {
				t.Fatalf("without policy %s should reach web through NodePort %s, got %q", c.Name, nodePort, got)
			}
		}
	}

	// web is isolated for ingress; only the ipBlock 192.168.77.96/28 may connect.
	atg := &cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-web"},
		GroupMembers: []cpv1beta2.GroupMember{member("default", "web", "10.10.1.3")}}
	np := &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "np-web", Generation: 1}, AppliedToGroups: []string{"atg-web"},
		Rules: []cpv1beta2.NetworkPolicyRule{{Direction: cpv1beta2.DirectionIn, From: cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{{
			CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.ParseIP("192.168.77.96").To4()), PrefixLength: 28}}}}}}}
	// As the agent does, a change that narrows what is allowed revalidates
	// the datapath's cached flows: the connections made above without the
	// policy left megaflows that would otherwise forward the next SYN of
	// the same client until the revalidators catch up.
	purged := make(chan struct{}, 1)
	c := NewController("node-1", newClient(atg, np), flows, store, Options{OnNarrowed: func() {
		if _, err := br.Appctl("revalidator/purge"); err != nil {
			t.Errorf("purge the datapath flows: %v", err)
		}
		purged <- struct{}{}
	}})
	go c.Run(ctx)
	select {
	case <-c.InitialRealized():
	case <-time.After(15 * time.Second):
		t.Fatal("the policy was not realized")
	}
	<-purged
	for _, f := range br.DumpFlows(t) {
		if strings.Contains(f, "table=15,") || strings.Contains(f, "table=16,") {
			t.Logf("ingress policy: %s", f)
		}
	}
	if got := outcome(t, allowed, nodePort); got != "web" {
		t.Fatalf("%s is inside the ipBlock: it should reach web through the NodePort, got %q", allowed.IP, got)
	}
	if got := outcome(t, denied, nodePort); got == "web" {
		t.Fatalf("%s is outside the ipBlock: the ingress rule must drop it, but web answered (traffic from outside bypasses ingress policy)", denied.IP)
	}
	// The node itself is still trusted (kubelet probes): its traffic to the
	// pod has the gateway IP as source.
	if got := outcome(t, br.NodeHost("node-1"), net.JoinHostPort(n.web.IP.String(), "8080")); got != "web" {
		t.Fatalf("the node should reach its pod despite the policy, got %q", got)
	}
}

func ptr[T any](v T) *T { return &v }
