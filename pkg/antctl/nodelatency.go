package antctl

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/antctl/query"
)

func newGetNodeLatencyStatsCommand(g *getOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "nodelatencystats [NODE]",
		Aliases: []string{"nls"},
		Short:   "Show the RTT between Nodes measured by NodeLatencyMonitor (source Node, peer, target IP)",
		Long: `Show the latency matrix from the agents' NodeLatencyStats (stats.antrea.io/v1alpha1), kept by
antrea-controller while the NodeLatencyMonitor exists (docs/node-latency-monitor.md). MEDIAN and MAX
are over the agent's last 10 probes; UNREACHABLE when the last probe got no reply.

  NODE       the measurements of that source Node only`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runNodeLatency(cmd.Context(), args)
		},
	}
}

func (g *getOptions) runNodeLatency(ctx context.Context, args []string) error {
	c, err := g.getClients()
	if err != nil {
		return err
	}
	node := ""
	if len(args) == 1 {
		node = args[0]
	}
	rows, objs, err := query.NodeLatency(ctx, c, node)
	if err != nil {
		return err
	}
	if g.output != outputTable {
		if node != "" {
			return writeObject(g.env.Out, g.output, objs[0])
		}
		return writeObject(g.env.Out, g.output, objs)
	}
	return writeLatencyTable(g.env.Out, rows, time.Now())
}

// writeLatencyTable prints the matrix, one row per source, peer and IP.
func writeLatencyTable(w io.Writer, rows []query.LatencyRow, now time.Time) error {
	t := &table{header: []string{"SOURCE", "PEER", "TARGET-IP", "LAST-RTT", "MEDIAN-RTT", "MAX-RTT", "LAST-RECV"}}
	rtt := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
	}
	for _, r := range rows {
		recv := "never"
		if !r.LastRecv.IsZero() {
			recv = now.Sub(r.LastRecv).Round(time.Second).String() + " ago"
		}
		last := rtt(r.Last)
		if r.Unreachable() {
			last = "UNREACHABLE"
		}
		t.add(r.Source, r.Peer, r.TargetIP, last, rtt(r.Median), rtt(r.Max), recv)
	}
	return t.write(w)
}
