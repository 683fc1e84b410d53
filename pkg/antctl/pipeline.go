package antctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/diagram"
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
	var gr *diagram.Pipeline
	var err error
	if po.declared {
		gr, err = diagram.DeclaredPipeline()
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

func writePipeline(w interface{ Write([]byte) (int, error) }, format string, gr *diagram.Pipeline) error {
	switch format {
	case outputSVG:
		_, err := w.Write(diagram.PipelineSVG(gr))
		return err
	case outputDot:
		_, err := w.Write(diagram.PipelineDot(gr))
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

// livePipeline reads this node's flows and groups.
func (l *localNode) livePipeline(ctx context.Context, nodeName string) (*diagram.Pipeline, error) {
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
		gr := diagram.LivePipeline(p, source, stats, nil)
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
	return diagram.LivePipeline(p, source, stats, groups), nil
}
