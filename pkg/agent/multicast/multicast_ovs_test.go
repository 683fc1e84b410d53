package multicast

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// mcastNode is one node of a two-node cluster on an underlay: its OVS,
// the agent's OpenFlow client and a real multicast controller.
type mcastNode struct {
	name  string
	br    *bridgetest.Bridge
	flows *agentof.Client
	store interfacestore.InterfaceStore
	ctrl  *Controller
	stop  context.CancelFunc
}

func newMcastNode(t *testing.T, u *bridgetest.Underlay, name, cidr, gw, nodeIP string) *mcastNode {
	t.Helper()
	br := bridgetest.NewNode(t, bridgetest.NodeOptions{PodCIDR: cidr, GatewayIP: gw, Underlay: u, NodeIP: nodeIP})
	c, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(context.Background(), &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayMAC: br.GatewayMAC, TunnelOFPort: bridgetest.TunnelOFPort, PodCIDR: br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	return &mcastNode{name: name, br: br, flows: c, store: interfacestore.NewInterfaceStore()}
}

func (n *mcastNode) addPod(t *testing.T, name, cidr string) *bridgetest.Pod {
	t.Helper()
	p := n.br.AddPod(t, name, cidr)
	if err := n.flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
		t.Fatal(err)
	}
	iface := interfacestore.NewContainerInterface(p.HostIF, "c-"+name, name, "demo", "eth0", p.MAC, []net.IP{p.IP}, 0)
	iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(p.OFPort)}
	n.store.AddInterface(iface)
	return p
}

// receiver is a socket of a pod joined to a group, counting what it reads.
type receiver struct {
	conn *ipv4.PacketConn
	ifi  *net.Interface
	got  atomic.Int64
}

// join opens a UDP socket on port in p and joins group on its eth0 (the
// pod's kernel sends the IGMP report).
func join(t *testing.T, p *bridgetest.Pod, group net.IP, port int) *receiver {
	t.Helper()
	r := &receiver{}
	if err := p.Do(t, func() error {
		c, err := net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", port))
		if err != nil {
			return err
		}
		r.ifi, err = net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		r.conn = ipv4.NewPacketConn(c)
		return r.conn.JoinGroup(r.ifi, &net.UDPAddr{IP: group})
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.conn.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, _, err := r.conn.ReadFrom(buf); err != nil {
				return
			}
			r.got.Add(1)
		}
	}()
	return r
}

