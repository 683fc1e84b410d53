package flowexporter

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

func deniedSYN(srcPort uint16, at time.Time) DeniedPacket {
	return DeniedPacket{
		Tuple: Tuple{Proto: 6, Src: netip.MustParseAddr("10.10.1.2"), Dst: netip.MustParseAddr("10.10.2.5"), SrcPort: srcPort, DstPort: 80},
		Bytes: 60, Ingress: true, Time: at,
		Rule: PolicyRule{Type: ipfix.PolicyTypeAntreaClusterNetwork, Name: "deny-web", Rule: "drop-client", Action: ipfix.RuleActionDrop},
	}
}

// A denied connection gets a record at the first poll after its first
// packet, then one per active timeout while its client retries, and is
// forgotten after the idle timeout without packets (with a last record only
// when packets came since its previous one).
func TestDeniedConnectionsAreExportedAtOnceThenAtTheActiveTimeout(t *testing.T) {
	s := NewDenyStore(10)
	t0 := time.Unix(1_000_000, 0)
	const active, idle = 5 * time.Second, 15 * time.Second
	s.Add(deniedSYN(40000, t0))
	recs := s.Due(t0.Add(time.Second), active, idle)
	if len(recs) != 1 {
		t.Fatalf("%d records at the first poll, want 1", len(recs))
	}
	r := recs[0]
	if !r.Denied || r.Ingress.Name != "deny-web" || r.Ingress.Rule != "drop-client" || r.Ingress.Action != ipfix.RuleActionDrop ||
		r.Egress != (PolicyRule{}) || r.OrigCounts != (Counts{1, 60}) || r.OrigDelta != (Counts{1, 60}) ||
		r.Reply.Src != netip.MustParseAddr("10.10.2.5") || r.Orig.SrcPort != 40000 || r.EndReason != ipfix.EndReasonActiveTimeout {
		t.Fatalf("record %+v", r)
	}
	// Retransmissions: nothing before the active timeout, then their delta.
	s.Add(deniedSYN(40000, t0.Add(2*time.Second)))
	s.Add(deniedSYN(40000, t0.Add(4*time.Second)))
	if recs := s.Due(t0.Add(4*time.Second), active, idle); len(recs) != 0 {
		t.Fatalf("records before the active timeout: %+v", recs)
	}
	recs = s.Due(t0.Add(6*time.Second), active, idle)
	if len(recs) != 1 || recs[0].OrigCounts != (Counts{3, 180}) || recs[0].OrigDelta != (Counts{2, 120}) {
		t.Fatalf("at the active timeout: %+v, want totals 3/180, delta 2/120", recs)
	}
	if recs := s.Due(t0.Add(12*time.Second), active, idle); len(recs) != 0 {
		t.Fatalf("a record without new packets: %+v", recs)
	}
	if recs := s.Due(t0.Add(20*time.Second), active, idle); len(recs) != 0 || s.Stats().Connections != 0 {
		t.Fatalf("after the idle timeout: records %+v, %d connections held, want none", recs, s.Stats().Connections)
	}
}

// The store holds at most its bound: a new connection beyond drops the
// oldest, counted; packets are counted whatever happens to them.
func TestTheDenyStoreIsBounded(t *testing.T) {
	s := NewDenyStore(3)
	t0 := time.Unix(1_000_000, 0)
	for i := range 5 {
		s.Add(deniedSYN(uint16(40000+i), t0.Add(time.Duration(i)*time.Millisecond)))
	}
	st := s.Stats()
	if st.Connections != 3 || st.Evicted != 2 || st.Packets != 5 {
		t.Fatalf("stats %+v, want 3 held, 2 evicted, 5 packets", st)
	}
	ports := map[uint16]bool{}
	for _, r := range s.Due(t0.Add(time.Second), time.Second, time.Minute) {
		ports[r.Orig.SrcPort] = true
	}
	if !ports[40002] || !ports[40003] || !ports[40004] || len(ports) != 3 {
		t.Fatalf("exported ports %v, want the 3 newest", ports)
	}
}

