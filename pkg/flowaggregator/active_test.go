package flowaggregator

import (
	"testing"
	"time"

	"antrea.io/antrea/pkg/ipfix"
)

// recorder is an Exporter keeping what it is given.
type recorder struct{ got []Flow }

func (r *recorder) Export(fs []Flow) { r.got = append(r.got, fs...) }

// activeTestAggregator is an aggregator on a clock the test moves
// (activeFlowRecordTimeout 10s, inactiveFlowRecordTimeout 90s) and what it
// outputs.
func activeTestAggregator() (*Aggregator, *recorder, *time.Time) {
	out := &recorder{}
	a := NewAggregator(10*time.Second, 10*time.Second, 90*time.Second, nil, NewStore(1024), NewMetrics(), out)
	clock := t0
	a.now = func() time.Time { return clock }
	return a, out, &clock
}

// A long-lived connection is output at least every activeFlowRecordTimeout
// whatever its agents send: while they send often, their records; while they
// send nothing (an idle connection, reported once), its last record again,
// flowEnd now, no delta, no throughput. Its end of flow is its last output;
// the throughput of a record counts from the previous agent record, not from
// the repetitions.
func TestALiveConnectionIsOutputAtLeastEveryActiveTimeout(t *testing.T) {
	a, out, clock := activeTestAggregator()
	intra := func(end time.Time, reason uint8, bytes, delta uint64) agentRecord {
		return agentRecord{srcPort: 41000, srcPod: "a", dstPod: "b", node: "node-1", bytes: bytes, packets: 10, delta: delta,
			flowType: ipfix.FlowTypeIntraNode, end: end, reason: reason}
	}
	agent := map[int]agentRecord{
		0:   intra(t0, ipfix.EndReasonActiveTimeout, 1000, 1000),
		3:   intra(t0.Add(3*time.Second), ipfix.EndReasonActiveTimeout, 2000, 1000),
		35:  intra(t0.Add(35*time.Second), ipfix.EndReasonIdleTimeout, 2000, 0),
		100: intra(t0.Add(100*time.Second), ipfix.EndReasonEndOfFlow, 66000, 64000),
	}
	var at []int // seconds of each output
	for sec := 0; sec <= 200; sec++ {
		*clock = t0.Add(time.Duration(sec) * time.Second)
		n := len(out.got)
		if r, ok := agent[sec]; ok {
			a.Ingest("tcp", []ipfix.Record{r.record()})
		}
		a.Expire()
		for range out.got[n:] {
			at = append(at, sec)
		}
	}
	t.Logf("outputs at %v s", at)
	for i := 1; i < len(at); i++ {
		if at[i]-at[i-1] > 10 {
			t.Errorf("no output from %d s to %d s: more than the active timeout", at[i-1], at[i])
		}
	}
	if last := at[len(at)-1]; last != 100 {
		t.Errorf("last output at %d s, want 100 (the end of flow; nothing after)", last)
	}
	for i, f := range out.got {
		_, fromAgent := agent[at[i]]
		switch {
		case fromAgent && f.End.Equal(t0.Add(time.Duration(at[i])*time.Second)):
		case !fromAgent:
			if f.EndReason != ipfix.EndReasonActiveTimeout || !f.End.Equal(t0.Add(time.Duration(at[i])*time.Second)) ||
				f.FromSource.Delta != (Counts{}) || f.Throughput != 0 || f.FromSource.Total.Bytes != 2000 {
				t.Errorf("repetition at %d s: %+v, want the last record, flowEnd now, reason 2, no delta, no throughput", at[i], f)
			}
		default:
			t.Errorf("output at %d s: flowEnd %v", at[i], f.End)
		}
	}
	// The end of flow's 64000 bytes over the 65 s since the agent's
	// record at 35 s (the repetitions do not count).
	if end := out.got[len(out.got)-1]; end.EndReason != ipfix.EndReasonEndOfFlow || end.Throughput != 64000/65 {
		t.Errorf("end of flow %+v, throughput %d, want %d", end, end.Throughput, 64000/65)
	}
	if a.live[agent[0].record2key()] != nil && a.live[agent[0].record2key()].repeat {
		t.Error("the connection is still repeated after its end of flow")
	}
}

// A connection of which no agent record came for inactiveFlowRecordTimeout
// is forgotten: no more outputs. A denied connection is never repeated.
func TestConnectionsWithoutRecordsAreForgottenAfterTheInactiveTimeout(t *testing.T) {
	a, out, clock := activeTestAggregator()
	a.Ingest("tcp", []ipfix.Record{
		agentRecord{srcPort: 1, srcPod: "a", dstPod: "b", node: "n", bytes: 60, packets: 1, delta: 60, flowType: ipfix.FlowTypeIntraNode, end: t0}.record(),
		agentRecord{srcPort: 2, srcPod: "a", dstPod: "b", node: "n", bytes: 60, packets: 1, delta: 60, flowType: ipfix.FlowTypeIntraNode, end: t0,
			ingress: "ns/deny:drop", ingressAction: ipfix.RuleActionDrop}.record(),
	})
	last := map[uint16]time.Time{}
	for sec := 1; sec <= 300; sec++ {
		*clock = t0.Add(time.Duration(sec) * time.Second)
		n := len(out.got)
		a.Expire()
		for _, f := range out.got[n:] {
			last[f.SrcPort] = *clock
		}
	}
	if got := last[1].Sub(t0); got != 90*time.Second {
		t.Errorf("the idle connection's last repetition %v after its record, want 90s (the last active timeout within the inactive timeout)", got)
	}
	if _, ok := last[2]; ok {
		t.Errorf("the denied connection was repeated")
	}
	if len(a.live) != 0 {
		t.Errorf("%d connections kept after the inactive timeout, want 0", len(a.live))
	}
}

// record2key is the key of r's connection.
func (r agentRecord) record2key() key {
	f, _ := fromRecord(r.record(), t0)
	return f.key()
}