// send sends n datagrams from p to group:port (TTL 1, the default).
func send(t *testing.T, p *bridgetest.Pod, group net.IP, port, n int) {
	t.Helper()
	if err := p.Do(t, func() error {
		c, err := net.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			return err
		}
		defer c.Close()
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		pc := ipv4.NewPacketConn(c)
		if err := pc.SetMulticastInterface(ifi); err != nil {
			return err
		}
		// No copy looped back by the sender's kernel: what a socket of
		// the sender reads came through OVS.
		if err := pc.SetMulticastLoopback(false); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if _, err := pc.WriteTo([]byte("mcast"), nil, &net.UDPAddr{IP: group, Port: port}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestMulticastAcrossTwoNodesOnRealOVS: two nodes joined by a Geneve
// tunnel, each running the multicast controller on a fake API (the Nodes'
// annotations carry the memberships). A sender on node-1 reaches a member
// on node-1 and one on node-2, through the tunnel; a non-member pod on
// node-2 sees none of the group's packets; the sender, a member too, never
// gets its own packets back; a member that leaves the group (its kernel
// sends the leave) stops receiving; the counters of antctl get
// podmulticaststats count what each pod sent and received.
func TestMulticastAcrossTwoNodesOnRealOVS(t *testing.T) {
	ovsinstance.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	u := bridgetest.NewUnderlay(t)
	n1 := newMcastNode(t, u, "node-1", "10.10.1.0/24", "10.10.1.1", "192.168.77.11/24")
	n2 := newMcastNode(t, u, "node-2", "10.10.2.0/24", "10.10.2.1", "192.168.77.12/24")
	for _, p := range [][2]*mcastNode{{n1, n2}, {n2, n1}} {
		if err := p[0].flows.InstallNodeFlows(p[1].name, p[1].br.PodCIDR, p[1].br.GatewayIP, p[1].br.NodeIP); err != nil {
			t.Fatal(err)
		}
		p[0].br.ConnectPeer(t, p[1].br)
	}
	sender := n1.addPod(t, "sender", "10.10.1.2/24")
	local := n1.addPod(t, "local", "10.10.1.3/24")
	remote := n2.addPod(t, "remote", "10.10.2.3/24")
	other := n2.addPod(t, "other", "10.10.2.4/24")

	node := func(n *mcastNode) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.br.NodeIP.String()}}}}
	}
	kube := k8sfake.NewClientset(node(n1), node(n2))
	for _, n := range []*mcastNode{n1, n2} {
		disp := agentof.NewPacketInDispatcher(n.br.OF)
		go disp.Run(ctx)
		f := informers.NewSharedInformerFactory(kube, 0)
		br := n.br
		n.ctrl = NewController(Config{NodeName: n.name, Kube: kube, Nodes: f.Core().V1().Nodes().Informer(),
			Interfaces: n.store, Flows: n.flows, IO: disp, GatewayIP: br.GatewayIP, GatewayMAC: br.GatewayMAC,
			QueryInterval: 10 * time.Second, QueryVersions: []int{3},
			Purge: func(context.Context) error { br.PurgeDatapath(t); return nil }})
		nctx, stop := context.WithCancel(ctx)
		n.stop = stop
		f.Start(nctx.Done())
		go n.ctrl.Run(nctx)
	}

	group, port := net.ParseIP("225.1.2.3"), 5001
	sniff := map[string]*bridgetest.Sniffer{}
	for _, p := range []*bridgetest.Pod{sender, local, remote, other} {
		sniff[p.Name] = bridgetest.Sniff(t, p, "eth0")
	}
	rLocal := join(t, local, group, port)
	rRemote := join(t, remote, group, port)
	rSender := join(t, sender, group, port)
	// The non-member listens on the port without joining.
	if err := other.Do(t, func() error {
		c, err := net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", port))
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(30 * time.Second)
	for rLocal.got.Load() == 0 || rRemote.got.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the members received local %d, remote %d\nnode-1 flows:\n%s\nnode-1 groups:\n%s\nnode-2 groups:\n%s",
				rLocal.got.Load(), rRemote.got.Load(), strings.Join(n1.br.DumpFlows(t), "\n"),
				strings.Join(n1.br.DumpGroups(t), "\n"), strings.Join(n2.br.DumpGroups(t), "\n"))
		}
		send(t, sender, group, port, 1)
		time.Sleep(200 * time.Millisecond)
	}
	const burst = 20
	before := map[string]int{}
	for name, s := range sniff {
		before[name] = s.Count(sender.IP, group)
	}
	send(t, sender, group, port, burst)
	time.Sleep(500 * time.Millisecond)
	for _, name := range []string{"local", "remote"} {
		if got := sniff[name].Count(sender.IP, group) - before[name]; got != burst {
			t.Errorf("member %s received %d of the %d datagrams sent to %s", name, got, burst, group)
		}
	}
	if got := sniff["other"].Count(sender.IP, group); got != 0 {
		t.Errorf("the non-member on node-2 received %d datagrams of group %s", got, group)
	}
	if got := sniff["sender"].Count(sender.IP, group); got != 0 || rSender.got.Load() != 0 {
		t.Errorf("the sender, a member, got %d of its own datagrams back (%d read)", got, rSender.got.Load())
	}

	// What docs/design/ovs-pipeline.md shows of the feature (go test -v).
	var shown []string
	for _, f := range n1.br.DumpFlows(t) {
		if strings.Contains(f, "cookie=0x100000005") {
			shown = append(shown, f)
		}
	}
	t.Logf("node-1's multicast flows:\n%s\nnode-1's groups:\n%s", strings.Join(shown, "\n"), strings.Join(n1.br.DumpGroups(t), "\n"))

	stats, err := n1.flows.MulticastPodStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := stats[sender.OFPort]; s.Outbound < burst {
		t.Errorf("the sender's outbound counter is %d, want at least %d", s.Outbound, burst)
	}
	if s := stats[local.OFPort]; s.Inbound < burst {
		t.Errorf("the local member's inbound counter is %d, want at least %d", s.Inbound, burst)
	}
	if s := stats[sender.OFPort]; s.Inbound != 0 {
		t.Errorf("the sender, a member, counted %d of its own packets as inbound", s.Inbound)
	}

	// remote leaves: its kernel sends an IGMPv3 TO_INCLUDE{} report.
	if err := rRemote.conn.LeaveGroup(rRemote.ifi, &net.UDPAddr{IP: group}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		prev := sniff["remote"].Count(sender.IP, group)
		send(t, sender, group, port, 5)
		time.Sleep(300 * time.Millisecond)
		if sniff["remote"].Count(sender.IP, group) == prev {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after remote left %s it still receives its datagrams", group)
		}
	}
	prevLocal := sniff["local"].Count(sender.IP, group)
	send(t, sender, group, port, burst)
	time.Sleep(500 * time.Millisecond)
	if got := sniff["local"].Count(sender.IP, group) - prevLocal; got != burst {
		t.Errorf("after remote left, the local member received %d of %d datagrams", got, burst)
	}
	// node-1 no longer sends the group through the tunnel: node-2's
	// annotation names no group.
	n2Node, err := kube.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := n2Node.Annotations[NodeGroupsAnnotation]; ok {
		t.Errorf("node-2's annotation %s is %q after its only member left", NodeGroupsAnnotation, a)
	}

	// remote's inbound counter outlives its membership (the group is gone
	// from node-2).
	st2, err := n2.flows.MulticastPodStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := st2[remote.OFPort]; s.Inbound < burst {
		t.Errorf("after it left, remote's inbound counter is %d, want at least the %d it received", s.Inbound, burst)
	}

	// node-1's agent restarts (OVS keeps its groups): the new run's first
	// write replaces the groups of the earlier one.
	n1.stop()
	c2, err := agentof.NewClient(n1.br.OF, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: n1.br.GatewayIP,
		GatewayMAC: n1.br.GatewayMAC, TunnelOFPort: bridgetest.TunnelOFPort, PodCIDR: n1.br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	want := agentof.MulticastFlows{Groups: []agentof.MulticastGroup{{Group: netip.MustParseAddr("225.1.2.3"), LocalPorts: []uint32{local.OFPort}}}}
	if err := c2.SetMulticastFlows(ctx, want); err != nil {
		t.Fatalf("the restarted agent's first multicast write: %v", err)
	}
	if gs := n1.br.DumpGroups(t); len(gs) != 2 {
		t.Errorf("after the restart node-1 holds %d groups, want the new run's 2:\n%s", len(gs), strings.Join(gs, "\n"))
	}
}
