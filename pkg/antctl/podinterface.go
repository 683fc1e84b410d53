package antctl

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/agent/interfacestore"
)

func newGetPodInterfaceCommand(g *getOptions) *cobra.Command {
	var pod string
	cmd := &cobra.Command{
		Use:     "podinterface [NAME] [-p POD] [-n NS]",
		Aliases: []string{"podinterfaces", "pi"},
		Short:   "Show a node's pod interfaces (local mode, or --node through its agent API)",
		Long: `Show the pod interfaces of this node: what the agent recorded in OVSDB (the
external_ids of br-int's ports) with the OpenFlow port OVS gave each.
In local mode (the antrea-agent container) this node's.

  -n NS          pods of namespace NS
  -p POD -n NS   pod NS/POD (or NAME -n NS, as upstream antctl)
  NAME           the pods of that name in every namespace`,
		Example: `  ` + localModeHowTo + ` get podinterface -n demo
  ` + localModeHowTo + ` get podinterface web-0 -n demo`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, nsGiven := g.namespace()
			anyNS := ""
			if len(args) == 1 {
				switch {
				case pod != "" && pod != args[0]:
					return fmt.Errorf("NAME %s and -p %s name two pods: give one", args[0], pod)
				case nsGiven:
					pod = args[0]
				default:
					anyNS = args[0]
				}
			}
			local, err := g.requireNode(cmd, ns, pod)
			if err != nil {
				return err
			}
			out, err := local.podInterfaces(cmd.Context(), ns, nsGiven, pod)
			if err != nil {
				return err
			}
			if anyNS != "" {
				if out, err = podsNamed(out, anyNS); err != nil {
					return err
				}
			}
			if g.output != outputTable {
				return writeObject(g.env.Out, g.output, out)
			}
			if len(out) == 0 {
				where := ""
				if nsGiven {
					where = " of namespace " + ns
				}
				fmt.Fprintf(g.env.Err, "No pod interfaces%s on this node.\n", where)
				return nil
			}
			t := &table{header: []string{"NAMESPACE", "NAME", "INTERFACE", "IP", "MAC", "OFPORT", "CONTAINER-ID"}}
			for _, p := range out {
				t.add(p.PodNamespace, p.PodName, p.InterfaceName, joinFew(p.IPs, 2), p.MAC, strconv.Itoa(int(p.OFPort)), shortID(p.ContainerID))
			}
			return t.write(g.env.Out)
		},
	}
	cmd.Flags().StringVarP(&pod, "pod", "p", "", "Only this pod's interfaces (its namespace is -n, default \"default\")")
	_ = cmd.RegisterFlagCompletionFunc("pod", g.completeLocalPods)
	addNodeFlag(cmd)
	return cmd
}

// podInterfaces reads the node's pod interfaces: pod's (in ns), else those
// of namespace ns when nsGiven, else all; described as the agent API (and
// upstream's) describe them.
func (l *localNode) podInterfaces(ctx context.Context, ns string, nsGiven bool, pod string) ([]apis.PodInterface, error) {
	store, err := l.interfaces(ctx)
	if err != nil {
		return nil, err
	}
	var ifs []*interfacestore.InterfaceConfig
	if pod != "" {
		if ifs, err = podInterfaces(store, ns, pod); err != nil {
			return nil, err
		}
	} else {
		for _, i := range store.GetInterfacesByType(interfacestore.ContainerInterface) {
			if !nsGiven || i.PodNamespace == ns {
				ifs = append(ifs, i)
			}
		}
	}
	out := make([]apis.PodInterface, 0, len(ifs))
	for _, i := range ifs {
		out = append(out, apis.NewPodInterface(i))
	}
	return out, nil
}

// podsNamed keeps the interfaces of the pods named name, in any namespace.
func podsNamed(ifs []apis.PodInterface, name string) ([]apis.PodInterface, error) {
	var out []apis.PodInterface
	var names []string
	for _, i := range ifs {
		names = append(names, i.PodName)
		if i.PodName == name {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no pod named %q has an interface on this node%s", name, didYouMean(name, names))
	}
	return out, nil
}

// shortID cuts a container ID as crictl ps prints it.
func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
