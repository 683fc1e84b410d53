package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/agent/nodenet"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
)

// ovsNode is one node of the test: its OVS, OpenFlow client and netfilter.
type ovsNode struct {
	br    *bridgetest.Bridge
	flows *agentof.Client
	nft   *nodenet.Table
	ips   *IPAssigner
}

func newOVSNode(t *testing.T, u *bridgetest.Underlay, cidr, gw, nodeIP string) *ovsNode {
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
	n := &ovsNode{br: br, flows: c, ips: NewIPAssigner("br-phy", nil)}
	n.do(t, func() error {
		var err error
		if n.nft, err = nodenet.New(); err != nil {
			return err
		}
		return n.nft.Masquerade(context.Background(), []netip.Prefix{netip.MustParsePrefix(cidr)}, "antrea-gw0")
	})
	return n
}

// do runs f in the node's network namespace.
func (n *ovsNode) do(t *testing.T, f func() error) {
	t.Helper()
	if err := n.br.NodeHost("node").Do(t, f); err != nil {
		t.Fatal(err)
	}
}

func (n *ovsNode) addPod(t *testing.T, name, cidr string) *bridgetest.Pod {
	t.Helper()
	p := n.br.AddPod(t, name, cidr)
	if err := n.flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
		t.Fatal(err)
	}
	return p
}

// hold makes the node hold the Egress IP for the given pods, or (eip
// invalid) hold nothing; remote sends its own pods' traffic to another node.
func (n *ovsNode) hold(t *testing.T, eip netip.Addr, members []*bridgetest.Pod, remote map[*bridgetest.Pod]net.IP) {
	t.Helper()
	ctx := context.Background()
	snat := map[netip.Addr]netip.Addr{}
	var want []netip.Addr
	if eip.IsValid() {
		want = []netip.Addr{eip}
		for _, p := range members {
			snat[netip.MustParseAddr(p.IP.String())] = eip
		}
	}
	n.do(t, func() error {
		if _, err := n.ips.Sync(want); err != nil {
			return err
		}
		return n.nft.SetEgressSNAT(ctx, nodenet.EgressSNAT{Gateway: "antrea-gw0", SNAT: snat})
	})
	r := map[netip.Addr]net.IP{}
	for p, to := range remote {
		r[netip.MustParseAddr(p.IP.String())] = to
	}
	if err := n.flows.SetEgressFlows(ctx, agentof.EgressFlows{Remote: r, Holding: eip.IsValid()}); err != nil {
		t.Fatal(err)
	}
}

// twoNodes are two nodes over a Geneve tunnel on an underlay, and a host
// outside the cluster on it (192.168.77.100).
func twoNodes(t *testing.T) (n1, n2 *ovsNode, ext *bridgetest.Pod) {
	t.Helper()
	u := bridgetest.NewUnderlay(t)
	n1 = newOVSNode(t, u, "10.10.1.0/24", "10.10.1.1", "192.168.77.11/24")
	n2 = newOVSNode(t, u, "10.10.2.0/24", "10.10.2.1", "192.168.77.12/24")
	for _, p := range [][2]*ovsNode{{n1, n2}, {n2, n1}} {
		if err := p[0].flows.InstallNodeFlows("peer", p[1].br.PodCIDR, p[1].br.GatewayIP, p[1].br.NodeIP); err != nil {
			t.Fatal(err)
		}
		p[0].br.ConnectPeer(t, p[1].br)
	}
	ext = u.AddHost(t, "ext", "192.168.77.100/24")
	return n1, n2, ext
}

