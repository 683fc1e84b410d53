package antctl

import (
	"io"
	"net"
	"strconv"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/antctl/query"
)

func newGetNodePortLocalCommand(g *getOptions) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:     "nodeportlocal [POD]",
		Aliases: []string{"npl"},
		Short:   "Show the NodePortLocal mappings of Pods: which Node IP and port reach which Pod port",
		Long: `Show the NodePortLocal mappings (docs/node-port-local.md) the agents wrote in the Pods' annotation
nodeportlocal.antrea.io: for each Pod port of a Service annotated nodeportlocal.antrea.io/enabled,
the Node IP and port an external load balancer reaches it at. POD in the namespace of -n (or the
kubeconfig's), every Pod of it without POD, every Pod with -A.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.getClients()
			if err != nil {
				return err
			}
			ns, _ := g.namespace()
			if all {
				ns = ""
			}
			ms, err := query.NodePortLocal(cmd.Context(), c, ns, firstArg(args))
			if err != nil {
				return err
			}
			if g.output != outputTable {
				return writeObject(g.env.Out, g.output, ms)
			}
			return writeNodePortLocalTable(g.env.Out, ms)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "the Pods of every namespace")
	return cmd
}

// writeNodePortLocalTable prints one row per mapping.
func writeNodePortLocalTable(w io.Writer, ms []query.PodNodePortLocal) error {
	t := &table{header: []string{"NAMESPACE", "POD", "NODE", "POD-PORT", "PROTOCOL", "NODE-IP:PORT"}}
	for _, m := range ms {
		t.add(m.Namespace, m.Pod, orNone(m.Node), strconv.Itoa(m.PodPort), m.Protocol,
			net.JoinHostPort(m.NodeIP, strconv.Itoa(m.NodePort)))
	}
	return t.write(w)
}
