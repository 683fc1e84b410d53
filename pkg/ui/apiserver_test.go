package ui

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/antctl/query"
)

// client is a logged-in browser without a browser.
type client struct {
	t      *testing.T
	base   string
	cookie string
	csrf   string
}

func (c *client) do(method, path, body string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: c.cookie})
	}
	if c.csrf != "" && method != "GET" {
		req.Header.Set(CSRFHeader, c.csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if method == "POST" && path == "/api/v1/login" && resp.StatusCode == 200 {
		for _, ck := range resp.Cookies() {
			if ck.Name == SessionCookie {
				c.cookie = ck.Value
			}
		}
		var s sessionResponse
		_ = json.Unmarshal(b, &s)
		c.csrf = s.CSRFToken
	}
	return resp.StatusCode, b
}

// get decodes a 200 answer into v.
func (c *client) get(path string, v any) {
	c.t.Helper()
	code, b := c.do("GET", path, "")
	if code != 200 {
		c.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		c.t.Fatalf("GET %s: %v\n%s", path, err, b)
	}
}

func loggedIn(t *testing.T, hs *httptest.Server) *client {
	t.Helper()
	c := &client{t: t, base: hs.URL}
	if code, b := c.do("POST", "/api/v1/login", `{"password":"`+testPassword+`"}`); code != 200 {
		t.Fatalf("login: %d %s", code, b)
	}
	return c
}

// TestTheAPIAnswersEveryPageFromARealAPIServer: the UI as the chart's
// antrea-ui rules' user, against a real kube-apiserver and antrea-controller.
func TestTheAPIAnswersEveryPageFromARealAPIServer(t *testing.T) {
	cl := startUICluster(t)
	c := loggedIn(t, cl.ui)

	t.Run("Summary: the controller and node-1 green, node-2 red for its old heartbeat", func(t *testing.T) {
		var s Summary
		c.get("/api/v1/summary", &s)
		if s.Controller == nil || !s.Controller.Healthy {
			t.Errorf("controller: %+v (error %q), want healthy", s.Controller, s.ControllerError)
		}
		health := map[string]Component{}
		for _, a := range s.Agents {
			health[a.Name] = a
		}
		if a := health["node-1"]; !a.Healthy || a.OVSVersion != "3.6.1" || a.PodCount != 2 || len(a.Conditions) != 4 {
			t.Errorf("node-1: %+v, want healthy with OVS 3.6.1, 2 Pods, 4 conditions", a)
		}
		if a := health["node-2"]; a.Healthy || !strings.Contains(a.Problem, "last heartbeat") || a.HeartbeatAge < 590 {
			t.Errorf("node-2: %+v, want unhealthy for its 10-minute-old heartbeat", a)
		}
		if len(s.FeatureGates) == 0 {
			t.Errorf("no feature gates (%s)", s.FeatureGatesErr)
		}
	})

	t.Run("Traceflow: the endpoints to pick, then the drop named with its rule", func(t *testing.T) {
		var eps struct{ Pods, Services []Endpoint }
		c.get("/api/v1/endpoints", &eps)
		names := map[string]bool{}
		for _, e := range append(eps.Pods, eps.Services...) {
			names[e.Kind+" "+e.Namespace+"/"+e.Name] = true
		}
		for _, want := range []string{"Pod demo/client", "Pod demo/web", "Service demo/web"} {
			if !names[want] {
				t.Errorf("endpoints lack %s: %v", want, names)
			}
		}
		code, b := c.do("POST", "/api/v1/traceflows", `{"source":"demo/client","destination":"demo/web","protocol":"TCP","port":80}`)
		if code != 200 {
			t.Fatalf("traceflow: %d %s", code, b)
		}
		var r TraceflowResult
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if r.Phase != "Succeeded" || !strings.Contains(r.Dropped, "rule "+denyRule+" of policy "+tfDropObs) ||
			!strings.Contains(r.SVG, `class="box drop"`) || len(r.Rows) != 3 {
			t.Errorf("traceflow result %+v, want Succeeded, dropped by rule %s, a drop box and 3 rows", r, denyRule)
		}
		if l, err := cl.crd.CrdV1beta1().Traceflows().List(cl.ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
			t.Errorf("the UI left Traceflows behind: %v %v", err, l)
		}
		code, b = c.do("POST", "/api/v1/traceflows", `{"source":"demo/clinet","destination":"demo/web"}`)
		if code != 400 || !strings.Contains(string(b), `did you mean`) {
			t.Errorf("a typo in the source: %d %s, want 400 with a suggestion", code, b)
		}
	})

	t.Run("Policies: Tiers in order, the ACNP in securityops with its rule, K8s NetworkPolicies before baseline", func(t *testing.T) {
		var p Policies
		c.get("/api/v1/policies", &p)
		var order []string
		var found bool
		for _, tier := range p.Tiers {
			order = append(order, tier.Name)
			for _, pol := range tier.Policies {
				if pol.Name == denyACNP && tier.Name == "securityops" && len(pol.Rules) == 1 && pol.Rules[0].Name == denyRule &&
					pol.Rules[0].Action == "Drop" && strings.Contains(pol.Rules[0].Peers, "app=client") {
					found = true
				}
			}
		}
		want := "emergency,securityops,networkops,platform,application,K8s NetworkPolicies,baseline"
		if strings.Join(order, ",") != want {
			t.Errorf("tiers %v, want %s", order, want)
		}
		if !found {
			t.Errorf("ACNP %s not in securityops with rule %s: %+v", denyACNP, denyRule, p.Tiers)
		}
		if p.StatsError != "" {
			t.Errorf("the stats API did not answer: %s", p.StatsError)
		}
	})

	t.Run("Policies: the Pods a policy applies to, its realization Node by Node, hit counts rising after traffic", func(t *testing.T) {
		np := cl.computedACNP(t)
		agent := cl.agentClient(t)
		acnp := func() PolicyView {
			t.Helper()
			var p Policies
			c.get("/api/v1/policies", &p)
			if p.ComputedError != "" {
				t.Fatalf("computed: %s", p.ComputedError)
			}
			for _, tier := range p.Tiers {
				for _, pol := range tier.Policies {
					if pol.Name == denyACNP {
						return pol
					}
				}
			}
			t.Fatalf("no ACNP %s", denyACNP)
			return PolicyView{}
		}
		before := acnp()
		if strings.Join(before.Pods, ",") != demoNS+"/web" {
			t.Errorf("pods %v, want only demo/web (app=web)", before.Pods)
		}
		if len(before.Nodes) != 1 || before.Nodes[0].Node != "node-1" || before.Nodes[0].State != "not reported" {
			t.Errorf("nodes %+v, want node-1 (web's Node) not reported yet", before.Nodes)
		}
		var sum Summary
		c.get("/api/v1/summary", &sum)
		if sum.PendingPolicies < 1 || sum.Agents[0].Pending == nil || *sum.Agents[0].Pending < 1 {
			t.Errorf("summary: %d pending policies, node-1 %v: want the ACNP pending on node-1", sum.PendingPolicies, sum.Agents[0].Pending)
		}
		reportRealized(t, cl.ctx, agent, np, "node-1")
		if after := acnp(); len(after.Nodes) != 1 || after.Nodes[0].State != "realized" {
			t.Errorf("after node-1's report: %+v, want realized", after.Nodes)
		}
		hits := func() int64 {
			t.Helper()
			for _, r := range acnp().Rules {
				if r.Name == denyRule && r.Stats != nil {
					return r.Stats.Packets
				}
			}
			return -1
		}
		start := hits()
		reportDrops(t, cl.ctx, agent, np, "node-1", 3)
		mid := hits()
		reportDrops(t, cl.ctx, agent, np, "node-1", 4)
		end := hits()
		if mid != start+3 || end != mid+4 {
			t.Errorf("rule %s packets %d → %d → %d after reports of 3 and 4 drops, want each read to add them", denyRule, start, mid, end)
		}
	})

	t.Run("Policies: a SIG AdminNetworkPolicy at its place, as computed", func(t *testing.T) { checkSIGPolicies(t, cl, c) })

	t.Run("Pipeline: every Node, the flow counts of the one chosen", func(t *testing.T) {
		var p PipelineView
		c.get("/api/v1/pipeline?node=node-2", &p)
		if strings.Join(p.Nodes, ",") != "node-1,node-2" || p.Node != "node-2" || !strings.Contains(p.SVG, ">"+strconv.Itoa(int(flowTable(1)["2"]))+" flows</text>") {
			t.Errorf("pipeline: nodes %v node %q, want node-2's flows of table 2 (%d)", p.Nodes, p.Node, flowTable(1)["2"])
		}
		if code, b := c.do("GET", "/api/v1/pipeline?node=node-9", ""); code != 404 {
			t.Errorf("unknown node: %d %s, want 404", code, b)
		}
	})

	t.Run("Flows: says how to enable it", func(t *testing.T) {
		var f FlowsView
		c.get("/api/v1/flows", &f)
		if f.Available || len(f.HowTo) == 0 || !strings.Contains(f.Message, "No Flow Aggregator") {
			t.Errorf("flows %+v, want not available, saying how to enable it", f)
		}
	})

	t.Run("Flows: the service map from the Flow Aggregator's records, denied in red", func(t *testing.T) { checkFlows(t, cl) })

	t.Run("a service account without rights gets 403 saying what is forbidden, not a stack trace", func(t *testing.T) {
		checkNoRights(t, cl)
	})

	t.Run("Kubernetes bearer-token login", func(t *testing.T) { checkTokenLogin(t, cl) })
}

// checkNoRights: a UI whose service account may read its Secret but
// nothing else logs in and answers every page with 403 naming what it lacks.
func checkNoRights(t *testing.T, cl *uiCluster) {
	const user = "poor-ui"
	_, err := cl.admin.RbacV1().RoleBindings(query.AntreaNamespace).Create(cl.ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "antrea-ui"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := cl.userConfig(t, user)
	c := loggedIn(t, cl.serveAs(t, cfg))
	for _, p := range []string{"/api/v1/summary", "/api/v1/endpoints", "/api/v1/policies", "/api/v1/pipeline"} {
		code, b := c.do("GET", p, "")
		if code != 403 || !strings.Contains(string(b), "service account lacks the rights") || !strings.Contains(string(b), `forbidden`) {
			t.Errorf("GET %s: %d %s, want 403 saying what is forbidden", p, code, b)
		}
	}
	code, b := c.do("POST", "/api/v1/traceflows", `{"source":"demo/client","destination":"demo/web"}`)
	if code != 403 {
		t.Errorf("traceflow without rights: %d %s, want 403", code, b)
	}
}
