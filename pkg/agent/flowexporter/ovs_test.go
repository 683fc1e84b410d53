package flowexporter

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/ipfix"
)

// inNetNS runs f on a thread in the named netns; sockets it opens stay
// there.
func inNetNS(t *testing.T, name string, f func() error) {
	t.Helper()
	n, err := ns.GetNS("/var/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

// startTcpdump captures UDP to port on lo of netns into file; the
// returned stop ends it (by its PID) and waits for it.
func startTcpdump(t *testing.T, netns, file string, port int) (stop func()) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", netns, "tcpdump", "-i", "lo", "-U", "--immediate-mode", "-n", "-w", file,
		"udp", "port", fmt.Sprint(port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	var stopped sync.Once
	stop = func() {
		stopped.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGINT)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("tcpdump did not start")
	}
	return stop
}

// twoPodNode starts a node (OVS, Antrea's pipeline) with pods a
// (10.10.1.2) and b (10.10.1.3) of namespace "flows", and the interface
// store that names them.
func twoPodNode(tb testing.TB) (*bridgetest.Bridge, *bridgetest.Pod, *bridgetest.Pod, interfacestore.InterfaceStore) {
	tb.Helper()
	br := bridgetest.New(tb)
	flows, err := agentof.NewClient(br.OF, 1)
	if err != nil {
		tb.Fatal(err)
	}
	_, cidr, _ := net.ParseCIDR(bridgetest.PodCIDR)
	if err := flows.Initialize(context.Background(), &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort,
		GatewayIP: net.ParseIP(bridgetest.GatewayIP), GatewayMAC: br.GatewayMAC, PodCIDR: cidr}); err != nil {
		tb.Fatal(err)
	}
	store := interfacestore.NewInterfaceStore()
	a := br.AddPod(tb, "a", "10.10.1.2/24")
	b := br.AddPod(tb, "b", "10.10.1.3/24")
	for i, p := range []*bridgetest.Pod{a, b} {
		if err := flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			tb.Fatal(err)
		}
		store.AddInterface(interfacestore.NewContainerInterface(p.HostIF, fmt.Sprintf("cid-%d", i), p.Name, "flows",
			"eth0", p.MAC, []net.IP{p.IP}, 0))
	}
	return br, a, b, store
}

