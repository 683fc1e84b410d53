package flowaggregator

import (
	"net/netip"
	"testing"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

// sourceSide and destSide are the two nodes' records of pod a (node-1) to
// pod b (node-2), as the agents send them: each names only its own Pod.
func sourceSide(bytes uint64) Flow {
	return Flow{Start: t0, End: t0.Add(5 * time.Second), SrcIP: netip.MustParseAddr("10.10.0.2"), DstIP: netip.MustParseAddr("10.10.1.2"),
		SrcPort: 40000, DstPort: 5201, Protocol: 6, SrcPod: "a", SrcNamespace: "ns", SrcNode: "node-1",
		ClusterIP: netip.MustParseAddr("10.96.0.10"), ServicePort: 80, Service: "ns/svc:http",
		FlowType: ipfix.FlowTypeToExternal, FromSource: &NodeCounts{Delta: Counts{10, bytes}, Total: Counts{10, bytes}}}
}

func destSide(bytes uint64) Flow {
	return Flow{Start: t0, End: t0.Add(5 * time.Second), SrcIP: netip.MustParseAddr("10.10.0.2"), DstIP: netip.MustParseAddr("10.10.1.2"),
		SrcPort: 40000, DstPort: 5201, Protocol: 6, DstPod: "b", DstNamespace: "ns", DstNode: "node-2",
		FlowType: ipfix.FlowTypeFromExternal, FromDestination: &NodeCounts{Delta: Counts{10, bytes}, Total: Counts{10, bytes}}}
}

func checkJoined(t *testing.T, got []Flow) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("%d records, want one joined record", len(got))
	}
	f := got[0]
	if !f.Correlated || f.FlowType != ipfix.FlowTypeInterNode {
		t.Errorf("correlated %v flowType %d, want true and %d", f.Correlated, f.FlowType, ipfix.FlowTypeInterNode)
	}
	if f.SrcPod != "a" || f.SrcNode != "node-1" || f.DstPod != "b" || f.DstNode != "node-2" || f.DstNamespace != "ns" {
		t.Errorf("pods %s/%s@%s -> %s/%s@%s, want ns/a@node-1 -> ns/b@node-2", f.SrcNamespace, f.SrcPod, f.SrcNode, f.DstNamespace, f.DstPod, f.DstNode)
	}
	if f.Service != "ns/svc:http" {
		t.Errorf("service %q, want the source node's ns/svc:http", f.Service)
	}
	if f.FromSource == nil || f.FromDestination == nil || f.FromSource.Delta.Bytes != 1000 || f.FromDestination.Delta.Bytes != 990 {
		t.Errorf("counts from source %+v from destination %+v, want 1000 and 990 bytes", f.FromSource, f.FromDestination)
	}
}

func TestTheTwoNodesRecordsAreJoinedWhicheverComesFirst(t *testing.T) {
	for name, order := range map[string][2]Flow{
		"source first":      {sourceSide(1000), destSide(990)},
		"destination first": {destSide(990), sourceSide(1000)},
	} {
		t.Run(name, func(t *testing.T) {
			c := &Correlator{Wait: 10 * time.Second}
			if got := c.Add(order[0], t0); len(got) != 0 {
				t.Fatalf("the first side was released at once: %+v", got)
			}
			checkJoined(t, c.Add(order[1], t0.Add(time.Second)))
			if c.Pending() != 0 || c.Correlated != 1 {
				t.Errorf("pending %d correlated %d, want 0 and 1", c.Pending(), c.Correlated)
			}
		})
	}
}

func TestARecordWhosePartnerNeverComesIsReleasedAloneAfterTheWait(t *testing.T) {
	c := &Correlator{Wait: 10 * time.Second}
	c.Add(sourceSide(1000), t0)
	if got := c.Expire(t0.Add(9 * time.Second)); len(got) != 0 {
		t.Fatalf("released before the wait: %+v", got)
	}
	got := c.Expire(t0.Add(10 * time.Second))
	if len(got) != 1 || got[0].Correlated || got[0].SrcPod != "a" || got[0].DstPod != "" {
		t.Fatalf("released %+v, want the source side alone", got)
	}
	if c.Alone != 1 || c.Pending() != 0 {
		t.Errorf("alone %d pending %d, want 1 and 0", c.Alone, c.Pending())
	}
	// The partner coming late starts a new wait instead of joining.
	if got := c.Add(destSide(990), t0.Add(11*time.Second)); len(got) != 0 {
		t.Errorf("the late partner was released at once: %+v", got)
	}
}

func TestIntraNodeAndExternalRecordsNeedNoPartner(t *testing.T) {
	podCIDR := netip.MustParsePrefix("10.10.0.0/16")
	c := &Correlator{Wait: time.Minute, IsPodIP: podCIDR.Contains}
	intra := sourceSide(1000)
	intra.DstPod, intra.DstNamespace, intra.FlowType = "b", "ns", ipfix.FlowTypeIntraNode
	if got := c.Add(intra, t0); len(got) != 1 || got[0].Correlated {
		t.Errorf("intra-node: %+v, want it released at once, uncorrelated", got)
	}
	ext := sourceSide(1000)
	ext.DstIP = netip.MustParseAddr("192.0.2.1")
	if got := c.Add(ext, t0); len(got) != 1 {
		t.Errorf("to external: %d records, want it released at once", len(got))
	}
	from := destSide(10)
	from.SrcIP = netip.MustParseAddr("192.0.2.1")
	if got := c.Add(from, t0); len(got) != 1 {
		t.Errorf("from external: %d records, want it released at once", len(got))
	}
	if c.Pending() != 0 {
		t.Errorf("%d records wait, want none", c.Pending())
	}
}

