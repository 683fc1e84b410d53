package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"antrea.io/antrea/pkg/agent/nodenet"
	"antrea.io/antrea/pkg/agent/route"
)

// routedNode is one node of TestARoutedDualStackPodKeepsItsSourceToARemotePodOverIPv6:
// its netns, its pod's netns, and its addresses.
type routedNode struct {
	node, pod        ns.NetNS
	ip4, ip6         string // underlay addresses on br-phy
	cidr4, cidr6     string // pod CIDRs
	podIP4, podIP6   string
	gwName, peerName string
}

// TestARoutedDualStackPodKeepsItsSourceToARemotePodOverIPv6 runs the
// kernel's half of the routed path (noEncap, hybrid within a subnet) with
// real packets, without OVS: two node netns joined by a cable between
// their br-phy links, each with a pod behind a gateway link (what
// antrea-gw0 is to the node's kernel). Each node gets what the agent
// installs: UnderlayRoutes' routes of the peer (both families), IPv6
// forwarding (ensureIPv6Forwarding), and nodenet's masquerade of a routed
// node with the cluster's pod CIDRs of both families in its sets. A pod's
// UDP datagram to the remote pod, over IPv6 and over IPv4, arrives with
// the pod's own source; to the remote node's address it arrives
// masqueraded to the sending node's address.
func TestARoutedDualStackPodKeepsItsSourceToARemotePodOverIPv6(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and nftables")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("needs the nft binary")
	}
	newNS := func() ns.NetNS {
		n, err := testutils.NewNS()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close(); _ = testutils.UnmountNS(n) })
		return n
	}
	nodes := []*routedNode{
		{ip4: "192.168.77.11", ip6: "fd00:77::11", cidr4: "10.10.1.0/24", cidr6: "fd00:10:244:1::/64",
			podIP4: "10.10.1.2", podIP6: "fd00:10:244:1::2", gwName: "gw-test", peerName: "pod-1"},
		{ip4: "192.168.77.12", ip6: "fd00:77::12", cidr4: "10.10.2.0/24", cidr6: "fd00:10:244:2::/64",
			podIP4: "10.10.2.2", podIP6: "fd00:10:244:2::2", gwName: "gw-test", peerName: "pod-2"},
	}
	for _, n := range nodes {
		n.node, n.pod = newNS(), newNS()
	}
	// The cable between the nodes' br-phy links.
	err := nodes[0].node.Do(func(ns.NetNS) error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "br-phy"}, PeerName: "cable"}
		if err := netlink.LinkAdd(v); err != nil {
			return err
		}
		peer, err := netlink.LinkByName("cable")
		if err != nil {
			return err
		}
		return netlink.LinkSetNsFd(peer, int(nodes[1].node.Fd()))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].node.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName("cable")
		if err != nil {
			return err
		}
		return netlink.LinkSetName(l, "br-phy")
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, n := range nodes {
		peer := nodes[1-i]
		gw4, gw6 := route.GatewayIP(mustCIDR(n.cidr4)), route.GatewayIP(mustCIDR(n.cidr6))
		err := n.node.Do(func(ns.NetNS) error {
			if err := addrsUp("br-phy", n.ip4+"/24", n.ip6+"/64"); err != nil {
				return err
			}
			v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n.gwName}, PeerName: n.peerName}
			if err := netlink.LinkAdd(v); err != nil {
				return err
			}
			if err := addrsUp(n.gwName, gw4.String()+"/24", gw6.String()+"/64"); err != nil {
				return err
			}
			p, err := netlink.LinkByName(n.peerName)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetNsFd(p, int(n.pod.Fd())); err != nil {
				return err
			}
			// What the agent installs for the routed peer.
			if err := (&route.UnderlayRoutes{LinkName: "br-phy"}).Add(&route.PeerRoute{NodeName: "peer",
				PodCIDR: mustCIDR(peer.cidr4), NodeIP: net.ParseIP(peer.ip4),
				PodCIDRv6: mustCIDR(peer.cidr6), GatewayIPv6: route.GatewayIP(mustCIDR(peer.cidr6)), NodeIPv6: net.ParseIP(peer.ip6)}); err != nil {
				return err
			}
			if err := ensureIPv6Forwarding(); err != nil {
				return err
			}
			// IPv4 forwarding is the node's (the lab sets it).
			if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
				return err
			}
			table, err := nodenet.New()
			if err != nil {
				return err
			}
			local := []netip.Prefix{netip.MustParsePrefix(n.cidr4), netip.MustParsePrefix(n.cidr6)}
			if err := table.MasqueradeRouted(ctx, local, n.gwName); err != nil {
				return err
			}
			return table.SetClusterPodCIDRs(ctx, append(local, netip.MustParsePrefix(peer.cidr4), netip.MustParsePrefix(peer.cidr6)))
		})
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		err = n.pod.Do(func(ns.NetNS) error {
			if err := addrsUp(n.peerName, n.podIP4+"/24", n.podIP6+"/64"); err != nil {
				return err
			}
			l, err := netlink.LinkByName(n.peerName)
			if err != nil {
				return err
			}
			for _, gw := range []net.IP{gw4, gw6} {
				if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw}); err != nil {
					return fmt.Errorf("default route via %s: %w", gw, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("pod %d: %v", i+1, err)
		}
	}
	for _, tc := range []struct {
		what       string
		listenIn   ns.NetNS
		to         string
		wantSource string
	}{
		{"pod to remote pod over IPv6 keeps the pod's source", nodes[1].pod, nodes[1].podIP6, nodes[0].podIP6},
		{"pod to remote pod over IPv4 keeps the pod's source", nodes[1].pod, nodes[1].podIP4, nodes[0].podIP4},
		{"pod to the remote node over IPv6 is masqueraded", nodes[1].node, nodes[1].ip6, nodes[0].ip6},
		{"pod to the remote node over IPv4 is masqueraded", nodes[1].node, nodes[1].ip4, nodes[0].ip4},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if got := udpSourceSeen(t, tc.listenIn, nodes[0].pod, tc.to); got != tc.wantSource {
				t.Errorf("the datagram to %s arrived from %q, want %s", tc.to, got, tc.wantSource)
			}
		})
	}
}

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// addrsUp gives link its addresses (no duplicate address detection: the
// test made them unique) and sets it up.
func addrsUp(link string, addrs ...string) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return err
		}
		addr.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(l, addr); err != nil {
			return fmt.Errorf("address %s on %s: %w", a, link, err)
		}
	}
	return netlink.LinkSetUp(l)
}

// udpSourceSeen sends UDP datagrams from netns from to address to, where
// a socket of netns at listens, until one arrives (neighbour resolution
// may lose the first), and returns the source address it came from; ""
// when none arrived within a few seconds.
func udpSourceSeen(t *testing.T, at, from ns.NetNS, to string) string {
	t.Helper()
	var conn *net.UDPConn
	if err := at.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(to)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	port := conn.LocalAddr().(*net.UDPAddr).Port
	var sender *net.UDPConn
	if err := from.Do(func(ns.NetNS) error {
		var err error
		sender, err = net.DialUDP("udp", nil, &net.UDPAddr{IP: net.ParseIP(to), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	buf := make([]byte, 64)
	for i := 0; i < 20; i++ {
		if _, err := sender.Write([]byte("routed")); err != nil {
			t.Fatalf("send to %s: %v", to, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, src, err := conn.ReadFromUDP(buf); err == nil {
			return src.IP.String()
		}
	}
	return ""
}
