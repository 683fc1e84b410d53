package nodenet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"

	"antrea.io/antrea/pkg/agent/types"
)

// nodePolicyLab is a "node" netns (the test's own, where the table is
// written) and a "peer" netns holding two addresses, joined by a veth.
// Servers answer "ok" on the node (8080, 8081) and on the peer (9090).
type nodePolicyLab struct {
	t    *testing.T
	node ns.NetNS
	peer ns.NetNS
}

const (
	nodeAddr  = "192.0.2.1"
	peerAddrA = "192.0.2.2"
	peerAddrB = "192.0.2.3"
)

func newNodePolicyLab(t *testing.T) (*nodePolicyLab, func()) {
	node, err := ns.GetCurrentNS()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := testutils.NewNS()
	if err != nil {
		t.Fatal(err)
	}
	run := func(c ...string) {
		t.Helper()
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	run("ip", "link", "add", "uplink", "type", "veth", "peer", "name", "eth0", "netns", peer.Path())
	run("ip", "addr", "add", nodeAddr+"/24", "dev", "uplink")
	run("ip", "link", "set", "uplink", "up")
	run("ip", "link", "set", "lo", "up")
	var closers []io.Closer
	serve := func(addr string) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, l)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 16)
					for {
						_ = c.SetDeadline(time.Now().Add(10 * time.Second))
						n, err := c.Read(buf)
						if err != nil {
							return
						}
						if _, err := c.Write([]byte("ok:" + string(buf[:n]))); err != nil {
							return
						}
					}
				}()
			}
		}()
	}
	serve(":8080")
	serve(":8081")
	if err := peer.Do(func(ns.NetNS) error {
		run("ip", "addr", "add", peerAddrA+"/24", "dev", "eth0")
		run("ip", "addr", "add", peerAddrB+"/24", "dev", "eth0")
		run("ip", "link", "set", "eth0", "up")
		run("ip", "link", "set", "lo", "up")
		serve(":9090")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return &nodePolicyLab{t: t, node: node, peer: peer}, func() {
		for _, c := range closers {
			_ = c.Close()
		}
		_ = peer.Close()
		_ = testutils.UnmountNS(peer)
	}
}

// dial connects from src (in the netns that holds it) to dst and exchanges
// one message; it returns nil when the server answered.
func (l *nodePolicyLab) dial(src, dst string) error {
	from := l.peer
	if src == nodeAddr {
		from = l.node
	}
	var conn net.Conn
	if err := from.Do(func(ns.NetNS) error {
		var err error
		// A dropped SYN is retried after 1 s: 700 ms is a drop.
		conn, err = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 700 * time.Millisecond}).Dial("tcp", dst)
		return err
	}); err != nil {
		return err
	}
	defer conn.Close()
	return exchange(conn)
}

func exchange(conn net.Conn) error {
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("hi")); err != nil {
		return err
	}
	buf := make([]byte, 16)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "ok:hi" {
		return fmt.Errorf("answer %q", buf[:n])
	}
	return nil
}

type reach struct {
	src, dst string
	// want: "" reached, "drop" timed out, "reset" refused.
	want string
}

func (l *nodePolicyLab) check(what string, cases ...reach) {
	l.t.Helper()
	for _, c := range cases {
		err := l.dial(c.src, c.dst)
		var got string
		var ne net.Error
		switch {
		case err == nil:
		case errors.Is(err, syscall.ECONNREFUSED):
			got = "reset"
		case errors.As(err, &ne) && ne.Timeout():
			got = "drop"
		default:
			got = err.Error()
		}
		if got != c.want {
			l.t.Errorf("%s: %s -> %s: got %q, want %q (%v)", what, c.src, c.dst, got, c.want, err)
		}
	}
}

func host(a string) netip.Prefix { return netip.PrefixFrom(netip.MustParseAddr(a), 32) }

var anyV4 = netip.MustParsePrefix("0.0.0.0/0")

func tcp(port uint16) []NodePolicyService {
	return []NodePolicyService{{Protocol: types.ProtocolTCP, Port: port}}
}