func TestASecondRecordOfTheSameNodeFoldsIntoTheWaitingOne(t *testing.T) {
	c := &Correlator{Wait: time.Minute}
	c.Add(sourceSide(600), t0)
	second := sourceSide(400)
	second.FromSource.Total = Counts{20, 1000}
	c.Add(second, t0.Add(5*time.Second))
	checkJoined(t, c.Add(destSide(990), t0.Add(6*time.Second)))
}

func TestPendingRecordsAreBounded(t *testing.T) {
	c := &Correlator{Wait: time.Minute, MaxPending: 2}
	for i := range 3 {
		f := sourceSide(1)
		f.SrcPort = uint16(1000 + i)
		got := c.Add(f, t0.Add(time.Duration(i)*time.Second))
		if i < 2 && len(got) != 0 {
			t.Fatalf("record %d released: %+v", i, got)
		}
		if i == 2 && (len(got) != 1 || got[0].SrcPort != 1000) {
			t.Fatalf("with the table full, released %+v, want the oldest (port 1000)", got)
		}
	}
	if c.Pending() != 2 {
		t.Errorf("%d pending, want 2", c.Pending())
	}
}

// A record an egress rule denied needs no partner (the destination Node
// never sees the connection); to a Pod of another Node it is inter-node.
func TestEgressDeniedRecordsNeedNoPartner(t *testing.T) {
	podCIDR := netip.MustParsePrefix("10.10.0.0/16")
	c := &Correlator{Wait: time.Minute, IsPodIP: podCIDR.Contains}
	f := sourceSide(60)
	f.EgressPolicy, f.EgressPolicyAction, f.Denied = "no-out", ipfix.RuleActionDrop, true
	got := c.Add(f, t0)
	if len(got) != 1 || got[0].Correlated || got[0].FlowType != ipfix.FlowTypeInterNode {
		t.Fatalf("%+v, want it released at once, uncorrelated, inter-node", got)
	}
	// An ingress drop waits for the source Node's record.
	in := destSide(60)
	in.IngressPolicy, in.IngressPolicyAction, in.Denied = "no-in", ipfix.RuleActionDrop, true
	if got := c.Add(in, t0); len(got) != 0 {
		t.Fatalf("the ingress drop was released at once: %+v", got)
	}
}

func TestThePolicyFilterMatchesEachIsolatingPolicy(t *testing.T) {
	f := Flow{IngressPolicy: "ns/a,b", IngressPolicyAction: ipfix.RuleActionDrop, Denied: true}
	for q, want := range map[string]bool{"a": true, "b": true, "ns/b": true, "ns/a,b": true, "c": false, "other/a": false} {
		if got := (Filter{Policy: q}).Match(&f); got != want {
			t.Errorf("policy=%s: %v, want %v", q, got, want)
		}
	}
}

// The source Node keeps exporting a connection denied at its destination
// while its conntrack entry lives (SYN retries), but the destination Node
// reports the denial once: the later records are that denial, not an
// allowed connection of an unknown Pod.
func TestTheSourcesLaterRecordsOfAConnectionDeniedAtItsDestinationStayDenied(t *testing.T) {
	for name, denialFirst := range map[string]bool{"joined": false, "the denial released alone": true} {
		t.Run(name, func(t *testing.T) {
			c := &Correlator{Wait: 10 * time.Second}
			in := destSide(60)
			in.IngressPolicy, in.IngressPolicyRule, in.IngressPolicyAction, in.Denied = "ns/no-in", "drop-a", ipfix.RuleActionDrop, true
			now := t0
			if denialFirst {
				c.Add(in, now)
				if got := c.Expire(now.Add(10 * time.Second)); len(got) != 1 || !got[0].Denied {
					t.Fatalf("the denial alone: %+v", got)
				}
				now = now.Add(10 * time.Second)
			} else {
				c.Add(sourceSide(60), now)
				if got := c.Add(in, now.Add(time.Second)); len(got) != 1 || !got[0].Denied || !got[0].Correlated {
					t.Fatalf("the pair: %+v", got)
				}
			}
			// The source's next record is released at once, denied, naming
			// the destination Pod and the rule, with its own counts only.
			got := c.Add(sourceSide(120), now.Add(30*time.Second))
			if len(got) != 1 {
				t.Fatalf("%d records (pending %d), want the source's record at once", len(got), c.Pending())
			}
			f := got[0]
			if !f.Denied || f.IngressPolicy != "ns/no-in" || f.IngressPolicyRule != "drop-a" || f.DstPod != "b" || f.SrcPod != "a" {
				t.Errorf("%+v, want ns/a -> ns/b denied by ns/no-in rule drop-a", f)
			}
			if f.FromDestination != nil || f.FromSource == nil || f.FromSource.Delta.Bytes != 120 || f.Correlated {
				t.Errorf("counts %+v / %+v correlated %v, want the source's 120 bytes only, not correlated", f.FromSource, f.FromDestination, f.Correlated)
			}
			if c.Redenied != 1 {
				t.Errorf("redenied %d, want 1", c.Redenied)
			}
			// Another connection (another source port) is not touched, and
			// the denial is forgotten after DenialMemory.
			other := sourceSide(60)
			other.SrcPort++
			if got := c.Add(other, now.Add(31*time.Second)); len(got) != 0 {
				t.Errorf("another connection was released at once: %+v", got)
			}
			c.Expire(now.Add(DenialMemory + time.Minute))
			if got := c.Add(sourceSide(60), now.Add(DenialMemory+time.Minute)); len(got) != 0 {
				t.Errorf("the denial was still remembered after %v: %+v", DenialMemory, got)
			}
		})
	}
}

