package antctl

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// antctl get pipeline: the OVS pipeline as stages x pipelines, the tables
// each feature adds and the edges (goto_table, resubmit, ct(table=),
// group buckets, learn) between tables. Live (local mode) it reads the
// bridge's flows and groups and gives each table its flow and packet
// counts; --declared draws the layout pkg/agent/openflow declares, with the
// edges of the flows its client installs for one object of each kind (what
// make docs writes to docs/design/ovs-pipeline.svg).

// Output formats only pipeline has.
const (
	outputSVG = "svg"
	outputDot = "dot"
)

var pipelineFormats = []string{outputTable, outputJSON, outputYAML, outputSVG, outputDot}

// pipelineTable is one table of the picture.
type pipelineTable struct {
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

// pipelineEdge is one way packets go from a table to another.
type pipelineEdge struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Kind  string `json:"kind"`
	Flows int    `json:"flows"`
	// Packets: live only, the packets the flows carrying the edge matched.
	Packets *uint64 `json:"packets,omitempty"`

	fromID, toID uint8
}

// pipelineGraph is what get pipeline prints.
type pipelineGraph struct {
	// Source says what was drawn: "declared" or "node NAME".
	Source    string          `json:"source"`
	Stages    []string        `json:"stages"`
	Pipelines []string        `json:"pipelines"`
	Features  []string        `json:"features"`
	Tables    []pipelineTable `json:"tables"`
	Edges     []pipelineEdge  `json:"edges"`
	// Unknown are table numbers holding flows that the declared layout
	// does not have (an agent of another version).
	Unknown []uint8 `json:"unknownTables,omitempty"`
	// Note says what the picture lacks, if anything.
	Note string `json:"note,omitempty"`
}

type pipelineOptions struct {
	g        *getOptions
	declared bool
}

func newGetPipelineCommand(g *getOptions) *cobra.Command {
	po := &pipelineOptions{g: g}
	cmd := &cobra.Command{
		Use:   "pipeline [--declared] [-o table|svg|dot|json|yaml]",
		Short: "Draw the OVS pipeline: stages x pipelines, tables, edges, live flow and packet counts",
		Long: `Draw the OVS pipeline the agent lays out on br-int: its stages (columns) and
pipelines (rows), the tables each feature (PodConnectivity, NetworkPolicy,
Service) adds, and an arrow for every way a flow moves packets between tables
(goto_table, resubmit, ct(table=...), a group bucket's resubmit, learn).

In local mode (inside the antrea-agent container) it reads the bridge's flows and
groups: the edges are those of the flows the node holds, and each table shows
its flow count and the packets its flows matched. --declared draws the layout
pkg/agent/openflow declares, anywhere, with the edges of the flows its client
installs for one object of each kind (docs/design/ovs-pipeline.svg).

  -o table   one line per table with its outgoing edges (default)
  -o svg     an SVG picture; -o dot a Graphviz graph; -o json|yaml the graph`,
		Example: `  ` + localModeHowTo + ` get pipeline
  ` + localModeHowTo + ` get pipeline -o svg > pipeline.svg
  antctl get pipeline --declared -o dot | dot -Tpng > pipeline.png`,
		Args: cobra.NoArgs,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.preRun(cmd)
			for _, f := range pipelineFormats {
				if g.output == f {
					return nil
				}
			}
			return fmt.Errorf("unknown output format %q%s; want one of %s", g.output, didYouMean(g.output, pipelineFormats),
				strings.Join(pipelineFormats, ", "))
		},
		RunE: po.run,
	}
	cmd.Flags().BoolVar(&po.declared, "declared", false, "Draw the declared layout (no node needed) instead of this node's live pipeline")
	addNodeFlag(cmd)
	return cmd
}

func (po *pipelineOptions) run(cmd *cobra.Command, _ []string) error {
	var gr *pipelineGraph
	var err error
	if po.declared {
		gr, err = declaredPipeline()
	} else {
		var local *localNode
		if local, err = po.g.requireNode(cmd, "", ""); err != nil {
			return fmt.Errorf("%w (or draw the declared layout anywhere: antctl get pipeline --declared)", err)
		}
		node := po.g.env.NodeName
		if local.remote != nil {
			node = local.remote.node
		}
		gr, err = local.livePipeline(cmd.Context(), node)
	}
	if err != nil {
		return err
	}
	return writePipeline(po.g.env.Out, po.g.output, gr)
}

