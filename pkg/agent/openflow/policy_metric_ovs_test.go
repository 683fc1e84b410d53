package openflow

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// serveEcho makes a pod echo every TCP connection on port.
func serveEcho(t *testing.T, p *testPod, port int) {
	t.Helper()
	var ln net.Listener
	if err := inNetNS(t, p.ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// echoTransfer connects from p to addr, sends n random bytes, reads them
// back, checks they are the same and closes: n payload bytes each way.
func echoTransfer(t *testing.T, p *testPod, addr string, n int) {
	t.Helper()
	var c net.Conn
	if err := inNetNS(t, p.ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, 2*time.Second)
		return err
	}); err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	sent := make([]byte, n)
	_, _ = rand.Read(sent)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(sent)
		errc <- err
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read the echo of %d bytes from %s: %v", n, addr, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("send %d bytes to %s: %v", n, addr, err)
	}
	if !bytes.Equal(sent, got) {
		t.Fatalf("the echo from %s differs from what was sent", addr)
	}
}

// ruleStats reads the rules' counters once the revalidators have added
// the cached datapath flows' packets to the OpenFlow counters.
func ruleStats(t *testing.T, in *ovsinstance.Instance, c *Client) map[uint32]RuleCounters {
	t.Helper()
	if _, err := in.Appctl("revalidator/wait"); err != nil {
		t.Fatal(err)
	}
	s, err := c.PolicyRuleStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sub(a, b RuleCounters) RuleCounters {
	return RuleCounters{Sessions: a.Sessions - b.Sessions, Packets: a.Packets - b.Packets, Bytes: a.Bytes - b.Bytes}
}

// The metric flows on a real bridge count every packet of the connections
// each Allow rule allowed, in both directions, for the egress rule of the
// client and the ingress rule of the server alike: a connection straight
// to the server, and one through a Service's VIP (DNATed and committed by
// EndpointDNAT before the policy tables: ConntrackCommit commits it again
// to store the rules' ids). A Drop rule counts the packets it dropped.
func TestMetricFlowsCountEveryPacketOfAllowedConnectionsOnRealOVS(t *testing.T) {
	in, c := newRealBridge(t)
	rw := NewRuleWriter(c)
	ctx := context.Background()
	cli := addPod(t, in, "c1", "10.10.1.2/24")
	srv := addPod(t, in, "s1", "10.10.1.3/24")
	other := addPod(t, in, "o1", "10.10.1.4/24")
	for _, p := range []*testPod{cli, srv, other} {
		if err := c.InstallPodFlows(p.hostIF, []net.IP{p.ip}, p.mac, p.ofPort); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "ip", "netns", "exec", in.NetNS(), "sysctl", "-qw", "net.ipv4.ip_forward=1")
	pingEventually(t, cli.ns, srv.ip)
	pingEventually(t, cli.ns, net.ParseIP("10.10.1.1"))
	pingEventually(t, other.ns, srv.ip)
	serveEcho(t, srv, 9000)
	vip := netip.MustParseAddr("10.96.0.20")
	if err := c.InstallService(ctx, "default/echo", ServiceState{{IP: vip, Protocol: 6, Port: 90}: {
		Endpoints: []Endpoint{{IP: addr(srv.ip), Port: 9000, Local: true}}}}); err != nil {
		t.Fatal(err)
	}

	const egressAllow, ingressAllow, ingressDrop = 3, 4, 5
	host := func(p *testPod) []netip.Prefix { return []netip.Prefix{netip.PrefixFrom(addr(p.ip), 32)} }
	tcp9000 := []PolicyPort{{Protocol: binding.IPProtoTCP, Port: 9000}}
	for _, r := range []*PolicyRule{
		{ID: egressAllow, Key: "egress-allow", Direction: DirectionEgress, Peers: host(srv), AppliedTo: []uint32{cli.ofPort},
			Services: tcp9000, Tier: TierAntrea, Priority: 1000},
		{ID: ingressAllow, Key: "ingress-allow", Direction: DirectionIngress, Peers: host(cli), AppliedTo: []uint32{srv.ofPort},
			Services: tcp9000, Priority: PolicyRulePriority},
		{ID: ingressDrop, Key: "ingress-drop", Direction: DirectionIngress, Peers: host(other), AppliedTo: []uint32{srv.ofPort},
			Tier: TierAntrea, Action: ActionDrop, Priority: 1000},
	} {
		if err := rw.Install(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	// Each transfer: n payload bytes each way. TCP segments of a 1,500-byte
	// MTU (no offload in the pods) carry at most 1,448 bytes of payload.
	const n = 200_000
	const minPackets = 2 * n / 1448
	for _, tc := range []struct{ name, addr string }{
		{"straight to the server", net.JoinHostPort(srv.ip.String(), "9000")},
		{"through the Service VIP", net.JoinHostPort(vip.String(), "90")},
	} {
		before := ruleStats(t, in, c)
		echoTransfer(t, cli, tc.addr, n)
		after := ruleStats(t, in, c)
		eg, ing := sub(after[egressAllow], before[egressAllow]), sub(after[ingressAllow], before[ingressAllow])
		t.Logf("%s, %d bytes each way: egress rule %+v, ingress rule %+v", tc.name, n, eg, ing)
		for _, r := range []struct {
			name string
			got  RuleCounters
		}{{"the client's egress rule", eg}, {"the server's ingress rule", ing}} {
			// One connection; a retransmitted SYN would be a second session.
			if r.got.Sessions < 1 || r.got.Sessions > 2 {
				t.Errorf("%s: %s counted %d sessions, want the 1 connection", tc.name, r.name, r.got.Sessions)
			}
			if r.got.Bytes < 2*n || r.got.Packets < minPackets {
				t.Errorf("%s: %s counted %d packets and %d bytes, want every packet of the connection both ways: at least %d packets and the %d payload bytes",
					tc.name, r.name, r.got.Packets, r.got.Bytes, minPackets, 2*n)
			}
		}
		if eg != ing {
			t.Errorf("%s: every packet of the connection crosses both metric tables once, but the egress rule counted %+v and the ingress rule %+v",
				tc.name, eg, ing)
		}
		if d := sub(after[ingressDrop], before[ingressDrop]); d != (RuleCounters{}) {
			t.Errorf("%s: the drop rule saw no packet but counted %+v", tc.name, d)
		}
	}

	before := ruleStats(t, in, c)
	var conn net.Conn
	err := inNetNS(t, other.ns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp4", net.JoinHostPort(srv.ip.String(), "9000"), 1500*time.Millisecond)
		return err
	})
	if err == nil {
		conn.Close()
		t.Fatal("the drop rule should keep o1 from connecting to s1")
	}
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("connecting from o1 should time out, got %v", err)
	}
	after := ruleStats(t, in, c)
	d := sub(after[ingressDrop], before[ingressDrop])
	t.Logf("one dropped connection attempt (SYN and its retransmits in 1.5 s): drop rule %+v", d)
	if d.Sessions < 1 || d.Packets != d.Sessions || d.Bytes < 40*d.Packets {
		t.Errorf("the drop rule counted %+v, want the dropped SYNs (at least one), each a session of at least 40 bytes", d)
	}
	if a := sub(after[ingressAllow], before[ingressAllow]); a != (RuleCounters{}) {
		t.Errorf("the allow rule counted %+v for a dropped connection", a)
	}
}
