package wireguard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"antrea.io/antrea/pkg/agent/route"
	"antrea.io/antrea/pkg/util/kernelconfig"
)

// node is one side of the two-node test: a netns with an underlay veth,
// a "pod" address on its loopback, a WireGuard device and its Routes.
type node struct {
	ns      ns.NetNS
	name    string
	under   string // underlay IP
	pod     string // the pod address (on lo), in podCIDR
	podCIDR string
	key     wgtypes.Key
	dev     Device
	routes  *Routes
}

func (n *node) do(t *testing.T, f func() error) {
	t.Helper()
	if err := n.ns.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatalf("%s: %v", n.name, err)
	}
}

func (n *node) peerRoute(key string) *route.PeerRoute {
	_, c, _ := net.ParseCIDR(n.podCIDR)
	return &route.PeerRoute{NodeName: n.name, PodCIDR: c, NodeIP: net.ParseIP(n.under), PublicKey: key}
}

// noWireGuardKernel is a kernel configuration without WireGuard, so that
// Open takes the userspace backend whatever the test machine's kernel has.
func noWireGuardKernel(t *testing.T) kernelconfig.Paths {
	dir := t.TempDir()
	writeGzip(t, filepath.Join(dir, "config.gz"), "CONFIG_TUN=y\n# CONFIG_WIREGUARD is not set\n")
	return kernelconfig.Paths{Config: filepath.Join(dir, "config.gz"), SysModule: dir, Modules: dir}
}

// twoNodes makes nodes a and b joined by a veth "underlay", each with a
// userspace WireGuard device configured with its own key and port 51820
// but no peer yet. Everything goes with the test.
func twoNodes(t *testing.T) (a, b *node) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("needs /dev/net/tun")
	}
	kernel := noWireGuardKernel(t)
	a = &node{name: "a", under: "192.0.2.1", pod: "10.99.1.1", podCIDR: "10.99.1.0/24"}
	b = &node{name: "b", under: "192.0.2.2", pod: "10.99.2.1", podCIDR: "10.99.2.0/24"}
	for _, n := range []*node{a, b} {
		netns, err := testutils.NewNS()
		if err != nil {
			t.Fatal(err)
		}
		n.ns = netns
		t.Cleanup(func() {
			if n.dev != nil {
				_ = n.dev.Close()
			}
			_ = netns.Close()
			_ = testutils.UnmountNS(netns)
		})
	}
	a.do(t, func() error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "under"}, PeerName: "under-b"}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		peer, err := netlink.LinkByName("under-b")
		if err != nil {
			return err
		}
		return netlink.LinkSetNsFd(peer, int(b.ns.Fd()))
	})
	b.do(t, func() error {
		l, err := netlink.LinkByName("under-b")
		if err != nil {
			return err
		}
		return netlink.LinkSetName(l, "under")
	})
	for _, n := range []*node{a, b} {
		n.do(t, func() error {
			for name, addr := range map[string]string{"under": n.under + "/24", "lo": n.pod + "/32"} {
				l, err := netlink.LinkByName(name)
				if err != nil {
					return err
				}
				a, _ := netlink.ParseAddr(addr)
				if err := netlink.AddrAdd(l, a); err != nil {
					return err
				}
				if err := netlink.LinkSetUp(l); err != nil {
					return err
				}
			}
			dev, ch, err := Open(DeviceName, 1500-Overhead, kernel)
			if err != nil {
				return err
			}
			if ch.Backend != BackendUserspace {
				return fmt.Errorf("backend %s (%s), want userspace", ch.Backend, ch.Reason)
			}
			n.dev = dev
			if n.key, err = wgtypes.GeneratePrivateKey(); err != nil {
				return err
			}
			port := DefaultPort
			if err := dev.Configure(wgtypes.Config{PrivateKey: &n.key, ListenPort: &port}); err != nil {
				return err
			}
			n.routes = &Routes{Device: dev, Port: DefaultPort, Source: net.ParseIP(n.pod)}
			return nil
		})
	}
	return a, b
}

// capture records the frames the underlay link of n receives until stop;
// it is an AF_PACKET socket in n's netns, written nowhere.
type capture struct {
	mu     sync.Mutex
	frames [][]byte
	stop   func()
}

