package flowaggregator

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"antrea.io/antrea/pkg/agent/flowexporter"
	"antrea.io/antrea/pkg/ipfix"
)

// writePcap writes datagrams as UDP packets from port 4739 to port dport
// over IPv4 on loopback, in the classic pcap format (linktype 1), so that a
// decoder reads them as a capture of the export.
func writePcap(t *testing.T, path string, dport uint16, datagrams [][]byte) {
	t.Helper()
	var b []byte
	be16 := func(v uint16) { b = binary.BigEndian.AppendUint16(b, v) }
	le32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	le32(0xa1b2c3d4)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 4)
	le32(0)
	le32(0)
	le32(65535)
	le32(1) // Ethernet
	for i, d := range datagrams {
		frame := 14 + 20 + 8 + len(d)
		le32(uint32(1700000000 + i))
		le32(0)
		le32(uint32(frame))
		le32(uint32(frame))
		b = append(b, make([]byte, 12)...) // MACs
		be16(0x0800)
		ip := len(b)
		b = append(b, 0x45, 0)
		be16(uint16(20 + 8 + len(d)))
		b = append(b, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1)
		var sum uint32
		for j := 0; j < 20; j += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[ip+j:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		binary.BigEndian.PutUint16(b[ip+10:], ^uint16(sum))
		be16(4739)
		be16(dport)
		be16(uint16(8 + len(d)))
		be16(0) // no UDP checksum
		b = append(b, d...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTsharkDecodesTheAggregatedExport joins two agents' records of a
// transfer, exports the record over UDP with IPFIXExporter, and has
// Wireshark's IPFIX dissector (tshark, written elsewhere) decode the
// datagrams: the 5-tuple, the counts and Antrea's elements (by enterprise
// number and id: tshark 4.0 does not know 56506's names, which are
// upstream's registry's for these ids) must be what the agents sent.
func TestTsharkDecodesTheAggregatedExport(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("no tshark (apt-get install tshark)")
	}
	sink, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	cfg := DefaultConfig()
	cfg.FlowCollector.Enable, cfg.FlowCollector.Address = true, sink.LocalAddr().String()+":udp"
	logPath := filepath.Join(t.TempDir(), "flows.log")
	cfg.FlowLogger.Enable, cfg.FlowLogger.Path = true, logPath
	r := startForTest(t, cfg)
	const n = 1_000_000
	sendAgent(t, r.TCPAddr, agentRecord{srcPort: 40000, srcPod: "a", node: "node-1", bytes: n + 52*700, packets: 700,
		delta: n + 52*700, flowType: ipfix.FlowTypeToExternal, service: "ns/svc:http", srcLabels: `{"app":"a"}`})
	sendAgent(t, r.TCPAddr, agentRecord{srcPort: 40000, dstPod: "b", node: "node-2", bytes: n + 52*700, packets: 700,
		delta: n + 52*700, flowType: ipfix.FlowTypeFromExternal, dstLabels: `{"app":"b","tier":"db"}`})
	var datagrams [][]byte
	buf := make([]byte, 65535)
	_ = sink.SetReadDeadline(time.Now().Add(10 * time.Second))
	for len(datagrams) < 2 {
		k, _, err := sink.ReadFrom(buf)
		if err != nil {
			t.Fatalf("after %d datagrams: %v", len(datagrams), err)
		}
		datagrams = append(datagrams, append([]byte(nil), buf[:k]...))
	}
	pcap := filepath.Join(t.TempDir(), "export.pcap")
	dport := uint16(sink.LocalAddr().(*net.UDPAddr).Port)
	writePcap(t, pcap, dport, datagrams)
	fields := []string{"cflow.srcaddr", "cflow.dstaddr", "cflow.srcport", "cflow.dstport", "cflow.protocol",
		"cflow.permanent_packets", "cflow.permanent_octets", "cflow.enterprise_private_entry",
		"cflow.template_ipfix_field_pen", "cflow.template_ipfix_field_type_enterprise"}
	// The aggregated template has 63 fields, more than the dissector's
	// default limit of 60 (its preference cflow.max_template_fields).
	args := []string{"-r", pcap, "-d", fmt.Sprintf("udp.port==%d,cflow", dport), "-o", "cflow.max_template_fields:128", "-T", "fields",
		"-E", "occurrence=a", "-E", "aggregator=|", "-E", "separator=/t"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("tshark read %d packets, want 2 (templates, data):\n%s", len(lines), out)
	}
	col := func(line, field string) []string {
		cols := strings.Split(line, "\t")
		for i, f := range fields {
			if f == field && i < len(cols) && cols[i] != "" {
				return strings.Split(strings.ReplaceAll(cols[i], ":", ""), "|")
			}
		}
		return nil
	}
	has := func(vs []string, v string) bool {
		for _, x := range vs {
			if x == v {
				return true
			}
		}
		return false
	}
	// Upstream's aggregator elements by id: 56506/120..135 the nodes'
	// counts, 145..150 throughputs, 151..152 the nodes' flowEndSeconds.
	ids := col(lines[0], "cflow.template_ipfix_field_type_enterprise")
	for id := 100; id <= 152; id++ {
		if _, known := ipfix.Lookup(ipfix.AntreaEnterprise, uint16(id)); !known || id == 107 {
			continue
		}
		if e, _ := ipfix.Lookup(ipfix.AntreaEnterprise, uint16(id)); !has(ids, fmt.Sprint(id)) && e.Type != ipfix.IPv6Address {
			t.Errorf("tshark: the IPv4 template lacks Antrea element %d (%s)", id, e.Name)
		}
	}
	rec := lines[1]
	for f, want := range map[string]string{"cflow.srcaddr": "10.10.0.2", "cflow.dstaddr": "10.10.1.2", "cflow.srcport": "40000",
		"cflow.dstport": "5201", "cflow.protocol": "6"} {
		if got := col(rec, f); len(got) != 1 || got[0] != want {
			t.Errorf("tshark: %s = %v, want %s", f, got, want)
		}
	}
	if got := col(rec, "cflow.permanent_octets"); len(got) < 1 || got[0] != fmt.Sprint(n+52*700) {
		t.Errorf("tshark: octetTotalCount %v, want %d (N plus 52 bytes of IP and TCP headers for each of 700 packets)", got, n+52*700)
	}
	if got := col(rec, "cflow.permanent_packets"); len(got) < 1 || got[0] != "700" {
		t.Errorf("tshark: packetTotalCount %v, want 700", got)
	}
	entries := col(rec, "cflow.enterprise_private_entry")
	for _, s := range []string{"a", "b", "ns", "node-1", "node-2", "ns/svc:http", "ESTABLISHED", `{"app":"a"}`, `{"app":"b","tier":"db"}`} {
		if !has(entries, fmt.Sprintf("%x", s)) {
			t.Errorf("tshark: no Antrea entry holding %q in %v", s, entries)
		}
	}
	// flowType 2 (inter-node) and octetDeltaCountFromDestinationNode.
	if !has(entries, "02") || !has(entries, fmt.Sprintf("%016x", n+52*700)) {
		t.Errorf("tshark: no flowType 2 or no per-node octet count among %v", entries)
	}
	// The same record in the JSON-lines log.
	var logged Flow
	for range 100 {
		if b, err := os.ReadFile(logPath); err == nil && len(b) > 0 {
			sc := bufio.NewScanner(strings.NewReader(string(b)))
			sc.Scan()
			if err := json.Unmarshal(sc.Bytes(), &logged); err != nil {
				t.Fatal(err)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !logged.Correlated || logged.SrcPod != "a" || logged.DstPod != "b" {
		t.Errorf("log: %+v, want the joined record", logged)
	}
}

func TestTheLogIsRotatedAndBounded(t *testing.T) {
	dir := t.TempDir()
	l := &JSONLog{Path: filepath.Join(dir, "f.log"), MaxBytes: 2000, MaxBackups: 2, Metrics: NewMetrics()}
	defer l.close()
	for i := range 100 {
		f := sourceSide(uint64(i))
		if err := l.write([]Flow{f}); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		st, _ := os.Stat(filepath.Join(dir, e.Name()))
		if st.Size() > 2000 {
			t.Errorf("%s holds %d bytes, more than 2000", e.Name(), st.Size())
		}
	}
	if strings.Join(names, " ") != "f.log f.log.1 f.log.2" {
		t.Errorf("files %v, want f.log f.log.1 f.log.2", names)
	}
}

// BenchmarkIngestTCP feeds the aggregator agents' records over loopback TCP
// (inter-node pairs from two connections, as two agents send them) and
// waits until every pair is joined: records/s the aggregator sustains.
func BenchmarkIngestTCP(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := Start(ctx, DefaultConfig(), Listen{IPFIX: "127.0.0.1:0", API: "127.0.0.1:0"}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); r.Wait() }()
	const batch = 200
	src := make([][]ipfix.Value, batch)
	dst := make([][]ipfix.Value, batch)
	v4, _ := flowexporter.Templates()
	connect := func() (net.Conn, *ipfix.Writer) {
		c, err := net.Dial("tcp", r.TCPAddr.String())
		if err != nil {
			b.Fatal(err)
		}
		w := &ipfix.Writer{}
		if err := w.Templates(1, func(m []byte) error { _, err := c.Write(m); return err }, v4); err != nil {
			b.Fatal(err)
		}
		return c, w
	}
	c1, w1 := connect()
	defer c1.Close()
	c2, w2 := connect()
	defer c2.Close()
	b.ResetTimer()
	sent := 0
	port := 0
	for sent < b.N {
		for i := range batch {
			port++
			src[i] = agentRecord{srcPort: uint16(port), srcPod: "a", node: "node-1", bytes: 100, packets: 1, delta: 100, flowType: 3}.values()
			dst[i] = agentRecord{srcPort: uint16(port), dstPod: "b", node: "node-2", bytes: 100, packets: 1, delta: 100, flowType: 4}.values()
		}
		if err := w1.Data(1, v4, src, func(m []byte) error { _, err := c1.Write(m); return err }); err != nil {
			b.Fatal(err)
		}
		if err := w2.Data(1, v4, dst, func(m []byte) error { _, err := c2.Write(m); return err }); err != nil {
			b.Fatal(err)
		}
		sent += 2 * batch
	}
	for {
		if v := testutil.ToFloat64(r.Metrics.Correlated); int(v) >= sent/2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(sent)/b.Elapsed().Seconds(), "records/s")
}
