package flowaggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"antrea.io/antrea/pkg/agent/flowexporter"
	"antrea.io/antrea/pkg/ipfix"
)

// agentRecord is a record in the agents' template (flowexporter.Templates):
// src names the source Pod when non-empty, dst the destination Pod.
type agentRecord struct {
	srcPort               uint16
	srcPod, dstPod, node  string
	bytes, packets, delta uint64
	flowType              uint8
	service               string
	// ingress and egress are "namespace/name:rule" of the rules that
	// allowed the connection ("" none), or denied it with the action
	// ingressAction or egressAction (0: allow).
	ingress, egress             string
	ingressAction, egressAction uint8
	// srcLabels and dstLabels are the Pods' labels as JSON.
	srcLabels, dstLabels string
	// end and reason are flowEndSeconds and flowEndReason (t0+5s and 2,
	// active timeout, when zero).
	end    time.Time
	reason uint8
}

// record is r as the collector decodes it.
func (r agentRecord) record() ipfix.Record {
	v4, _ := flowexporter.Templates()
	return ipfix.Record{TemplateID: v4.ID, Fields: v4.Fields, Values: r.values()}
}

func (r agentRecord) values() []ipfix.Value {
	u, s, a := ipfix.U, ipfix.S, ipfix.A
	srcNode, dstNode := "", ""
	if r.srcPod != "" {
		srcNode = r.node
	}
	if r.dstPod != "" {
		dstNode = r.node
	}
	clusterIP := netip.IPv4Unspecified()
	port := uint64(0)
	if r.service != "" {
		clusterIP, port = netip.MustParseAddr("10.96.0.20"), 80
	}
	end, reason := r.end, r.reason
	if end.IsZero() {
		end = t0.Add(5 * time.Second)
	}
	if reason == 0 {
		reason = ipfix.EndReasonActiveTimeout
	}
	vals := []ipfix.Value{
		u(uint64(t0.Unix())), u(uint64(end.Unix())), u(uint64(reason)),
		a(netip.MustParseAddr("10.10.0.2")), a(netip.MustParseAddr("10.10.1.2")), u(uint64(r.srcPort)), u(5201), u(6),
		u(r.packets), u(r.bytes), u(r.packets), u(r.delta),
		u(r.packets / 2), u(r.packets * 52), u(r.packets / 2), u(r.packets * 52),
		s(r.srcPod), s(nsOf(r.srcPod)), s(srcNode),
		s(r.dstPod), s(nsOf(r.dstPod)), s(dstNode),
		a(clusterIP), u(port), s(r.service),
		u(uint64(r.flowType)), s("ESTABLISHED"),
		s(r.srcLabels), s(r.dstLabels),
	}
	policy := func(p string, action uint8) []ipfix.Value {
		if p == "" {
			return []ipfix.Value{s(""), s(""), u(0), s(""), u(0)}
		}
		if action == 0 {
			action = ipfix.RuleActionAllow
		}
		ref, rule, _ := strings.Cut(p, ":")
		ns, name, _ := strings.Cut(ref, "/")
		return []ipfix.Value{s(name), s(ns), u(uint64(ipfix.PolicyTypeAntreaNetworkPolicy)), s(rule), u(uint64(action))}
	}
	vals = append(vals, policy(r.ingress, r.ingressAction)...)
	return append(vals, policy(r.egress, r.egressAction)...)
}

func nsOf(pod string) string {
	if pod == "" {
		return ""
	}
	return "ns"
}

// sendAgent connects to the aggregator like an agent (TCP) and sends the
// templates and recs.
func sendAgent(t testing.TB, addr net.Addr, recs ...agentRecord) net.Conn {
	t.Helper()
	conn, err := net.Dial(addr.Network(), addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	w := &ipfix.Writer{Domain: 1}
	v4, _ := flowexporter.Templates()
	emit := func(b []byte) error { _, err := conn.Write(b); return err }
	if err := w.Templates(uint32(t0.Unix()), emit, v4); err != nil {
		t.Fatal(err)
	}
	var vals [][]ipfix.Value
	for _, r := range recs {
		vals = append(vals, r.values())
	}
	if err := w.Data(uint32(t0.Unix()), v4, vals, emit); err != nil {
		t.Fatal(err)
	}
	return conn
}

func startForTest(t *testing.T, cfg Config) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := Start(ctx, cfg, Listen{IPFIX: "127.0.0.1:0", GRPC: "127.0.0.1:0", API: "127.0.0.1:0"}, nil, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); r.Wait() })
	return r
}

