package query_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/antctl/query/querytest"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// The queries are plain Go calls on clients: no flags, no printing. The
// expectations come from querytest's cluster: allow-client applies to
// web-0 (node-1) and web-1 (node-2), client-egress to client (node-1),
// deny-other to other (node-2).

func names(ps []cpv1beta2.NetworkPolicy) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// acnp is an Antrea ClusterNetworkPolicy of Tier priority 100 applied to
// the web pods.
var acnp = &cpv1beta2.NetworkPolicy{
	ObjectMeta:      metav1.ObjectMeta{Name: "uid-zz-acnp", Generation: 2},
	SourceRef:       &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.AntreaClusterNetworkPolicy, Name: "web-ops"},
	TierPriority:    ptr[int32](100),
	Priority:        ptr(1.5),
	AppliedToGroups: []string{querytest.ATGWeb.Name},
}

func ptr[T any](v T) *T { return &v }

func TestNetworkPoliciesSelectsAsAsked(t *testing.T) {
	c := querytest.Default()
	c.Policies = append(c.Policies, acnp)
	c.Realized[acnp.Name] = "2/2"
	cl := c.Clients()
	web, cli, oth := querytest.NPWeb.Name, querytest.NPClient.Name, querytest.NPOther.Name
	for _, tc := range []struct {
		name string
		sel  query.PolicySelector
		want []string
	}{
		{"every policy, by name", query.PolicySelector{}, []string{web, cli, oth, acnp.Name}},
		{"the policies from a namespace", query.PolicySelector{Selector: query.Selector{Namespace: "demo"}}, []string{web, cli}},
		{"the policies applied to a pod", query.PolicySelector{Selector: query.Selector{PodNamespace: "demo", Pod: "web-1"}}, []string{web, acnp.Name}},
		{"what a node's agent receives", query.PolicySelector{Selector: query.Selector{Node: "node-1"}}, []string{web, cli, acnp.Name}},
		{"a policy by its source's name", query.PolicySelector{Selector: query.Selector{Name: "deny-other"}}, []string{oth}},
		{"by source", query.PolicySelector{Source: "client-egress"}, []string{cli}},
		{"by type", query.PolicySelector{Type: cpv1beta2.AntreaClusterNetworkPolicy}, []string{acnp.Name}},
		{"in evaluation order", query.PolicySelector{Selector: query.Selector{SortBy: query.SortByEffectivePriority}}, []string{acnp.Name, web, cli, oth}},
		{"by a JSONPath, numbers as numbers", query.PolicySelector{Selector: query.Selector{SortBy: "{.metadata.generation}"}}, []string{web, oth, acnp.Name, cli}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := query.NetworkPolicies(context.Background(), cl, tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got), tc.want) {
				t.Errorf("got %v, want %v", names(got), tc.want)
			}
			for _, p := range got {
				if p.Kind != "NetworkPolicy" || p.APIVersion != cpv1beta2.SchemeGroupVersion.String() {
					t.Errorf("%s has TypeMeta %+v, want the API's", p.Name, p.TypeMeta)
				}
			}
		})
	}
	for _, tc := range []struct {
		sel  query.PolicySelector
		want string
	}{
		{query.PolicySelector{Selector: query.Selector{Name: "alow-client"}}, `networkpolicy "alow-client" not found (did you mean "allow-client"?)`},
		{query.PolicySelector{Selector: query.Selector{Name: oth, Node: "node-1"}}, "networkpolicy " + oth + " does not match the filters on node node-1"},
		{query.PolicySelector{Selector: query.Selector{SortBy: "{.metadata"}}, `--sort-by "{.metadata": `},
	} {
		_, err := query.NetworkPolicies(context.Background(), cl, tc.sel)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.sel, err, tc.want)
		}
	}
}

