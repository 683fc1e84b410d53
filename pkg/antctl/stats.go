package antctl

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// statsRow is one policy's stats as antctl prints them.
type statsRow struct {
	obj   any // as served, for -o json|yaml
	meta  metav1.ObjectMeta
	total statsv1alpha1.TrafficStats
	rules []statsv1alpha1.RuleTrafficStats
}

// statsKind is one of the three stats.antrea.io resources.
type statsKind struct {
	use, kind  string
	aliases    []string
	short      string
	namespaced bool
	perRule    bool
}

var statsKinds = []statsKind{
	{use: "networkpolicystats", kind: "NetworkPolicyStats", aliases: []string{"nps"}, namespaced: true,
		short: "Show the traffic statistics of K8s NetworkPolicies (sessions, packets, bytes)"},
	{use: "antreanetworkpolicystats", kind: "AntreaNetworkPolicyStats", aliases: []string{"anps"}, namespaced: true, perRule: true,
		short: "Show the traffic statistics of Antrea NetworkPolicies, per policy and rule"},
	{use: "antreaclusternetworkpolicystats", kind: "AntreaClusterNetworkPolicyStats", aliases: []string{"acnps"}, perRule: true,
		short: "Show the traffic statistics of Antrea ClusterNetworkPolicies, per policy and rule"},
}

func newGetStatsCommands(g *getOptions) []*cobra.Command {
	var cmds []*cobra.Command
	for _, k := range statsKinds {
		long := k.short + `, summed by antrea-controller over
every Node from the agents' reports (stats.antrea.io/v1alpha1; an agent reports every
statsCollectionInterval, 60 s by default). Sessions are the connections the policy's rules
decided on; packets and bytes count the packets of those decisions (docs/network-policy-stats.md).`
		if k.namespaced {
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
	st := c.Antrea.StatsV1alpha1()
	ns, explicit := g.namespace()
	if !k.namespaced {
		ns = ""
	} else if !explicit && len(args) == 0 {
		ns = metav1.NamespaceAll
	}
	tm := metav1.TypeMeta{APIVersion: statsv1alpha1.SchemeGroupVersion.String(), Kind: k.kind}
	var rows []statsRow
	var getErr error
	switch k.kind {
	case "NetworkPolicyStats":
		if len(args) == 1 {
			o, err := st.NetworkPolicyStatses(ns).Get(ctx, args[0], metav1.GetOptions{})
			if getErr = err; err == nil {
				o.TypeMeta = tm
				rows = append(rows, statsRow{obj: o, meta: o.ObjectMeta, total: o.TrafficStats})
			}
			break
		}
		l, err := st.NetworkPolicyStatses(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing networkpolicystats: %w", err)
		}
		for i := range l.Items {
			o := &l.Items[i]
			o.TypeMeta = tm
			rows = append(rows, statsRow{obj: o, meta: o.ObjectMeta, total: o.TrafficStats})
		}
	case "AntreaNetworkPolicyStats":
		if len(args) == 1 {
			o, err := st.AntreaNetworkPolicyStatses(ns).Get(ctx, args[0], metav1.GetOptions{})
			if getErr = err; err == nil {
				o.TypeMeta = tm
				rows = append(rows, statsRow{obj: o, meta: o.ObjectMeta, total: o.TrafficStats, rules: o.RuleTrafficStats})
			}
			break
		}
		l, err := st.AntreaNetworkPolicyStatses(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing antreanetworkpolicystats: %w", err)
		}
		for i := range l.Items {
			o := &l.Items[i]
			o.TypeMeta = tm
			rows = append(rows, statsRow{obj: o, meta: o.ObjectMeta, total: o.TrafficStats, rules: o.RuleTrafficStats})
		}
	default:
		if len(args) == 1 {
			o, err := st.AntreaClusterNetworkPolicyStatses().Get(ctx, args[0], metav1.GetOptions{})
			if getErr = err; err == nil {
				o.TypeMeta = tm
				rows = append(rows, statsRow{obj: o, meta: o.ObjectMeta, total: o.TrafficStats, rules: o.RuleTrafficStats})
			}
			break
		}
		l, err := st.AntreaClusterNetworkPolicyStatses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing antreaclusternetworkpolicystats: %w", err)
		}
		for i := range l.Items {
			o := &l.Items[i]
			o.TypeMeta = tm
			rows = append(rows, statsRow{obj: o, meta: o.ObjectMeta, total: o.TrafficStats, rules: o.RuleTrafficStats})
		}
	}
	if getErr != nil {
		if apierrors.IsNotFound(getErr) {
			where := ""
			if k.namespaced {
				where = " in namespace " + ns
			}
			return fmt.Errorf("%s %q not found%s (stats exist for each policy of that kind)", k.use, args[0], where)
		}
		return fmt.Errorf("getting %s %s: %w", k.use, args[0], getErr)
	}
	if g.output != outputTable {
		if len(args) == 1 {
			return writeObject(g.env.Out, g.output, rows[0].obj)
		}
		objs := make([]any, 0, len(rows))
		for _, r := range rows {
			objs = append(objs, r.obj)
		}
		return writeObject(g.env.Out, g.output, objs)
	}
	header := []string{"NAME", "SESSIONS", "PACKETS", "BYTES", "CREATED AT"}
	if k.namespaced {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if k.perRule {
		header = append(header, "RULES (SESSIONS)")
	}
	t := &table{header: header}
	for _, r := range rows {
		cells := []string{r.meta.Name, strconv.FormatInt(r.total.Sessions, 10), strconv.FormatInt(r.total.Packets, 10),
			strconv.FormatInt(r.total.Bytes, 10), r.meta.CreationTimestamp.UTC().Format(time.RFC3339)}
		if k.namespaced {
			cells = append([]string{r.meta.Namespace}, cells...)
		}
		if k.perRule {
			var rules []string
			for _, rs := range r.rules {
				rules = append(rules, fmt.Sprintf("%s=%d", rs.Name, rs.TrafficStats.Sessions))
			}
			cells = append(cells, joinFew(rules, 4))
		}
		t.add(cells...)
	}
	return t.write(g.env.Out)
}