// TestEgressIPOnTwoRealOVSNodes: two nodes with the userspace datapath and
// a Geneve tunnel, and a host outside the cluster on their underlay that
// reports the client address it sees. Pods an Egress selects reach it from
// the Egress IP, from the node holding it and from the other node (whose
// traffic is tunnelled there); a pod not selected is masqueraded to its
// node; pod-to-pod traffic keeps its source. Then the IP moves to the other
// node (gratuitous ARP tells the outside host) and the same holds.
func TestEgressIPOnTwoRealOVSNodes(t *testing.T) {
	n1, n2, ext := twoNodes(t)
	ext.ServeWho(t, 8080)
	a1 := n1.addPod(t, "a1", "10.10.1.2/24")
	a2 := n1.addPod(t, "a2", "10.10.1.3/24")
	b1 := n2.addPod(t, "b1", "10.10.2.2/24")
	b1.ServeWho(t, 8080)
	eip := netip.MustParseAddr("192.168.77.200")

	seen := func(p *bridgetest.Pod, to string) string {
		t.Helper()
		_, client := bridgetest.Answerer(p.AskWhoEventually(t, "tcp4", net.JoinHostPort(to, "8080")))
		host, _, _ := net.SplitHostPort(client)
		return host
	}
	expect := func(phase string, p *bridgetest.Pod, to, want string) {
		t.Helper()
		if got := seen(p, to); got != want {
			t.Errorf("%s: %s to %s arrived from %s, want %s", phase, p.Name, to, got, want)
		}
	}
	expect("no Egress", a1, "192.168.77.100", "192.168.77.11")

	n2.hold(t, eip, []*bridgetest.Pod{a1, b1}, nil)
	n1.hold(t, netip.Addr{}, nil, map[*bridgetest.Pod]net.IP{a1: n2.br.NodeIP})
	t.Logf("node-1's Egress flows:\n%s\nnode-2's:\n%s", strings.Join(n1.br.DumpFlows(t, "cookie=0x2/0xffffffff"), "\n"),
		strings.Join(n2.br.DumpFlows(t, "cookie=0x2/0xffffffff"), "\n"))
	phase := "node-2 holds the Egress IP"
	expect(phase, a1, "192.168.77.100", "192.168.77.200")
	expect(phase, b1, "192.168.77.100", "192.168.77.200")
	expect(phase, a2, "192.168.77.100", "192.168.77.11")
	expect(phase, a1, b1.IP.String(), a1.IP.String())
	n2.do(t, func() error {
		held, err := n2.ips.Held()
		if err == nil && !slices.Equal(held, []netip.Addr{eip}) {
			t.Errorf("node-2 holds %v, want [%s]", held, eip)
		}
		return err
	})

	// Failover: node-2 lets go, node-1 takes the IP.
	time.Sleep(time.Second) // past the outside host's neighbour locktime
	n2.hold(t, netip.Addr{}, nil, map[*bridgetest.Pod]net.IP{b1: n1.br.NodeIP})
	n1.hold(t, eip, []*bridgetest.Pod{a1, b1}, nil)
	phase = "node-1 holds the Egress IP"
	expect(phase, a1, "192.168.77.100", "192.168.77.200")
	expect(phase, b1, "192.168.77.100", "192.168.77.200")
	expect(phase, a2, "192.168.77.100", "192.168.77.11")
	n2.do(t, func() error {
		held, err := n2.ips.Held()
		if err == nil && len(held) != 0 {
			t.Errorf("node-2 still holds %v", held)
		}
		return err
	})

	// Nothing held: every pod is masqueraded to its node again.
	n1.hold(t, netip.Addr{}, nil, nil)
	n2.hold(t, netip.Addr{}, nil, nil)
	expect("Egress gone", a1, "192.168.77.100", "192.168.77.11")
	expect("Egress gone", b1, "192.168.77.100", "192.168.77.12")
}

