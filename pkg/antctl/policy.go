package antctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/antctl/query"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// antctl get networkpolicy|appliedtogroup|addressgroup: flags, then the
// query (pkg/antctl/query), then a printer.

// policyFlags are the flags of the three commands.
type policyFlags struct {
	g      *getOptions
	pod    string
	node   string
	sortBy string
	// source and policyType filter networkpolicy (upstream's -S and -T).
	source     string
	policyType string
}

// addFlags adds the filters of the three commands: upstream antctl's -p
// and --sort-by (pkg/antctl/antctl.go), and --node.
func (f *policyFlags) addFlags(cmd *cobra.Command, podHelp string) {
	cmd.Flags().StringVarP(&f.pod, "pod", "p", "", podHelp+" (POD with -n, default \"default\", or NS/POD)")
	cmd.Flags().StringVar(&f.node, "node", "", "Only what the agent of this Node receives (the objects whose span holds it)")
	cmd.Flags().StringVar(&f.sortBy, "sort-by", "", "Order by this JSONPath of the objects (e.g. .metadata.name; default: by name)")
	_ = cmd.RegisterFlagCompletionFunc("pod", f.g.completePods)
	_ = cmd.RegisterFlagCompletionFunc("node", f.g.completeNodes)
}

// selector turns the flags (and NAME) into the query's selector, and checks
// that the namespace, pod and Node it names exist.
func (f *policyFlags) selector(ctx context.Context, c *Clients, args []string) (query.Selector, error) {
	s := query.Selector{Node: f.node, SortBy: f.sortBy}
	if len(args) == 1 {
		s.Name = args[0]
	}
	ns, given := f.g.namespace()
	pod := f.pod
	if i := strings.IndexByte(pod, '/'); i > 0 {
		// NS/POD, as upstream antctl's -p takes it.
		ns, pod, given = pod[:i], pod[i+1:], true
	}
	switch {
	case pod != "":
		s.PodNamespace, s.Pod = ns, pod
	case given:
		s.Namespace = ns
	}
	if given && pod != "" {
		if err := query.CheckNamespace(ctx, c.Kube, ns); err != nil {
			return s, err
		}
	}
	return s, s.Check(ctx, c)
}

// ---- networkpolicy

func newGetNetworkPolicyCommand(g *getOptions) *cobra.Command {
	f := &policyFlags{g: g}
	cmd := &cobra.Command{
		Use:     "networkpolicy [NAME]",
		Aliases: []string{"networkpolicies", "netpol", "np"},
		Short:   "Show the NetworkPolicies computed by the controller",
		Long: `Show the NetworkPolicies computed by the controller (controlplane.antrea.io/v1beta2).

NAME is the internal name or, with -n, the name of the source policy.
  -n NS          policies whose source is in namespace NS
  -p POD -n NS   policies applied to pod NS/POD (or -p NS/POD)
  --node NODE    policies the agent of NODE receives (span)
  -S NAME        policies derived from a source policy of that name
  -T TYPE        policies of one type of source (K8sNP, ACNP, ANNP, ANP, BANP)
Columns: the source policy, how many rules, the AppliedToGroups, the Nodes of
the span and how many of them realized the current generation (the agents'
reports to the controller).`,
		Example: `  antctl get networkpolicy -n default
  antctl get networkpolicy -p demo/web-0 -o yaml
  antctl get networkpolicy -S allow-frontend -n demo
  antctl get networkpolicy -T ACNP --sort-by effectivePriority
  antctl get netpol --node node-1`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.runPolicies(cmd.Context(), args)
		},
	}
	f.addFlags(cmd, "Only the policies applied to this pod")
	cmd.Flags().StringVarP(&f.source, "source", "S", "", "Only the policies derived from the policy of this name (K8s or Antrea-native; its namespace is -n)")
	cmd.Flags().StringVarP(&f.policyType, "type", "T", "", "Only the policies of this type: K8sNP, ACNP, ANNP, ANP or BANP")
	cmd.Flags().Lookup("sort-by").Usage = "Order: effectivePriority (as evaluated: Tier, then priority), or a JSONPath of the objects (e.g. .sourceRef.name); default: by name"
	return cmd
}

func (f *policyFlags) runPolicies(ctx context.Context, args []string) error {
	c, err := f.g.getClients()
	if err != nil {
		return err
	}
	typ, err := query.ParsePolicyType(f.policyType)
	if err != nil {
		return err
	}
	sel, err := f.selector(ctx, c, args)
	if err != nil {
		return err
	}
	ps := query.PolicySelector{Selector: sel, Source: f.source, Type: typ}
	policies, err := query.NetworkPolicies(ctx, c, ps)
	if err != nil {
		return err
	}
	if f.g.output != outputTable {
		if len(args) == 1 {
			return writeObject(f.g.env.Out, f.g.output, &policies[0])
		}
		return writeObject(f.g.env.Out, f.g.output, &cpv1beta2.NetworkPolicyList{
			TypeMeta: metav1.TypeMeta{APIVersion: cpv1beta2.SchemeGroupVersion.String(), Kind: "NetworkPolicyList"},
			Items:    policies,
		})
	}
	if len(policies) == 0 {
		fmt.Fprintf(f.g.env.Err, "No networkpolicies found%s.\n", ps.Describe())
		return nil
	}
	summaries, err := query.SummarizePolicies(ctx, c, policies)
	if err != nil {
		return err
	}
	return policyTable(summaries).write(f.g.env.Out)
}

