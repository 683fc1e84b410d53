package ui

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/flowaggregator"
)

// aggregatorWith serves a real Flow Aggregator API (its Store and Handler)
// holding records the test feeds, as the aggregator would after the
// agents' exports.
func aggregatorWith(t *testing.T, fs ...flowaggregator.Flow) (*httptest.Server, *flowaggregator.Store) {
	t.Helper()
	store := flowaggregator.NewStore(64)
	store.Add(fs...)
	hs := httptest.NewServer(flowaggregator.Handler(store, flowaggregator.NewMetrics()))
	t.Cleanup(hs.Close)
	return hs, store
}

// demoFlow is a record of one connection between demo Pods.
func demoFlow(src, dst string, srcPort, dstPort uint16, bytes uint64, start time.Time) flowaggregator.Flow {
	ip := map[string]string{"client": "10.10.1.2", "web": "10.10.1.3", "db": "10.10.2.4"}
	return flowaggregator.Flow{Start: start, End: start.Add(2 * time.Second), Protocol: 6,
		SrcIP: netip.MustParseAddr(ip[src]), DstIP: netip.MustParseAddr(ip[dst]), SrcPort: srcPort, DstPort: dstPort,
		SrcPod: src, SrcNamespace: demoNS, DstPod: dst, DstNamespace: demoNS, SrcNode: "node-1", DstNode: "node-1",
		FromSource: &flowaggregator.NodeCounts{Total: flowaggregator.Counts{Packets: 10, Bytes: bytes}}}
}

// checkFlows: with the aggregator running, the page maps who talks to whom
// from its records, one connection counted once however many records it
// sent, the denied one apart and drawn as such.
func checkFlows(t *testing.T, cl *uiCluster) {
	t0 := time.Now().Add(-time.Minute)
	allowed1 := demoFlow("client", "web", 40000, 8080, 1000, t0)
	allowed1.IngressPolicy, allowed1.IngressPolicyRule = demoNS+"/web-from-client", ""
	allowed1b := allowed1
	allowed1b.End = allowed1.End.Add(2 * time.Second)
	allowed1b.FromSource = &flowaggregator.NodeCounts{Total: flowaggregator.Counts{Packets: 20, Bytes: 3000}}
	allowed2 := demoFlow("client", "web", 40001, 8080, 500, t0.Add(time.Second))
	denied := demoFlow("web", "db", 41000, 5432, 0, t0.Add(2*time.Second))
	denied.Denied, denied.EgressPolicy, denied.EgressPolicyRule = true, denyACNP, denyRule
	agg, _ := aggregatorWith(t, allowed1, allowed1b, allowed2, denied)
	ui := cl.serveAs(t, cl.uiConfig, func(c *Config) { c.FlowGetter = urlFlowGetter(agg.URL) })
	c := loggedIn(t, ui)
	var v FlowsView
	c.get("/api/v1/flows", &v)
	if !v.Available || v.Records != 4 || v.Denied != 1 || len(v.Edges) != 2 {
		t.Fatalf("flows %+v: want available, 4 records, 1 denied, 2 edges", v)
	}
	// Denied first.
	if e := v.Edges[0]; !e.Denied || e.From != "demo/web" || e.To != "demo/db" || !strings.Contains(e.Policies, denyRule) {
		t.Errorf("first edge %+v: want the denied web → db naming rule %s", e, denyRule)
	}
	// Two connections; the first counted with its newer record's bytes.
	if e := v.Edges[1]; e.Denied || e.Connections != 2 || e.Bytes != 3000+500 || e.Port != "TCP/8080" {
		t.Errorf("second edge %+v: want client → web, 2 connections, 3500 bytes, TCP/8080", e)
	}
	if !strings.Contains(v.SVG, `class="edge denied" data-from="demo/web" data-to="demo/db"`) ||
		!strings.Contains(v.SVG, `class="edge allowed" data-from="demo/client" data-to="demo/web"`) || !strings.Contains(v.SVG, "✖ denied") {
		t.Errorf("the map does not draw both edges, the denied one marked:\n%s", v.SVG)
	}
	if len(v.Recent) != 4 || !v.Recent[0].Denied {
		t.Errorf("recent %+v: want 4 records, newest (the denied one) first", v.Recent)
	}

	t.Run("an aggregator that does not answer is 502 naming it", func(t *testing.T) {
		agg.Close()
		code, b := c.do("GET", "/api/v1/flows", "")
		if code != 502 || !strings.Contains(string(b), "Flow Aggregator's API") {
			t.Errorf("%d %s, want 502 naming the aggregator", code, b)
		}
	})
}
