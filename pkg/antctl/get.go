package antctl

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// getOptions are the flags every get shares.
type getOptions struct {
	*options
	output string
}

func newGetCommand(o *options) *cobra.Command {
	g := &getOptions{options: o}
	cmd := &cobra.Command{
		Use:   "get RESOURCE [NAME]",
		Short: "Show computed policy objects, a node's interfaces and flows, feature gates",
		Long: `Show Antrea's resources.

From the controller (through kube-apiserver, from a laptop or local mode):
  networkpolicy, appliedtogroup, addressgroup   the computed controlplane.antrea.io/v1beta2 objects
  featuregates                                  from the antrea-config ConfigMap (local mode: the conf files)
  agentinfo, controllerinfo                     what the components report about themselves (monitoring CRDs)
  networkpolicystats, antreanetworkpolicystats, antreaclusternetworkpolicystats
                                                policies' traffic statistics (stats.antrea.io/v1alpha1)
  nodelatencystats                              the RTT matrix between Nodes (NodeLatencyMonitor)
  egress, externalippool                        Egress IPs, their pools and Nodes (crd.antrea.io/v1beta1)
  nodeportlocal                                 the Pods' NodePortLocal mappings (Node IP and port per Pod port)
From a node's OVS (local mode; from a laptop through the node's agent API, --node NODE or -p POD):
  podinterface, ovsflows
From a node's BGP speaker (its agent API; --node NODE, local mode: this node):
  bgppolicy, bgppeers, bgproutes                BGPPolicy (docs/bgp-policy.md)
From a node's agent (its agent API; --node NODE, local mode: this node):
  fqdncache                                     the addresses learned for toFQDN rules' names
  podmulticaststats                             the multicast packets each Pod received and sent
From the Flow Aggregator (a port-forward to its Pod):
  flows                                         the latest flow records, both Nodes' joined (docs/flow-export.md)`,
		Args: cobra.ArbitraryArgs,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.preRun(cmd)
			return checkOutput(g.output)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0], "resource")
		},
	}
	cmd.PersistentFlags().StringVarP(&g.output, "output", "o", outputTable, "Output format: "+strings.Join(outputFormats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	cmd.AddCommand(
		newGetNetworkPolicyCommand(g),
		newGetAppliedToGroupCommand(g),
		newGetAddressGroupCommand(g),
		newGetPodInterfaceCommand(g),
		newGetOVSFlowsCommand(g),
		newGetFeatureGatesCommand(g),
		newGetPipelineCommand(g),
		newGetAgentInfoCommand(g),
		newGetControllerInfoCommand(g),
		newGetNodeLatencyStatsCommand(g),
		newGetEgressCommand(g),
		newGetExternalIPPoolCommand(g),
		newGetNodePortLocalCommand(g),
		newGetBGPPolicyCommand(g),
		newGetBGPPeersCommand(g),
		newGetBGPRoutesCommand(g),
		newGetFQDNCacheCommand(g),
		newGetPodMulticastStatsCommand(g),
		newGetFlowsCommand(g),
	)
	cmd.AddCommand(newGetStatsCommands(g)...)
	return cmd
}

// unknownCommand is the one-line error for a subcommand (of what) that parent
// lacks, naming the closest one by name or alias.
func unknownCommand(parent *cobra.Command, name, what string) error {
	var names []string
	for _, c := range parent.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
			names = append(names, c.Aliases...)
		}
	}
	guess := closest(name, names)
	for _, c := range parent.Commands() {
		for _, a := range c.Aliases {
			if a == guess {
				guess = c.Name()
			}
		}
	}
	hint := ""
	if guess != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", guess)
	}
	var all []string
	for _, c := range parent.Commands() {
		if c.IsAvailableCommand() {
			all = append(all, c.Name())
		}
	}
	sort.Strings(all)
	return fmt.Errorf("unknown %s %q for %q%s; want one of %s", what, name, parent.CommandPath(), hint, strings.Join(all, ", "))
}
