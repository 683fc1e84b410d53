package antctl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"antrea.io/antrea/pkg/antctl/query"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// antctl get agentinfo|controllerinfo: what the components report about
// themselves in the monitoring CRDs (query.AgentInfos, query.ControllerInfo).

func newGetAgentInfoCommand(g *getOptions) *cobra.Command {
	var node string
	cmd := &cobra.Command{
		Use:     "agentinfo",
		Aliases: []string{"agentinfos", "ai"},
		Short:   "Show the agents' reports: version, Node subnets, OVS, policy counts, local Pods, health",
		Long: `Show what each antrea-agent reports about itself in its AntreaAgentInfo
(crd.antrea.io/v1beta1, named after its Node; docs/monitoring.md): its version and
Pod, the Node's Pod subnets, the OVS version and bridge, how many computed
NetworkPolicies, AddressGroups and AppliedToGroups it holds, its local Pods, and
its health conditions. In local mode this Node's agent; from a laptop every
agent (or --node NODE).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node == "" && g.local() && !g.kubeconfigGiven() {
				node = g.env.NodeName
			}
			c, err := g.getClients()
			if err != nil {
				return err
			}
			infos, err := query.AgentInfos(cmd.Context(), c, node)
			if err != nil {
				return err
			}
			if g.output != outputTable {
				if node != "" {
					return writeObject(g.env.Out, g.output, &infos[0])
				}
				return writeObject(g.env.Out, g.output, infos)
			}
			if len(infos) == 0 {
				fmt.Fprintln(g.env.Err, "No AntreaAgentInfos: no agent has reported.")
				return nil
			}
			return agentInfoTable(infos).write(g.env.Out)
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "Only the agent of this Node (default in local mode: this Node)")
	_ = cmd.RegisterFlagCompletionFunc("node", g.completeNodes)
	return cmd
}

func agentInfoTable(infos []crdv1beta1.AntreaAgentInfo) *table {
	t := &table{header: []string{"NODE", "POD", "VERSION", "HEALTHY", "SUBNETS", "OVS", "NETWORK-POLICIES", "ADDRESS-GROUPS",
		"APPLIED-TO-GROUPS", "LOCAL-PODS"}}
	for _, i := range infos {
		healthy := ""
		for _, c := range i.AgentConditions {
			if c.Type == crdv1beta1.AgentHealthy {
				healthy = string(c.Status)
			}
		}
		np := i.NetworkPolicyControllerInfo
		t.add(i.Name, podRefString(i.PodRef), i.Version, healthy, joinFew(i.NodeSubnets, 2), i.OVSInfo.Version,
			strconv.Itoa(int(np.NetworkPolicyNum)), strconv.Itoa(int(np.AddressGroupNum)), strconv.Itoa(int(np.AppliedToGroupNum)),
			strconv.Itoa(int(i.LocalPodNum)))
	}
	return t
}

func newGetControllerInfoCommand(g *getOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "controllerinfo",
		Aliases: []string{"controllerinfos", "ci"},
		Short:   "Show the controller's report: version, policy counts, connected agents, health",
		Long: `Show what antrea-controller reports about itself in the AntreaControllerInfo
antrea-controller (crd.antrea.io/v1beta1; docs/monitoring.md): its version, Pod and
Node, how many NetworkPolicies, AddressGroups and AppliedToGroups it computed, how
many agents watch them, and its health.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.getClients()
			if err != nil {
				return err
			}
			info, err := query.ControllerInfo(cmd.Context(), c)
			if err != nil {
				return err
			}
			if g.output != outputTable {
				return writeObject(g.env.Out, g.output, info)
			}
			healthy := ""
			for _, c := range info.ControllerConditions {
				if c.Type == crdv1beta1.ControllerHealthy {
					healthy = string(c.Status)
				}
			}
			np := info.NetworkPolicyControllerInfo
			t := &table{header: []string{"POD", "NODE", "VERSION", "HEALTHY", "NETWORK-POLICIES", "ADDRESS-GROUPS",
				"APPLIED-TO-GROUPS", "CONNECTED-AGENTS"}}
			t.add(podRefString(info.PodRef), info.NodeRef.Name, info.Version, healthy, strconv.Itoa(int(np.NetworkPolicyNum)),
				strconv.Itoa(int(np.AddressGroupNum)), strconv.Itoa(int(np.AppliedToGroupNum)), strconv.Itoa(int(info.ConnectedAgentNum)))
			return t.write(g.env.Out)
		},
	}
}

// podRefString is NS/NAME of a Pod reference ("" for none).
func podRefString(r corev1.ObjectReference) string {
	return strings.TrimPrefix(r.Namespace+"/"+r.Name, "/")
}
