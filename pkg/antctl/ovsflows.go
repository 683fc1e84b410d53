package antctl

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// flowEntry is one flow as -o json|yaml print it.
type flowEntry struct {
	Table           uint8   `json:"table"`
	TableName       string  `json:"tableName,omitempty"`
	Priority        uint16  `json:"priority"`
	Cookie          string  `json:"cookie"`
	Packets         uint64  `json:"packets"`
	Bytes           uint64  `json:"bytes"`
	DurationSeconds float64 `json:"durationSeconds"`
	// Flow is the flow without counters, as ovs-ofctl --no-stats prints it
	// (and as ovs-ofctl add-flow takes it).
	Flow string `json:"flow"`
}

type ovsFlowsOptions struct {
	g     *getOptions
	pod   string
	table string
	// tableNamesOnly prints the pipeline's table names and nothing else.
	tableNamesOnly bool
	policy         string
	// policyType narrows -N to the policies of one type (upstream's --type).
	policyType string
	// groups are the OVS groups to print instead of flows: IDs, or "all".
	groups string
}

// groupEntry is one OVS group as -o json|yaml print it.
type groupEntry struct {
	GroupID uint32 `json:"groupID"`
	Type    string `json:"type"`
	// Group is the group as ovs-ofctl dump-groups prints it.
	Group string `json:"group"`
}

func newGetOVSFlowsCommand(g *getOptions) *cobra.Command {
	f := &ovsFlowsOptions{g: g}
	cmd := &cobra.Command{
		Use:     "ovsflows [-p POD -n NS] [-T TABLE[,TABLE...]] [-N NS/NAME [--type TYPE]] [--table-names-only]",
		Aliases: []string{"ovsflow", "of"},
		Short:   "Show a node's OpenFlow flows as ovs-ofctl prints them (local mode, or --node through its agent API)",
		Long: `Show the flows of this node's bridge (br-int) with their counters, one per line
as ` + "`ovs-ofctl -O OpenFlow15 dump-flows`" + ` prints them. In local mode (the
antrea-agent container) this node's.

  -T TABLE[,TABLE]    tables of the pipeline, by name (docs/design/ovs-pipeline.md) or number
  --table-names-only  the pipeline's table names, one a line
  -G ID[,ID...]|all   the OVS groups (Services' endpoint selection) instead of flows, as
                      ovs-ofctl dump-groups prints them (local mode: the agent API serves no groups)
  -p POD -n NS        the flows that match the pod's port, MAC or address
  -N NS/NAME          the flows realizing a NetworkPolicy (by its source's namespace/name;
                      --type K8sNP|ACNP|ANNP|ANP|BANP when several kinds share the name):
                      its rules' conjunctive flows and the isolation of its pods. antctl finds
                      them by matching the policy's rules, read from the controller, against
                      the rule tables; rules realized identically on this node are shown together.`,
		Example: `  ` + localModeHowTo + ` get ovsflows -T Classifier
  ` + localModeHowTo + ` get ovsflows -p web-0 -n demo
  ` + localModeHowTo + ` get ovsflows -N demo/allow-frontend
  ` + localModeHowTo + ` get ovsflows -T IngressRule,IngressDefaultRule
  ` + localModeHowTo + ` get ovsflows -G all`,
		Args: cobra.NoArgs,
		RunE: f.run,
	}
	// Upstream antctl's flags (pkg/antctl/antctl.go, "ovsflows"), then ours.
	cmd.Flags().StringVarP(&f.pod, "pod", "p", "", "Only the flows of this pod (its namespace is -n, default \"default\")")
	cmd.Flags().StringVarP(&f.table, "table", "T", "", "Only these tables (comma-separated names or numbers)")
	cmd.Flags().BoolVar(&f.tableNamesOnly, "table-names-only", false, "Print the pipeline's table names only")
	cmd.Flags().StringVarP(&f.policy, "networkpolicy", "N", "", "Only the flows of this NetworkPolicy (NS/NAME of its source; NAME uses -n)")
	cmd.Flags().StringVar(&f.policyType, "type", "", "With -N: the policy's type, one of K8sNP, ACNP, ANNP, ANP, BANP")
	cmd.Flags().StringVarP(&f.groups, "groups", "G", "", "Print these OVS groups instead of flows: comma-separated IDs, or all")
	cmd.Flags().StringVar(&f.policy, "policy", "", "The same as -N/--networkpolicy")
	_ = cmd.Flags().MarkHidden("policy")
	_ = cmd.RegisterFlagCompletionFunc("pod", g.completeLocalPods)
	addNodeFlag(cmd)
	_ = cmd.RegisterFlagCompletionFunc("table", completeTables)
	return cmd
}