func (c *capture) all() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.frames...)
}

func startCapture(t *testing.T, n *node) *capture {
	t.Helper()
	c := &capture{}
	var fd int
	n.do(t, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		ifc, err := net.InterfaceByName("under")
		if err != nil {
			return err
		}
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
	})
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
			k, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue
			}
			c.mu.Lock()
			c.frames = append(c.frames, append([]byte(nil), buf[:k]...))
			c.mu.Unlock()
		}
	}()
	var once sync.Once
	c.stop = func() { once.Do(func() { close(done); <-stopped; unix.Close(fd) }) }
	t.Cleanup(c.stop)
	return c
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// udpPorts counts the IPv4/UDP frames by "src>dst:dport".
func udpPorts(frames [][]byte) map[string]int {
	out := map[string]int{}
	for _, f := range frames {
		if len(f) < 14+20+8 || binary.BigEndian.Uint16(f[12:14]) != 0x0800 || f[14+9] != 17 {
			continue
		}
		ihl := int(f[14]&0x0f) * 4
		src, dst := net.IP(f[14+12:14+16]), net.IP(f[14+16:14+20])
		dport := binary.BigEndian.Uint16(f[14+ihl+2 : 14+ihl+4])
		out[fmt.Sprintf("%s>%s:%d", src, dst, dport)]++
	}
	return out
}

func containsMarker(frames [][]byte, marker []byte) bool {
	for _, f := range frames {
		if bytes.Contains(f, marker) {
			return true
		}
	}
	return false
}

