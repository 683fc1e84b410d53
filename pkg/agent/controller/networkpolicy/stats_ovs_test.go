package networkpolicy

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/agent/stats"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// ruleSessions returns the per-rule stats of the policy with uid in a
// summary (nil summary: none).
func ruleStatsOf(s *cpv1beta2.NodeStatsSummary, uid types.UID) map[string]statsv1alpha1.TrafficStats {
	out := map[string]statsv1alpha1.TrafficStats{}
	if s == nil {
		return out
	}
	for _, ps := range s.AntreaClusterNetworkPolicies {
		if ps.NetworkPolicy.UID == uid {
			for _, r := range ps.RuleTrafficStats {
				out[r.Name] = r.TrafficStats
			}
		}
	}
	return out
}

// connect makes n TCP connections from c to web:8080 and returns what each
// saw ("web" or "timeout").
func (n *policyNode) connect(t *testing.T, c *bridgetest.Pod, times int) []string {
	t.Helper()
	var got []string
	for range times {
		got = append(got, n.tcpOutcome(t, c))
	}
	return got
}

// echoPort is where web echoes in the stats tests.
const echoPort = "9000"

// dialEcho opens a TCP connection from c to web's echo port, without
// keepalives (an idle connection sends nothing the tests did not send).
func (n *policyNode) dialEcho(t *testing.T, c *bridgetest.Pod) *net.TCPConn {
	t.Helper()
	conn, err := c.Dial(t, "tcp4", net.JoinHostPort(n.web.IP.String(), echoPort), 2*time.Second)
	if err != nil {
		t.Fatalf("connect from %s to web's echo: %v", c.Name, err)
	}
	tc := conn.(*net.TCPConn)
	if err := tc.SetKeepAlive(false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	return tc
}

// echo sends size random bytes on conn and reads them back: size payload
// bytes each way.
func echo(t *testing.T, conn net.Conn, size int) {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	sent := make([]byte, size)
	_, _ = rand.Read(sent)
	errc := make(chan error, 1)
	go func() {
		_, err := conn.Write(sent)
		errc <- err
	}()
	got := make([]byte, size)
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("read back %d bytes: %v", size, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("send %d bytes: %v", size, err)
	}
	if !bytes.Equal(sent, got) {
		t.Fatal("the echo differs from what was sent")
	}
}

// maxSegment is the most TCP payload one packet carries between the test
// pods (1,500-byte MTU, TCP timestamps, no offload in the pods): a
// transfer of n bytes each way is at least 2n/maxSegment packets.
const maxSegment = 1448

// The stats collector on a real node counts whole connections, as
// upstream Antrea does: an ACNP in front of web with an Allow rule (from
// a) and a Drop rule (from b), and an ACNP on a with an egress Allow rule
// to web. Real TCP connections that echo a known number of bytes go
// through the bridge: both Allow rules count each connection once
// (sessions) and every packet of it in both directions (at least the
// payload bytes sent each way), the same figures for both; the Drop rule
// counts the dropped SYNs. An update of the policy that keeps the Allow
// rule keeps its counters going: what a long connection moved before and
// after the update is all reported. Removing and re-adding the policy
// reinstalls its flows (counters from zero): the next report counts only
// what came after, not a negative or wrapped number.
func TestStatsCollectorCountsWholeConnectionsFromRealFlowCounters(t *testing.T) {
	n := newPolicyNode(t)
	a, b := n.a, n.b
	n.web.ServeEcho(t, 9000)
	uid, egressUID := types.UID("acnp-uid"), types.UID("acnp-egress-uid")
	acnp := func(extra ...cpv1beta2.NetworkPolicyRule) *cpv1beta2.NetworkPolicy {
		allowA, dropB := ingressFrom(allow, "ag-a"), ingressFrom(drop, "ag-b")
		allowA.Name, dropB.Name = "allow-a", "drop-b"
		p := antreaPolicy("acnp", tierApplication, 1, "atg-web", append([]cpv1beta2.NetworkPolicyRule{allowA, dropB}, extra...)...)
		p.SourceRef.UID = uid
		return p
	}
	egress := antreaPolicy("acnp-egress", tierApplication, 2, "atg-a", cpv1beta2.NetworkPolicyRule{Direction: cpv1beta2.DirectionOut,
		Action: ptr(allow), Name: "to-web", To: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag-web"}}})
	egress.SourceRef.UID = egressUID
	n.set(t, acnp(), egress)
	n.expect(t, "the policy allows a and drops b", map[*bridgetest.Pod]string{a: "web", b: "timeout"})

	c := stats.NewCollector("node-1", time.Minute, n.ctl, n.flows, nil)
	ctx := context.Background()
	// OVS adds the packets of cached datapath flows to the OpenFlow
	// counters when its revalidators run (every 500 ms): wait for a
	// round before each collection, so it sees every packet sent.
	collect := func() (in, out map[string]statsv1alpha1.TrafficStats) {
		t.Helper()
		if _, err := n.br.Appctl("revalidator/wait"); err != nil {
			t.Fatal(err)
		}
		s, err := c.Collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ruleStatsOf(s, uid), ruleStatsOf(s, egressUID)
	}
	if in, _ := collect(); len(in) != 0 {
		t.Fatalf("baseline: %+v, want nothing", in)
	}
	// wholeConnections checks an Allow rule's report of conns connections
	// that moved size payload bytes each way.
	wholeConnections := func(what, rule string, got statsv1alpha1.TrafficStats, conns, size int64) {
		t.Helper()
		// A retransmitted SYN would be one more session.
		if got.Sessions < conns || got.Sessions > conns+2 {
			t.Errorf("%s: %s counted %d sessions, want the %d connections", what, rule, got.Sessions, conns)
		}
		if got.Bytes < 2*size || got.Packets < 2*size/maxSegment {
			t.Errorf("%s: %s counted %d packets and %d bytes, want every packet both ways: at least %d packets and the %d payload bytes",
				what, rule, got.Packets, got.Bytes, 2*size/maxSegment, 2*size)
		}
	}

	// Three connections of 100 kB each way; the first one stays open.
	const size = 100_000
	long := n.dialEcho(t, a)
	echo(t, long, size)
	for range 2 {
		conn := n.dialEcho(t, a)
		echo(t, conn, size)
		conn.Close()
	}
	in, out := collect()
	t.Logf("3 connections from a, %d bytes each way: %+v; egress %+v", size, in, out)
	wholeConnections("3 connections from a", "allow-a", in["allow-a"], 3, 3*size)
	wholeConnections("3 connections from a", "to-web (a's egress)", out["to-web"], 3, 3*size)
	if in["allow-a"] != out["to-web"] {
		t.Errorf("every packet of a's connections crosses both metric tables once, but allow-a counted %+v and to-web %+v",
			in["allow-a"], out["to-web"])
	}
	if got := in["drop-b"]; got != (statsv1alpha1.TrafficStats{}) {
		t.Errorf("drop-b saw no traffic but counted %+v", got)
	}

	const fromB = 3
	for i, got := range n.connect(t, b, fromB) {
		if got != "timeout" {
			t.Fatalf("connection %d from b: %s, want timeout", i, got)
		}
	}
	in, _ = collect()
	t.Logf("after %d connections from b: %+v", fromB, in)
	if got := in["drop-b"]; got.Sessions < fromB || got.Packets != got.Sessions || got.Bytes < 40*got.Packets {
		t.Errorf("after %d connections from b, drop-b counted %+v; want at least %d sessions, one dropped SYN (40 bytes or more) each",
			fromB, got, fromB)
	}
	if got := in["allow-a"]; got != (statsv1alpha1.TrafficStats{}) {
		t.Errorf("allow-a saw no new traffic but counted %+v", got)
	}

	// An update that keeps allow-a (a rule added after it): the long
	// connection moves data before and after it, and one collection after
	// the update reports both, so the counters went on across the update.
	echo(t, long, size)
	extra := ingressFrom(allow, "ag-b")
	extra.Name = "allow-b-after-drop"
	n.set(t, acnp(extra), egress)
	waitFor(t, "the updated policy realized", func() bool {
		for _, r := range n.ctl.RealizedRules() {
			if r.Name == extra.Name {
				return true
			}
		}
		return false
	})
	echo(t, long, size)
	in, out = collect()
	t.Logf("the long connection, %d bytes each way before and after the update: %+v; egress %+v", size, in, out)
	if got := in["allow-a"]; got.Sessions != 0 || got.Bytes < 2*2*size || got.Packets < 2*2*size/maxSegment {
		t.Errorf("allow-a counted %+v across the update, want no new session and every packet of both transfers: at least %d packets and %d bytes",
			got, 2*2*size/maxSegment, 2*2*size)
	}
	if in["allow-a"] != out["to-web"] {
		t.Errorf("across the update allow-a counted %+v, to-web %+v: want the same packets", in["allow-a"], out["to-web"])
	}
	long.Close()

	// Reinstall: the policy goes and comes back (its flows start from zero).
	n.set(t, egress)
	n.expect(t, "without the policy b reaches web", map[*bridgetest.Pod]string{b: "web"})
	n.set(t, acnp(), egress)
	n.expect(t, "the policy is back", map[*bridgetest.Pod]string{b: "timeout"})
	collect() // the expect probes above, counted from zero
	const again = 2
	for range again {
		conn := n.dialEcho(t, a)
		echo(t, conn, size)
		conn.Close()
	}
	in, _ = collect()
	t.Logf("after the flows were reinstalled and %d connections from a: %+v", again, in)
	wholeConnections("after the flows were reinstalled", "allow-a", in["allow-a"], again, again*size)
}

// TestStatsCollectionCost (ANTREA_MEASURE=1) measures one collection on a
// real bridge holding 1,000 rules: the flow-stats request of their
// conj_id flows and the summary.
func TestStatsCollectionCost(t *testing.T) {
	if os.Getenv("ANTREA_MEASURE") == "" {
		t.Skip("set ANTREA_MEASURE=1 to measure")
	}
	n := newPolicyNode(t)
	const rules = 1000
	var ps []*cpv1beta2.NetworkPolicy
	for i := range rules / 10 {
		var rs []cpv1beta2.NetworkPolicyRule
		for j := range 10 {
			r := ingressFrom(allow, []string{"ag-a", "ag-b"}[j%2])
			r.Name = fmt.Sprintf("r%d", j)
			rs = append(rs, r)
		}
		p := antreaPolicy(fmt.Sprintf("p%03d", i), tierApplication, float64(i+1), "atg-web", rs...)
		p.SourceRef.UID = types.UID(p.Name)
		ps = append(ps, p)
	}
	n.set(t, ps...)
	waitFor(t, "1000 rules realized", func() bool { return len(n.ctl.RealizedRules()) == rules })
	c := stats.NewCollector("node-1", time.Minute, n.ctl, n.flows, nil)
	ctx := context.Background()
	const rounds = 20
	var total time.Duration
	for i := range rounds + 1 {
		start := time.Now()
		s, err := c.Collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			total += time.Since(start)
			if len(s.AntreaClusterNetworkPolicies) != rules/10 {
				t.Fatalf("summary holds %d policies, want %d", len(s.AntreaClusterNetworkPolicies), rules/10)
			}
		}
	}
	t.Logf("one collection of %d rules (%d policies) on a real bridge holding %d flows: %v (mean of %d)",
		rules, rules/10, len(n.br.DumpFlows(t)), total/rounds, rounds)
}
