package antctl

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
)

func TestBGPQueriesReadTheAgentAPIAndFilter(t *testing.T) {
	routes := []apis.BGPRouteState{
		{Route: "10.10.1.0/24", Type: "NodeIPAMPodCIDR", K8sObjRef: "n1"},
		{Route: "fd00:10:1::/64", Type: "NodeIPAMPodCIDR", K8sObjRef: "n1"},
		{Route: "172.30.0.200/32", Type: "ServiceLoadBalancerIP", K8sObjRef: "default/web"},
	}
	policyInEffect := true
	mux := http.NewServeMux()
	mux.HandleFunc("/bgproutes", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(routes) })
	mux.HandleFunc("/bgppolicy", func(w http.ResponseWriter, _ *http.Request) {
		if !policyInEffect {
			http.Error(w, "there is no effective BGPPolicy applied to the Node", http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(apis.BGPPolicyState{BGPPolicyName: "p", LocalASN: 64512, ListenPort: 179, RouterID: "172.30.0.11"})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ac := &agentClient{node: "n1", base: srv.URL, http: srv.Client()}
	ctx := context.Background()

	got, err := ac.bgpRoutes(ctx)
	if err != nil || len(got) != 3 {
		t.Fatalf("routes: %v, %v", got, err)
	}
	for _, tc := range []struct {
		name         string
		only4, only6 bool
		typ          string
		want         []string
	}{
		{name: "no filter keeps all", want: []string{"10.10.1.0/24", "fd00:10:1::/64", "172.30.0.200/32"}},
		{name: "-4 keeps IPv4", only4: true, want: []string{"10.10.1.0/24", "172.30.0.200/32"}},
		{name: "-6 keeps IPv6", only6: true, want: []string{"fd00:10:1::/64"}},
		{name: "-T keeps a type, in any case", typ: "serviceloadbalancerip", want: []string{"172.30.0.200/32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := filterBGPRoutes(got, tc.only4, tc.only6, tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			var prefixes []string
			for _, r := range out {
				prefixes = append(prefixes, r.Route)
			}
			if strings.Join(prefixes, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", prefixes, tc.want)
			}
		})
	}
	if _, err := filterBGPRoutes(got, false, false, "ServiceClusterIPs"); err == nil || !strings.Contains(err.Error(), "ServiceClusterIP") {
		t.Errorf("an unknown type: %v, want an error naming the closest", err)
	}

	if st, err := ac.bgpPolicy(ctx); err != nil || st.BGPPolicyName != "p" || st.LocalASN != 64512 {
		t.Errorf("policy: %+v, %v", st, err)
	}
	policyInEffect = false
	if _, err := ac.bgpPolicy(ctx); err == nil || !strings.Contains(err.Error(), "no effective BGPPolicy") {
		t.Errorf("without a policy in effect: %v, want the agent's message", err)
	}
}