func completeTables(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	p, err := pipeline()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, t := range p.Tables() {
		if strings.HasPrefix(strings.ToLower(t.Name), strings.ToLower(toComplete)) {
			out = append(out, t.Name+"\t"+t.Doc)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func (f *ovsFlowsOptions) run(cmd *cobra.Command, _ []string) error {
	ctx := cmd.Context()
	ns, nsGiven := f.g.namespace()
	// The table layout is known without OVS: a typo is answered anywhere.
	p, err := pipeline()
	if err != nil {
		return err
	}
	if f.tableNamesOnly {
		var b strings.Builder
		for _, t := range p.Tables() {
			b.WriteString(t.Name + "\n")
		}
		_, err := fmt.Fprint(f.g.env.Out, b.String())
		return err
	}
	tableIDs := []uint8{openflow.TableAll}
	if f.table != "" {
		tableIDs = nil
		for _, name := range strings.Split(f.table, ",") {
			t, err := lookupTable(p, strings.TrimSpace(name))
			if err != nil {
				return err
			}
			tableIDs = append(tableIDs, t.ID)
		}
	}
	polType, err := query.ParsePolicyType(f.policyType)
	if err != nil {
		return err
	}
	if polType != "" && f.policy == "" {
		return fmt.Errorf("--type narrows -N/--networkpolicy: give -N NS/NAME")
	}
	groupIDs, err := parseGroupIDs(f.groups)
	if err != nil {
		return err
	}
	local, err := f.g.requireNode(cmd, ns, f.pod)
	if err != nil {
		return err
	}
	if groupIDs != nil {
		return f.printGroups(ctx, local, groupIDs)
	}
	var store interfacestore.InterfaceStore
	if f.pod != "" || f.policy != "" {
		if store, err = local.interfaces(ctx); err != nil {
			return err
		}
	}
	var keys []podKeys
	if f.pod != "" {
		ifs, err := podInterfaces(store, ns, f.pod)
		if err != nil {
			return err
		}
		for _, i := range ifs {
			keys = append(keys, keysOf(i))
		}
	}
	var pf *policyFlows
	if f.policy != "" {
		polNS, name, err := splitPolicyName(f.policy, ns, nsGiven)
		if err != nil {
			return err
		}
		if pf, err = f.g.policyFlows(ctx, p, store, polNS, name, polType); err != nil {
			return err
		}
	}
	var flows []openflow.FlowStats
	for _, id := range tableIDs {
		fs, err := local.dumpFlows(ctx, id)
		if err != nil {
			return err
		}
		flows = append(flows, fs...)
	}
	var sel []*openflow.FlowStats
	var inPolicy map[int]bool
	if pf != nil {
		inPolicy = pf.selectFlows(flows)
	}
	for i := range flows {
		fs := &flows[i]
		if keys != nil && !matchesPod(&fs.Flow, keys) {
			continue
		}
		if pf != nil && !inPolicy[i] {
			continue
		}
		sel = append(sel, fs)
	}
	if f.g.output != outputTable {
		out := make([]flowEntry, 0, len(sel))
		for _, fs := range sel {
			e := flowEntry{Table: fs.Table, Priority: fs.Priority, Cookie: fmt.Sprintf("%#x", fs.Cookie),
				Packets: fs.PacketCount, Bytes: fs.ByteCount,
				DurationSeconds: float64(fs.DurationSec) + float64(fs.DurationNsec)/1e9, Flow: fs.Flow.String()}
			if int(fs.Table) < len(p.Tables()) {
				e.TableName = p.Tables()[fs.Table].Name
			}
			out = append(out, e)
		}
		return writeObject(f.g.env.Out, f.g.output, out)
	}
	if pf != nil && len(pf.notes) > 0 {
		for _, n := range pf.notes {
			fmt.Fprintln(f.g.env.Err, n)
		}
	}
	var b strings.Builder
	for _, fs := range sel {
		b.WriteString(" ")
		b.WriteString(flowStatsText(fs))
		b.WriteString("\n")
	}
	_, err = fmt.Fprint(f.g.env.Out, b.String())
	return err
}

// parseGroupIDs reads -G: nil without it, [GroupIDAll] for all.
func parseGroupIDs(s string) ([]uint32, error) {
	if s == "" {
		return nil, nil
	}
	if strings.EqualFold(s, "all") {
		return []uint32{openflow.GroupIDAll}, nil
	}
	var ids []uint32
	for _, part := range strings.Split(s, ",") {
		id, err := strconv.ParseUint(strings.TrimSpace(part), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("-G %q: want group IDs (comma-separated) or all", s)
		}
		ids = append(ids, uint32(id))
	}
	return ids, nil
}

// printGroups prints the groups of ids as ovs-ofctl dump-groups does (one
// line each, without its reply header).
func (f *ovsFlowsOptions) printGroups(ctx context.Context, local *localNode, ids []uint32) error {
	var groups []openflow.GroupDesc
	for _, id := range ids {
		gs, err := local.dumpGroups(ctx, id)
		if err != nil {
			return err
		}
		if len(gs) == 0 && id != openflow.GroupIDAll {
			return fmt.Errorf("no OVS group %d on this node", id)
		}
		groups = append(groups, gs...)
	}
	if f.g.output != outputTable {
		out := make([]groupEntry, 0, len(groups))
		for i := range groups {
			out = append(out, groupEntry{GroupID: groups[i].GroupID, Type: groups[i].Type.String(), Group: groups[i].String()})
		}
		return writeObject(f.g.env.Out, f.g.output, out)
	}
	var b strings.Builder
	for i := range groups {
		b.WriteString(" " + groups[i].String() + "\n")
	}
	_, err := fmt.Fprint(f.g.env.Out, b.String())
	return err
}

// podKeys are the values by which a flow belongs to a pod interface.
type podKeys struct {
	ofPort uint32
	mac    net.HardwareAddr
	ips    []netip.Addr
}

func keysOf(i *interfacestore.InterfaceConfig) podKeys {
	k := podKeys{mac: i.MAC}
	if i.OVSPortConfig != nil && i.OFPort > 0 {
		k.ofPort = uint32(i.OFPort)
	}
	for _, ip := range i.IPs {
		if a, ok := netip.AddrFromSlice(ip); ok {
			k.ips = append(k.ips, a.Unmap())
		}
	}
	return k
}

// matchesPod says whether a flow matches exactly on one of the pod's keys:
// its OpenFlow port (in_port, or the output port register the pipeline
// fills, agentof.TargetOFPortField), its MAC or one of its addresses
// (ARP included). A match on a prefix holding the pod (its node's pod CIDR)
// is not the pod's.
func matchesPod(f *openflow.Flow, keys []podKeys) bool {
	for _, k := range keys {
		if k.ofPort != 0 {
			if mf, ok := f.Match.Get(openflow.FieldInPort); ok && mf.Value.Lo == uint64(k.ofPort) {
				return true
			}
			if v, ok := fieldRangeValue(&f.Match, agentof.TargetOFPortField); ok && v == uint64(k.ofPort) {
				return true
			}
		}
		if k.mac != nil {
			for _, fld := range []openflow.Field{openflow.FieldEthSrc, openflow.FieldEthDst} {
				if mf, ok := f.Match.Get(fld); ok && exact(mf, fld) && macOf(mf.Value) == k.mac.String() {
					return true
				}
			}
		}
		for _, ip := range k.ips {
			for _, fld := range []openflow.Field{openflow.FieldIPv4Src, openflow.FieldIPv4Dst, openflow.FieldARPSpa, openflow.FieldARPTpa} {
				if mf, ok := f.Match.Get(fld); ok && exact(mf, fld) && ip.Is4() && uint32(mf.Value.Lo) == ip4Uint(ip) {
					return true
				}
			}
		}
	}
	return false
}

// fieldRangeValue returns the value a match gives the bits of r, when it
// matches all of them exactly (registers: at most 64 bits).
func fieldRangeValue(m *openflow.Match, r openflow.FieldRange) (uint64, bool) {
	mf, ok := m.Get(r.Field)
	if !ok {
		return 0, false
	}
	width := uint(r.End) - uint(r.Start) + 1
	ones := uint64(1)<<width - 1
	if width >= 64 {
		ones = ^uint64(0)
	}
	if (mf.Mask.Lo>>r.Start)&ones != ones {
		return 0, false
	}
	return (mf.Value.Lo >> r.Start) & ones, true
}

// exact says whether a match field matches every bit of its field.
func exact(mf openflow.MatchField, f openflow.Field) bool {
	bits := f.Bits()
	if bits > 64 {
		return mf.Mask.Lo == ^uint64(0) && mf.Mask.Hi == uint64(1)<<(bits-64)-1
	}
	return mf.Mask.Lo == uint64(1)<<bits-1
}

func macOf(v openflow.U128) string {
	b := make(net.HardwareAddr, 6)
	for i := 0; i < 6; i++ {
		b[5-i] = byte(v.Lo >> (8 * i))
	}
	return b.String()
}

func ip4Uint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// splitPolicyName reads -N/--networkpolicy: NS/NAME, or NAME in -n's namespace (any
// namespace without -n, which also finds cluster-scoped policies).
func splitPolicyName(s, ns string, nsGiven bool) (string, string, error) {
	if i := strings.Index(s, "/"); i >= 0 {
		if i == 0 || i == len(s)-1 || strings.Count(s, "/") > 1 {
			return "", "", fmt.Errorf("-N/--networkpolicy %q: want NAMESPACE/NAME or NAME", s)
		}
		return s[:i], s[i+1:], nil
	}
	if nsGiven {
		return ns, s, nil
	}
	return "", s, nil
}