// TestTwoNodesTalkThroughWireGuardAndTheUnderlaySeesOnlyCiphertext: two
// netns "nodes" with userspace WireGuard (wireguard-go behind a TUN) and
// Routes as the agent configures them from each other's Node: a TCP
// connection from a's pod address to b's carries a marker; b's underlay
// link sees UDP 51820 between the node IPs and never the marker. Then b's
// key rotates (b's device gets a new private key, a's Routes the new public
// key, as a Node annotation update would make them) and the same
// connection carries a second marker; then a peer with no key gets a
// route but no traffic through; then b leaves and is no peer of a any more.
func TestTwoNodesTalkThroughWireGuardAndTheUnderlaySeesOnlyCiphertext(t *testing.T) {
	a, b := twoNodes(t)
	a.do(t, func() error {
		return a.routes.Reconcile(map[string]*route.PeerRoute{"b": b.peerRoute(b.key.PublicKey().String())})
	})
	b.do(t, func() error { return b.routes.Add(a.peerRoute(a.key.PublicKey().String())) })

	var ln net.Listener
	b.do(t, func() error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(b.pod, "7777"))
		return err
	})
	defer ln.Close()
	received := make(chan []byte, 4)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4096)
		for {
			k, err := c.Read(buf)
			if k > 0 {
				received <- append([]byte(nil), buf[:k]...)
			}
			if err != nil {
				return
			}
		}
	}()
	cap := startCapture(t, b)
	marker := []byte("MARKER-wireguard-netns-0123456789")
	var conn net.Conn
	a.do(t, func() error {
		d := net.Dialer{Timeout: 20 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(a.pod)}}
		var err error
		conn, err = d.Dial("tcp4", net.JoinHostPort(b.pod, "7777"))
		return err
	})
	defer conn.Close()
	expect := func(m []byte) {
		t.Helper()
		start := time.Now()
		defer func() { t.Logf("%q took %s", m, time.Since(start)) }()
		if _, err := conn.Write(m); err != nil {
			t.Fatalf("write: %v", err)
		}
		select {
		case got := <-received:
			if !bytes.Equal(got, m) {
				t.Fatalf("b received %q, want %q", got, m)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("b did not receive %q", m)
		}
	}
	expect(marker)
	// The capture reads the socket on its own goroutine: wait (bounded)
	// until it has read the datagrams that carried the marker.
	var frames [][]byte
	var ports map[string]int
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		frames = cap.all()
		if ports = udpPorts(frames); ports["192.0.2.1>192.0.2.2:51820"] > 0 && ports["192.0.2.2>192.0.2.1:51820"] > 0 {
			break
		}
	}
	if ports["192.0.2.1>192.0.2.2:51820"] == 0 || ports["192.0.2.2>192.0.2.1:51820"] == 0 {
		t.Errorf("b's underlay saw no UDP between a and b on port 51820 both ways; UDP seen: %v", ports)
	}
	if containsMarker(frames, marker) {
		t.Errorf("b's underlay saw the marker in the clear")
	}
	if containsMarker(frames, []byte("wireguard-netns")) {
		t.Errorf("b's underlay saw part of the marker in the clear")
	}
	var peers []wgtypes.Peer
	a.do(t, func() error {
		var err error
		peers, err = a.dev.Peers()
		return err
	})
	if len(peers) != 1 || peers[0].PublicKey != b.key.PublicKey() || peers[0].TransmitBytes == 0 {
		t.Fatalf("a's peers: %+v, want b's key with bytes sent", peers)
	}
	if got := peers[0].AllowedIPs; len(got) != 1 || got[0].String() != b.podCIDR {
		t.Errorf("a's peer b allows %v, want %s", got, b.podCIDR)
	}

	// b's key rotates; the established connection goes on.
	newKey, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	b.do(t, func() error { return b.dev.Configure(wgtypes.Config{PrivateKey: &newKey}) })
	a.do(t, func() error { return a.routes.Add(b.peerRoute(newKey.PublicKey().String())) })
	marker2 := []byte("SECOND-marker-after-rotation-42")
	expect(marker2)
	time.Sleep(100 * time.Millisecond) // the capture reads what carried it
	if containsMarker(cap.all(), marker2) {
		t.Errorf("after the rotation, b's underlay saw the marker in the clear")
	}
	a.do(t, func() error {
		var err error
		peers, err = a.dev.Peers()
		return err
	})
	if len(peers) != 1 || peers[0].PublicKey != newKey.PublicKey() {
		t.Errorf("after the rotation a's peers are %+v, want only b's new key", peers)
	}

	// A peer without a key: routed into WireGuard, which sends nothing.
	c := &node{name: "c", under: "192.0.2.3", podCIDR: "10.99.3.0/24"}
	a.do(t, func() error { return a.routes.Add(c.peerRoute("")) })
	before := len(cap.all())
	a.do(t, func() error {
		rs, err := netlink.RouteGet(net.ParseIP("10.99.3.5"))
		if err != nil {
			return err
		}
		l, _ := netlink.LinkByIndex(rs[0].LinkIndex)
		if l.Attrs().Name != DeviceName {
			return fmt.Errorf("10.99.3.5 is routed to %s, want %s", l.Attrs().Name, DeviceName)
		}
		u, err := net.Dial("udp4", "10.99.3.5:9")
		if err != nil {
			return err
		}
		defer u.Close()
		_, err = u.Write([]byte("NOKEY-plaintext"))
		return err
	})
	time.Sleep(200 * time.Millisecond)
	if containsMarker(cap.all()[before:], []byte("NOKEY-plaintext")) {
		t.Errorf("a packet to a peer without a key left in the clear")
	}

	// a's device goes (a userspace device goes with the agent): the
	// kernel drops what it would have encrypted; nothing leaves in the
	// clear by another route.
	a.do(t, func() error {
		if err := a.dev.Close(); err != nil {
			return err
		}
		rs, err := netlink.RouteGet(net.ParseIP("10.99.2.5"))
		if err == nil {
			return fmt.Errorf("with the device gone, b's pods are still routed: %+v", rs)
		}
		if !errors.Is(err, unix.EINVAL) {
			t.Logf("route get 10.99.2.5 without the device: %v", err)
		}
		dev, _, err := Open(DeviceName, 1500-Overhead, noWireGuardKernel(t))
		if err != nil {
			return err
		}
		port := DefaultPort
		if err := dev.Configure(wgtypes.Config{PrivateKey: &a.key, ListenPort: &port}); err != nil {
			return err
		}
		a.dev, a.routes = dev, &Routes{Device: dev, Port: DefaultPort, Source: net.ParseIP(a.pod)}
		return a.routes.Reconcile(map[string]*route.PeerRoute{"b": b.peerRoute(newKey.PublicKey().String())})
	})
	marker3 := []byte("THIRD-marker-after-a-restart")
	expect(marker3)
	time.Sleep(100 * time.Millisecond)
	if containsMarker(cap.all(), marker3) {
		t.Errorf("after a's restart, b's underlay saw the marker in the clear")
	}

	// b leaves.
	a.do(t, func() error { return a.routes.Delete(b.peerRoute(newKey.PublicKey().String())) })
	a.do(t, func() error {
		var err error
		peers, err = a.dev.Peers()
		return err
	})
	if len(peers) != 0 {
		t.Errorf("after b left a's peers are %+v, want none", peers)
	}
	a.do(t, func() error {
		rs, err := netlink.RouteGet(net.ParseIP("10.99.2.5"))
		if err == nil && len(rs) > 0 {
			if l, _ := netlink.LinkByIndex(rs[0].LinkIndex); l != nil && l.Attrs().Name == DeviceName {
				return fmt.Errorf("b's pod CIDR is still routed into %s", DeviceName)
			}
		}
		return nil
	})
}