// A Service connection a rule denied after DNAT is exported with the
// address the client dialled as its destination and the endpoint as the
// reply's source, as conntrack would have it.
func TestADeniedServiceConnectionKeepsTheAddressDialled(t *testing.T) {
	s := NewDenyStore(10)
	p := deniedSYN(40000, time.Unix(1_000_000, 0))
	p.ServiceIP, p.ServicePort = netip.MustParseAddr("10.96.0.10"), 8080
	p.Ingress = false
	p.Rule.Action = ipfix.RuleActionReject
	s.Add(p)
	r := s.Due(p.Time.Add(time.Second), time.Second, time.Minute)[0]
	if r.Orig.Dst != netip.MustParseAddr("10.96.0.10") || r.Orig.DstPort != 8080 || r.Reply.Src != p.Tuple.Dst ||
		r.Reply.SrcPort != 80 || !r.isDNAT() || r.Egress.Action != ipfix.RuleActionReject || r.Ingress != (PolicyRule{}) {
		t.Fatalf("record %+v", r)
	}
}

type fakeLabels map[string]string

func (l fakeLabels) PodLabels(ns, name string) (map[string]string, bool) {
	v, ok := l[ns+"/"+name]
	if !ok {
		return nil, false
	}
	m := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(kv, "=")
		m[k] = val
	}
	return m, true
}

// The exporter sends a denied connection's record with the rule that denied
// it in upstream's elements (ingressNetworkPolicyRuleAction 2, the policy's
// and rule's names), and the local Pods' labels.
func TestExporterSendsDeniedConnectionsWithTheRuleAndLabels(t *testing.T) {
	out := make(chan ipfix.Record, 100)
	addr, _ := tcpCollector(t, "127.0.0.1:0", out)
	e, err := New(Config{NodeName: "node-2", Collector: addr, Protocol: "tcp", PollInterval: 20 * time.Millisecond,
		ActiveTimeout: time.Second, IdleTimeout: time.Minute}, &fakeSource{}, nil,
		fakePods{netip.MustParseAddr("10.10.2.5"): {"web", "server"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetLabels(fakeLabels{"web/server": "app=web"})
	runExporter(t, e)
	p := deniedSYN(40000, time.Now())
	p.Allowed = PolicyRule{Type: ipfix.PolicyTypeK8s, Namespace: "client-ns", Name: "allow-out", Action: ipfix.RuleActionAllow}
	e.Deny(p)
	r := waitRecord(t, out, "of the denied connection", func(ipfix.Record) bool { return true })
	want := map[ipfix.Element]ipfix.Value{
		ipfix.SourceTransportPort:            ipfix.U(40000),
		ipfix.PacketTotalCount:               ipfix.U(1),
		ipfix.OctetTotalCount:                ipfix.U(60),
		ipfix.DestinationPodName:             ipfix.S("server"),
		ipfix.DestinationPodLabels:           ipfix.S(`{"app":"web"}`),
		ipfix.SourcePodLabels:                ipfix.S(""),
		ipfix.FlowType:                       ipfix.U(uint64(ipfix.FlowTypeFromExternal)),
		ipfix.IngressNetworkPolicyName:       ipfix.S("deny-web"),
		ipfix.IngressNetworkPolicyType:       ipfix.U(uint64(ipfix.PolicyTypeAntreaClusterNetwork)),
		ipfix.IngressNetworkPolicyRuleName:   ipfix.S("drop-client"),
		ipfix.IngressNetworkPolicyRuleAction: ipfix.U(uint64(ipfix.RuleActionDrop)),
		ipfix.EgressNetworkPolicyName:        ipfix.S("allow-out"),
		ipfix.EgressNetworkPolicyNamespace:   ipfix.S("client-ns"),
		ipfix.EgressNetworkPolicyRuleAction:  ipfix.U(uint64(ipfix.RuleActionAllow)),
	}
	for el, v := range want {
		got, ok := r.Get(el)
		if !ok || got.Uint != v.Uint || got.Str != v.Str {
			t.Errorf("%s = %+v (present %v), want %+v", el, got, ok, v)
		}
	}
	if st := e.Stats().Denied; st.Packets != 1 || st.Connections != 1 {
		t.Errorf("denied stats %+v", st)
	}
}