// getFlows polls GET /flows?query until want(list) or 10 s pass.
func getFlows(t *testing.T, r *Running, query string, want func([]Flow) bool) []Flow {
	t.Helper()
	var last []Flow
	for range 200 {
		resp, err := http.Get(fmt.Sprintf("http://%s/flows?%s", r.APIAddr, query))
		if err != nil {
			t.Fatal(err)
		}
		var l FlowList
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		last = l.Items
		if want(last) {
			return last
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("GET /flows?%s: %+v", query, last)
	return nil
}

func TestTwoAgentsRecordsOverTCPBecomeOneRecordInTheAPI(t *testing.T) {
	cfg := DefaultConfig()
	r := startForTest(t, cfg)
	sendAgent(t, r.TCPAddr, agentRecord{srcPort: 40000, srcPod: "a", node: "node-1", bytes: 1000, packets: 10, delta: 1000,
		flowType: ipfix.FlowTypeToExternal, service: "ns/svc:http", egress: "ns/allow-out:to-b"})
	sendAgent(t, r.TCPAddr, agentRecord{srcPort: 40000, dstPod: "b", node: "node-2", bytes: 990, packets: 10, delta: 990,
		flowType: ipfix.FlowTypeFromExternal, ingress: "ns/allow-in:from-a"})
	got := getFlows(t, r, "pod=b", func(fs []Flow) bool { return len(fs) > 0 })
	if len(got) != 1 {
		t.Fatalf("%d records, want 1: %+v", len(got), got)
	}
	checkJoined(t, got)
	// 1000 bytes in the 5 s of the record.
	if got[0].Throughput != 200 {
		t.Errorf("throughput %d B/s, want 200", got[0].Throughput)
	}
	if f := got[0]; f.IngressPolicy != "ns/allow-in" || f.IngressPolicyRule != "from-a" || f.EgressPolicy != "ns/allow-out" ||
		f.EgressPolicyRule != "to-b" || f.EgressPolicyType != ipfix.PolicyTypeAntreaNetworkPolicy || f.Denied {
		t.Errorf("policies: ingress %s (%s), egress %s (%s) type %d denied %v, want the destination node's ingress rule and the source node's egress rule",
			f.IngressPolicy, f.IngressPolicyRule, f.EgressPolicy, f.EgressPolicyRule, f.EgressPolicyType, f.Denied)
	}
	if n := len(getFlows(t, r, "policy=allow-in", func(fs []Flow) bool { return len(fs) > 0 })); n != 1 {
		t.Errorf("policy=allow-in: %d records, want 1", n)
	}
	if n := len(getFlows(t, r, "policy=other", func([]Flow) bool { return true })); n != 0 {
		t.Errorf("policy=other: %d records, want 0", n)
	}
	if n := len(getFlows(t, r, "namespace=other", func([]Flow) bool { return true })); n != 0 {
		t.Errorf("namespace=other: %d records, want 0", n)
	}
	if v := testutil.ToFloat64(r.Metrics.RecordsReceived.WithLabelValues("tcp")); v != 2 {
		t.Errorf("records_received_total{tcp} %v, want 2", v)
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/flows?colour=red", r.APIAddr))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "colour") {
		t.Errorf("an unknown parameter: %s %s, want 400 naming it", resp.Status, body)
	}
}

func TestAPeerSendingGarbageIsCountedAndOthersAreStillServed(t *testing.T) {
	r := startForTest(t, DefaultConfig())
	bad, err := net.Dial("tcp", r.TCPAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	// A version 10 header announcing 40 bytes, then a set of reserved id 7.
	msg := []byte{0, 10, 0, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 24}
	msg = append(msg, make([]byte, 20)...)
	for range 3 {
		if _, err := bad.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	// Garbage over UDP too.
	u, err := net.Dial("udp", r.UDPAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	_, _ = u.Write([]byte("not ipfix"))
	sendAgent(t, r.TCPAddr, agentRecord{srcPort: 1, srcPod: "a", dstPod: "b", node: "node-1", bytes: 1, packets: 1, delta: 1,
		flowType: ipfix.FlowTypeIntraNode})
	getFlows(t, r, "pod=a", func(fs []Flow) bool { return len(fs) == 1 })
	for range 100 {
		if testutil.ToFloat64(r.Metrics.DecodeErrors.WithLabelValues("tcp")) == 3 &&
			testutil.ToFloat64(r.Metrics.DecodeErrors.WithLabelValues("udp")) == 1 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("decode errors tcp %v udp %v, want 3 and 1", testutil.ToFloat64(r.Metrics.DecodeErrors.WithLabelValues("tcp")),
		testutil.ToFloat64(r.Metrics.DecodeErrors.WithLabelValues("udp")))
}

func TestTheStreamSendsNewRecords(t *testing.T) {
	r := startForTest(t, DefaultConfig())
	resp, err := http.Get(fmt.Sprintf("http://%s/flows/stream?pod=ns/a", r.APIAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sendAgent(t, r.TCPAddr, agentRecord{srcPort: 2, srcPod: "x", dstPod: "y", node: "node-1", flowType: ipfix.FlowTypeIntraNode},
		agentRecord{srcPort: 3, srcPod: "a", dstPod: "b", node: "node-1", bytes: 7, packets: 1, delta: 7, flowType: ipfix.FlowTypeIntraNode})
	var f Flow
	if err := json.NewDecoder(resp.Body).Decode(&f); err != nil {
		t.Fatal(err)
	}
	if f.SrcPod != "a" || f.SrcPort != 3 {
		t.Errorf("streamed %+v, want the record of pod a (the filter drops x)", f)
	}
}

func FuzzCollectorMessage(f *testing.F) {
	w := &ipfix.Writer{}
	v4, _ := flowexporter.Templates()
	var msgs [][]byte
	keep := func(b []byte) error { msgs = append(msgs, append([]byte(nil), b...)); return nil }
	_ = w.Templates(1, keep, v4)
	_ = w.Data(1, v4, [][]ipfix.Value{agentRecord{srcPort: 1, srcPod: "a", node: "n", flowType: 3}.values()}, keep)
	f.Add(msgs[1])
	f.Add(msgs[0])
	f.Fuzz(func(t *testing.T, b []byte) {
		m := NewMetrics()
		agg := NewAggregator(time.Second, time.Minute, 2*time.Minute, nil, NewStore(16), m)
		c := &collector{ingest: agg.Ingest, metrics: m}
		s := ipfix.NewSession()
		logged := false
		c.handle(s, msgs[0], "tcp", "fuzz", &logged)
		c.handle(s, b, "tcp", "fuzz", &logged)
		agg.Expire()
		_, _ = ipfix.ReadMessage(strings.NewReader(string(b)), nil)
	})
}

// A connection an ingress rule of the destination Node dropped joins the
// source Node's record (the source Node committed it) and is denied, naming
// the rule; one an egress rule of the source Node rejected never reaches the
// destination Node and is released at once, without waiting for a partner.
// The Pods' labels are kept from each side.
func TestDeniedRecordsNameTheRuleAndKeepTheLabels(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CorrelationWait = "1h"
	r := startForTest(t, cfg)
	sendAgent(t, r.TCPAddr, agentRecord{srcPort: 40001, srcPod: "a", node: "node-1", bytes: 60, packets: 1, delta: 60,
		flowType: ipfix.FlowTypeToExternal, srcLabels: `{"app":"client"}`})
	sendAgent(t, r.TCPAddr, agentRecord{srcPort: 40001, dstPod: "b", node: "node-2", bytes: 60, packets: 1, delta: 60,
		flowType: ipfix.FlowTypeFromExternal, ingress: "ns/deny-a:drop-a", ingressAction: ipfix.RuleActionDrop,
		dstLabels: `{"app":"server","tier":"db"}`})
	sendAgent(t, r.TCPAddr, agentRecord{srcPort: 40002, srcPod: "a", node: "node-1", bytes: 60, packets: 1, delta: 60,
		flowType: ipfix.FlowTypeToExternal, egress: "ns/no-out:reject-all", egressAction: ipfix.RuleActionReject,
		srcLabels: `{"app":"client"}`})
	got := getFlows(t, r, "denied=true", func(fs []Flow) bool { return len(fs) == 2 })
	byPort := map[uint16]Flow{}
	for _, f := range got {
		byPort[f.SrcPort] = f
	}
	in, out := byPort[40001], byPort[40002]
	if !in.Correlated || !in.Denied || in.IngressPolicy != "ns/deny-a" || in.IngressPolicyRule != "drop-a" ||
		in.IngressPolicyAction != ipfix.RuleActionDrop || in.SrcPod != "a" || in.DstPod != "b" {
		t.Errorf("ingress drop: %+v, want the joined record naming ns/deny-a drop-a, action drop", in)
	}
	if in.SrcLabels["app"] != "client" || in.DstLabels["app"] != "server" || in.DstLabels["tier"] != "db" {
		t.Errorf("labels %v and %v, want each Pod's", in.SrcLabels, in.DstLabels)
	}
	if out.Correlated || !out.Denied || out.EgressPolicy != "ns/no-out" || out.EgressPolicyAction != ipfix.RuleActionReject {
		t.Errorf("egress reject: %+v, want the source Node's record alone, naming ns/no-out, action reject", out)
	}
	if n := len(getFlows(t, r, "denied=false", func([]Flow) bool { return true })); n != 2 {
		t.Errorf("denied=false lists %d records, want both", n)
	}
}