// policyTable is the table of get networkpolicy.
func policyTable(ps []query.PolicySummary) *table {
	t := &table{header: []string{"NAME", "SOURCE", "RULES", "APPLIED-TO", "NODES", "REALIZED", "TIER-PRIORITY", "PRIORITY"}}
	for _, p := range ps {
		t.add(p.Name, p.Source, strconv.Itoa(p.Rules), joinFew(p.AppliedTo, 2), joinFew(p.Nodes, maxNamesPerCell), p.Realized,
			p.TierPriority, p.Priority)
	}
	return t
}

// ---- appliedtogroup and addressgroup

func newGetAppliedToGroupCommand(g *getOptions) *cobra.Command {
	f := &policyFlags{g: g}
	cmd := &cobra.Command{
		Use:     "appliedtogroup [NAME]",
		Aliases: []string{"appliedtogroups", "atg"},
		Short:   "Show the AppliedToGroups: the pods policies apply to",
		Long: `Show the AppliedToGroups computed by the controller: the pods a policy (or rule) applies to.

  -n NS          groups used by policies from namespace NS
  -p POD -n NS   groups holding pod NS/POD
  --node NODE    groups with members on NODE, with only those members (what its agent receives)`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.runGroups(cmd.Context(), args, query.AppliedToGroups)
		},
	}
	f.addFlags(cmd, "Only the groups holding this pod")
	return cmd
}

func newGetAddressGroupCommand(g *getOptions) *cobra.Command {
	f := &policyFlags{g: g}
	cmd := &cobra.Command{
		Use:     "addressgroup [NAME]",
		Aliases: []string{"addressgroups", "ag"},
		Short:   "Show the AddressGroups: the peers of policy rules",
		Long: `Show the AddressGroups computed by the controller: the pods a rule's peers select, with their addresses.

  -n NS          groups used by policies from namespace NS
  -p POD -n NS   groups holding pod NS/POD
  --node NODE    groups the agent of NODE receives`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.runGroups(cmd.Context(), args, query.AddressGroups)
		},
	}
	f.addFlags(cmd, "Only the groups holding this pod")
	return cmd
}

func (f *policyFlags) runGroups(ctx context.Context, args []string, kind query.GroupKind) error {
	c, err := f.g.getClients()
	if err != nil {
		return err
	}
	sel, err := f.selector(ctx, c, args)
	if err != nil {
		return err
	}
	groups, err := query.Groups(ctx, c, kind, sel)
	if err != nil {
		return err
	}
	if f.g.output != outputTable {
		if len(args) == 1 {
			return writeObject(f.g.env.Out, f.g.output, groups[0].Object)
		}
		items := make([]any, 0, len(groups))
		for _, g := range groups {
			items = append(items, g.Object)
		}
		kindName := "AppliedToGroupList"
		if kind == query.AddressGroups {
			kindName = "AddressGroupList"
		}
		return writeObject(f.g.env.Out, f.g.output, map[string]any{
			"apiVersion": cpv1beta2.SchemeGroupVersion.String(), "kind": kindName, "items": items,
		})
	}
	if len(groups) == 0 {
		fmt.Fprintf(f.g.env.Err, "No %ss found%s.\n", kind, sel.Describe())
		return nil
	}
	if kind == query.AddressGroups {
		return addressGroupTable(groups).write(f.g.env.Out)
	}
	spans, err := query.GroupSpans(ctx, c, kind)
	if err != nil {
		return err
	}
	return appliedToGroupTable(groups, spans).write(f.g.env.Out)
}

// addressGroupTable is the table of get addressgroup.
func addressGroupTable(groups []query.Group) *table {
	t := &table{header: []string{"NAME", "MEMBERS", "ADDRESSES", "POLICIES"}}
	for _, g := range groups {
		var ips []string
		for _, m := range g.Members {
			ips = append(ips, query.IPStrings(m.IPs)...)
		}
		t.add(g.Name, strconv.Itoa(len(g.Members)), joinFew(ips, maxNamesPerCell), joinFew(g.UsedBy, 2))
	}
	return t
}

// appliedToGroupTable is the table of get appliedtogroup.
func appliedToGroupTable(groups []query.Group, spans map[string][]string) *table {
	t := &table{header: []string{"NAME", "MEMBERS", "PODS", "NODES", "POLICIES"}}
	for _, g := range groups {
		var pods []string
		for _, m := range g.Members {
			pods = append(pods, query.MemberString(m))
		}
		t.add(g.Name, strconv.Itoa(len(g.Members)), joinFew(pods, maxNamesPerCell), joinFew(spans[g.Name], maxNamesPerCell),
			joinFew(g.UsedBy, 2))
	}
	return t
}
