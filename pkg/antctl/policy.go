package antctl

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"

	"antrea.io/antrea/pkg/antctl/query"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// The three computed resources of controlplane.antrea.io/v1beta2, listed
// without nodeName (every object with every member) or, with --node, as that
// Node's agent sees them: the server evaluates nodeName=<node>
// (docs/design/controlplane-api.md).

// nodeNameField is the field selector the controlplane API evaluates.
const nodeNameField = "nodeName"

// policyFilter holds the filters of the three commands.
type policyFilter struct {
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
func (f *policyFilter) addFlags(cmd *cobra.Command, podHelp string) {
	cmd.Flags().StringVarP(&f.pod, "pod", "p", "", podHelp+" (POD with -n, default \"default\", or NS/POD)")
	cmd.Flags().StringVar(&f.node, "node", "", "Only what the agent of this Node receives (the objects whose span holds it)")
	cmd.Flags().StringVar(&f.sortBy, "sort-by", "", "Order by this JSONPath of the objects (e.g. .metadata.name; default: by name)")
	_ = cmd.RegisterFlagCompletionFunc("pod", f.g.completePods)
	_ = cmd.RegisterFlagCompletionFunc("node", f.g.completeNodes)
}

// view is the state one command reads: the policies, groups and checks.
type view struct {
	clients *Clients
	ns      string // the namespace filter (-n), "" for none
	podNS   string // the pod's namespace when -p is given
}

// prepare checks -n, -p and --node and returns the clients.
func (f *policyFilter) prepare(ctx context.Context) (*view, error) {
	c, err := f.g.getClients()
	if err != nil {
		return nil, err
	}
	v := &view{clients: c}
	ns, given := f.g.namespace()
	if i := strings.IndexByte(f.pod, '/'); i > 0 {
		// NS/POD, as upstream antctl's -p takes it.
		ns, f.pod, given = f.pod[:i], f.pod[i+1:], true
	}
	if given {
		if err := checkNamespace(ctx, c.Kube, ns); err != nil {
			return nil, err
		}
	}
	if f.pod != "" {
		v.podNS = ns
		if err := checkPod(ctx, c.Kube, ns, f.pod); err != nil {
			return nil, err
		}
	} else if given {
		v.ns = ns
	}
	if f.node != "" {
		if err := checkNode(ctx, c.Kube, f.node); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func listOptions(node string) metav1.ListOptions {
	if node == "" {
		return metav1.ListOptions{}
	}
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(nodeNameField, node).String()}
}

func (v *view) policies(ctx context.Context, node string) ([]cpv1beta2.NetworkPolicy, error) {
	list, err := v.clients.Antrea.ControlplaneV1beta2().NetworkPolicies().List(ctx, listOptions(node))
	if err != nil {
		return nil, fmt.Errorf("listing networkpolicies: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

func (v *view) appliedToGroups(ctx context.Context, node string) ([]cpv1beta2.AppliedToGroup, error) {
	list, err := v.clients.Antrea.ControlplaneV1beta2().AppliedToGroups().List(ctx, listOptions(node))
	if err != nil {
		return nil, fmt.Errorf("listing appliedtogroups: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

func (v *view) addressGroups(ctx context.Context, node string) ([]cpv1beta2.AddressGroup, error) {
	list, err := v.clients.Antrea.ControlplaneV1beta2().AddressGroups().List(ctx, listOptions(node))
	if err != nil {
		return nil, fmt.Errorf("listing addressgroups: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// spans returns, for every object list(node) returns for some Node, the
// Nodes it is sent to: the server's own span, asked Node by Node (what each
// agent watches), so antctl needs no copy of the span computation.
func (v *view) spans(ctx context.Context, list func(ctx context.Context, node string) ([]string, error)) (map[string][]string, error) {
	nodes, err := nodeNames(ctx, v.clients.Kube)
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		first error
		out   = map[string][]string{}
		sem   = make(chan struct{}, maxConcurrentLists)
	)
	for _, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			names, err := list(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = fmt.Errorf("node %s: %w", n, err)
				}
				return
			}
			for _, name := range names {
				out[name] = append(out[name], n)
			}
		}()
	}
	wg.Wait()
	for _, ns := range out {
		sort.Strings(ns)
	}
	return out, first
}

// notFound is the error for a name get did not find, with the closest name.
func notFound(resource, name string, names []string) error {
	return fmt.Errorf("%s %q not found%s", resource, name, didYouMean(name, names))
}

// sourceString is the policy's origin as the controller's table prints it
// (type:namespace/name).
func sourceString(p *cpv1beta2.NetworkPolicy) string {
	ref := p.SourceRef
	if ref == nil {
		return ""
	}
	if ref.Namespace == "" {
		return string(ref.Type) + ":" + ref.Name
	}
	return string(ref.Type) + ":" + ref.Namespace + "/" + ref.Name
}

// priorities prints an Antrea-native policy's tier priority and priority,
// <none> for a K8s NetworkPolicy (evaluated between the application and
// baseline Tiers).
func priorities(p *cpv1beta2.NetworkPolicy) (tier, priority string) {
	tier, priority = "<none>", "<none>"
	if p.TierPriority != nil {
		tier = strconv.Itoa(int(*p.TierPriority))
	}
	if p.Priority != nil {
		priority = strconv.FormatFloat(*p.Priority, 'g', -1, 64)
	}
	return tier, priority
}

func sourceNamespace(p *cpv1beta2.NetworkPolicy) string {
	if p.SourceRef == nil {
		return ""
	}
	return p.SourceRef.Namespace
}

// appliedToOf lists the AppliedToGroups of a policy: its own and its rules'.
func appliedToOf(p *cpv1beta2.NetworkPolicy) []string {
	s := sets.New(p.AppliedToGroups...)
	for _, r := range p.Rules {
		s.Insert(r.AppliedToGroups...)
	}
	return sets.List(s)
}

// addressGroupsOf lists the AddressGroups of a policy's rules.
func addressGroupsOf(p *cpv1beta2.NetworkPolicy) []string {
	s := sets.New[string]()
	for _, r := range p.Rules {
		s.Insert(r.From.AddressGroups...)
		s.Insert(r.To.AddressGroups...)
	}
	return sets.List(s)
}

func hasPod(members []cpv1beta2.GroupMember, ns, name string) bool {
	for _, m := range members {
		if m.Pod != nil && m.Pod.Namespace == ns && m.Pod.Name == name {
			return true
		}
	}
	return false
}

func memberString(m cpv1beta2.GroupMember) string {
	switch {
	case m.Pod != nil:
		return m.Pod.Namespace + "/" + m.Pod.Name
	case m.Node != nil:
		return "node/" + m.Node.Name
	case m.Service != nil:
		return "service/" + m.Service.Namespace + "/" + m.Service.Name
	}
	return strings.Join(ipStrings(m.IPs), ",")
}

func ipStrings(ips []cpv1beta2.IPAddress) []string {
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, net.IP(ip).String())
	}
	return out
}

// ---- networkpolicy

func newGetNetworkPolicyCommand(g *getOptions) *cobra.Command {
	f := &policyFilter{g: g}
	cmd := &cobra.Command{
		Use:     "networkpolicy [NAME]",
		Aliases: []string{"networkpolicies", "netpol", "np"},
		Short:   "Show the NetworkPolicies computed by the controller",
		Long: `Show the NetworkPolicies computed by the controller (controlplane.antrea.io/v1beta2).

NAME is the internal name or, with -n, the name of the source policy.
  -n NS          policies whose source is in namespace NS
  -p POD -n NS   policies applied to pod NS/POD
  --node NODE    policies the agent of NODE receives (span)
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

func (f *policyFilter) runPolicies(ctx context.Context, args []string) error {
	v, err := f.prepare(ctx)
	if err != nil {
		return err
	}
	var policies []cpv1beta2.NetworkPolicy
	if len(args) == 1 {
		p, err := v.policyByName(ctx, args[0], v.ns)
		if err != nil {
			return err
		}
		policies = []cpv1beta2.NetworkPolicy{*p}
	} else if policies, err = v.policies(ctx, f.node); err != nil {
		return err
	}
	polType, err := query.ParsePolicyType(f.policyType)
	if err != nil {
		return err
	}
	var groups []cpv1beta2.AppliedToGroup
	if f.pod != "" {
		if groups, err = v.appliedToGroups(ctx, ""); err != nil {
			return err
		}
	}
	var out []cpv1beta2.NetworkPolicy
	for _, p := range policies {
		if v.ns != "" && sourceNamespace(&p) != v.ns {
			continue
		}
		if f.source != "" && (p.SourceRef == nil || p.SourceRef.Name != f.source) {
			continue
		}
		if polType != "" && (p.SourceRef == nil || p.SourceRef.Type != polType) {
			continue
		}
		if f.pod != "" && !appliesTo(&p, groups, v.podNS, f.pod) {
			continue
		}
		if f.node != "" && len(args) == 1 {
			in, err := v.inSpan(ctx, f.node, p.Name)
			if err != nil {
				return err
			}
			if !in {
				continue
			}
		}
		out = append(out, p)
	}
	if len(args) == 1 && len(out) == 0 {
		return fmt.Errorf("networkpolicy %s does not match the filters%s", args[0], f.describe(v))
	}
	if err := query.SortPolicies(out, f.sortBy); err != nil {
		return err
	}
	if f.g.output != outputTable {
		for i := range out {
			out[i].TypeMeta = metav1.TypeMeta{APIVersion: cpv1beta2.SchemeGroupVersion.String(), Kind: "NetworkPolicy"}
		}
		if len(args) == 1 {
			return writeObject(f.g.env.Out, f.g.output, &out[0])
		}
		return writeObject(f.g.env.Out, f.g.output, &cpv1beta2.NetworkPolicyList{
			TypeMeta: metav1.TypeMeta{APIVersion: cpv1beta2.SchemeGroupVersion.String(), Kind: "NetworkPolicyList"},
			Items:    out,
		})
	}
	if len(out) == 0 {
		fmt.Fprintf(f.g.env.Err, "No networkpolicies found%s.\n", f.describe(v))
		return nil
	}
	spans, err := v.spans(ctx, func(ctx context.Context, node string) ([]string, error) {
		ps, err := v.policies(ctx, node)
		names := make([]string, 0, len(ps))
		for _, p := range ps {
			names = append(names, p.Name)
		}
		return names, err
	})
	if err != nil {
		return err
	}
	realized, err := v.clients.Realization(ctx)
	if err != nil {
		return err
	}
	t := &table{header: []string{"NAME", "SOURCE", "RULES", "APPLIED-TO", "NODES", "REALIZED", "TIER-PRIORITY", "PRIORITY"}}
	for _, p := range out {
		tier, prio := priorities(&p)
		t.add(p.Name, sourceString(&p), strconv.Itoa(len(p.Rules)), joinFew(appliedToOf(&p), 2),
			joinFew(spans[p.Name], maxNamesPerCell), realized[p.Name], tier, prio)
	}
	return t.write(f.g.env.Out)
}

// describe says which filters were applied, for "nothing found" lines.
func (f *policyFilter) describe(v *view) string {
	var parts []string
	if v.ns != "" {
		parts = append(parts, "from namespace "+v.ns)
	}
	if f.pod != "" {
		parts = append(parts, "for pod "+v.podNS+"/"+f.pod)
	}
	if f.node != "" {
		parts = append(parts, "on node "+f.node)
	}
	if f.source != "" {
		parts = append(parts, "derived from "+f.source)
	}
	if f.policyType != "" {
		parts = append(parts, "of type "+f.policyType)
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}

// policyByName gets a policy by its internal name or, failing that, by its
// source's name (in namespace ns when given): users know the latter.
func (v *view) policyByName(ctx context.Context, name, ns string) (*cpv1beta2.NetworkPolicy, error) {
	p, err := v.clients.Antrea.ControlplaneV1beta2().NetworkPolicies().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return p, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("networkpolicy %s: %w", name, err)
	}
	all, err := v.policies(ctx, "")
	if err != nil {
		return nil, err
	}
	var names []string
	var found []*cpv1beta2.NetworkPolicy
	for i := range all {
		p := &all[i]
		names = append(names, p.Name)
		if p.SourceRef == nil || (ns != "" && p.SourceRef.Namespace != ns) {
			continue
		}
		names = append(names, p.SourceRef.Name)
		if p.SourceRef.Name == name {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, notFound("networkpolicy", name, names)
	}
	var srcs []string
	for _, p := range found {
		srcs = append(srcs, sourceString(p))
	}
	return nil, fmt.Errorf("networkpolicy %q names %d policies (%s): give -n or the internal name", name, len(found), strings.Join(srcs, ", "))
}

// inSpan says whether the policy is sent to node.
func (v *view) inSpan(ctx context.Context, node, name string) (bool, error) {
	ps, err := v.policies(ctx, node)
	for _, p := range ps {
		if p.Name == name {
			return true, nil
		}
	}
	return false, err
}

// appliesTo says whether a policy (or one of its rules) applies to pod ns/name.
func appliesTo(p *cpv1beta2.NetworkPolicy, groups []cpv1beta2.AppliedToGroup, ns, name string) bool {
	want := sets.New(appliedToOf(p)...)
	for _, g := range groups {
		if want.Has(g.Name) && hasPod(g.GroupMembers, ns, name) {
			return true
		}
	}
	return false
}

// ---- appliedtogroup and addressgroup

// group is what the two group commands share.
type group struct {
	name    string
	members []cpv1beta2.GroupMember
}

func newGetAppliedToGroupCommand(g *getOptions) *cobra.Command {
	f := &policyFilter{g: g}
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
			return f.runGroups(cmd.Context(), args, false)
		},
	}
	f.addFlags(cmd, "Only the groups holding this pod")
	return cmd
}

func newGetAddressGroupCommand(g *getOptions) *cobra.Command {
	f := &policyFilter{g: g}
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
			return f.runGroups(cmd.Context(), args, true)
		},
	}
	f.addFlags(cmd, "Only the groups holding this pod")
	return cmd
}

func (f *policyFilter) runGroups(ctx context.Context, args []string, address bool) error {
	resource := "appliedtogroup"
	if address {
		resource = "addressgroup"
	}
	v, err := f.prepare(ctx)
	if err != nil {
		return err
	}
	// Objects as served (for -o json|yaml) and their members.
	var objs []any
	var groups []group
	add := func(obj any, name string, members []cpv1beta2.GroupMember) {
		objs = append(objs, obj)
		groups = append(groups, group{name: name, members: members})
	}
	cp := v.clients.Antrea.ControlplaneV1beta2()
	typeMeta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: cpv1beta2.SchemeGroupVersion.String(), Kind: kind}
	}
	switch {
	case len(args) == 1 && address:
		ag, err := cp.AddressGroups().Get(ctx, args[0], metav1.GetOptions{})
		if err != nil {
			return f.groupNotFound(ctx, v, resource, args[0], err, address)
		}
		ag.TypeMeta = typeMeta("AddressGroup")
		add(ag, ag.Name, ag.GroupMembers)
	case len(args) == 1:
		atg, err := cp.AppliedToGroups().Get(ctx, args[0], metav1.GetOptions{})
		if err != nil {
			return f.groupNotFound(ctx, v, resource, args[0], err, address)
		}
		atg.TypeMeta = typeMeta("AppliedToGroup")
		add(atg, atg.Name, atg.GroupMembers)
	case address:
		list, err := v.addressGroups(ctx, f.node)
		if err != nil {
			return err
		}
		for i := range list {
			list[i].TypeMeta = typeMeta("AddressGroup")
			add(&list[i], list[i].Name, list[i].GroupMembers)
		}
	default:
		list, err := v.appliedToGroups(ctx, f.node)
		if err != nil {
			return err
		}
		for i := range list {
			list[i].TypeMeta = typeMeta("AppliedToGroup")
			add(&list[i], list[i].Name, list[i].GroupMembers)
		}
	}
	if err := sortGroups(objs, groups, f.sortBy); err != nil {
		return err
	}
	policies, err := v.policies(ctx, "")
	if err != nil {
		return err
	}
	usedBy := map[string][]string{} // group → sources of the policies using it
	for i := range policies {
		p := &policies[i]
		if v.ns != "" && sourceNamespace(p) != v.ns {
			continue
		}
		names := appliedToOf(p)
		if address {
			names = addressGroupsOf(p)
		}
		for _, n := range names {
			usedBy[n] = append(usedBy[n], sourceString(p))
		}
	}
	var keep []int
	for i, gr := range groups {
		if v.ns != "" && len(usedBy[gr.name]) == 0 {
			continue
		}
		if f.pod != "" && !hasPod(gr.members, v.podNS, f.pod) {
			continue
		}
		keep = append(keep, i)
	}
	if len(args) == 1 && f.node != "" && len(keep) == 1 {
		in, err := f.groupInSpan(ctx, v, args[0], address)
		if err != nil {
			return err
		}
		if !in {
			keep = nil
		}
	}
	if len(args) == 1 && len(keep) == 0 {
		return fmt.Errorf("%s %s does not match the filters%s", resource, args[0], f.describe(v))
	}
	if f.g.output != outputTable {
		if len(args) == 1 {
			return writeObject(f.g.env.Out, f.g.output, objs[keep[0]])
		}
		items := make([]any, 0, len(keep))
		for _, i := range keep {
			items = append(items, objs[i])
		}
		kind := "AppliedToGroupList"
		if address {
			kind = "AddressGroupList"
		}
		return writeObject(f.g.env.Out, f.g.output, map[string]any{
			"apiVersion": cpv1beta2.SchemeGroupVersion.String(), "kind": kind, "items": items,
		})
	}
	if len(keep) == 0 {
		fmt.Fprintf(f.g.env.Err, "No %ss found%s.\n", resource, f.describe(v))
		return nil
	}
	if address {
		t := &table{header: []string{"NAME", "MEMBERS", "ADDRESSES", "POLICIES"}}
		for _, i := range keep {
			gr := groups[i]
			var ips []string
			for _, m := range gr.members {
				ips = append(ips, ipStrings(m.IPs)...)
			}
			t.add(gr.name, strconv.Itoa(len(gr.members)), joinFew(ips, maxNamesPerCell), joinFew(usedBy[gr.name], 2))
		}
		return t.write(f.g.env.Out)
	}
	spans, err := v.spans(ctx, func(ctx context.Context, node string) ([]string, error) {
		gs, err := v.appliedToGroups(ctx, node)
		names := make([]string, 0, len(gs))
		for _, g := range gs {
			names = append(names, g.Name)
		}
		return names, err
	})
	if err != nil {
		return err
	}
	t := &table{header: []string{"NAME", "MEMBERS", "PODS", "NODES", "POLICIES"}}
	for _, i := range keep {
		gr := groups[i]
		var pods []string
		for _, m := range gr.members {
			pods = append(pods, memberString(m))
		}
		t.add(gr.name, strconv.Itoa(len(gr.members)), joinFew(pods, maxNamesPerCell),
			joinFew(spans[gr.name], maxNamesPerCell), joinFew(usedBy[gr.name], 2))
	}
	return t.write(f.g.env.Out)
}

// sortGroups orders the groups (and their objects alike) by --sort-by.
func sortGroups(objs []any, groups []group, sortBy string) error {
	idx := make([]int, len(objs))
	for i := range idx {
		idx[i] = i
	}
	if err := query.SortBy(idx, sortBy, func(i *int) (string, any) { return groups[*i].name, objs[*i] }); err != nil {
		return err
	}
	o, g := slices.Clone(objs), slices.Clone(groups)
	for i, j := range idx {
		objs[i], groups[i] = o[j], g[j]
	}
	return nil
}

// groupNotFound turns a failed get into the one-line error naming the closest group.
func (f *policyFilter) groupNotFound(ctx context.Context, v *view, resource, name string, err error, address bool) error {
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s: %w", resource, name, err)
	}
	var names []string
	if address {
		gs, _ := v.addressGroups(ctx, "")
		for _, g := range gs {
			names = append(names, g.Name)
		}
	} else {
		gs, _ := v.appliedToGroups(ctx, "")
		for _, g := range gs {
			names = append(names, g.Name)
		}
	}
	return notFound(resource, name, names)
}

// groupInSpan says whether the group is sent to f.node.
func (f *policyFilter) groupInSpan(ctx context.Context, v *view, name string, address bool) (bool, error) {
	if address {
		gs, err := v.addressGroups(ctx, f.node)
		for _, g := range gs {
			if g.Name == name {
				return true, nil
			}
		}
		return false, err
	}
	gs, err := v.appliedToGroups(ctx, f.node)
	for _, g := range gs {
		if g.Name == name {
			return true, nil
		}
	}
	return false, err
}