func writePipeline(w interface{ Write([]byte) (int, error) }, format string, gr *pipelineGraph) error {
	switch format {
	case outputSVG:
		_, err := w.Write(pipelineSVG(gr))
		return err
	case outputDot:
		_, err := w.Write(pipelineDot(gr))
		return err
	case outputJSON, outputYAML:
		return writeObject(w, format, gr)
	}
	t := &table{header: []string{"ID", "TABLE", "PIPELINE", "STAGE", "FEATURE", "MISS", "FLOWS", "PACKETS", "NEXT"}}
	out := map[string][]string{}
	for _, e := range gr.Edges {
		if e.Kind == string(agentof.EdgeLearn) {
			out[e.From] = append(out[e.From], "learn:"+e.To)
			continue
		}
		if e.From == e.To && e.Kind == string(agentof.EdgeCT) {
			out[e.From] = append(out[e.From], "ct:"+e.To)
			continue
		}
		prefix := ""
		if e.Kind != string(agentof.EdgeGoto) {
			prefix = e.Kind + ":"
		}
		out[e.From] = append(out[e.From], prefix+e.To)
	}
	for _, tb := range gr.Tables {
		flows, pkts := "", ""
		if tb.Flows != nil {
			flows = fmt.Sprint(*tb.Flows)
		}
		if tb.Packets != nil {
			pkts = fmt.Sprint(*tb.Packets)
		}
		t.add(fmt.Sprint(tb.ID), tb.Name, tb.Pipeline, tb.Stage, tb.Feature, tb.Miss, flows, pkts, strings.Join(out[tb.Name], ","))
	}
	if err := t.write(w); err != nil {
		return err
	}
	if len(gr.Unknown) > 0 {
		if _, err := fmt.Fprintf(w, "flows in tables the declared layout lacks: %v\n", gr.Unknown); err != nil {
			return err
		}
	}
	if gr.Note != "" {
		_, err := fmt.Fprintf(w, "note: %s\n", gr.Note)
		return err
	}
	return nil
}

// newPipelineGraph lays out the tables of p with their features; edges and
// counts are the caller's.
func newPipelineGraph(p *agentof.Pipeline, source string) *pipelineGraph {
	gr := &pipelineGraph{Source: source}
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
		gr.Tables = append(gr.Tables, pipelineTable{ID: t.ID, Name: t.Name, Pipeline: t.Pipeline.String(),
			Stage: t.Stage.String(), Feature: featureOf[t.Name], Miss: t.Miss.String(), Doc: t.Doc})
	}
	return gr
}

// tableName names table id: its declared name, else "table<ID>".
func (gr *pipelineGraph) tableName(id uint8) string {
	if int(id) < len(gr.Tables) && gr.Tables[id].ID == id {
		return gr.Tables[id].Name
	}
	return fmt.Sprintf("table%d", id)
}

func (gr *pipelineGraph) addEdges(edges []agentof.Edge, packets map[agentof.Edge]uint64) {
	for _, e := range edges {
		pe := pipelineEdge{From: gr.tableName(e.From), To: gr.tableName(e.To), Kind: string(e.Kind), Flows: e.Flows,
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

// declaredPipeline is the layout with the edges of the sample flows.
func declaredPipeline() (*pipelineGraph, error) {
	p, flows, groups, err := agentof.SampleFlows()
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	gr := newPipelineGraph(p, "declared")
	gr.addEdges(agentof.Edges(flows, groups), nil)
	return gr, nil
}

// livePipeline reads this node's flows and groups.
func (l *localNode) livePipeline(ctx context.Context, nodeName string) (*pipelineGraph, error) {
	p, err := pipeline()
	if err != nil {
		return nil, err
	}
	source := "node"
	if nodeName != "" {
		source = "node " + nodeName
	}
	if l.remote != nil {
		// The agent API serves the flows, not the groups: no group edges.
		stats, err := l.dumpFlows(ctx, openflow.TableAll)
		if err != nil {
			return nil, err
		}
		gr := livePipelineOf(p, source, stats, nil)
		gr.Note = "read through the agent API, which serves no groups: the group bucket edges are not shown"
		return gr, nil
	}
	stats, err := l.dumpFlows(ctx, openflow.TableAll)
	if err != nil {
		return nil, err
	}
	groups, err := l.dumpGroups(ctx, openflow.GroupIDAll)
	if err != nil {
		return nil, err
	}
	return livePipelineOf(p, source, stats, groups), nil
}

// livePipelineOf builds the graph of a node's flows and groups.
func livePipelineOf(p *agentof.Pipeline, source string, stats []openflow.FlowStats, groups []openflow.GroupDesc) *pipelineGraph {
	gr := newPipelineGraph(p, source)
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
	gr.addEdges(agentof.Edges(flows, gs), edgePackets)
	return gr
}
