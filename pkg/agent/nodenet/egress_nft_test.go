package nodenet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
)

// TestEgressSNATOnARealKernel: a "node" netns and a "server" netns joined by
// a veth. Connections from a pod address of the node to the server arrive
// from the Egress IP the map gives it, from an address not in the map they
// keep their source, and after the map changes a new connection takes the
// new Egress IP. The server reports the address it sees.
func TestEgressSNATOnARealKernel(t *testing.T) {
	inNewNetNS(t, func() error {
		node, err := ns.GetCurrentNS()
		if err != nil {
			return err
		}
		server, err := testutils.NewNS()
		if err != nil {
			return err
		}
		defer func() { _ = server.Close(); _ = testutils.UnmountNS(server) }()
		for _, c := range [][]string{
			{"ip", "link", "add", "uplink", "type", "veth", "peer", "name", "eth0", "netns", server.Path()},
			{"ip", "addr", "add", "192.0.2.1/24", "dev", "uplink"},
			{"ip", "link", "set", "uplink", "up"},
			{"ip", "link", "set", "lo", "up"},
			// Two pods' addresses; the Egress IPs this node holds.
			{"ip", "addr", "add", "10.10.1.5/32", "dev", "lo"},
			{"ip", "addr", "add", "10.10.1.6/32", "dev", "lo"},
			{"ip", "addr", "add", "192.0.2.100/32", "dev", "uplink"},
			{"ip", "addr", "add", "192.0.2.101/32", "dev", "uplink"},
		} {
			if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %v: %s", c, err, out)
			}
		}
		var l net.Listener
		if err := server.Do(func(ns.NetNS) error {
			for _, c := range [][]string{{"ip", "addr", "add", "192.0.2.2/24", "dev", "eth0"}, {"ip", "link", "set", "eth0", "up"},
				{"ip", "link", "set", "lo", "up"}, {"ip", "route", "add", "10.10.0.0/16", "via", "192.0.2.1"}} {
				if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
					return fmt.Errorf("%v: %v: %s", c, err, out)
				}
			}
			var err error
			l, err = net.Listen("tcp", "192.0.2.2:8080")
			return err
		}); err != nil {
			return err
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.RemoteAddr) }),
			ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(l) }()
		defer srv.Close()

		// seenFrom dials from a pod's address in the node netns (the socket
		// keeps the netns it was made in) and returns what the server saw.
		seenFrom := func(pod string) string {
			t.Helper()
			var conn net.Conn
			if err := node.Do(func(ns.NetNS) error {
				var err error
				conn, err = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(pod)}, Timeout: 3 * time.Second}).Dial("tcp", "192.0.2.2:8080")
				return err
			}); err != nil {
				t.Fatalf("dial from %s: %v", pod, err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n"); err != nil {
				t.Fatalf("request from %s: %v", pod, err)
			}
			b, err := io.ReadAll(conn)
			if err != nil {
				t.Fatalf("response to %s: %v", pod, err)
			}
			body := string(b[strings.Index(string(b), "\r\n\r\n")+4:])
			host, _, err := net.SplitHostPort(body)
			if err != nil {
				t.Fatalf("the server answered %q", b)
			}
			return host
		}
		ctx := context.Background()
		tb, err := New()
		if err != nil {
			return err
		}
		want := EgressSNAT{Gateway: "antrea-gw0", SNAT: map[netip.Addr]netip.Addr{
			netip.MustParseAddr("10.10.1.5"): netip.MustParseAddr("192.0.2.100")}}
		if err := tb.SetEgressSNAT(ctx, want); err != nil {
			return err
		}
		if got := seenFrom("10.10.1.5"); got != "192.0.2.100" {
			t.Errorf("a pod in the map reached the server from %s, want its Egress IP 192.0.2.100", got)
		}
		if got := seenFrom("10.10.1.6"); got != "10.10.1.6" {
			t.Errorf("a pod not in the map reached the server from %s, want its own address", got)
		}
		want.SNAT[netip.MustParseAddr("10.10.1.5")] = netip.MustParseAddr("192.0.2.101")
		want.SNAT[netip.MustParseAddr("10.10.1.6")] = netip.MustParseAddr("192.0.2.100")
		if err := tb.SetEgressSNAT(ctx, want); err != nil {
			return err
		}
		if got := seenFrom("10.10.1.5"); got != "192.0.2.101" {
			t.Errorf("after the map changed, the pod reached the server from %s, want 192.0.2.101", got)
		}
		if got := seenFrom("10.10.1.6"); got != "192.0.2.100" {
			t.Errorf("after the map changed, the second pod reached the server from %s, want 192.0.2.100", got)
		}
		out, err := exec.Command("nft", "list", "chain", "inet", TableName, egressPostrouting).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft list chain: %v: %s", err, out)
		}
		if n := strings.Count(string(out), "snat "); n != 2 {
			t.Errorf("want one rule per family after two writes, got %d:\n%s", n, out)
		}
		if err := tb.SetEgressSNAT(ctx, EgressSNAT{Gateway: "antrea-gw0"}); err != nil {
			return err
		}
		if got := seenFrom("10.10.1.5"); got != "10.10.1.5" {
			t.Errorf("with an empty map the pod reached the server from %s, want its own address", got)
		}
		return nil
	})
}
