package openflow

import (
	"testing"
)

// Features lists exactly the tables NewClient lays out.
func TestFeaturesAreTheLayout(t *testing.T) {
	c, err := NewClient(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, f := range Features() {
		for _, s := range f.Tables {
			declared[s.Name] = true
		}
	}
	for _, tb := range c.Pipeline().Tables() {
		if !declared[tb.Name] {
			t.Errorf("table %s is laid out but no feature of Features() declares it", tb.Name)
		}
		delete(declared, tb.Name)
	}
	for n := range declared {
		t.Errorf("Features() declares %s, which NewClient does not lay out", n)
	}
}

// The sample flows reach every table, and every table but the ends of a
// pipeline leads somewhere; the edges the design document names exist.
func TestSampleFlowEdges(t *testing.T) {
	p, flows, groups, err := SampleFlows()
	if err != nil {
		t.Fatal(err)
	}
	edges := Edges(flows, groups)
	id := func(s *TableSpec) uint8 { return p.Table(s).ID }
	has := func(from, to *TableSpec, kind EdgeKind) bool {
		for _, e := range edges {
			if e.From == id(from) && e.To == id(to) && e.Kind == kind {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		from, to *TableSpec
		kind     EdgeKind
	}{
		// ovs-pipeline.md: the root classifier sends ARP and IP to their pipelines.
		{PipelineRootClassifierTable, ARPSpoofGuardTable, EdgeGoto},
		{PipelineRootClassifierTable, ClassifierTable, EdgeGoto},
		// ConntrackZone sends packets through conntrack; they come back in ConntrackState.
		{ConntrackZoneTable, ConntrackStateTable, EdgeCT},
		// ServiceLB sends to the Service's group, whose buckets go on to EndpointDNAT.
		{ServiceLBTable, EndpointDNATTable, EdgeGroup},
		// Allowed packets of a K8s ingress rule skip IngressDefaultRule and
		// IngressBaselineRule, to be counted in IngressMetric.
		{IngressRuleTable, IngressMetricTable, EdgeGoto},
		{IngressMetricTable, ConntrackCommitTable, EdgeGoto},
	} {
		if !has(tc.from, tc.to, tc.kind) {
			t.Errorf("no %s edge %s -> %s in %v", tc.kind, tc.from.Name, tc.to.Name, edges)
		}
	}
	into := map[uint8]bool{0: true}
	out := map[uint8]bool{}
	for _, e := range edges {
		if e.Kind != EdgeLearn && e.From != e.To {
			into[e.To] = true
			out[e.From] = true
		}
	}
	for _, tb := range p.Tables() {
		if !into[tb.ID] {
			t.Errorf("no flow leads into table %s", tb.Name)
		}
	}
	for _, e := range edges {
		t.Logf("%s -> %s %s (%d)", p.Tables()[e.From].Name, p.Tables()[e.To].Name, e.Kind, e.Flows)
	}
}
