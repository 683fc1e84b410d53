package antctl

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/antctl/query"
)

// antctl query endpoint: flags, then query.Endpoint, then the printer.

type queryOptions struct {
	*options
	pod    string
	output string
}

func newQueryCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "query endpoint -n NS -p POD",
		Short: "Which policies select a pod and which rules allow or deny traffic to and from it",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0], "query")
		},
	}
	q := &queryOptions{options: o}
	ep := &cobra.Command{
		Use:     "endpoint -n NS -p POD [-o table|json|yaml]",
		Aliases: []string{"endpoints"},
		Short:   "Which policies select a pod and which rules allow or deny traffic to and from it",
		Long: `Show the policies that apply to a pod (select it through their AppliedToGroups),
each of their rules with its action, peers and ports, the directions in which K8s
NetworkPolicies isolate the pod, and the rules of other policies that name the pod as
a peer (an AddressGroup holding it, or an ipBlock holding its address): which traffic
they allow or deny from or to it.

antctl computes this from the controller's controlplane.antrea.io objects
(NetworkPolicies, AppliedToGroups, AddressGroups); the controller does not serve an
endpoint query itself.`,
		Example: `  antctl query endpoint -n demo -p web-0
  antctl query endpoint -n demo -p web-0 -o yaml`,
		Args: cobra.NoArgs,
		RunE: q.run,
	}
	ep.Flags().StringVarP(&q.pod, "pod", "p", "", "The pod (its namespace is -n, default \"default\")")
	ep.Flags().StringVarP(&q.output, "output", "o", outputTable, "Output format: "+strings.Join(outputFormats, ", "))
	_ = ep.RegisterFlagCompletionFunc("pod", o.completePods)
	cmd.AddCommand(ep)
	return cmd
}

func (q *queryOptions) run(cmd *cobra.Command, _ []string) error {
	if err := checkOutput(q.output); err != nil {
		return err
	}
	if q.pod == "" {
		return fmt.Errorf("query endpoint needs -p POD (and -n NAMESPACE)")
	}
	ns, _ := q.namespace()
	ctx := cmd.Context()
	c, err := q.getClients()
	if err != nil {
		return err
	}
	ans, err := query.Endpoint(ctx, c, ns, q.pod)
	if err != nil {
		return err
	}
	if q.output != outputTable {
		return writeObject(q.env.Out, q.output, ans)
	}
	return writeEndpoint(q.env.Out, ans)
}

// writeEndpoint prints the answer of query endpoint as text and a table.
func writeEndpoint(w io.Writer, a *query.EndpointAnswer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Endpoint %s/%s", a.Namespace, a.Pod)
	if len(a.IPs) > 0 {
		fmt.Fprintf(&b, " (%s", strings.Join(a.IPs, ","))
		if a.Node != "" {
			fmt.Fprintf(&b, " on %s", a.Node)
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	if len(a.Applied) == 0 {
		b.WriteString("Applied policies: none (no policy selects this pod)\n")
	} else {
		fmt.Fprintf(&b, "Applied policies: %s\n", strings.Join(a.Applied, ", "))
	}
	if len(a.Isolated) == 0 {
		b.WriteString("Isolated by K8s NetworkPolicy: no\n")
	} else {
		fmt.Fprintf(&b, "Isolated by K8s NetworkPolicy: %s\n", strings.Join(a.Isolated, ", "))
	}
	if _, err := w.Write([]byte(b.String() + "\n")); err != nil {
		return err
	}
	if len(a.Rules) == 0 {
		_, err := w.Write([]byte("No rule applies to this pod or names it as a peer: all its traffic is allowed.\n"))
		return err
	}
	t := &table{header: []string{"ROLE", "POLICY", "RULE", "DIRECTION", "ACTION", "PEERS", "PORTS", "EFFECT"}}
	for _, r := range a.Rules {
		t.add(r.Role, r.Policy, r.Rule, r.Direction, r.Action, joinFew(r.Peers, 2), r.Services, r.Effect)
	}
	return t.write(w)
}