func TestSummarizePoliciesGivesTheSpanAndTheControllersCount(t *testing.T) {
	c := querytest.Default()
	cl := c.Clients()
	ps, err := query.NetworkPolicies(context.Background(), cl, query.PolicySelector{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := query.SummarizePolicies(context.Background(), cl, ps)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]query.PolicySummary{
		querytest.NPWeb.Name: {Source: "K8sNetworkPolicy:demo/allow-client", Rules: 1, AppliedTo: []string{querytest.ATGWeb.Name},
			Nodes: []string{"node-1", "node-2"}, Realized: c.Realized[querytest.NPWeb.Name]},
		querytest.NPClient.Name: {Source: "K8sNetworkPolicy:demo/client-egress", Rules: 2, AppliedTo: []string{querytest.ATGClient.Name},
			Nodes: []string{"node-1"}, Realized: c.Realized[querytest.NPClient.Name]},
		querytest.NPOther.Name: {Source: "K8sNetworkPolicy:default/deny-other", Rules: 1, AppliedTo: []string{querytest.ATGOther.Name},
			Nodes: []string{"node-2"}, Realized: c.Realized[querytest.NPOther.Name]},
	}
	if len(got) != len(want) {
		t.Fatalf("%d summaries, want %d", len(got), len(want))
	}
	for _, s := range got {
		w := want[s.Name]
		if s.Source != w.Source || s.Rules != w.Rules || !slices.Equal(s.AppliedTo, w.AppliedTo) || !slices.Equal(s.Nodes, w.Nodes) ||
			s.Realized != w.Realized || s.TierPriority != "<none>" {
			t.Errorf("%s: %+v, want %+v", s.Name, s, w)
		}
	}
}

func TestGroupsSelectsAsAsked(t *testing.T) {
	cl := querytest.Default().Clients()
	ctx := context.Background()
	// What node-1's agent receives: the applied-to groups with node-1's members only.
	atgs, err := query.Groups(ctx, cl, query.AppliedToGroups, query.Selector{Node: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, g := range atgs {
		for _, m := range g.Members {
			got[g.Name] = append(got[g.Name], query.MemberString(m))
		}
		if _, ok := g.Object.(*cpv1beta2.AppliedToGroup); !ok {
			t.Errorf("%s: object %T, want the served AppliedToGroup", g.Name, g.Object)
		}
	}
	if len(got) != 2 || !slices.Equal(got[querytest.ATGWeb.Name], []string{"demo/web-0"}) ||
		!slices.Equal(got[querytest.ATGClient.Name], []string{"demo/client"}) {
		t.Errorf("node-1's applied-to groups: %v", got)
	}
	// The address groups holding client, and who uses them.
	ags, err := query.Groups(ctx, cl, query.AddressGroups, query.Selector{PodNamespace: "demo", Pod: "client"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ags) != 1 || ags[0].Name != querytest.AGClient.Name || !slices.Equal(ags[0].UsedBy, []string{"K8sNetworkPolicy:demo/allow-client"}) {
		t.Errorf("address groups holding demo/client: %+v", ags)
	}
	spans, err := query.GroupSpans(ctx, cl, query.AppliedToGroups)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spans[querytest.ATGWeb.Name], []string{"node-1", "node-2"}) || !slices.Equal(spans[querytest.ATGOther.Name], []string{"node-2"}) {
		t.Errorf("spans %v", spans)
	}
	if _, err := query.Groups(ctx, cl, query.AddressGroups, query.Selector{Name: "ag-wbe"}); err == nil ||
		err.Error() != `addressgroup "ag-wbe" not found (did you mean "ag-web"?)` {
		t.Errorf("a typo: %v", err)
	}
}

func TestSelectorCheckNamesTheClosestMatch(t *testing.T) {
	cl := querytest.Default().Clients()
	for _, tc := range []struct {
		sel  query.Selector
		want string
	}{
		{query.Selector{Namespace: "dmeo"}, `namespace "dmeo" not found (did you mean "demo"?)`},
		{query.Selector{PodNamespace: "demo", Pod: "web-9"}, `pod "web-9" not found in namespace demo (did you mean "web-0"?)`},
		{query.Selector{Node: "node-3"}, `node "node-3" not found (did you mean "node-1"?)`},
	} {
		if err := tc.sel.Check(context.Background(), cl); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.sel, err, tc.want)
		}
	}
	if err := (&query.Selector{PodNamespace: "demo", Pod: "web-0", Node: "node-1"}).Check(context.Background(), cl); err != nil {
		t.Errorf("existing names: %v", err)
	}
}

// Endpoint answers without cobra what antctl query endpoint prints.
func TestEndpointIsAPlainCall(t *testing.T) {
	a, err := query.Endpoint(context.Background(), querytest.Default().Clients(), "demo", "client")
	if err != nil {
		t.Fatal(err)
	}
	if a.Node != "node-1" || !slices.Equal(a.IPs, []string{"10.10.1.3"}) || !slices.Equal(a.Applied, []string{"K8sNetworkPolicy:demo/client-egress"}) {
		t.Errorf("answer %+v", a)
	}
	var peerOf []string
	for _, r := range a.Rules {
		if r.Role == query.RolePeer {
			peerOf = append(peerOf, r.Policy)
		}
	}
	if !slices.Equal(peerOf, []string{"K8sNetworkPolicy:demo/allow-client"}) {
		t.Errorf("client is a peer of %v, want allow-client's ingress rule", peerOf)
	}
}

func TestParsePolicyTypeTakesUpstreamsNames(t *testing.T) {
	for in, want := range map[string]cpv1beta2.NetworkPolicyType{
		"K8sNP": cpv1beta2.K8sNetworkPolicy, "acnp": cpv1beta2.AntreaClusterNetworkPolicy, "ANNP": cpv1beta2.AntreaNetworkPolicy,
		"AntreaNetworkPolicy": cpv1beta2.AntreaNetworkPolicy, "": "",
	} {
		if got, err := query.ParsePolicyType(in); err != nil || got != want {
			t.Errorf("ParsePolicyType(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	if _, err := query.ParsePolicyType("NP"); err == nil {
		t.Error("NP is no type")
	}
}