// TestNodePolicyOnARealKernel writes Node policy rules into the table of a
// netns the test made and checks each verdict with real connections to and
// from the node: order, Allow/Drop/Reject/Pass, the baseline tier, egress,
// and what a deny-all policy leaves (established connections, the API
// server).
func TestNodePolicyOnARealKernel(t *testing.T) {
	inNewNetNS(t, func() error {
		l, done := newNodePolicyLab(t)
		defer done()
		ctx := context.Background()
		tb, err := New()
		if err != nil {
			return err
		}
		np := tb.NodePolicy()
		to8080, to8081, to9090A, to9090B := nodeAddr+":8080", nodeAddr+":8081", peerAddrA+":9090", peerAddrB+":9090"
		l.check("no policy", reach{peerAddrA, to8080, ""}, reach{peerAddrB, to8080, ""}, reach{nodeAddr, to9090B, ""})

		// Upstream's first example: allow a CIDR to port 8080, drop the rest.
		set := func(what string, always NodePolicyAlways, rules ...NodePolicyRule) {
			t.Helper()
			if err := np.Set(ctx, always, rules); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		set("allow a CIDR, drop the rest", NodePolicyAlways{},
			NodePolicyRule{Name: "p allow-cidr", Action: NodePolicyAllow, Peers: []netip.Prefix{host(peerAddrA)}, Services: tcp(8080)},
			NodePolicyRule{Name: "p drop-other", Action: NodePolicyDrop, Peers: []netip.Prefix{anyV4}, Services: tcp(8080)})
		l.check("allow a CIDR, drop the rest", reach{peerAddrA, to8080, ""}, reach{peerAddrB, to8080, "drop"}, reach{peerAddrB, to8081, ""})

		set("reject, and an earlier drop wins", NodePolicyAlways{},
			NodePolicyRule{Name: "p drop-a", Action: NodePolicyDrop, Peers: []netip.Prefix{host(peerAddrA)}, Services: tcp(8080)},
			NodePolicyRule{Name: "p reject", Action: NodePolicyReject, Peers: []netip.Prefix{anyV4},
				Services: []NodePolicyService{{Protocol: types.ProtocolTCP, Port: 8080, EndPort: 8081}}})
		l.check("reject, and an earlier drop wins", reach{peerAddrA, to8080, "drop"}, reach{peerAddrB, to8080, "reset"}, reach{peerAddrA, to8081, "reset"})

		// Pass skips the later rules of the tiers before the baseline, not
		// the baseline's.
		pass := NodePolicyRule{Name: "p pass-a", Action: NodePolicyPass, Peers: []netip.Prefix{host(peerAddrA)}}
		drop := NodePolicyRule{Name: "p drop-all", Action: NodePolicyDrop, Peers: []netip.Prefix{anyV4}, Services: tcp(8080)}
		set("pass", NodePolicyAlways{}, pass, drop)
		l.check("pass", reach{peerAddrA, to8080, ""}, reach{peerAddrB, to8080, "drop"})
		set("pass then baseline", NodePolicyAlways{}, pass, drop,
			NodePolicyRule{Name: "b reject-a", Baseline: true, Action: NodePolicyReject, Peers: []netip.Prefix{host(peerAddrA)}, Services: tcp(8080)})
		l.check("pass then baseline", reach{peerAddrA, to8080, "reset"}, reach{peerAddrB, to8080, "drop"})

		// Egress: the node's own connections, by destination.
		set("egress", NodePolicyAlways{},
			NodePolicyRule{Name: "p drop-to-b", Egress: true, Action: NodePolicyDrop, Peers: []netip.Prefix{host(peerAddrB)}, Services: tcp(9090)})
		l.check("egress", reach{nodeAddr, to9090A, ""}, reach{nodeAddr, to9090B, "drop"}, reach{peerAddrB, to8080, ""})

		// Deny all, both ways: a connection opened before stays, the API
		// server's address and loopback stay reachable.
		var open net.Conn
		if err := l.peer.Do(func(ns.NetNS) error {
			var err error
			open, err = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(peerAddrA)}}).Dial("tcp", to8081)
			return err
		}); err != nil {
			return err
		}
		defer open.Close()
		always := NodePolicyAlways{APIServers: []netip.Addr{netip.MustParseAddr(peerAddrB)}}
		set("deny all", always,
			NodePolicyRule{Name: "p deny-in", Action: NodePolicyDrop, Peers: []netip.Prefix{anyV4}},
			NodePolicyRule{Name: "p deny-out", Egress: true, Action: NodePolicyDrop, Peers: []netip.Prefix{anyV4}})
		l.check("deny all", reach{peerAddrA, to8080, "drop"}, reach{nodeAddr, to9090A, "drop"},
			reach{peerAddrB, to8080, ""}, reach{nodeAddr, to9090B, ""}, reach{nodeAddr, "127.0.0.1:8080", ""})
		if err := exchange(open); err != nil {
			t.Errorf("deny all: the connection opened before the policy broke: %v", err)
		}

		// Every match the API has loads into the kernel: ICMP type and
		// code, IPv6 peers, SCTP and UDP port ranges, source ports,
		// logging, Reject of UDP; and the ICMP one takes effect.
		echo, zero := uint8(8), uint8(0)
		set("every match", NodePolicyAlways{APIServers: []netip.Addr{netip.MustParseAddr("2001:db8::1")}, TunnelProtocol: 47},
			NodePolicyRule{Name: "p no-ping", Action: NodePolicyDrop, Log: true, Peers: []netip.Prefix{host(peerAddrA), netip.MustParsePrefix("2001:db8::/64")},
				Services: []NodePolicyService{{Protocol: protocolICMP, ICMPType: &echo, ICMPCode: &zero}}},
			NodePolicyRule{Name: "p ranges", Action: NodePolicyReject, Peers: []netip.Prefix{anyV4, netip.MustParsePrefix("::/0")},
				Services: []NodePolicyService{{Protocol: types.ProtocolSCTP, Port: 5000, EndPort: 5010},
					{Protocol: types.ProtocolUDP, Port: 53, SrcPort: 1000, SrcEndPort: 2000}}},
			NodePolicyRule{Name: "b v6 only", Baseline: true, Egress: true, Action: NodePolicyDrop, Peers: []netip.Prefix{netip.MustParsePrefix("2001:db8::5/128")}})
		ping := func(src string) error {
			return l.peer.Do(func(ns.NetNS) error {
				out, err := exec.Command("ping", "-c", "1", "-W", "1", "-I", src, nodeAddr).CombinedOutput()
				if err != nil {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			})
		}
		if _, err := exec.LookPath("ping"); err == nil {
			if err := ping(peerAddrA); err == nil {
				t.Errorf("every match: a ping from %s reached the node through the rule dropping ICMP echo from it", peerAddrA)
			}
			if err := ping(peerAddrB); err != nil {
				t.Errorf("every match: a ping from %s, not a peer of the rule, failed: %v", peerAddrB, err)
			}
		}
		l.check("every match", reach{peerAddrA, to8080, ""})

		// Sets follow the rules: the ones no rule uses are gone.
		set("fewer rules", NodePolicyAlways{}, NodePolicyRule{Name: "p one", Action: NodePolicyDrop, Peers: []netip.Prefix{host(peerAddrB)}, Services: tcp(8080)})
		out, err := exec.Command("nft", "list", "sets", "inet").CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft list sets: %v: %s", err, out)
		}
		if got := strings.Count(string(out), "set "+NodePolicySetPrefix); got != 1 {
			t.Errorf("want the one set of the one rule, got %d:\n%s", got, out)
		}
		l.check("fewer rules", reach{peerAddrA, to8080, ""}, reach{peerAddrB, to8080, "drop"})

		if err := np.Remove(ctx); err != nil {
			return err
		}
		l.check("removed", reach{peerAddrB, to8080, ""})
		return nil
	})
}

