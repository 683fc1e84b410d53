package openflow

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/agent/l7engine"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// startL7Engine makes the engine's veth pair in the node (antrea-l7-tap0
// on br-int, l7-engine for the engine), runs an engine on it and returns
// the engine and the port's OpenFlow number.
func startL7Engine(t *testing.T, br *bridgetest.Bridge) (*l7engine.Engine, uint32) {
	t.Helper()
	node := br.NetNS()
	bridgetest.Run(t, "ip", "-n", node, "link", "add", "antrea-l7-tap0", "type", "veth", "peer", "name", "l7-engine")
	for _, l := range []string{"antrea-l7-tap0", "l7-engine"} {
		bridgetest.Run(t, "ip", "-n", node, "link", "set", l, "arp", "off", "up")
	}
	if _, err := br.Vsctl("add-port", "br-int", "antrea-l7-tap0"); err != nil {
		t.Fatal(err)
	}
	out, err := br.Vsctl("get", "interface", "antrea-l7-tap0", "ofport")
	if err != nil {
		t.Fatal(err)
	}
	var ofport uint32
	if _, err := fmt.Sscan(strings.TrimSpace(out), &ofport); err != nil {
		t.Fatal(err)
	}
	n, err := ns.GetNS("/var/run/netns/" + node)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var port *l7engine.Port
	if err := n.Do(func(ns.NetNS) error {
		port, err = l7engine.OpenPort("l7-engine")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e := l7engine.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, port) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine: %v", err)
		}
		port.Close()
	})
	return e, ofport
}

// serveHTTP makes a pod answer HTTP on port 80 with "<pod> <method> <path>"
// and HTTPS on 443 with its certificate (httptest's) whatever the name.
func serveHTTP(t *testing.T, p *bridgetest.Pod) {
	t.Helper()
	var ln, tlsLn net.Listener
	if err := p.Do(t, func() error {
		var err error
		if ln, err = net.Listen("tcp4", ":80"); err != nil {
			return err
		}
		tlsLn, err = net.Listen("tcp4", ":443")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "%s %s %s", p.Name, r.Method, r.URL.Path) })
	plain := &http.Server{Handler: h}
	go func() { _ = plain.Serve(ln) }()
	secure := httptest.NewUnstartedServer(h)
	secure.Listener.Close()
	secure.Listener = tlsLn
	secure.StartTLS()
	t.Cleanup(func() { plain.Close(); secure.Close() })
}

// httpFrom is an HTTP client whose connections the pod opens.
func httpFrom(t *testing.T, p *bridgetest.Pod, keepAlive bool) *http.Client {
	return &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: !keepAlive,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return p.Dial(t, "tcp4", addr, 2*time.Second)
		}}}
}

