package flowexporter

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

func benchRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		c := conn(uint16(10000+i), Counts{uint64(1000 + i), uint64(1_000_000 + i)}, Counts{500, 30000})
		c.Reply.Src = netip.MustParseAddr("10.10.2.7")
		c.TCPState = "ESTABLISHED"
		recs[i] = Record{Connection: c, Start: time.Unix(1700000000, 0), End: time.Unix(1700000005, 0),
			OrigDelta: Counts{10, 15000}, ReplyDelta: Counts{5, 300}, EndReason: ipfix.EndReasonActiveTimeout,
			SrcPod: "frontend-7d9c8b6f5-x2x7q", SrcNamespace: "demo", DstPod: "web-5f8d7c9b4-abcde", DstNamespace: "demo",
			ServicePortName: "demo/web:http", FlowType: ipfix.FlowTypeInterNode}
	}
	return recs
}

// BenchmarkExportUDP sends records as the sender does (values, IPFIX data
// sets of at most 1400 bytes, one UDP datagram each) to a socket on
// loopback; in the same run it encodes them without sending, and with
// json.Marshal, the reference: it reports records/s of each and the
// ratios to json.Marshal.
func BenchmarkExportUDP(b *testing.B) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	_ = pc.(*net.UDPConn).SetReadBuffer(8 << 20)
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	conn, err := net.Dial("udp4", pc.LocalAddr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	var ipfixBytes int
	write := func(m []byte) error { ipfixBytes += len(m); _, err := conn.Write(m); return err }
	v4, _ := Templates()
	recs := benchRecords(100)
	w := &ipfix.Writer{MaxLen: maxUDPMessage}
	vals := make([][]ipfix.Value, len(recs))
	var ipfixTime, encodeTime, jsonTime time.Duration
	discard := func([]byte) error { return nil }
	var jsonBytes int
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		for i := range recs {
			vals[i] = recs[i].values(vals[i][:0], "node-1")
		}
		if err := w.Data(uint32(start.Unix()), v4, vals, write); err != nil {
			b.Fatal(err)
		}
		ipfixTime += time.Since(start)
		start = time.Now()
		for i := range recs {
			vals[i] = recs[i].values(vals[i][:0], "node-1")
		}
		if err := w.Data(uint32(start.Unix()), v4, vals, discard); err != nil {
			b.Fatal(err)
		}
		encodeTime += time.Since(start)
		start = time.Now()
		for i := range recs {
			out, err := json.Marshal(&recs[i])
			if err != nil {
				b.Fatal(err)
			}
			jsonBytes += len(out)
		}
		jsonTime += time.Since(start)
	}
	n := float64(b.N * len(recs))
	b.ReportMetric(n/ipfixTime.Seconds(), "ipfix+udp-rec/s")
	b.ReportMetric(n/encodeTime.Seconds(), "ipfix-encode-rec/s")
	b.ReportMetric(n/jsonTime.Seconds(), "json-marshal-rec/s")
	b.ReportMetric(jsonTime.Seconds()/encodeTime.Seconds(), "encode-speed/json-speed")
	b.ReportMetric(jsonTime.Seconds()/ipfixTime.Seconds(), "ipfix-speed/json-speed")
	b.ReportMetric(float64(jsonBytes)/n, "json-bytes/rec")
	b.ReportMetric(float64(ipfixBytes)/n, "ipfix-bytes/rec")
}

// dpctlLines returns n conntrack entries as OVS's userspace datapath
// prints them (the shape of TestParseDpctlReadsUserspaceAndKernelEntries's
// first line).
func dpctlLines(n int) []byte {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "tcp,orig=(src=10.10.%d.%d,dst=10.10.1.3,sport=%d,dport=8080),reply=(src=10.10.1.3,dst=10.10.%d.%d,sport=8080,dport=%d),id=0,zone=65520,status=0,timeout=86399,protoinfo=(state_orig=ESTABLISHED,state_reply=ESTABLISHED,wscale_orig=10,wscale_reply=10,flags_orig=WINDOW_SCALE,flags_reply=WINDOW_SCALE)\n",
			i/250, i%250+2, 10000+i, i/250, i%250+2, 10000+i)
	}
	return []byte(sb.String())
}

// BenchmarkParseDpctl1000 parses 1,000 entries.
func BenchmarkParseDpctl1000(b *testing.B) {
	out := dpctlLines(1000)
	b.SetBytes(int64(len(out)))
	for range b.N {
		if conns, _ := ParseDpctl(out); len(conns) != 1000 {
			b.Fatalf("%d entries", len(conns))
		}
	}
}

// BenchmarkPoll1000 is one poll's work after ovs-appctl returned, for
// 1,000 entries: parsing, the store's update and the due records.
func BenchmarkPoll1000(b *testing.B) {
	out := dpctlLines(1000)
	s := NewStore(65536)
	now := time.Unix(1700000000, 0)
	b.SetBytes(int64(len(out)))
	b.ResetTimer()
	for i := range b.N {
		conns, skipped := ParseDpctl(out)
		if len(conns) != 1000 || skipped != 0 {
			b.Fatalf("%d entries, %d skipped", len(conns), skipped)
		}
		t := now.Add(time.Duration(i) * time.Second)
		s.Update(conns, t)
		s.Due(t, 5*time.Second, 15*time.Second)
	}
}
