package antctl

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
)

// The query asks the agent API's /fqdncache with the domain as upstream's
// parameter and reads its entries; the agent's side (the filter, the
// refusal of a bad pattern) is tested with the real cache in
// pkg/agent/controller/networkpolicy (checkFQDNCacheAPI).
func TestFQDNCacheAsksTheAgentAPIWithTheDomain(t *testing.T) {
	exp := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/fqdncache" {
			http.NotFound(w, r)
			return
		}
		asked = append(asked, r.URL.Query().Get("domain"))
		_ = json.NewEncoder(w).Encode([]apis.FQDNCacheEntry{{FQDNName: "api.example.test", IPAddress: "10.10.1.10", ExpirationTime: exp}})
	}))
	defer srv.Close()
	ac := &agentClient{node: "n1", base: srv.URL, http: srv.Client()}
	got, err := ac.fqdnCache(context.Background(), "*.example.test")
	if err != nil || len(got) != 1 || got[0].IPAddress != "10.10.1.10" || !got[0].ExpirationTime.Equal(exp) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := ac.fqdnCache(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || asked[0] != "*.example.test" || asked[1] != "" {
		t.Errorf("the agent was asked for domains %q, want [*.example.test \"\"]", asked)
	}
}

// podmulticaststats asks the agent API's /podmulticaststats with upstream's
// parameters (namespace, name) and prints upstream's columns.
func TestPodMulticastStatsAsksTheAgentAPIAndPrintsUpstreamsColumns(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/podmulticaststats" {
			http.NotFound(w, r)
			return
		}
		asked = append(asked, r.URL.Query().Get("namespace")+"/"+r.URL.Query().Get("name"))
		_ = json.NewEncoder(w).Encode([]apis.PodMulticastStats{{PodName: "recv", PodNamespace: "demo", Inbound: 7, Outbound: 0}})
	}))
	defer srv.Close()
	ac := &agentClient{node: "n1", base: srv.URL, http: srv.Client()}
	got, err := ac.podMulticastStats(context.Background(), "demo", "recv")
	if err != nil || len(got) != 1 || got[0].Inbound != 7 || got[0].PodName != "recv" {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := ac.podMulticastStats(context.Background(), "", ""); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || asked[0] != "demo/recv" || asked[1] != "/" {
		t.Errorf("the agent was asked for %q, want [demo/recv /]", asked)
	}
}