// L7NetworkPolicy on real OVS: an egress rule with l7Protocols steers the
// client's connections through the engine: allowed requests get the
// server's answer, denied ones the engine's 403, on fresh and kept-alive
// connections; TLS handshakes pass or are reset by their server name; a
// Pod the rule does not apply to is not inspected.
func TestL7RulesAreEnforcedByTheEngineOnRealOVS(t *testing.T) {
	br := bridgetest.New(t)
	c := initializedClient(t, br, br.OF)
	ctx := context.Background()
	var pods []*bridgetest.Pod
	for i, name := range []string{"web", "client", "other", "portless"} {
		p := br.AddPod(t, name, strings.Replace(bridgetest.PodCIDR, ".0/24", "", 1)+"."+string(rune('3'+i))+"/24")
		if err := c.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	web, client, other, portless := pods[0], pods[1], pods[2], pods[3]
	serveHTTP(t, web)
	web.ServeWho(t, 5353)
	engine, ofport := startL7Engine(t, br)
	var mu sync.Mutex
	var verdicts []l7engine.Verdict
	engine.Report = func(v l7engine.Verdict) { mu.Lock(); verdicts = append(verdicts, v); mu.Unlock() }
	engine.SetRules(map[uint16]*l7engine.Rule{
		7: {Policy: "AntreaNetworkPolicy:default/allow-only-get-request-to-api-v2", Name: "allow-http",
			HTTP: []l7engine.HTTPMatch{{Method: "GET", Path: "/api/v2/*"}}},
		8: {Policy: "AntreaClusterNetworkPolicy:allow-tls", Name: "allow-tls", TLS: []l7engine.TLSMatch{{SNI: "*.bar.com"}}},
		9: {Policy: "AntreaNetworkPolicy:default/allow-http-only", Name: "http-only", HTTP: []l7engine.HTTPMatch{{}}},
	})
	if err := c.SetL7EnginePort(ctx, ofport); err != nil {
		t.Fatal(err)
	}
	webIP, _ := netip.AddrFromSlice(web.IP.To4())
	rw := NewRuleWriter(c)
	for _, r := range []*PolicyRule{
		{ID: 20, Direction: DirectionEgress, Peers: []netip.Prefix{netip.PrefixFrom(webIP, 32)}, AppliedTo: []uint32{client.OFPort},
			Services: []PolicyPort{{Protocol: binding.IPProtoTCP, Port: 80}}, Action: ActionAllow, Tier: TierAntrea, Priority: PolicyRulePriority, L7VLAN: 7},
		{ID: 21, Direction: DirectionEgress, Peers: []netip.Prefix{netip.PrefixFrom(webIP, 32)}, AppliedTo: []uint32{client.OFPort},
			Services: []PolicyPort{{Protocol: binding.IPProtoTCP, Port: 443}}, Action: ActionAllow, Tier: TierAntrea, Priority: PolicyRulePriority, L7VLAN: 8},
		// Upstream's "http-only" rule: no ports, so every protocol.
		{ID: 22, Direction: DirectionEgress, Peers: []netip.Prefix{netip.PrefixFrom(webIP, 32)}, AppliedTo: []uint32{portless.OFPort},
			Action: ActionAllow, Tier: TierAntrea, Priority: PolicyRulePriority, L7VLAN: 9},
	} {
		if err := rw.Install(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	br.PurgeDatapath(t)

	get := func(cl *http.Client, method, path string) (int, string, error) {
		req, _ := http.NewRequest(method, "http://"+web.IP.String()+path, nil)
		resp, err := cl.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	flows := func() string { return strings.Join(br.DumpFlows(t), "\n") }
	for _, keepAlive := range []bool{false, true} {
		cl := httpFrom(t, client, keepAlive)
		for _, tc := range []struct {
			method, path string
			allowed      bool
		}{
			{"GET", "/api/v2/users", true},
			{"POST", "/api/v2/users", false},
			{"GET", "/api/v2/items", true},
			{"GET", "/admin", false},
			{"GET", "/api/v2/", true},
		} {
			code, body, err := get(cl, tc.method, tc.path)
			switch {
			case err != nil:
				t.Fatalf("keep-alive %v: %s %s: %v\nflows:\n%s", keepAlive, tc.method, tc.path, err, flows())
			case tc.allowed && (code != 200 || body != "web "+tc.method+" "+tc.path):
				t.Errorf("keep-alive %v: allowed %s %s got %d %q, want the server's answer", keepAlive, tc.method, tc.path, code, body)
			case !tc.allowed && code != http.StatusForbidden:
				t.Errorf("keep-alive %v: denied %s %s got %d %q, want the engine's 403", keepAlive, tc.method, tc.path, code, body)
			}
		}
		cl.CloseIdleConnections()
	}
	// A Pod the rule does not apply to is not inspected.
	if code, body, err := get(httpFrom(t, other, false), "DELETE", "/admin"); err != nil || code != 200 {
		t.Errorf("other's DELETE got %d %q %v, want the server's answer", code, body, err)
	}

	// What a layer 7 rule selects that is not TCP is dropped (upstream's
	// engine denies what it cannot read); its TCP goes through the engine.
	// UDP the layer 7 rules do not select (client's rules are TCP 80 and
	// 443) is answered.
	udpAddr := net.JoinHostPort(web.IP.String(), "5353")
	if who := client.AskWhoEventually(t, "udp4", udpAddr); !strings.HasPrefix(who, "web ") {
		t.Errorf("UDP the layer 7 rules do not select got %q, want web's answer", who)
	}
	for i := 0; i < 3; i++ {
		if who, err := portless.AskWho(t, "udp4", udpAddr, time.Second); err == nil {
			t.Fatalf("UDP under a layer 7 rule without ports was answered %q, want it dropped\nflows:\n%s", who, flows())
		}
	}
	if code, body, err := get(httpFrom(t, portless, false), "DELETE", "/anything"); err != nil || code != 200 || body != "web DELETE /anything" {
		t.Errorf("HTTP under the http-only rule got %d %q %v, want the server's answer", code, body, err)
	}

	// TLS: the handshake passes or is reset by its server name.
	for _, tc := range []struct {
		sni   string
		allow bool
	}{{"www.bar.com", true}, {"evil.example", false}} {
		conn, err := client.Dial(t, "tcp4", net.JoinHostPort(web.IP.String(), "443"), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		tc2 := tls.Client(conn, &tls.Config{ServerName: tc.sni, InsecureSkipVerify: true})
		err = tc2.Handshake()
		if err == nil {
			_, err = fmt.Fprintf(tc2, "GET /api/v2/x HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", tc.sni)
			if err == nil {
				var line string
				line, err = bufio.NewReader(tc2).ReadString('\n')
				if err == nil && !strings.HasPrefix(line, "HTTP/1.1 200") {
					err = errors.New("answer " + line)
				}
			}
		}
		conn.Close()
		switch {
		case tc.allow && err != nil:
			t.Errorf("TLS to %s: %v, want the server's answer", tc.sni, err)
		case !tc.allow && (err == nil || !strings.Contains(err.Error(), "reset")):
			t.Errorf("TLS to %s: %v, want the connection reset", tc.sni, err)
		}
	}
	// The feature's flows carry its cookie in round 1 (the first client).
	l7Cookie := fmt.Sprintf("cookie=%#x,", withRound(1, cookieL7Policy))
	steering := 0
	for _, f := range br.DumpFlows(t) {
		if strings.Contains(f, l7Cookie) {
			steering++
			t.Log(f)
		}
	}
	if steering != 6 {
		t.Errorf("%d steering flows on the switch, want 6 (two to the engine, two drops of what is not TCP, two for what it sends back)", steering)
	}
	// Without the engine's port the steering flows go.
	if err := c.SetL7EnginePort(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for _, f := range br.DumpFlows(t) {
		if strings.Contains(f, l7Cookie) {
			t.Errorf("a steering flow stayed: %s", f)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	denied := 0
	for _, v := range verdicts {
		if !v.Allowed {
			denied++
		}
	}
	// Two denied requests per client, the denied handshake.
	if denied != 5 {
		t.Errorf("the engine reported %d denials, want 5: %+v", denied, verdicts)
	}
}