// BenchmarkNodePolicySet writes rules × addresses (set elements) into the
// table of a fresh netns, the whole list per write: what one policy change
// costs the agent.
func BenchmarkNodePolicySet(b *testing.B) {
	if _, err := exec.LookPath("nft"); err != nil {
		b.Skip("needs the nft binary")
	}
	for _, size := range []struct{ rules, addrs int }{{1, 1}, {10, 100}, {100, 100}} {
		b.Run(fmt.Sprintf("%d_rules_of_%d_addresses", size.rules, size.addrs), func(b *testing.B) {
			netns, err := testutils.NewNS()
			if err != nil {
				b.Skip("needs root for a network namespace: ", err)
			}
			defer func() { _ = netns.Close(); _ = testutils.UnmountNS(netns) }()
			var rules []NodePolicyRule
			for i := 0; i < size.rules; i++ {
				var peers []netip.Prefix
				for j := 0; j < size.addrs; j++ {
					peers = append(peers, host(fmt.Sprintf("10.%d.%d.%d", 20+i/50, i%50, j+1)))
				}
				rules = append(rules, NodePolicyRule{Name: fmt.Sprintf("p r%d", i), Action: NodePolicyDrop, Peers: peers, Services: tcp(uint16(1000 + i))})
			}
			if err := netns.Do(func(ns.NetNS) error {
				tb, err := New()
				if err != nil {
					return err
				}
				np := tb.NodePolicy()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := np.Set(context.Background(), NodePolicyAlways{}, rules); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestTheAlwaysRulesOfADualStackNodeLoad: the rules every Node policy
// starts with, on a dual-stack node (a pod CIDR of each family, the API
// server, the tunnel), load into a real kernel with no policy rule and with
// one. Seen on the dual-stack lab: the kernel refused them and no policy
// was reported realized.
func TestTheAlwaysRulesOfADualStackNodeLoad(t *testing.T) {
	inNewNetNS(t, func() error {
		tb, err := New()
		if err != nil {
			return err
		}
		always := NodePolicyAlways{APIServers: []netip.Addr{netip.MustParseAddr("172.30.0.2")},
			TunnelProtocol: types.ProtocolUDP, TunnelPort: 6081, Gateway: "antrea-gw0",
			PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}}
		ctx := context.Background()
		if err := tb.NodePolicy().Set(ctx, always, nil); err != nil {
			t.Errorf("no rule: %v", err)
		}
		if err := tb.NodePolicy().Set(ctx, always, []NodePolicyRule{{Name: "p drop-v6", Action: NodePolicyDrop,
			Peers: []netip.Prefix{netip.MustParsePrefix("fd00:99::/64")}, Services: tcp(8080)}}); err != nil {
			t.Errorf("an IPv6 rule: %v", err)
		}
		return nil
	})
}
