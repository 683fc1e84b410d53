package nodenet

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"antrea.io/antrea/pkg/agent/types"
)

// The same feature against the real nft and kernel, in network namespaces
// the test makes: a "node" whose gateway antrea-gw0 is a veth to a "pod"
// (10.10.0.5, routes via the gateway 10.10.0.1), and a "peer" node on the
// underlay (172.30.0.12, the node being 172.30.0.11). OVS is left out: the
// gateway's peer is the pod's eth0, which is what the node's stack sees.
// Every listener in the pod answers with its own name, so each probe says
// which mapping the kernel applied.

const (
	nodeIP = "172.30.0.11"
	peerIP = "172.30.0.12"
	podIP  = "10.10.0.5"
	gwIP   = "10.10.0.1"
)

type nftLab struct {
	node, pod, peer ns.NetNS
}

func newNFTLab(t *testing.T) *nftLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and nftables")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs the nft binary")
	}
	l := &nftLab{}
	for _, p := range []*ns.NetNS{&l.node, &l.pod, &l.peer} {
		n, err := testutils.NewNS()
		if err != nil {
			t.Fatal(err)
		}
		*p = n
		t.Cleanup(func() { _ = n.Close(); _ = testutils.UnmountNS(n) })
	}
	// Links are made in the node and their peers moved out; deleting the
	// namespaces removes them all.
	err := l.node.Do(func(ns.NetNS) error {
		for _, v := range []struct {
			name, peer, addr, peerAddr, peerName string
			peerNS                               ns.NetNS
		}{
			{"antrea-gw0", "gw-peer", gwIP + "/24", podIP + "/24", "eth0", l.pod},
			{"uplink", "up-peer", nodeIP + "/24", peerIP + "/24", "eth0", l.peer},
		} {
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: v.name}, PeerName: v.peer}); err != nil {
				return err
			}
			link, err := netlink.LinkByName(v.name)
			if err != nil {
				return err
			}
			addr, _ := netlink.ParseAddr(v.addr)
			if err := netlink.AddrAdd(link, addr); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(link); err != nil {
				return err
			}
			peer, err := netlink.LinkByName(v.peer)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetNsFd(peer, int(v.peerNS.Fd())); err != nil {
				return err
			}
			gw := strings.Split(v.addr, "/")[0]
			if err := v.peerNS.Do(func(ns.NetNS) error {
				p, err := netlink.LinkByName(v.peer)
				if err != nil {
					return err
				}
				if err := netlink.LinkSetName(p, v.peerName); err != nil {
					return err
				}
				a, _ := netlink.ParseAddr(v.peerAddr)
				if err := netlink.AddrAdd(p, a); err != nil {
					return err
				}
				if err := netlink.LinkSetUp(p); err != nil {
					return err
				}
				lo, _ := netlink.LinkByName("lo")
				if err := netlink.LinkSetUp(lo); err != nil {
					return err
				}
				return netlink.RouteAdd(&netlink.Route{Gw: net.ParseIP(gw)})
			}); err != nil {
				return err
			}
		}
		lo, _ := netlink.LinkByName("lo")
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		// The node forwards between the underlay and its pods (this
		// namespace's sysctl, not the host's).
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// serve starts, in the pod, a listener on port answering name: a TCP one
// writes it and closes, a UDP one sends it back to each datagram.
func (l *nftLab) serve(t *testing.T, proto string, port uint16, name string) {
	t.Helper()
	addr := fmt.Sprintf(":%d", port)
	err := l.pod.Do(func(ns.NetNS) error {
		if proto == "udp" {
			c, err := net.ListenPacket("udp4", addr)
			if err != nil {
				return err
			}
			t.Cleanup(func() { c.Close() })
			go func() {
				buf := make([]byte, 64)
				for {
					_, from, err := c.ReadFrom(buf)
					if err != nil {
						return
					}
					_, _ = c.WriteTo([]byte(name+"\n"), from)
				}
			}()
			return nil
		}
		ln, err := net.Listen("tcp4", addr)
		if err != nil {
			return err
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(name + "\n"))
				c.Close()
			}
		}()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// probe connects from netns to addr and returns the name the pod
// answered, or the error.
func probe(n ns.NetNS, proto, addr string) (string, error) {
	var name string
	err := n.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout(proto+"4", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if proto == "udp" {
			if _, err := c.Write([]byte("hostName\n")); err != nil {
				return err
			}
		}
		name, err = bufio.NewReader(c).ReadString('\n')
		name = strings.TrimSpace(name)
		return err
	})
	return name, err
}