// TestReconcileRemovesPeersAndRoutesOfNodesThatAreGone: a device holding a
// peer and a route of a node no longer in the cluster (a kernel device
// outlives the agent) keeps only the desired ones.
func TestReconcileRemovesPeersAndRoutesOfNodesThatAreGone(t *testing.T) {
	a, b := twoNodes(t)
	gone, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	g := &node{name: "gone", under: "192.0.2.9", podCIDR: "10.99.9.0/24"}
	a.do(t, func() error {
		if err := a.routes.Add(g.peerRoute(gone.PublicKey().String())); err != nil {
			return err
		}
		fresh := &Routes{Device: a.dev, Port: DefaultPort, Source: net.ParseIP(a.pod)} // a restarted agent's
		if err := fresh.Reconcile(map[string]*route.PeerRoute{"b": b.peerRoute(b.key.PublicKey().String())}); err != nil {
			return err
		}
		peers, err := a.dev.Peers()
		if err != nil {
			return err
		}
		if len(peers) != 1 || peers[0].PublicKey != b.key.PublicKey() {
			return fmt.Errorf("peers %+v, want only b's", peers)
		}
		l, err := netlink.LinkByName(DeviceName)
		if err != nil {
			return err
		}
		rs, err := netlink.RouteList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		var dsts []string
		for _, r := range rs {
			if r.Dst != nil {
				dsts = append(dsts, r.Dst.String())
			}
		}
		if len(dsts) != 1 || dsts[0] != b.podCIDR {
			return fmt.Errorf("routes into %s: %v, want only %s", DeviceName, dsts, b.podCIDR)
		}
		return nil
	})
}

// TestTheCaptureSeesTheMarkerWhenTrafficIsRoutedInTheClear is the control
// of the test above: the same nodes, routed over the underlay as noEncap
// routes them (route.UnderlayRoutes), and the same capture sees the marker.
func TestTheCaptureSeesTheMarkerWhenTrafficIsRoutedInTheClear(t *testing.T) {
	a, b := twoNodes(t)
	a.do(t, func() error { return (&route.UnderlayRoutes{LinkName: "under"}).Add(b.peerRoute("")) })
	b.do(t, func() error { return (&route.UnderlayRoutes{LinkName: "under"}).Add(a.peerRoute("")) })
	var ln net.Listener
	b.do(t, func() error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(b.pod, "7777"))
		return err
	})
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if c, err := ln.Accept(); err == nil {
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	cap := startCapture(t, b)
	marker := []byte("MARKER-in-the-clear-0123456789")
	a.do(t, func() error {
		d := net.Dialer{Timeout: 20 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(a.pod)}}
		c, err := d.Dial("tcp4", net.JoinHostPort(b.pod, "7777"))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(marker)
		return err
	})
	<-done
	seen := false
	for deadline := time.Now().Add(3 * time.Second); !seen && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		seen = containsMarker(cap.all(), marker)
	}
	if !seen {
		t.Fatalf("the capture on b's underlay did not see the marker sent in the clear (%d frames)", len(cap.all()))
	}
}
