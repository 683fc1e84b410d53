package diagram

import (
	"fmt"
	"sort"
	"strconv"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// The OVS pipeline as a graph: stages x pipelines, the tables each feature
// declares and the edges (goto_table, resubmit, ct(table=), group buckets,
// learn) between them, with live flow and packet counts when a node's flows
// were read. antctl get pipeline prints it; the web UI draws it per node.

// Table is one table of the picture.
type Table struct {
	ID       uint8  `json:"id"`
	Name     string `json:"name"`
	Pipeline string `json:"pipeline"`
	Stage    string `json:"stage"`
	Feature  string `json:"feature"`
	Miss     string `json:"miss"`
	Doc      string `json:"doc"`
	// Flows and Packets: live only (the flows the table holds, the packets
	// they matched since they were installed).
	Flows   *int    `json:"flows,omitempty"`
	Packets *uint64 `json:"packets,omitempty"`
}

// Edge is one way packets go from a table to another.
type Edge struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Kind  string `json:"kind"`
	Flows int    `json:"flows"`
	// Packets: live only, the packets the flows carrying the edge matched.
	Packets *uint64 `json:"packets,omitempty"`

	fromID, toID uint8
}

// Pipeline is the picture: what antctl get pipeline prints and the UI draws.
type Pipeline struct {
	// Source says what was drawn: "declared" or "node NAME".
	Source    string   `json:"source"`
	Stages    []string `json:"stages"`
	Pipelines []string `json:"pipelines"`
	Features  []string `json:"features"`
	Tables    []Table  `json:"tables"`
	Edges     []Edge   `json:"edges"`
	// Unknown are table numbers holding flows that the declared layout
	// does not have (an agent of another version).
	Unknown []uint8 `json:"unknownTables,omitempty"`
	// Note says what the picture lacks, if anything.
	Note string `json:"note,omitempty"`
}

// NewPipeline lays out the tables of p with their features; edges and
// counts are the caller's.
func NewPipeline(p *agentof.Pipeline, source string) *Pipeline {
	gr := &Pipeline{Source: source}
	for _, s := range agentof.Stages() {
		gr.Stages = append(gr.Stages, s.String())
	}
	for _, pl := range agentof.Pipelines() {
		gr.Pipelines = append(gr.Pipelines, pl.String())
	}
	featureOf := map[string]string{}
	for _, f := range agentof.Features() {
		gr.Features = append(gr.Features, f.Name)
		for _, s := range f.Tables {
			if _, ok := featureOf[s.Name]; !ok {
				featureOf[s.Name] = f.Name
			}
		}
	}
	for _, t := range p.Tables() {
		gr.Tables = append(gr.Tables, Table{ID: t.ID, Name: t.Name, Pipeline: t.Pipeline.String(),
			Stage: t.Stage.String(), Feature: featureOf[t.Name], Miss: t.Miss.String(), Doc: t.Doc})
	}
	return gr
}

// tableName names table id: its declared name, else "table<ID>".
func (gr *Pipeline) tableName(id uint8) string {
	if int(id) < len(gr.Tables) && gr.Tables[id].ID == id {
		return gr.Tables[id].Name
	}
	return fmt.Sprintf("table%d", id)
}

func (gr *Pipeline) AddEdges(edges []agentof.Edge, packets map[agentof.Edge]uint64) {
	for _, e := range edges {
		pe := Edge{From: gr.tableName(e.From), To: gr.tableName(e.To), Kind: string(e.Kind), Flows: e.Flows,
			fromID: e.From, toID: e.To}
		if packets != nil {
			k := e
			k.Flows = 0
			n := packets[k]
			pe.Packets = &n
		}
		gr.Edges = append(gr.Edges, pe)
	}
}

// DeclaredPipeline is the layout with the edges of the sample flows.
func DeclaredPipeline() (*Pipeline, error) {
	p, flows, groups, err := agentof.SampleFlows()
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	gr := NewPipeline(p, "declared")
	gr.AddEdges(agentof.Edges(flows, groups), nil)
	return gr, nil
}

// LivePipeline builds the graph of a node's flows and groups.
func LivePipeline(p *agentof.Pipeline, source string, stats []openflow.FlowStats, groups []openflow.GroupDesc) *Pipeline {
	gr := NewPipeline(p, source)
	gs := make([]*openflow.GroupMod, len(groups))
	for i := range groups {
		gs[i] = &groups[i]
	}
	flows := make([]*openflow.Flow, len(stats))
	flowCount := map[uint8]int{}
	pktCount := map[uint8]uint64{}
	edgePackets := map[agentof.Edge]uint64{}
	unknown := map[uint8]bool{}
	for i := range stats {
		f := &stats[i].Flow
		flows[i] = f
		flowCount[f.Table]++
		pktCount[f.Table] += stats[i].PacketCount
		if int(f.Table) >= len(gr.Tables) {
			unknown[f.Table] = true
		}
		for _, e := range agentof.Edges([]*openflow.Flow{f}, gs) {
			e.Flows = 0
			edgePackets[e] += stats[i].PacketCount
		}
	}
	for i := range gr.Tables {
		n, pk := flowCount[gr.Tables[i].ID], pktCount[gr.Tables[i].ID]
		gr.Tables[i].Flows, gr.Tables[i].Packets = &n, &pk
	}
	for id := range unknown {
		gr.Unknown = append(gr.Unknown, id)
	}
	sort.Slice(gr.Unknown, func(i, j int) bool { return gr.Unknown[i] < gr.Unknown[j] })
	gr.AddEdges(agentof.Edges(flows, gs), edgePackets)
	return gr
}

// WithFlowCounts gives the tables of gr (a declared layout) the flow counts
// an agent reports in its AntreaAgentInfo (ovsInfo.flowTable: table number
// → flows), for source ("node NAME"). Packets stay unknown: the report
// does not carry them.
func WithFlowCounts(gr *Pipeline, source string, flowTable map[string]int32) *Pipeline {
	gr.Source = source
	for i := range gr.Tables {
		n := int(flowTable[strconv.Itoa(int(gr.Tables[i].ID))])
		gr.Tables[i].Flows = &n
	}
	for k := range flowTable {
		id, err := strconv.Atoi(k)
		if err == nil && id >= len(gr.Tables) && id < 256 {
			gr.Unknown = append(gr.Unknown, uint8(id))
		}
	}
	sort.Slice(gr.Unknown, func(i, j int) bool { return gr.Unknown[i] < gr.Unknown[j] })
	return gr
}