// The other Node's lone records of a denied connection take the denial
// too: the destination's later record of a connection denied at ingress
// names the source Pod; the source's conntrack record of a connection its
// own egress rule dropped (EndpointDNAT committed it first) names that
// rule, typed inter-node as the denial learned.
func TestEitherNodesLaterRecordsOfADeniedConnectionTakeTheDenial(t *testing.T) {
	podCIDR := netip.MustParsePrefix("10.10.0.0/16")
	c := &Correlator{Wait: 10 * time.Second, IsPodIP: podCIDR.Contains}
	in := destSide(60)
	in.IngressPolicy, in.IngressPolicyRule, in.IngressPolicyAction, in.Denied = "ns/no-in", "drop-a", ipfix.RuleActionDrop, true
	c.Add(sourceSide(60), t0)
	c.Add(in, t0.Add(time.Second))
	later := destSide(120)
	got := c.Add(later, t0.Add(20*time.Second))
	if len(got) != 1 || !got[0].Denied || got[0].SrcPod != "a" || got[0].DstPod != "b" || got[0].IngressPolicyRule != "drop-a" ||
		got[0].FromSource != nil || got[0].FromDestination == nil || got[0].FromDestination.Delta.Bytes != 120 {
		t.Errorf("the destination's later record: %+v, want ns/a -> ns/b denied by drop-a with its own 120 bytes only", got)
	}

	out := sourceSide(60)
	out.SrcPort = 41000
	out.EgressPolicy, out.EgressPolicyRule, out.EgressPolicyAction, out.Denied = "no-out", "no-web", ipfix.RuleActionDrop, true
	if got := c.Add(out, t0); len(got) != 1 || got[0].FlowType != ipfix.FlowTypeInterNode {
		t.Fatalf("the egress denial: %+v", got)
	}
	ct := sourceSide(120) // the source's conntrack record, no rule in it
	ct.SrcPort = 41000
	got = c.Add(ct, t0.Add(3*time.Second))
	if len(got) != 1 || !got[0].Denied || got[0].EgressPolicyRule != "no-web" || got[0].FlowType != ipfix.FlowTypeInterNode || got[0].FromSource.Delta.Bytes != 120 {
		t.Errorf("the source's conntrack record after its egress denial: %+v, want denied by no-web, inter-node, 120 bytes", got)
	}
	if c.Redenied != 2 {
		t.Errorf("redenied %d, want 2", c.Redenied)
	}
}

// The memory of denials is bounded: beyond maxDenials the oldest is
// forgotten, and one remembered again counts from its new time.
func TestTheMemoryOfDenialsForgetsTheOldestBeyondItsBound(t *testing.T) {
	c := &Correlator{Wait: time.Second}
	denied := func(port uint16) Flow {
		f := destSide(60)
		f.SrcPort = port
		f.IngressPolicyAction, f.Denied = ipfix.RuleActionDrop, true
		return f
	}
	remember := func(port uint16, at time.Time) {
		f := denied(port)
		c.rememberDenial(f.key(), f, at)
	}
	for i := 0; i < maxDenials; i++ {
		remember(uint16(i), t0.Add(time.Duration(i)*time.Microsecond))
	}
	// Port 0 again: now the newest; port 1 is the oldest.
	remember(0, t0.Add(time.Second))
	remember(60000, t0.Add(2*time.Second))
	if len(c.denials) != maxDenials {
		t.Fatalf("%d denials remembered, want %d", len(c.denials), maxDenials)
	}
	for port, want := range map[uint16]bool{0: true, 1: false, 2: true, 60000: true} {
		f := denied(port)
		if _, ok := c.denials[f.key()]; ok != want {
			t.Errorf("port %d remembered %v, want %v", port, ok, want)
		}
	}
	c.Expire(t0.Add(2*time.Second + DenialMemory))
	if len(c.denials) != 0 || len(c.denialOrder) != 0 {
		t.Errorf("after DenialMemory %d denials and %d order entries left, want none", len(c.denials), len(c.denialOrder))
	}
}
