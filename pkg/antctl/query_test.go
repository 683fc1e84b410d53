package antctl

import (
	"encoding/json"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/antctl/query"
)

// The fixture's semantics (fixture_test.go): allow-client lets demo/client
// reach app web pods on TCP 80 (applied to web-0 and web-1 through
// atg-web, peers ag-client); client-egress applies to client, lets it
// reach ag-web (web-0, web-1) and isolates it for ingress with no rule.
func TestQueryEndpoint(t *testing.T) {
	c := defaultCluster()
	run := func(pod string) query.EndpointAnswer {
		t.Helper()
		r := runAntctl(t, c, "query", "endpoint", "-n", "demo", "-p", pod, "-o", "json")
		if r.runErr != nil {
			t.Fatal(r.runErr)
		}
		var a query.EndpointAnswer
		if err := json.Unmarshal([]byte(r.out), &a); err != nil {
			t.Fatalf("%v: %s", err, r.out)
		}
		return a
	}
	find := func(a query.EndpointAnswer, role, policy, dir string) *query.EndpointRule {
		for i := range a.Rules {
			if a.Rules[i].Role == role && a.Rules[i].Policy == policy && a.Rules[i].Direction == dir {
				return &a.Rules[i]
			}
		}
		return nil
	}
	web := run("web-0")
	if strings.Join(web.Applied, ",") != "K8sNetworkPolicy:demo/allow-client" {
		t.Errorf("web-0 applied %v, want allow-client only", web.Applied)
	}
	if len(web.Isolated) != 1 || !strings.HasPrefix(web.Isolated[0], "Ingress") {
		t.Errorf("web-0 isolated %v, want Ingress (by demo/allow-client)", web.Isolated)
	}
	if r := find(web, query.RoleApplied, "K8sNetworkPolicy:demo/allow-client", "Ingress"); r == nil ||
		strings.Join(r.Peers, ",") != "demo/client" || r.Services != "TCP/80" || r.Action != "Allow" {
		t.Errorf("web-0's applied ingress rule: %+v in %+v", r, web.Rules)
	}
	if r := find(web, query.RolePeer, "K8sNetworkPolicy:demo/client-egress", "Egress"); r == nil ||
		strings.Join(r.Peers, ",") != "demo/client" || !strings.Contains(r.Effect, "allows traffic to the pod from demo/client") {
		t.Errorf("web-0 as the peer of client-egress: %+v in %+v", r, web.Rules)
	}
	if len(web.Rules) != 2 {
		t.Errorf("web-0: %d rules, want 2: %+v", len(web.Rules), web.Rules)
	}
	cl := run("client")
	if r := find(cl, query.RoleIsolation, "K8sNetworkPolicy:demo/client-egress", "Ingress"); r == nil {
		t.Errorf("client's ingress isolation by client-egress missing: %+v", cl.Rules)
	}
	if r := find(cl, query.RolePeer, "K8sNetworkPolicy:demo/allow-client", "Ingress"); r == nil ||
		strings.Join(r.Peers, ",") != "demo/web-0,demo/web-1" || !strings.Contains(r.Effect, "allows traffic from the pod to demo/web-0") {
		t.Errorf("client as the peer of allow-client: %+v", r)
	}
	tbl := runAntctl(t, c, "query", "endpoint", "-n", "demo", "-p", "web-0")
	if tbl.runErr != nil || !strings.HasPrefix(tbl.out, "Endpoint demo/web-0 (10.10.1.2 on node-1)\n") ||
		!strings.Contains(tbl.out, "ROLE ") {
		t.Errorf("table: %v\n%s", tbl.runErr, tbl.out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "demo", "-p", "web-9"}, `pod "web-9" not found in namespace demo (did you mean "web-0"?)`},
		{[]string{"-n", "dmeo", "-p", "web-0"}, `namespace "dmeo" not found (did you mean "demo"?)`},
		{[]string{"-n", "demo"}, "query endpoint needs -p POD (and -n NAMESPACE)"},
	} {
		r := runAntctl(t, c, append([]string{"query", "endpoint"}, tc.args...)...)
		if r.runErr == nil || r.runErr.Error() != tc.want {
			t.Errorf("query endpoint %v: %v, want %q", tc.args, r.runErr, tc.want)
		}
	}
	r := runAntctl(t, c, "query", "endpont")
	if r.runErr == nil || !strings.Contains(r.runErr.Error(), `(did you mean "endpoint"?)`) {
		t.Errorf("query endpont: %v", r.runErr)
	}
}
