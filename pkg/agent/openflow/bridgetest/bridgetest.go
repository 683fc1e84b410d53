// Package bridgetest gives the agent's data-plane tests a real node to run
// on: a private Open vSwitch instance (userspace datapath) in its own network
// namespace with the integration bridge br-int and the gateway antrea-gw0,
// pods made of network namespaces wired to the bridge by veths, hosts outside
// the node, and the oracles the tests ask (dump-flows, dump-groups,
// ofproto/trace). Everything a test creates is removed when it ends, also on
// failure. Only the Service tests and the proxy's tests use it so far; the
// older pod and policy tests of pkg/agent/openflow have their own copies.
//
// It does not import pkg/agent/openflow, so that package's own tests can use
// it: the caller builds its client on Bridge.OF and sets Bridge.Replay.
package bridgetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsconfig"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// Addresses of every Bridge: the node's pod CIDR and its gateway.
const (
	GatewayOFPort = 2
	PodCIDR       = "10.10.1.0/24"
	GatewayIP     = "10.10.1.1"
)

// Run runs a command and fails the test when it fails; it returns the output.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Bridge is a node: OVS in its own netns with br-int and the gateway.
type Bridge struct {
	*ovsinstance.Instance
	GatewayMAC net.HardwareAddr
	// GatewayIP and PodCIDR are the node's (GatewayIP and PodCIDR for New).
	GatewayIP net.IP
	PodCIDR   *net.IPNet
	// GatewayIPv6 and PodCIDRv6 are a dual-stack node's (AddGatewayIPv6).
	GatewayIPv6 net.IP
	PodCIDRv6   *net.IPNet
	// NodeIP is the node's underlay address (on br-phy's internal port) and
	// PhyMAC br-phy's MAC, for a node made with an underlay; nil otherwise.
	// An IPv6 NodeIP makes an IPv6 underlay (the tunnel's outer packets
	// are IPv6).
	NodeIP net.IP
	PhyMAC net.HardwareAddr
	// OF is the OpenFlow channel to br-int (with packet-ins enabled).
	OF *binding.Client

	mu     sync.Mutex
	replay func(ctx context.Context, conn *binding.Conn) error
}

// SetReplay sets what runs when the OpenFlow channel reconnects (after an
// ovs-vswitchd restart): the agent's client replays its flows there.
func (b *Bridge) SetReplay(f func(ctx context.Context, conn *binding.Conn) error) {
	b.mu.Lock()
	b.replay = f
	b.mu.Unlock()
}

// New starts a node (PodCIDR, GatewayIP) without underlay. The node
// forwards IP (as a real node does): a packet the pipeline wrongly sends to
// the gateway comes back in from it.
func New(t testing.TB) *Bridge {
	t.Helper()
	return NewNode(t, NodeOptions{PodCIDR: PodCIDR, GatewayIP: GatewayIP})
}

// TunnelOFPort is the port of antrea-tun0 on a node with an underlay.
const TunnelOFPort = 1

// NodeOptions say what node NewNode makes.
type NodeOptions struct {
	// PodCIDR ("10.10.2.0/24") and GatewayIP ("10.10.2.1") of the node.
	PodCIDR, GatewayIP string
	// Underlay, when set, wires the node to it as the agent's bring-up does
	// with the userspace datapath (pkg/agent/nodeinit): the uplink eth0 is
	// a port of the netdev bridge br-phy, whose internal port holds NodeIP
	// ("192.168.77.11/24"), and br-int has a flow-based tunnel port
	// antrea-tun0 on TunnelOFPort, of TunnelType (Geneve when empty) with
	// the options the agent gives it (ovsconfig.TunnelOptions).
	Underlay   *Underlay
	NodeIP     string
	TunnelType ovsconfig.TunnelType
}

