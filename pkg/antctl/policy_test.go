package antctl

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

var (
	policyHeader = []string{"NAME", "SOURCE", "RULES", "APPLIED-TO", "NODES", "REALIZED", "TIER-PRIORITY", "PRIORITY"}
	rowWeb       = []string{npWeb.Name, "K8sNetworkPolicy:demo/allow-client", "1", atgWeb.Name, "node-1,node-2", "2/2", "<none>", "<none>"}
	rowClient    = []string{npClient.Name, "K8sNetworkPolicy:demo/client-egress", "2", atgClient.Name, "node-1", "0/1", "<none>", "<none>"}
	rowOther     = []string{npOther.Name, "K8sNetworkPolicy:default/deny-other", "1", atgOther.Name, "node-2", "1/1", "<none>", "<none>"}
)

func TestGetTables(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want [][]string
	}{
		{
			name: "every policy with its source, rules, groups, span and realization",
			args: []string{"get", "networkpolicy"},
			want: [][]string{policyHeader, rowWeb, rowClient, rowOther},
		},
		{
			name: "-n keeps the policies whose source is in the namespace",
			args: []string{"get", "netpol", "-n", "demo"},
			want: [][]string{policyHeader, rowWeb, rowClient},
		},
		{
			name: "-p keeps the policies applied to the pod",
			args: []string{"get", "networkpolicies", "-p", web1.Name, "-n", web1.Namespace},
			want: [][]string{policyHeader, rowWeb},
		},
		{
			name: "--node keeps the policies the node's agent receives",
			args: []string{"get", "networkpolicy", "--node", "node-2"},
			want: [][]string{policyHeader, rowWeb, rowOther},
		},
		{
			name: "a policy by its source's name and namespace",
			args: []string{"get", "networkpolicy", "client-egress", "-n", "demo"},
			want: [][]string{policyHeader, rowClient},
		},
		{
			name: "a policy by its internal name",
			args: []string{"get", "networkpolicy", npOther.Name},
			want: [][]string{policyHeader, rowOther},
		},
		{
			name: "applied-to groups with members, nodes and the policies using them",
			args: []string{"get", "appliedtogroup"},
			want: [][]string{
				{"NAME", "MEMBERS", "PODS", "NODES", "POLICIES"},
				{atgClient.Name, "1", "demo/client", "node-1", "K8sNetworkPolicy:demo/client-egress"},
				{atgOther.Name, "1", "default/other", "node-2", "K8sNetworkPolicy:default/deny-other"},
				{atgWeb.Name, "2", "demo/web-0,demo/web-1", "node-1,node-2", "K8sNetworkPolicy:demo/allow-client"},
			},
		},
		{
			name: "--node shows an applied-to group with the node's members only",
			args: []string{"get", "atg", "--node", "node-1"},
			want: [][]string{
				{"NAME", "MEMBERS", "PODS", "NODES", "POLICIES"},
				{atgClient.Name, "1", "demo/client", "node-1", "K8sNetworkPolicy:demo/client-egress"},
				{atgWeb.Name, "1", "demo/web-0", "node-1,node-2", "K8sNetworkPolicy:demo/allow-client"},
			},
		},
		{
			name: "address groups holding a pod",
			args: []string{"get", "addressgroup", "-p", client.Name, "-n", client.Namespace},
			want: [][]string{
				{"NAME", "MEMBERS", "ADDRESSES", "POLICIES"},
				{agClient.Name, "1", client.Status.PodIP, "K8sNetworkPolicy:demo/allow-client"},
			},
		},
		{
			name: "address groups used by the policies of a namespace",
			args: []string{"get", "ag", "-n", "demo"},
			want: [][]string{
				{"NAME", "MEMBERS", "ADDRESSES", "POLICIES"},
				{agClient.Name, "1", client.Status.PodIP, "K8sNetworkPolicy:demo/allow-client"},
				{agWeb.Name, "2", web0.Status.PodIP + "," + web1.Status.PodIP, "K8sNetworkPolicy:demo/client-egress"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAntctl(t, defaultCluster(), tc.args...)
			if r.runErr != nil {
				t.Fatalf("antctl %s: %v (stderr %q)", strings.Join(tc.args, " "), r.runErr, r.err)
			}
			if got := rows(r.out); !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("antctl %s printed\n%s\nwant rows\n%q", strings.Join(tc.args, " "), r.out, tc.want)
			}
		})
	}
}

func TestGetPrintsObjectsAsJSONAndYAML(t *testing.T) {
	r := runAntctl(t, defaultCluster(), "get", "networkpolicy", "-n", "demo", "-o", "json")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	var list cpv1beta2.NetworkPolicyList
	if err := json.Unmarshal([]byte(r.out), &list); err != nil {
		t.Fatalf("-o json printed %q: %v", r.out, err)
	}
	if list.Kind != "NetworkPolicyList" || len(list.Items) != 2 || list.Items[0].Name != npWeb.Name ||
		list.Items[1].Name != npClient.Name || list.Items[0].Kind != "NetworkPolicy" {
		t.Errorf("-o json printed %s, want the list of %s and %s", r.out, npWeb.Name, npClient.Name)
	}
	r = runAntctl(t, defaultCluster(), "get", "appliedtogroup", atgWeb.Name, "-o", "yaml")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	for _, want := range []string{"kind: AppliedToGroup\n", "name: " + atgWeb.Name + "\n", "name: " + web1.Name + "\n"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("-o yaml printed\n%s\nwithout %q", r.out, want)
		}
	}
}