func TestHostPortsWithTheRealNFT(t *testing.T) {
	l := newNFTLab(t)
	l.serve(t, "tcp", 8081, "loopback-tcp")
	l.serve(t, "tcp", 8082, "nodeip-tcp")
	l.serve(t, "udp", 8083, "nodeip-udp")
	l.serve(t, "tcp", 8084, "any-tcp")
	l.serve(t, "udp", 8085, "any-udp")
	var h *HostPorts
	var table *Table
	ctx := context.Background()
	err := l.node.Do(func(ns.NetNS) error {
		var err error
		if table, err = New(); err != nil {
			return err
		}
		h = table.HostPorts(HostPortConfig{GatewayName: "antrea-gw0"})
		// The upstream Conformance spec's three pods (one here, three
		// ports): the same hostPort on 127.0.0.1 and the node IP, TCP and
		// UDP; and hostIP unset.
		return h.Add(ctx, "c1/eth0", PodHostPorts{Pod: "ns/hp", IPs: []netip.Addr{netip.MustParseAddr(podIP)}, Mappings: []types.PortMapping{
			pm(types.ProtocolTCP, "127.0.0.1", 54323, 8081),
			pm(types.ProtocolTCP, nodeIP, 54323, 8082),
			pm(types.ProtocolUDP, nodeIP, 54323, 8083),
			pm(types.ProtocolTCP, "", 54324, 8084),
			pm(types.ProtocolUDP, "", 54324, 8085),
		}})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.node.Do(func(ns.NetNS) error { return table.Remove(context.Background()) })
	})
	for _, tc := range []struct {
		name   string
		from   ns.NetNS
		proto  string
		addr   string
		answer string // "": no answer
	}{
		{"the node reaches a hostPort on 127.0.0.1", l.node, "tcp", "127.0.0.1:54323", "loopback-tcp"},
		{"the node reaches the same port on its IP, TCP", l.node, "tcp", nodeIP + ":54323", "nodeip-tcp"},
		{"the node reaches the same port on its IP, UDP", l.node, "udp", nodeIP + ":54323", "nodeip-udp"},
		{"another node reaches the node IP's port, TCP", l.peer, "tcp", nodeIP + ":54323", "nodeip-tcp"},
		{"another node reaches the node IP's port, UDP", l.peer, "udp", nodeIP + ":54323", "nodeip-udp"},
		{"the node reaches an unset hostIP's port on 127.0.0.1", l.node, "tcp", "127.0.0.1:54324", "any-tcp"},
		{"the node reaches an unset hostIP's port on its IP, UDP", l.node, "udp", nodeIP + ":54324", "any-udp"},
		{"another node reaches an unset hostIP's port, TCP", l.peer, "tcp", nodeIP + ":54324", "any-tcp"},
		{"another node reaches an unset hostIP's port, UDP", l.peer, "udp", nodeIP + ":54324", "any-udp"},
		{"the pod reaches its own hostPort through the node", l.pod, "tcp", nodeIP + ":54323", "nodeip-tcp"},
		{"the node's gateway address serves an unset hostIP's port", l.pod, "tcp", gwIP + ":54324", "any-tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := probe(tc.from, tc.proto, tc.addr)
			if err != nil || got != tc.answer {
				t.Errorf("%s %s answered %q (%v), want %q", tc.proto, tc.addr, got, err, tc.answer)
			}
		})
	}

	if err := l.node.Do(func(ns.NetNS) error { return h.Delete(ctx, "c1/eth0") }); err != nil {
		t.Fatal(err)
	}
	if got, err := probe(l.peer, "tcp", nodeIP+":54323"); err == nil {
		t.Errorf("after DEL, %s:54323 still answered %q", nodeIP, got)
	}
	if got, err := probe(l.node, "tcp", "127.0.0.1:54323"); err == nil {
		t.Errorf("after DEL, 127.0.0.1:54323 still answered %q", got)
	}
}