// NewNode starts a node.
func NewNode(t testing.TB, o NodeOptions) *Bridge {
	t.Helper()
	in := ovsinstance.StartForTest(t, "svcof")
	gwIP := net.ParseIP(o.GatewayIP)
	_, cidr, err := net.ParseCIDR(o.PodCIDR)
	if err != nil || gwIP == nil || !cidr.Contains(gwIP) {
		t.Fatalf("node: bad pod CIDR %q or gateway %q", o.PodCIDR, o.GatewayIP)
	}
	if _, err := in.Vsctl("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev",
		"protocols=OpenFlow13,OpenFlow15", "fail_mode=secure",
		"--", "add-port", "br-int", "antrea-gw0", "--", "set", "interface", "antrea-gw0", "type=internal",
		fmt.Sprintf("ofport_request=%d", GatewayOFPort)); err != nil {
		t.Fatal(err)
	}
	ones, _ := cidr.Mask.Size()
	Run(t, "ip", "-n", in.NetNS(), "addr", "add", fmt.Sprintf("%s/%d", gwIP, ones), "dev", "antrea-gw0")
	Run(t, "ip", "-n", in.NetNS(), "link", "set", "antrea-gw0", "up")
	Run(t, "ip", "netns", "exec", in.NetNS(), "sysctl", "-qw", "net.ipv4.ip_forward=1")
	b := &Bridge{Instance: in, GatewayMAC: linkMAC(t, in.NetNS(), "antrea-gw0"), GatewayIP: gwIP, PodCIDR: cidr}
	if o.Underlay != nil {
		b.joinUnderlay(t, o.Underlay, o.NodeIP, o.TunnelType)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.OF = binding.NewClient(in.BridgeMgmt("br-int"), binding.ClientOptions{
		Conn: binding.Options{AsyncMessages: true},
		OnConnect: func(ctx context.Context, conn *binding.Conn, reconnect bool) error {
			b.mu.Lock()
			replay := b.replay
			b.mu.Unlock()
			if reconnect && replay != nil {
				return replay(ctx, conn)
			}
			return nil
		},
	})
	done := make(chan struct{})
	go func() { b.OF.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return b
}

func linkMAC(t testing.TB, netns, link string) net.HardwareAddr {
	t.Helper()
	out := Run(t, "ip", "-n", netns, "-o", "link", "show", link)
	mac, err := net.ParseMAC(strings.Fields(out[strings.Index(out, "link/ether"):])[1])
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// Pod is a pod: a netns whose eth0 is wired to an OVS port.
type Pod struct {
	Name, NS, HostIF string
	IP               net.IP
	// IPv6 is the pod's IPv6 address on a dual-stack node (AddIPv6).
	IPv6   net.IP
	MAC    net.HardwareAddr
	OFPort uint32
}

// AddPod makes a pod with address cidr (in the node's pod CIDR) and its OVS port.
func (b *Bridge) AddPod(t testing.TB, name, cidr string) *Pod {
	t.Helper()
	podNS := ovsinstance.NewNetNS(t, "svcpod")
	host := "veth-" + name
	Run(t, "ip", "-n", podNS, "link", "add", "eth0", "type", "veth", "peer", "name", host, "netns", b.NetNS())
	Run(t, "ip", "-n", podNS, "addr", "add", cidr, "dev", "eth0")
	Run(t, "ip", "-n", podNS, "link", "set", "eth0", "up")
	Run(t, "ip", "-n", podNS, "route", "add", "default", "via", b.GatewayIP.String())
	// netdev datapath pitfalls (ENVIRONMENT.md): no TX checksum offload in
	// the pod, no kernel ARP nor IPv6 on the host side.
	Run(t, "ip", "netns", "exec", podNS, "ethtool", "-K", "eth0", "tx", "off")
	Run(t, "ip", "netns", "exec", b.NetNS(), "sysctl", "-qw", "net.ipv6.conf."+host+".disable_ipv6=1")
	Run(t, "ip", "-n", b.NetNS(), "link", "set", host, "arp", "off", "up")
	if _, err := b.Vsctl("add-port", "br-int", host); err != nil {
		t.Fatal(err)
	}
	port, err := b.Vsctl("get", "interface", host, "ofport")
	if err != nil {
		t.Fatal(err)
	}
	ofPort, err := strconv.ParseUint(strings.TrimSpace(port), 10, 32)
	if err != nil {
		t.Fatalf("ofport of %s: %q: %v", host, port, err)
	}
	ip, _, _ := net.ParseCIDR(cidr)
	return &Pod{Name: name, NS: podNS, HostIF: host, IP: ip, MAC: linkMAC(t, podNS, "eth0"), OFPort: uint32(ofPort)}
}

// AddGatewayIPv6 makes the node dual-stack: the gateway gets gw (its
// address with the IPv6 pod CIDR's length, "fd00:10:244:1::1/64"), without
// duplicate address detection, and the node forwards IPv6 (a sysctl of the
// node's own netns). It sets GatewayIPv6 and PodCIDRv6.
func (b *Bridge) AddGatewayIPv6(t testing.TB, gw string) {
	t.Helper()
	ip, cidr, err := net.ParseCIDR(gw)
	if err != nil || ip.To4() != nil {
		t.Fatalf("gateway IPv6 %q: not an IPv6 address with its prefix length", gw)
	}
	Run(t, "ip", "netns", "exec", b.NetNS(), "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	Run(t, "ip", "-n", b.NetNS(), "addr", "add", gw, "dev", "antrea-gw0", "nodad")
	b.GatewayIPv6, b.PodCIDRv6 = ip, cidr
}

// AddIPv6 gives the pod a second address, of IPv6 (cidr, in the node's
// IPv6 pod CIDR), without duplicate address detection, and a default route
// through the gateway's IPv6 address, as the agent's CNI does for a
// dual-stack pod.
func (p *Pod) AddIPv6(t testing.TB, b *Bridge, cidr string) {
	t.Helper()
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil || ip.To4() != nil || b.GatewayIPv6 == nil {
		t.Fatalf("pod %s: IPv6 %q: not an IPv6 address with its prefix length, or the node has no IPv6 gateway", p.Name, cidr)
	}
	Run(t, "ip", "-n", p.NS, "addr", "add", cidr, "dev", "eth0", "nodad")
	Run(t, "ip", "-n", p.NS, "-6", "route", "add", "default", "via", b.GatewayIPv6.String())
	p.IPv6 = ip
}

// AddOutsideHost makes a host outside the cluster: a netns linked to the
// node by a veth (link: the node's and the host's addresses) with a default
// route through the node.
func (b *Bridge) AddOutsideHost(t testing.TB, name string, link HostLink) *Pod {
	t.Helper()
	hostNS := ovsinstance.NewNetNS(t, "svcext")
	nodeIF := "ext-" + name
	Run(t, "ip", "-n", hostNS, "link", "add", "eth0", "type", "veth", "peer", "name", nodeIF, "netns", b.NetNS())
	Run(t, "ip", "-n", hostNS, "addr", "add", link.Host, "dev", "eth0")
	Run(t, "ip", "-n", hostNS, "link", "set", "eth0", "up")
	Run(t, "ip", "-n", b.NetNS(), "addr", "add", link.Node, "dev", nodeIF)
	Run(t, "ip", "-n", b.NetNS(), "link", "set", nodeIF, "up")
	nodeIP, _, _ := net.ParseCIDR(link.Node)
	Run(t, "ip", "-n", hostNS, "route", "add", "default", "via", nodeIP.String())
	Run(t, "ip", "netns", "exec", hostNS, "ethtool", "-K", "eth0", "tx", "off")
	ip, _, _ := net.ParseCIDR(link.Host)
	return &Pod{Name: name, NS: hostNS, HostIF: nodeIF, IP: ip, MAC: linkMAC(t, hostNS, "eth0")}
}

// ServiceNextHop is the next hop through which the node routes Service
// addresses into the bridge: its neighbor entry is pinned to a MAC the
// pipeline routes (the global virtual MAC), as the agent's node path does.
const ServiceNextHop = "169.254.0.252"

// RouteToBridge makes the node route prefix into the bridge through the
// gateway, to ServiceNextHop at mac.
func (b *Bridge) RouteToBridge(t testing.TB, prefix string, mac net.HardwareAddr) {
	t.Helper()
	Run(t, "ip", "-n", b.NetNS(), "neigh", "replace", ServiceNextHop, "lladdr", mac.String(), "dev", "antrea-gw0", "nud", "permanent")
	Run(t, "ip", "-n", b.NetNS(), "route", "replace", prefix, "via", ServiceNextHop, "dev", "antrea-gw0", "onlink")
}

// HostLink is the point-to-point link between the node and an outside host:
// each side's address with its prefix length ("192.168.77.1/24").
type HostLink struct{ Node, Host string }

// Do runs f with the calling goroutine's thread in the pod's netns; sockets
// f opens stay there.
func (p *Pod) Do(t testing.TB, f func() error) error {
	t.Helper()
	n, err := ns.GetNS("/var/run/netns/" + p.NS)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	return n.Do(func(ns.NetNS) error { return f() })
}

// ServeWho makes a pod answer on TCP and UDP port with "<name> <client
// address>": the test learns which endpoint answered and whom it saw.
func (p *Pod) ServeWho(t testing.TB, port int) {
	t.Helper()
	p.serveWho(t, "4", port)
}

// ServeWho6 is ServeWho over IPv6 (tcp6 and udp6).
func (p *Pod) ServeWho6(t testing.TB, port int) {
	t.Helper()
	p.serveWho(t, "6", port)
}

func (p *Pod) serveWho(t testing.TB, family string, port int) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	if err := p.Do(t, func() error {
		var err error
		if ln, err = net.Listen("tcp"+family, fmt.Sprintf(":%d", port)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp"+family, fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); pc.Close(); wg.Wait() })
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "%s %s\n", p.Name, c.RemoteAddr())
			c.Close()
		}
	}()
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			// The answer's first line says who answered; the datagram
			// follows it, so a large request gets an answer as large.
			_, _ = pc.WriteTo(append(fmt.Appendf(nil, "%s %s\n", p.Name, from), buf[:k]...), from)
		}
	}()
}

// ServeEcho makes a pod echo every TCP connection on port, for as long as
// the connection lasts.
func (p *Pod) ServeEcho(t testing.TB, port int) {
	t.Helper()
	var ln net.Listener
	if err := p.Do(t, func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// Dial opens a connection from the pod (network "tcp4" or "udp4").
func (p *Pod) Dial(t testing.TB, network, addr string, timeout time.Duration) (net.Conn, error) {
	t.Helper()
	var c net.Conn
	err := p.Do(t, func() error {
		var err error
		c, err = net.DialTimeout(network, addr, timeout)
		return err
	})
	return c, err
}

// AskWhoEchoes sends payload from the pod as one datagram (network udp4 or
// udp6, a new socket: a new source port) to addr, and returns who answered
// (ServeWho's first line) once the whole payload came back with it within
// a second, or why not.
func (p *Pod) AskWhoEchoes(t testing.TB, network, addr string, payload []byte) (string, error) {
	var who string
	err := p.Do(t, func() error {
		conn, err := net.Dial(network, addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := conn.Write(payload); err != nil {
			return err
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 65536)
		k, err := conn.Read(buf)
		if err != nil {
			return err
		}
		first, rest, _ := strings.Cut(string(buf[:k]), "\n")
		if rest != string(payload) {
			return fmt.Errorf("the answer of %s carried %d bytes of the %d sent", first, len(rest), len(payload))
		}
		who, _ = Answerer(first)
		return nil
	})
	return who, err
}

// AskWho connects from the pod to addr and returns the answer of ServeWho.
func (p *Pod) AskWho(t testing.TB, network, addr string, timeout time.Duration) (string, error) {
	t.Helper()
	c, err := p.Dial(t, network, addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if network == "udp4" || network == "udp6" {
		if _, err := c.Write([]byte("who?")); err != nil {
			return "", err
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", fmt.Errorf("%s %s from %s: %w", network, addr, p.IP, err)
	}
	return strings.TrimSpace(line), nil
}

// AskWhoEventually retries while the first packets resolve ARP.
func (p *Pod) AskWhoEventually(t testing.TB, network, addr string) string {
	t.Helper()
	var err error
	for i := 0; i < 5; i++ {
		var s string
		if s, err = p.AskWho(t, network, addr, time.Second); err == nil {
			return s
		}
	}
	t.Fatal(err)
	return ""
}

// Answerer returns who answered (the first word of AskWho's answer) and the
// client address it saw.
func Answerer(answer string) (who, client string) {
	answer, _, _ = strings.Cut(answer, "\n")
	f := strings.Fields(answer)
	if len(f) != 2 {
		return answer, ""
	}
	return f[0], f[1]
}

// DumpFlows returns br-int's flows as `dump-flows --no-stats` prints them,
// sorted; args select (e.g. "table=7", "cookie=0x1/-1").
func (b *Bridge) DumpFlows(t testing.TB, args ...string) []string {
	t.Helper()
	out, err := b.Ofctl("dump-flows", "br-int", append([]string{"--no-stats"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lines(out, "OFPST_FLOW")
}

// DumpFlowsWithStats returns br-int's flows with durations and counters.
func (b *Bridge) DumpFlowsWithStats(t testing.TB, args ...string) []string {
	t.Helper()
	out, err := b.Ofctl("dump-flows", "br-int", args...)
	if err != nil {
		t.Fatal(err)
	}
	return lines(out, "OFPST_FLOW")
}

// DumpGroups returns br-int's groups as dump-groups prints them, by id.
func (b *Bridge) DumpGroups(t testing.TB) []string {
	t.Helper()
	out, err := b.Ofctl("dump-groups", "br-int")
	if err != nil {
		t.Fatal(err)
	}
	groups := lines(out, "OFPST_GROUP")
	SortGroups(groups)
	return groups
}

// SortGroups sorts groups printed as dump-groups prints them by id.
func SortGroups(groups []string) {
	sort.Slice(groups, func(i, j int) bool { return groupID(groups[i]) < groupID(groups[j]) })
}

func groupID(s string) int {
	s = strings.TrimPrefix(s, "group_id=")
	if i := strings.IndexByte(s, ','); i >= 0 {
		s = s[:i]
	}
	n, _ := strconv.Atoi(s)
	return n
}

func lines(out, header string) []string {
	var res []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, header) {
			res = append(res, l)
		}
	}
	sort.Strings(res)
	return res
}

// Trace asks OVS what it does with a packet (ofproto/trace, the oracle).
func (b *Bridge) Trace(t testing.TB, flow string) string {
	t.Helper()
	out, err := b.Appctl("ofproto/trace", "br-int", flow)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// PurgeDatapath drops the datapath's cached flows, as the agent does after a
// policy change.
func (b *Bridge) PurgeDatapath(t testing.TB) {
	t.Helper()
	if _, err := b.Appctl("revalidator/purge"); err != nil {
		t.Fatal(err)
	}
}

// IPReceived is the number of IPv4 packets a pod's kernel received (Ip
// InReceives of /proc/net/snmp): a SYN that reached the pod counts, whatever
// became of its connection.
func (p *Pod) IPReceived(t testing.TB) int {
	t.Helper()
	out := Run(t, "ip", "netns", "exec", p.NS, "cat", "/proc/net/snmp")
	var names, values []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "Ip: ") {
			continue
		}
		if names == nil {
			names = strings.Fields(l)
		} else {
			values = strings.Fields(l)
		}
	}
	for i, n := range names {
		if n == "InReceives" && i < len(values) {
			v, _ := strconv.Atoi(values[i])
			return v
		}
	}
	t.Fatalf("no Ip InReceives in /proc/net/snmp of %s:\n%s", p.NS, out)
	return 0
}

// Underlay is the network between nodes: a Linux bridge in a netns of its
// own, as the lab's underlay.
type Underlay struct {
	NS string
	n  int
}

// NewUnderlay makes an underlay.
func NewUnderlay(t testing.TB) *Underlay {
	t.Helper()
	u := &Underlay{NS: ovsinstance.NewNetNS(t, "svcul")}
	Run(t, "ip", "-n", u.NS, "link", "add", "br0", "type", "bridge")
	Run(t, "ip", "-n", u.NS, "link", "set", "br0", "up")
	return u
}

// plug links a new veth's end "eth0" in netns to the underlay's bridge.
func (u *Underlay) plug(t testing.TB, netns string) {
	t.Helper()
	u.n++
	port := fmt.Sprintf("p%d", u.n)
	Run(t, "ip", "-n", netns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", u.NS)
	Run(t, "ip", "-n", u.NS, "link", "set", port, "master", "br0")
	Run(t, "ip", "-n", u.NS, "link", "set", port, "up")
}

// AddHost makes a host on the underlay outside the cluster, with address
// cidr ("192.168.77.100/24") on its eth0.
func (u *Underlay) AddHost(t testing.TB, name, cidr string) *Pod {
	t.Helper()
	hostNS := ovsinstance.NewNetNS(t, "svcext")
	u.plug(t, hostNS)
	Run(t, "ip", "-n", hostNS, "addr", "add", cidr, "dev", "eth0")
	Run(t, "ip", "-n", hostNS, "link", "set", "eth0", "up")
	Run(t, "ip", "netns", "exec", hostNS, "ethtool", "-K", "eth0", "tx", "off")
	ip, _, _ := net.ParseCIDR(cidr)
	return &Pod{Name: name, NS: hostNS, HostIF: "eth0", IP: ip, MAC: linkMAC(t, hostNS, "eth0")}
}

// joinUnderlay wires the node to the underlay as nodeinit does with the
// userspace datapath (ENVIRONMENT.md: userspace tunnels route through an
// OVS internal port of a second netdev bridge).
func (b *Bridge) joinUnderlay(t testing.TB, u *Underlay, nodeIP string, tunnel ovsconfig.TunnelType) {
	t.Helper()
	node := b.NetNS()
	u.plug(t, node)
	ip, _, err := net.ParseCIDR(nodeIP)
	if err != nil {
		t.Fatalf("node IP %q: %v", nodeIP, err)
	}
	b.NodeIP = net.IP(types.Addr(ip).AsSlice()) // 4 bytes for IPv4, 16 for IPv6: PhyMAC takes the last three
	last := b.NodeIP[len(b.NodeIP)-3:]
	b.PhyMAC = net.HardwareAddr{0x0a, 0x00, 0x00, last[0], last[1], last[2]}
	if tunnel == "" {
		tunnel = ovsconfig.GeneveTunnel
	}
	args := []string{"add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev", "fail_mode=standalone",
		"other_config:hwaddr=" + b.PhyMAC.String(), "other_config:disable-in-band=true",
		"--", "add-port", "br-phy", "eth0",
		"--", "add-port", "br-int", "antrea-tun0", "--", "set", "interface", "antrea-tun0", "type=" + string(tunnel),
		fmt.Sprintf("ofport_request=%d", TunnelOFPort)}
	for k, v := range ovsconfig.TunnelOptions(ovsconfig.TunnelConfig{Type: tunnel}) {
		args = append(args, "options:"+k+"="+v)
	}
	if _, err := b.Vsctl(args...); err != nil {
		t.Fatal(err)
	}
	// The uplink is only a port of br-phy: no kernel ARP nor IPv6 on it.
	Run(t, "ip", "netns", "exec", node, "sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=1")
	Run(t, "ip", "-n", node, "link", "set", "eth0", "arp", "off", "up")
	if ip.To4() != nil {
		Run(t, "ip", "-n", node, "addr", "add", nodeIP, "dev", "br-phy")
	} else {
		// An IPv6 underlay: the node's address without duplicate address
		// detection (the test made it unique), so it is usable at once.
		Run(t, "ip", "-n", node, "addr", "add", nodeIP, "dev", "br-phy", "nodad")
	}
	Run(t, "ip", "-n", node, "link", "set", "br-phy", "up")
	// Best effort: a tap may not offer the feature.
	_ = exec.Command("ip", "netns", "exec", node, "ethtool", "-K", "br-phy", "tx", "off").Run()
}

// ConnectPeer makes the node's kernel route peer's pod CIDR into the bridge
// (as the agent's route controller does) and pins the peer's underlay MAC
// in OVS's tunnel neighbour table (ENVIRONMENT.md: the neighbour black
// hole). The pipeline's flows towards the peer are the caller's.
func (b *Bridge) ConnectPeer(t testing.TB, peer *Bridge) {
	t.Helper()
	Run(t, "ip", "-n", b.NetNS(), "route", "replace", peer.PodCIDR.String(), "via", peer.GatewayIP.String(), "dev", "antrea-gw0", "onlink")
	if _, err := b.Appctl("tnl/neigh/set", "br-phy", peer.NodeIP.String(), peer.PhyMAC.String()); err != nil {
		t.Fatal(err)
	}
}

// NodeHost is the node's own network namespace as a host to connect from
// (its processes: hostNetwork pods, kubelet, curl on the node).
func (b *Bridge) NodeHost(name string) *Pod {
	return &Pod{Name: name, NS: b.NetNS(), IP: b.NodeIP}
}