// sink accepts TCP connections on port in host's netns and sends, for each
// connection, the bits per second it received, measured by the receiver
// from its first to its last byte.
func sink(t *testing.T, host *bridgetest.Pod, port int) <-chan float64 {
	t.Helper()
	var ln net.Listener
	if err := host.Do(t, func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rates := make(chan float64, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 64<<10)
			// A stream that stalls ends the count (bounded, so cleanup
			// never waits on a dead connection).
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			var n int64
			var first, end time.Time
			for {
				k, err := c.Read(buf)
				if k > 0 {
					if n == 0 {
						first = time.Now()
					}
					n += int64(k)
					end = time.Now()
				}
				if err != nil {
					break
				}
			}
			c.Close()
			rate := 0.0
			if d := end.Sub(first).Seconds(); d > 0 {
				rate = float64(n*8) / d
			}
			select {
			case rates <- rate:
			default:
			}
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return rates
}

// stream sends from the pod to addr for d (a bounded loop) and returns the
// receiver's rate.
func stream(t *testing.T, p *bridgetest.Pod, addr string, d time.Duration, rates <-chan float64) float64 {
	t.Helper()
	c, err := p.Dial(t, "tcp4", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("%s to %s: %v", p.Name, addr, err)
	}
	buf := make([]byte, 32<<10)
	for end := time.Now().Add(d); time.Now().Before(end); {
		_ = c.SetWriteDeadline(end.Add(time.Second))
		if _, err := c.Write(buf); err != nil {
			break
		}
	}
	c.Close()
	select {
	case r := <-rates:
		if r == 0 {
			t.Fatalf("the receiver at %s got nothing from %s", addr, p.Name)
		}
		return r
	case <-time.After(20 * time.Second):
		t.Fatalf("the receiver at %s never ended the stream from %s", addr, p.Name)
	}
	return 0
}

func dumpMeters(t *testing.T, n *ovsNode) string {
	t.Helper()
	out, err := n.br.Ofctl("dump-meters", "br-int", "-O", "OpenFlow15")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEgressBandwidthOnTheHoldingNode: node-2 holds an Egress IP for b1 (its
// own pod) and a1 (node-1's, tunnelled there); with a bandwidth of 8 Mbit/s
// the meter on node-2 limits both pods' TCP streams to the outside host,
// which run several times faster without it; the meter goes with the
// bandwidth.
func TestEgressBandwidthOnTheHoldingNode(t *testing.T) {
	n1, n2, ext := twoNodes(t)
	rates := sink(t, ext, 9000)
	a1 := n1.addPod(t, "a1", "10.10.1.2/24")
	b1 := n2.addPod(t, "b1", "10.10.2.2/24")
	// a1's stream crosses the Geneve tunnel: its MTU leaves room for the
	// encapsulation, as the agent gives pods.
	bridgetest.Run(t, "ip", "-n", a1.NS, "link", "set", "eth0", "mtu", "1400")
	eip := netip.MustParseAddr("192.168.77.200")
	n2.hold(t, eip, []*bridgetest.Pod{a1, b1}, nil)
	n1.hold(t, netip.Addr{}, nil, map[*bridgetest.Pod]net.IP{a1: n2.br.NodeIP})

	const limit = 8000 // kbit/s
	shaped := agentof.EgressFlows{Holding: true, Shaped: map[string]agentof.EgressShaping{"e": {RateKbps: limit, BurstKb: limit / 4,
		Local: []netip.Addr{netip.MustParseAddr(b1.IP.String())}, Remote: []netip.Addr{netip.MustParseAddr(a1.IP.String())}}}}
	measure := func(phase string) map[string]float64 {
		out := map[string]float64{}
		for _, p := range []*bridgetest.Pod{a1, b1} {
			out[p.Name] = stream(t, p, "192.168.77.100:9000", time.Second, rates)
			t.Logf("%s: %s to the outside host: %.1f Mbit/s", phase, p.Name, out[p.Name]/1e6)
		}
		return out
	}
	free := measure("no bandwidth")
	if err := n2.flows.SetEgressFlows(context.Background(), shaped); err != nil {
		t.Fatal(err)
	}
	meters := dumpMeters(t, n2)
	if !strings.Contains(meters, fmt.Sprintf("meter=%d kbps burst stats bands=", agentof.EgressMeterIDBase)) ||
		!strings.Contains(meters, fmt.Sprintf("type=drop rate=%d burst_size=%d", limit, limit/4)) {
		t.Errorf("node-2's meters:\n%s\nwant meter %d at %d kbps", meters, agentof.EgressMeterIDBase, limit)
	}
	t.Logf("node-2's Egress flows:\n%s", strings.Join(n2.br.DumpFlows(t, "cookie=0x2/0xffffffff"), "\n"))
	limited := measure(fmt.Sprintf("bandwidth %d kbit/s", limit))
	for _, p := range []string{"a1", "b1"} {
		// A TCP stream through a drop policer stays below its rate (plus the
		// burst); the bound leaves room for the receiver's clock.
		if limited[p] > 1.5*limit*1000 || free[p] < 3*limited[p] {
			t.Errorf("%s: %.1f Mbit/s with the bandwidth, %.1f without; want at most %.1f, and the free stream several times faster",
				p, limited[p]/1e6, free[p]/1e6, 1.5*limit/1000)
		}
	}
	// The bandwidth removed: its meter goes, the streams are free again.
	if err := n2.flows.SetEgressFlows(context.Background(), agentof.EgressFlows{Holding: true}); err != nil {
		t.Fatal(err)
	}
	if meters := dumpMeters(t, n2); strings.Contains(meters, fmt.Sprintf("meter=%d ", agentof.EgressMeterIDBase)) {
		t.Errorf("the meter is still there after the bandwidth went:\n%s", meters)
	}
	if again := measure("bandwidth removed"); again["b1"] < 2*limit*1000 {
		t.Errorf("b1 streams at %.1f Mbit/s after the bandwidth went, want it free again", again["b1"]/1e6)
	}
}
