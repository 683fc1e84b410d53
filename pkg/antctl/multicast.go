package antctl

import (
	"context"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
)

// podMulticastStats reads the multicast counters of a node's Pods (GET
// /podmulticaststats, upstream's parameters namespace and name), those of
// namespace ns and pod when given.
func (a *agentClient) podMulticastStats(ctx context.Context, ns, pod string) ([]apis.PodMulticastStats, error) {
	q := url.Values{}
	if ns != "" {
		q.Set("namespace", ns)
	}
	if pod != "" {
		q.Set("name", pod)
	}
	var out []apis.PodMulticastStats
	err := a.get(ctx, "/podmulticaststats", q, &out)
	return out, err
}

func newGetPodMulticastStatsCommand(g *getOptions) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "podmulticaststats [POD] --node NODE [-n NS | -A]",
		Short: "Show the multicast packets a Node's Pods received and sent",
		Long: `Show, for each Pod of a Node (multicast.enable, docs/multicast.md), the multicast packets
it received from the groups it joined (INBOUND: its buckets in the groups' OpenFlow groups)
and the multicast packets it sent (OUTBOUND: its counter flow). POD in the namespace of -n
(or the kubeconfig's), every Pod of the namespace without POD, of every namespace with -A.`,
		Example: `  antctl get podmulticaststats --node node-1 -A
  antctl get podmulticaststats sender -n demo --node node-1`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ac, err := g.nodeAgentAPI(cmd, "a Node's Pods' multicast counters")
			if err != nil {
				return err
			}
			ns, _ := g.namespace()
			if all {
				ns = ""
			}
			stats, err := ac.podMulticastStats(cmd.Context(), ns, firstArg(args))
			if err != nil {
				return err
			}
			if g.output != outputTable {
				return writeObject(g.env.Out, g.output, stats)
			}
			t := &table{header: []string{"NAMESPACE", "NAME", "INBOUND", "OUTBOUND"}}
			for _, s := range stats {
				t.add(s.PodNamespace, s.PodName, strconv.FormatUint(s.Inbound, 10), strconv.FormatUint(s.Outbound, 10))
			}
			return t.write(g.env.Out)
		},
	}
	cmd.Flags().String(nodeFlag, "", "The Node whose agent API to ask (local mode: this Node)")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "the Pods of every namespace")
	return cmd
}