func TestBadInputIsOneLineNamingTheClosestMatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "unknown namespace", args: []string{"get", "networkpolicy", "-n", "dmeo"},
			want: `namespace "dmeo" not found (did you mean "demo"?)`},
		{name: "unknown pod", args: []string{"get", "networkpolicy", "-p", "web-9", "-n", "demo"},
			want: `pod "web-9" not found in namespace demo (did you mean "web-0"?)`},
		{name: "pod in an unknown namespace", args: []string{"get", "appliedtogroup", "-p", "web-0", "-n", "dmo"},
			want: `namespace "dmo" not found (did you mean "demo"?)`},
		{name: "unknown node", args: []string{"get", "addressgroup", "--node", "node-3"},
			want: `node "node-3" not found (did you mean "node-1"?)`},
		{name: "policy name with a typo", args: []string{"get", "networkpolicy", "alow-client", "-n", "demo"},
			want: `networkpolicy "alow-client" not found (did you mean "allow-client"?)`},
		{name: "group name with a typo", args: []string{"get", "appliedtogroup", "atg-wbe"},
			want: `appliedtogroup "atg-wbe" not found (did you mean "atg-web"?)`},
		{name: "resource with a typo", args: []string{"get", "adressgroup"},
			want: `unknown resource "adressgroup" for "antctl get" (did you mean "addressgroup"?)`},
		{name: "command with a typo", args: []string{"verison"},
			want: `unknown command "verison" for "antctl" (did you mean "version"?)`},
		{name: "output format with a typo", args: []string{"get", "networkpolicy", "-o", "ymal"},
			want: `unknown output format "ymal" (did you mean "yaml"?)`},
		{name: "table with a typo, even from a laptop", args: []string{"get", "ovsflows", "-T", "Clasifier"},
			want: `unknown table "Clasifier" (did you mean "Classifier"?)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAntctl(t, defaultCluster(), tc.args...)
			if r.runErr == nil {
				t.Fatalf("antctl %s succeeded, printing %q", strings.Join(tc.args, " "), r.out)
			}
			msg := r.runErr.Error()
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, tc.want) {
				t.Errorf("antctl %s: error %q, want one line starting with %q", strings.Join(tc.args, " "), msg, tc.want)
			}
		})
	}
}

func TestNothingFoundIsSaidOnStderr(t *testing.T) {
	r := runAntctl(t, defaultCluster(), "get", "networkpolicy", "-p", other.Name, "-n", other.Namespace, "--node", "node-1")
	if r.runErr != nil {
		t.Fatal(r.runErr)
	}
	want := "No networkpolicies found for pod default/other on node node-1.\n"
	if r.out != "" || r.err != want {
		t.Errorf("stdout %q stderr %q, want nothing and %q", r.out, r.err, want)
	}
}

func TestGetShowsAntreaNativePoliciesWithTheirPriorities(t *testing.T) {
	tier, prio := int32(100), 5.5
	drop := cpv1beta2.RuleActionDrop
	acnp := &cpv1beta2.NetworkPolicy{
		ObjectMeta:       metav1.ObjectMeta{Name: "uid-acnp", Generation: 1},
		SourceRef:        &cpv1beta2.NetworkPolicyReference{Type: cpv1beta2.AntreaClusterNetworkPolicy, Name: "isolate"},
		TierPriority:     &tier,
		Priority:         &prio,
		AppliedToPerRule: true,
		Rules: []cpv1beta2.NetworkPolicyRule{
			{Direction: cpv1beta2.DirectionIn, Action: &drop, AppliedToGroups: []string{atgOther.Name}},
			{Direction: cpv1beta2.DirectionIn, Action: &drop, Priority: 1, AppliedToGroups: []string{atgWeb.Name}},
		},
	}
	c := defaultCluster()
	c.Policies = append(c.Policies, acnp)
	c.Realized[acnp.Name] = "1/2"
	r := runAntctl(t, c, "get", "networkpolicy", "isolate")
	if r.runErr != nil {
		t.Fatalf("antctl get networkpolicy isolate: %v (stderr %q)", r.runErr, r.err)
	}
	want := [][]string{policyHeader, {acnp.Name, "AntreaClusterNetworkPolicy:isolate", "2", atgOther.Name + "," + atgWeb.Name, "node-1,node-2", "1/2", "100", "5.5"}}
	if got := rows(r.out); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("printed\n%s\nwant rows\n%q", r.out, want)
	}
}
