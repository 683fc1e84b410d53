package antctl

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/antctl/query"
)

// statsKind is one of the three stats.antrea.io resources as a command.
type statsKind struct {
	use     string
	kind    query.StatsKind
	aliases []string
	short   string
}

var statsKinds = []statsKind{
	{use: "networkpolicystats", kind: query.NetworkPolicyStats, aliases: []string{"nps"},
		short: "Show the traffic statistics of K8s NetworkPolicies (sessions, packets, bytes)"},
	{use: "antreanetworkpolicystats", kind: query.AntreaNetworkPolicyStats, aliases: []string{"anps"},
		short: "Show the traffic statistics of Antrea NetworkPolicies, per policy and rule"},
	{use: "antreaclusternetworkpolicystats", kind: query.AntreaClusterNetworkPolicyStats, aliases: []string{"acnps"},
		short: "Show the traffic statistics of Antrea ClusterNetworkPolicies, per policy and rule"},
}

func newGetStatsCommands(g *getOptions) []*cobra.Command {
	var cmds []*cobra.Command
	for _, k := range statsKinds {
		long := k.short + `, summed by antrea-controller over
every Node from the agents' reports (stats.antrea.io/v1alpha1; an agent reports every
statsCollectionInterval, 60 s by default). Sessions are the connections the policy's rules
decided on; packets and bytes count the packets of those decisions (docs/network-policy-stats.md).`
		if k.kind.Namespaced() {
			long += `

  -n NS      the policies of namespace NS (default: every namespace)
  NAME       one policy (in -n NS, or the kubeconfig context's namespace)`
		}
		cmds = append(cmds, &cobra.Command{
			Use:     k.use + " [NAME]",
			Aliases: k.aliases,
			Short:   k.short,
			Long:    long,
			Args:    cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return g.runStats(cmd.Context(), k, args)
			},
		})
	}
	return cmds
}

func (g *getOptions) runStats(ctx context.Context, k statsKind, args []string) error {
	c, err := g.getClients()
	if err != nil {
		return err
	}
	ns, explicit := g.namespace()
	if !explicit && len(args) == 0 {
		ns = metav1.NamespaceAll
	}
	name := ""
	if len(args) == 1 {
		name = args[0]
	}
	rows, err := query.Stats(ctx, c, k.kind, ns, name)
	if err != nil {
		return err
	}
	if g.output != outputTable {
		if name != "" {
			return writeObject(g.env.Out, g.output, rows[0].Object)
		}
		objs := make([]any, 0, len(rows))
		for _, r := range rows {
			objs = append(objs, r.Object)
		}
		return writeObject(g.env.Out, g.output, objs)
	}
	return statsTable(k.kind, rows).write(g.env.Out)
}

// statsTable is the table of the stats commands.
func statsTable(kind query.StatsKind, rows []query.PolicyStats) *table {
	header := []string{"NAME", "SESSIONS", "PACKETS", "BYTES", "CREATED AT"}
	if kind.Namespaced() {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if kind.PerRule() {
		header = append(header, "RULES (SESSIONS)")
	}
	t := &table{header: header}
	for _, r := range rows {
		cells := []string{r.Name, strconv.FormatInt(r.Total.Sessions, 10), strconv.FormatInt(r.Total.Packets, 10),
			strconv.FormatInt(r.Total.Bytes, 10), r.Created.UTC().Format(time.RFC3339)}
		if kind.Namespaced() {
			cells = append([]string{r.Namespace}, cells...)
		}
		if kind.PerRule() {
			var rules []string
			for _, rs := range r.Rules {
				rules = append(rules, fmt.Sprintf("%s=%d", rs.Name, rs.TrafficStats.Sessions))
			}
			cells = append(cells, joinFew(rules, 4))
		}
		t.add(cells...)
	}
	return t
}
