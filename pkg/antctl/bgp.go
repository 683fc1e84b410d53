package antctl

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
)

// The BGP commands read the speaker that runs in a Node's agent
// (BGPPolicy, pkg/agent/bgp) through that agent's API: GET /bgppolicy,
// /bgppeers, /bgproutes. Queries (bgpClient) are apart from printing.

// bgpClient is the agent API of the node of --node, or in local mode of
// this node.
func (g *getOptions) bgpClient(cmd *cobra.Command) (*agentClient, error) {
	return g.nodeAgentAPI(cmd, "a Node's BGP speaker")
}

// nodeAgentAPI is the agent API of the node of --node, or in local mode of
// this node, for a command that reads what (in its error).
func (g *getOptions) nodeAgentAPI(cmd *cobra.Command, what string) (*agentClient, error) {
	node, _ := cmd.Flags().GetString(nodeFlag)
	if node == "" && g.local() {
		node = g.env.NodeName
	}
	if node == "" {
		return nil, fmt.Errorf("%s reads %s: give --node NODE", strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), what)
	}
	ac, err := g.agentClientFor(cmd.Context(), node)
	if err != nil {
		return nil, err
	}
	ac.how = localModeHowTo + " " + replayArgs(cmd)
	return ac, nil
}

// bgpPolicy is the BGPPolicy in effect on the node.
func (a *agentClient) bgpPolicy(ctx context.Context) (apis.BGPPolicyState, error) {
	var st apis.BGPPolicyState
	err := a.get(ctx, "/bgppolicy", nil, &st)
	return st, err
}

// bgpPeers are the node's speaker's peers.
func (a *agentClient) bgpPeers(ctx context.Context) ([]apis.BGPPeerState, error) {
	var out []apis.BGPPeerState
	err := a.get(ctx, "/bgppeers", nil, &out)
	return out, err
}

// bgpRoutes are the routes the node's speaker advertises.
func (a *agentClient) bgpRoutes(ctx context.Context) ([]apis.BGPRouteState, error) {
	var out []apis.BGPRouteState
	err := a.get(ctx, "/bgproutes", nil, &out)
	return out, err
}

// familyOf says whether s (an address, ADDRESS:PORT or a prefix) is IPv4.
func familyOf(s string) (v4 bool, ok bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().Is4(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().Is4(), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().Is4(), true
	}
	return false, false
}

// keepFamily keeps what is of the family asked (-4, -6; neither: all).
func keepFamily(s string, only4, only6 bool) bool {
	if !only4 && !only6 {
		return true
	}
	v4, ok := familyOf(s)
	return ok && ((only4 && v4) || (only6 && !v4))
}

// bgpRouteTypes are the route types -T accepts (upstream's).
var bgpRouteTypes = []string{"EgressIP", "ServiceLoadBalancerIP", "ServiceExternalIP", "ServiceClusterIP", "NodeIPAMPodCIDR"}

// filterBGPRoutes keeps the routes of one family and one type ("" all).
func filterBGPRoutes(routes []apis.BGPRouteState, only4, only6 bool, typ string) ([]apis.BGPRouteState, error) {
	if typ != "" {
		found := false
		for _, t := range bgpRouteTypes {
			if strings.EqualFold(t, typ) {
				typ, found = t, true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown route type %q: one of %s%s", typ, strings.Join(bgpRouteTypes, ", "), didYouMean(typ, bgpRouteTypes))
		}
	}
	out := []apis.BGPRouteState{}
	for _, r := range routes {
		if keepFamily(r.Route, only4, only6) && (typ == "" || r.Type == typ) {
			out = append(out, r)
		}
	}
	return out, nil
}

func addFamilyFlags(cmd *cobra.Command, only4, only6 *bool) {
	cmd.Flags().BoolVarP(only4, "ipv4-only", "4", false, "Only IPv4")
	cmd.Flags().BoolVarP(only6, "ipv6-only", "6", false, "Only IPv6")
	cmd.MarkFlagsMutuallyExclusive("ipv4-only", "ipv6-only")
}

const bgpHowTo = `
The BGP speaker runs in the antrea-agent of each Node a BGPPolicy selects
(feature gate BGPPolicy, docs/bgp-policy.md): antctl asks that Node's agent
API (--node NODE; in the agent container, its own Node).`

func newGetBGPPolicyCommand(g *getOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "bgppolicy --node NODE",
		Aliases: []string{"bgppolicies"},
		Short:   "Show the BGPPolicy in effect on a Node and its speaker's configuration",
		Long:    "Show the BGPPolicy in effect on a Node: its name, the speaker's router ID, local ASN and listen port." + bgpHowTo,
		Example: `  antctl get bgppolicy --node node-1`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ac, err := g.bgpClient(cmd)
			if err != nil {
				return err
			}
			st, err := ac.bgpPolicy(cmd.Context())
			if err != nil {
				return err
			}
			if g.output != outputTable {
				return writeObject(g.env.Out, g.output, st)
			}
			t := &table{header: []string{"NAME", "ROUTER ID", "LOCAL ASN", "LISTEN PORT"}}
			row := []string{st.BGPPolicyName, st.RouterID, strconv.Itoa(int(st.LocalASN)), strconv.Itoa(int(st.ListenPort))}
			if st.ConfederationIdentifier != 0 {
				t.header = append(t.header, "CONFEDERATION IDENTIFIER")
				row = append(row, strconv.Itoa(int(st.ConfederationIdentifier)))
			}
			t.add(row...)
			return t.write(g.env.Out)
		},
	}
	cmd.Flags().String(nodeFlag, "", "The Node whose agent API to ask (local mode: this Node)")
	return cmd
}

