package openflow

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
)

// sniffer counts the IPv4 frames a netns's link receives, by "src>dst"
// (an AF_PACKET socket opened in that netns), until the test ends.
type sniffer struct {
	mu   sync.Mutex
	seen map[string]int
}

func sniff(t *testing.T, p *bridgetest.Pod, link string) *sniffer {
	t.Helper()
	s := &sniffer{seen: map[string]int{}}
	var fd int
	if err := p.Do(t, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		ifc, err := net.InterfaceByName(link)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
	}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped; unix.Close(fd) })
	go func() {
		defer close(stopped)
		buf := make([]byte, 65536)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			if n < 34 || binary.BigEndian.Uint16(buf[12:14]) != unix.ETH_P_IP {
				continue
			}
			k := net.IP(buf[26:30]).String() + ">" + net.IP(buf[30:34]).String()
			s.mu.Lock()
			s.seen[k]++
			s.mu.Unlock()
		}
	}()
	return s
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// count is how many frames src>dst the link received.
func (s *sniffer) count(src, dst net.IP) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[src.String()+">"+dst.String()]
}

// forward copies every frame one link of p receives to another (an inline
// appliance between a redirect's target and return ports) until stop is
// called; it returns how many it copied.
func forward(t *testing.T, p *bridgetest.Pod, from, to string) (stop func() int) {
	t.Helper()
	var in, out int
	if err := p.Do(t, func() error {
		open := func(link string) (int, error) {
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
			if err != nil {
				return -1, err
			}
			ifc, err := net.InterfaceByName(link)
			if err != nil {
				return -1, err
			}
			return fd, unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
		}
		var err error
		if in, err = open(from); err != nil {
			return err
		}
		out, err = open(to)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(in, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	var mu sync.Mutex
	copied := 0
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		buf := make([]byte, 65536)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, sa, err := unix.Recvfrom(in, buf, 0)
			if err != nil {
				continue
			}
			if ll, ok := sa.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			if _, err := unix.Write(out, buf[:n]); err == nil {
				mu.Lock()
				copied++
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() { close(done); <-stopped; unix.Close(in); unix.Close(out) })
		mu.Lock()
		defer mu.Unlock()
		return copied
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TrafficControl on real OVS: a Mirror of a Pod's egress copies exactly its
// packets to the target port and its connections still work; a Mirror of
// a Pod's ingress copies what it receives, not what it sends; a Redirect
// of a Pod's egress through an inline appliance (target port in, return
// port out) keeps its connections working only while the appliance passes
// the packets on.
func TestTrafficControlMirrorsAndRedirectsOnRealOVS(t *testing.T) {
	br := bridgetest.New(t)
	c, err := NewClient(br.OF, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, cidr, _ := net.ParseCIDR(bridgetest.PodCIDR)
	if err := c.Initialize(ctx, &NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort,
		GatewayIP: net.ParseIP(bridgetest.GatewayIP), GatewayMAC: br.GatewayMAC, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]*bridgetest.Pod{}
	for i, name := range []string{"web", "a", "b", "mon"} {
		p := br.AddPod(t, name, strings.Replace(bridgetest.PodCIDR, ".0/24", "", 1)+"."+string(rune('3'+i))+"/24")
		if err := c.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		pods[name] = p
	}
	web, a, b, mon := pods["web"], pods["a"], pods["b"], pods["mon"]
	web.ServeWho(t, 8080)
	addr := net.JoinHostPort(web.IP.String(), "8080")
	mirror := sniff(t, mon, "eth0")
	// As the agent does after each change: the datapath's cached flows,
	// translated before it, are purged (else packets of a known shape keep
	// their old path until OVS revalidates them).
	set := func(want TrafficControlFlows) {
		t.Helper()
		if err := c.SetTrafficControlFlows(ctx, want); err != nil {
			t.Fatal(err)
		}
		br.PurgeDatapath(t)
	}
	ask := func(why string, from *bridgetest.Pod) {
		t.Helper()
		answer, err := from.AskWho(t, "tcp4", addr, 2*time.Second)
		if who, _ := bridgetest.Answerer(answer); err != nil || who != "web" {
			t.Fatalf("%s: %s asked web, got %q, %v\nflows:\n%s", why, from.Name, answer, err, strings.Join(br.DumpFlows(t), "\n"))
		}
	}

	// Mirror a's egress to mon's port.
	set(TrafficControlFlows{Rules: []TrafficControlRule{
		{Name: "mirror-a", Ports: []uint32{a.OFPort}, Egress: true, Target: mon.OFPort}}})
	ask("a's egress mirrored", a)
	ask("a's egress mirrored", b)
	time.Sleep(200 * time.Millisecond)
	if got := mirror.count(a.IP, web.IP); got < 3 {
		t.Errorf("the mirror saw %d of a's packets to web, want its whole exchange (3 or more)", got)
	}
	for _, other := range [][2]net.IP{{web.IP, a.IP}, {b.IP, web.IP}, {web.IP, b.IP}} {
		if got := mirror.count(other[0], other[1]); got != 0 {
			t.Errorf("a's egress mirror saw %d packets %s>%s", got, other[0], other[1])
		}
	}

	// Mirror web's ingress instead.
	set(TrafficControlFlows{Rules: []TrafficControlRule{
		{Name: "mirror-web", Ports: []uint32{web.OFPort}, Ingress: true, Target: mon.OFPort}}})
	before := mirror.count(a.IP, web.IP)
	ask("web's ingress mirrored", a)
	ask("web's ingress mirrored", b)
	time.Sleep(200 * time.Millisecond)
	if mirror.count(a.IP, web.IP) <= before || mirror.count(b.IP, web.IP) == 0 {
		t.Errorf("web's ingress mirror missed what web received: a>web %d (before %d), b>web %d",
			mirror.count(a.IP, web.IP), before, mirror.count(b.IP, web.IP))
	}
	if got := mirror.count(web.IP, a.IP) + mirror.count(web.IP, b.IP); got != 0 {
		t.Errorf("web's ingress mirror saw %d packets web sent", got)
	}

	// Redirect a's egress through an appliance: its netns holds the
	// target and return links, and passes frames from one to the other.
	app := br.AddPod(t, "tc-tgt", strings.Replace(bridgetest.PodCIDR, ".0/24", ".60/24", 1))
	appNS := app.NS
	bridgetest.Run(t, "ip", "-n", appNS, "link", "add", "ret", "type", "veth", "peer", "name", "veth-tc-ret", "netns", br.NetNS())
	bridgetest.Run(t, "ip", "-n", appNS, "link", "set", "ret", "up")
	bridgetest.Run(t, "ip", "-n", br.NetNS(), "link", "set", "veth-tc-ret", "arp", "off", "up")
	if _, err := br.Vsctl("add-port", "br-int", "veth-tc-ret"); err != nil {
		t.Fatal(err)
	}
	out, err := br.Vsctl("get", "interface", "veth-tc-ret", "ofport")
	if err != nil {
		t.Fatal(err)
	}
	var ret uint32
	for _, ch := range strings.TrimSpace(out) {
		ret = ret*10 + uint32(ch-'0')
	}
	stop := forward(t, app, "eth0", "ret")
	set(TrafficControlFlows{Rules: []TrafficControlRule{
		{Name: "redirect-a", Ports: []uint32{a.OFPort}, Egress: true, Redirect: true, Target: app.OFPort}},
		ReturnPorts: []uint32{ret}})
	ask("a's egress redirected through the appliance", a)
	// web answers once a's SYN and handshake ACK reached it: both through
	// the appliance.
	if n := stop(); n < 2 {
		t.Fatalf("the appliance passed %d frames of a's exchange, want its SYN and ACK at least: a's egress did not go through it", n)
	}
	// The appliance stopped: a's traffic goes nowhere, b's is untouched.
	if answer, err := a.AskWho(t, "tcp4", addr, 700*time.Millisecond); err == nil {
		t.Fatalf("with the appliance stopped, a still reached web (%q): its egress was not redirected", answer)
	}
	ask("b is not redirected", b)

	// No rule: everything as before, and the feature's flows are gone.
	set(TrafficControlFlows{})
	ask("without TrafficControl", a)
	for _, f := range br.DumpFlows(t) {
		if strings.Contains(f, "cookie=0x100000004,") {
			t.Errorf("a TrafficControl flow stayed: %s", f)
		}
	}
}