// TestExportsARealTransferOnOVS runs the exporter on a real OVS bridge
// (userspace datapath, Antrea's pipeline): pod a sends exactly N bytes to
// pod b over TCP; the exporter reads the connection from OVS's conntrack
// and its counts from OVS's own IPFIX export, and sends records over UDP
// to a collector inside the node's netns, where tcpdump captures them.
// Both our decoder (in the collector) and tshark (on the capture) must
// find the 5-tuple and N bytes.
//
// Overhead: the counts are IP bytes (OVS counts each packet's IP total
// length, as conntrack accounting does). Every packet of the transfer
// carries an IP header (20 bytes) and a TCP header (20 bytes, up to 60
// with options; Linux sends 32 with timestamps, 40 on a SYN), so the
// client-to-server bytes are N plus 40 to 80 bytes per packet, and the
// server-to-client bytes (acknowledgements, no payload) 40 to 80 per
// packet.
func TestExportsARealTransferOnOVS(t *testing.T) {
	for _, tool := range []string{"tshark", "tcpdump"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	br, a, b, store := twoPodNode(t)

	// OVS's IPFIX export to the feed, inside the node's netns.
	var feed *OVSIPFIXFeed
	inNetNS(t, br.NetNS(), func() error {
		var err error
		feed, err = ListenOVSIPFIX("127.0.0.1:0", 1000)
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() { defer wg.Done(); feed.Run(ctx) }()
	if err := (BridgeIPFIX{RunDir: br.Dir(), Bridge: "br-int", Target: feed.Addr(), CacheActiveTimeout: 1,
		CacheMaxFlows: 1000}).Configure(ctx); err != nil {
		t.Fatal(err)
	}

	// The collector and the capture, inside the node's netns.
	var pc net.PacketConn
	inNetNS(t, br.NetNS(), func() error {
		var err error
		pc, err = net.ListenPacket("udp4", "127.0.0.1:0")
		return err
	})
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pcap := filepath.Join(t.TempDir(), "ipfix.pcap")
	stopCapture := startTcpdump(t, br.NetNS(), pcap, port)
	records := make(chan ipfix.Record, 1000)
	serveUDP(t, pc, records)

	e, err := New(Config{NodeName: "node-1", Collector: pc.LocalAddr().String(), Protocol: "udp",
		PollInterval: 200 * time.Millisecond, ActiveTimeout: time.Second, IdleTimeout: 3 * time.Second,
		Dial: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			inNetNS(t, br.NetNS(), func() error {
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return nil
			})
			return c, err
		}},
		&DpctlSource{RunDir: br.Dir(), Datapath: "netdev@ovs-netdev", Zones: []uint16{agentof.CtZone}}, feed, InterfacePods{Store: store}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); e.Run(ctx) }()

	// The transfer: exactly N bytes from a to b, counted by b.
	const N = 1_000_000
	var ln net.Listener
	inNetNS(t, b.NS, func() error {
		var err error
		ln, err = net.Listen("tcp4", ":5001")
		return err
	})
	t.Cleanup(func() { ln.Close() })
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	c, err := a.Dial(t, "tcp4", "10.10.1.3:5001", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clientPort := c.LocalAddr().(*net.TCPAddr).Port
	if _, err := c.Write(make([]byte, N)); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	select {
	case n := <-got:
		if n != N {
			t.Fatalf("server received %d bytes, want %d", n, N)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("transfer did not finish")
	}
	c.Close()

	// Wait for the connection's idle record: nothing moved for the idle
	// timeout, so its totals are final.
	a4, b4 := netip.MustParseAddr("10.10.1.2"), netip.MustParseAddr("10.10.1.3")
	ours := func(r ipfix.Record) bool {
		s, _ := r.Get(ipfix.SourceIPv4Address)
		d, _ := r.Get(ipfix.DestinationIPv4Address)
		sp, _ := r.Get(ipfix.SourceTransportPort)
		dp, _ := r.Get(ipfix.DestinationTransportPort)
		return s.Addr == a4 && d.Addr == b4 && sp.Uint == uint64(clientPort) && dp.Uint == 5001
	}
	var final ipfix.Record
	var deltaBytes uint64
	deadline := time.After(60 * time.Second)
wait:
	for {
		select {
		case r := <-records:
			if !ours(r) {
				continue
			}
			d, _ := r.Get(ipfix.OctetDeltaCount)
			deltaBytes += d.Uint
			if reason, _ := r.Get(ipfix.FlowEndReason); reason.Uint == uint64(ipfix.EndReasonIdleTimeout) ||
				reason.Uint == uint64(ipfix.EndReasonEndOfFlow) {
				final = r
				break wait
			}
		case <-deadline:
			t.Fatalf("no final record of 10.10.1.2:%d > 10.10.1.3:5001; exporter %+v, feed records %d",
				clientPort, e.Stats(), feed.Records.Load())
		}
	}
	get := func(el ipfix.Element) ipfix.Value { v, _ := final.Get(el); return v }
	pkts, octets := get(ipfix.PacketTotalCount).Uint, get(ipfix.OctetTotalCount).Uint
	rpkts, roctets := get(ipfix.ReversePacketTotalCount).Uint, get(ipfix.ReverseOctetTotalCount).Uint
	t.Logf("final record: %d packets %d bytes forward, %d packets %d bytes back, state %s",
		pkts, octets, rpkts, roctets, get(ipfix.TCPState).Str)
	if octets < N+40*pkts || octets > N+80*pkts {
		t.Errorf("forward bytes %d for %d packets: want N=%d plus 40 to 80 per packet", octets, pkts, N)
	}
	if pkts < N/1460 {
		t.Errorf("%d forward packets cannot carry %d bytes with a 1500-byte MTU", pkts, N)
	}
	if rpkts == 0 || roctets < 40*rpkts || roctets > 80*rpkts {
		t.Errorf("reverse %d bytes for %d packets: want 40 to 80 per packet (acknowledgements)", roctets, rpkts)
	}
	if deltaBytes != octets {
		t.Errorf("the deltas of the records add up to %d, the total says %d", deltaBytes, octets)
	}
	for el, want := range map[ipfix.Element]string{ipfix.SourcePodName: "a", ipfix.DestinationPodName: "b",
		ipfix.SourcePodNamespace: "flows", ipfix.DestinationPodNamespace: "flows", ipfix.SourceNodeName: "node-1"} {
		if got := get(el).Str; got != want {
			t.Errorf("%s = %q, want %q", el, got, want)
		}
	}
	// Both sides closed (the client's CloseWrite, the server's Close).
	if st := get(ipfix.TCPState).Str; st != "TIME_WAIT" {
		t.Errorf("tcpState %q, want TIME_WAIT (both sides closed)", st)
	}
	if ft := get(ipfix.FlowType).Uint; ft != uint64(ipfix.FlowTypeIntraNode) {
		t.Errorf("flowType %d, want intra-node", ft)
	}

	// tshark, on the capture of the same messages.
	time.Sleep(300 * time.Millisecond)
	stopCapture()
	checkWithTshark(t, pcap, port, fmt.Sprint(clientPort), tsharkWant{n: N, pkts: pkts, octets: octets, roctets: roctets,
		reason: get(ipfix.FlowEndReason).Uint, state: get(ipfix.TCPState).Str})
}

// checkWithTshark decodes the capture with Wireshark's IPFIX dissector
// (tshark 4.0) and checks the final record there: the 5-tuple, N bytes
// within the stated overhead, the same counts our decoder read, and
// Antrea's elements. tshark does not know enterprise 56506's names: it
// shows the template's fields as PEN 56506 with their ids, and the
// values as raw enterprise entries (the strings' bytes), which is what
// is checked. It shows packetTotalCount/octetTotalCount (85, 86) as
// "permanent" packets/octets, the reverse ones (PEN 29305) under the same
// names, after the forward ones.
func checkWithTshark(t *testing.T, pcap string, port int, clientPort string, final tsharkWant) {
	t.Helper()
	fields := []string{"cflow.srcaddr", "cflow.dstaddr", "cflow.srcport", "cflow.dstport", "cflow.protocol",
		"cflow.permanent_packets", "cflow.permanent_octets", "cflow.flow_end_reason", "cflow.enterprise_private_entry",
		"cflow.template_ipfix_field_pen", "cflow.template_ipfix_field_type_enterprise"}
	args := []string{"-r", pcap, "-d", fmt.Sprintf("udp.port==%d,cflow", port), "-T", "fields",
		"-E", "occurrence=a", "-E", "aggregator=|", "-E", "separator=/t"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command("tshark", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	type packet map[string][]string
	var packets []packet
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		cols := strings.Split(line, "\t")
		p := packet{}
		for i, f := range fields {
			if i < len(cols) && cols[i] != "" {
				for _, v := range strings.Split(cols[i], "|") {
					p[f] = append(p[f], strings.ReplaceAll(v, ":", ""))
				}
			}
		}
		packets = append(packets, p)
	}
	has := func(p packet, f, v string) bool {
		for _, x := range p[f] {
			if x == v {
				return true
			}
		}
		return false
	}
	var template, rec packet
	for _, p := range packets {
		if has(p, "cflow.template_ipfix_field_pen", "56506") {
			template = p
		}
		if has(p, "cflow.srcport", clientPort) && has(p, "cflow.permanent_octets", fmt.Sprint(final.octets)) &&
			has(p, "cflow.flow_end_reason", fmt.Sprint(final.reason)) {
			rec = p
		}
	}
	if template == nil {
		t.Fatalf("tshark found no template with Antrea's enterprise number in %d messages:\n%s", len(packets), out)
	}
	for _, id := range []string{"100", "101", "102", "103", "104", "109", "136", "137"} {
		if !has(template, "cflow.template_ipfix_field_type_enterprise", id) {
			t.Errorf("tshark: the template has no Antrea element %s", id)
		}
	}
	if rec == nil {
		t.Fatalf("tshark found no record of port %s with %d bytes (reason %d) in %d messages",
			clientPort, final.octets, final.reason, len(packets))
	}
	t.Logf("tshark's record: %v", rec)
	for f, v := range map[string]string{"cflow.srcaddr": "10.10.1.2", "cflow.dstaddr": "10.10.1.3",
		"cflow.dstport": "5001", "cflow.protocol": "6"} {
		if !has(rec, f, v) {
			t.Errorf("tshark: %s is %v, want %s", f, rec[f], v)
		}
	}
	// The first permanent (total) counts are the forward ones; check them
	// against N on their own, not only against our decoder.
	var pk, oc uint64
	if len(rec["cflow.permanent_packets"]) != 2 || len(rec["cflow.permanent_octets"]) != 2 {
		t.Fatalf("tshark: totals %v %v, want forward and reverse", rec["cflow.permanent_packets"], rec["cflow.permanent_octets"])
	}
	fmt.Sscan(rec["cflow.permanent_packets"][0], &pk)
	fmt.Sscan(rec["cflow.permanent_octets"][0], &oc)
	if oc < final.n+40*pk || oc > final.n+80*pk {
		t.Errorf("tshark: forward %d bytes in %d packets, want N=%d plus 40 to 80 per packet", oc, pk, final.n)
	}
	if rec["cflow.permanent_octets"][1] != fmt.Sprint(final.roctets) || pk != final.pkts {
		t.Errorf("tshark: totals %v/%v, our decoder read %d packets, reverse %d bytes",
			rec["cflow.permanent_packets"], rec["cflow.permanent_octets"], final.pkts, final.roctets)
	}
	for _, s := range []string{"a", "b", "flows", "node-1", final.state} {
		if !has(rec, "cflow.enterprise_private_entry", hex.EncodeToString([]byte(s))) {
			t.Errorf("tshark: no enterprise entry holding %q in %v", s, rec["cflow.enterprise_private_entry"])
		}
	}
	if !has(rec, "cflow.enterprise_private_entry", "01") {
		t.Errorf("tshark: no flowType 1 (intra-node) among %v", rec["cflow.enterprise_private_entry"])
	}
}

// tsharkWant is what the final record must hold.
type tsharkWant struct {
	n, pkts, octets, roctets uint64
	reason                   uint64
	state                    string
}

// BenchmarkDpctlSourceOnOVS1000 is one poll of a real bridge's conntrack
// (ovs-appctl dpctl/dump-conntrack and the parse) holding 1,000 UDP
// connections from pod a to pod b, one per source port.
func BenchmarkDpctlSourceOnOVS1000(b *testing.B) {
	br, a, _, _ := twoPodNode(b)
	var err error
	const conns = 1000
	src := &DpctlSource{RunDir: br.Dir(), Datapath: "netdev@ovs-netdev", Zones: []uint16{agentof.CtZone}}
	if err := a.Do(b, func() error {
		for i := range conns {
			c, err := net.DialUDP("udp4", &net.UDPAddr{Port: 20000 + i}, &net.UDPAddr{IP: net.ParseIP("10.10.1.3"), Port: 9})
			if err != nil {
				return err
			}
			_, _ = c.Write([]byte("x"))
			c.Close()
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	var got []Connection
	for range 100 { // bounded: the last datagrams are still crossing
		if got, err = src.Connections(context.Background()); err != nil {
			b.Fatal(err)
		}
		if len(got) >= conns {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(got) < conns {
		b.Fatalf("%d connections in conntrack, want %d", len(got), conns)
	}
	b.ResetTimer()
	for range b.N {
		if got, err = src.Connections(context.Background()); err != nil || len(got) < conns {
			b.Fatalf("%d connections: %v", len(got), err)
		}
	}
	b.ReportMetric(float64(len(got)), "conns")
}

// An agent that restarts while ovs-vswitchd keeps running gives OVS a new
// target: its feed must decode OVS's records again within seconds (OVS
// sends its templates to a new exporter at once, but to an existing one
// only every 10 minutes: Configure clears the export first).
func TestTheCountsComeBackAfterTheAgentRestarts(t *testing.T) {
	br, a, b, _ := twoPodNode(t)
	var ln net.Listener
	inNetNS(t, b.NS, func() error {
		var err error
		ln, err = net.Listen("tcp4", ":5002")
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	// counted waits until feed decoded records of a's connections to b.
	counted := func(feed *OVSIPFIXFeed, what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for feed.Records.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the feed decoded no record in 20s", what)
			}
			if c, err := a.Dial(t, "tcp4", "10.10.1.3:5002", 5*time.Second); err == nil {
				_, _ = c.Write([]byte("x"))
				c.Close()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	run := func() (*OVSIPFIXFeed, context.CancelFunc) {
		var feed *OVSIPFIXFeed
		inNetNS(t, br.NetNS(), func() error {
			var err error
			feed, err = ListenOVSIPFIX("127.0.0.1:0", 1000)
			return err
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); feed.Run(ctx) }()
		if err := (BridgeIPFIX{RunDir: br.Dir(), Bridge: "br-int", Target: feed.Addr(), CacheActiveTimeout: 1,
			CacheMaxFlows: 1000}).Configure(ctx); err != nil {
			t.Fatal(err)
		}
		return feed, func() { cancel(); <-done }
	}
	first, stop := run()
	counted(first, "the first agent")
	stop() // the agent dies without clearing the bridge's export
	second, stop2 := run()
	defer stop2()
	counted(second, "the restarted agent")
}