func newGetBGPPeersCommand(g *getOptions) *cobra.Command {
	var only4, only6 bool
	cmd := &cobra.Command{
		Use:     "bgppeers --node NODE [-4|-6]",
		Aliases: []string{"bgppeer"},
		Short:   "Show the peers of a Node's BGP speaker and their sessions",
		Long:    "Show the peers of a Node's BGP speaker: address and port, ASN, session state." + bgpHowTo,
		Example: `  antctl get bgppeers --node node-1
  antctl get bgppeers --node node-1 -6`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ac, err := g.bgpClient(cmd)
			if err != nil {
				return err
			}
			peers, err := ac.bgpPeers(cmd.Context())
			if err != nil {
				return err
			}
			out := []apis.BGPPeerState{}
			for _, p := range peers {
				if keepFamily(p.Peer, only4, only6) {
					out = append(out, p)
				}
			}
			if g.output != outputTable {
				return writeObject(g.env.Out, g.output, out)
			}
			t := &table{header: []string{"PEER", "ASN", "STATE"}}
			for _, p := range out {
				t.add(p.Peer, strconv.Itoa(int(p.ASN)), p.State)
			}
			return t.write(g.env.Out)
		},
	}
	cmd.Flags().String(nodeFlag, "", "The Node whose agent API to ask (local mode: this Node)")
	addFamilyFlags(cmd, &only4, &only6)
	return cmd
}

func newGetBGPRoutesCommand(g *getOptions) *cobra.Command {
	var only4, only6 bool
	var typ string
	cmd := &cobra.Command{
		Use:     "bgproutes --node NODE [-4|-6] [-T TYPE]",
		Aliases: []string{"bgproute"},
		Short:   "Show the routes a Node's BGP speaker advertises",
		Long: "Show the routes a Node's BGP speaker advertises, each with its type (" + strings.Join(bgpRouteTypes, ", ") +
			") and the object it comes from." + bgpHowTo,
		Example: `  antctl get bgproutes --node node-1
  antctl get bgproutes --node node-1 -T ServiceLoadBalancerIP`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ac, err := g.bgpClient(cmd)
			if err != nil {
				return err
			}
			routes, err := ac.bgpRoutes(cmd.Context())
			if err != nil {
				return err
			}
			out, err := filterBGPRoutes(routes, only4, only6, typ)
			if err != nil {
				return err
			}
			if g.output != outputTable {
				return writeObject(g.env.Out, g.output, out)
			}
			t := &table{header: []string{"ROUTE", "TYPE", "K8S-OBJ-REF"}}
			for _, r := range out {
				t.add(r.Route, r.Type, r.K8sObjRef)
			}
			return t.write(g.env.Out)
		},
	}
	cmd.Flags().String(nodeFlag, "", "The Node whose agent API to ask (local mode: this Node)")
	cmd.Flags().StringVarP(&typ, "type", "T", "", "Only routes of this type: "+strings.Join(bgpRouteTypes, ", "))
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(bgpRouteTypes, cobra.ShellCompDirectiveNoFileComp))
	addFamilyFlags(cmd, &only4, &only6)
	return cmd
}