// TestAHostPortOnIPv6LoopbackWithTheRealNFT: on an IPv6 pod (the node and
// its gateway with IPv6 addresses), a hostPort on ::1 answers the node's
// own connection to [::1]:PORT from the node's IPv6 address, as upstream's
// HostPort Conformance spec makes it on an IPv6 cluster (IPv6 has no
// route_localnet: a packet from ::1 never leaves the node), and the same
// port on the node's IPv6 address answers another pod's mapping.
func TestAHostPortOnIPv6LoopbackWithTheRealNFT(t *testing.T) {
	const node6, gw6, pod6 = "fd00:172:30::11", "fd00:10:244::1", "fd00:10:244::5"
	l := newNFTLab(t)
	add := func(n ns.NetNS, link, a string) error {
		return n.Do(func(ns.NetNS) error {
			l, err := netlink.LinkByName(link)
			if err != nil {
				return err
			}
			addr, _ := netlink.ParseAddr(a)
			addr.Flags = unix.IFA_F_NODAD
			return netlink.AddrAdd(l, addr)
		})
	}
	for _, a := range []struct {
		n          ns.NetNS
		link, addr string
	}{{l.node, "antrea-gw0", gw6 + "/64"}, {l.node, "uplink", node6 + "/64"}, {l.pod, "eth0", pod6 + "/64"}} {
		if err := add(a.n, a.link, a.addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.pod.Do(func(ns.NetNS) error {
		return netlink.RouteAdd(&netlink.Route{Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, Gw: net.ParseIP(gw6)})
	}); err != nil {
		t.Fatal(err)
	}
	for port, name := range map[int]string{8086: "loopback6-tcp", 8087: "nodeip6-tcp"} {
		err := l.pod.Do(func(ns.NetNS) error {
			ln, err := net.Listen("tcp6", fmt.Sprintf("[::]:%d", port))
			if err != nil {
				return err
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					_, _ = c.Write([]byte(name + "\n"))
					c.Close()
				}
			}()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var table *Table
	ctx := context.Background()
	if err := l.node.Do(func(ns.NetNS) error {
		var err error
		if table, err = New(); err != nil {
			return err
		}
		return table.HostPorts(HostPortConfig{GatewayName: "antrea-gw0"}).Add(ctx, "c1/eth0", PodHostPorts{Pod: "ns/hp6",
			IPs: []netip.Addr{netip.MustParseAddr(pod6)}, Mappings: []types.PortMapping{
				pm(types.ProtocolTCP, "::1", 54323, 8086),
				pm(types.ProtocolTCP, node6, 54323, 8087),
			}})
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.node.Do(func(ns.NetNS) error { return table.Remove(context.Background()) })
	})
	// Up to 3 tries: the first SYN may be lost while the pod's
	// neighbour entry resolves in these fresh namespaces.
	dial := func(src, dst string) (string, error) {
		var name string
		var err error
		for range 3 {
			err = l.node.Do(func(ns.NetNS) error {
				d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
				c, err := d.Dial("tcp6", net.JoinHostPort(dst, "54323"))
				if err != nil {
					return err
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				name, err = bufio.NewReader(c).ReadString('\n')
				name = strings.TrimSpace(name)
				return err
			})
			if err == nil {
				break
			}
		}
		return name, err
	}
	if got, err := dial(node6, "::1"); err != nil || got != "loopback6-tcp" {
		t.Errorf("[::1]:54323 from %s answered %q (%v), want loopback6-tcp", node6, got, err)
	}
	if got, err := dial(node6, node6); err != nil || got != "nodeip6-tcp" {
		t.Errorf("[%s]:54323 answered %q (%v), want nodeip6-tcp", node6, got, err)
	}
}
