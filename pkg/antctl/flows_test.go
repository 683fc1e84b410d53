package antctl

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/flowaggregator"
	"antrea.io/antrea/pkg/ipfix"
)

func TestGetFlowsAsksTheAggregatorWithTheFiltersAndPrintsOneRowARecord(t *testing.T) {
	f := flowaggregator.Flow{SrcIP: netip.MustParseAddr("10.10.0.2"), DstIP: netip.MustParseAddr("10.10.1.2"), SrcPort: 40000, DstPort: 5201,
		Protocol: 6, SrcPod: "a", SrcNamespace: "ns", DstPod: "b", DstNamespace: "ns", Service: "ns/svc:http",
		FlowType: ipfix.FlowTypeInterNode, TCPState: "ESTABLISHED", End: time.Unix(1700000000, 0),
		FromSource: &flowaggregator.NodeCounts{Total: flowaggregator.Counts{Packets: 10, Bytes: 1234}, ReverseTotal: flowaggregator.Counts{Bytes: 56}}}
	var asked url.Values
	get := func(_ context.Context, path string, params url.Values) ([]byte, error) {
		if path != "/flows" {
			t.Errorf("GET %s, want /flows", path)
		}
		asked = params
		return json.Marshal(flowaggregator.FlowList{Items: []flowaggregator.Flow{f}})
	}
	fs, err := query.Flows(context.Background(), get, query.FlowQuery{Pod: "ns/b", Namespace: "ns", Denied: true, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if asked.Get("pod") != "ns/b" || asked.Get("namespace") != "ns" || asked.Get("denied") != "true" || asked.Get("limit") != "5" || asked.Has("policy") {
		t.Errorf("asked %v, want pod, namespace, denied and limit only", asked)
	}
	var out bytes.Buffer
	if err := writeFlowsTable(&out, fs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want a header and a row:\n%s", len(lines), out.String())
	}
	for _, want := range []string{"ns/a (10.10.0.2:40000)", "ns/b (10.10.1.2:5201)", "TCP", "ns/svc:http", "inter-node", "1234", "56", "ESTABLISHED"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
}

func TestTheFlowsTableNamesTheRuleThatDeniedAConnection(t *testing.T) {
	f := flowaggregator.Flow{SrcIP: netip.MustParseAddr("10.10.0.2"), DstIP: netip.MustParseAddr("10.10.1.2"), Protocol: 6, Denied: true,
		EgressPolicy: "ns/allow-out", EgressPolicyAction: ipfix.RuleActionAllow,
		IngressPolicy: "deny-web", IngressPolicyRule: "drop-client", IngressPolicyAction: ipfix.RuleActionDrop}
	iso := flowaggregator.Flow{SrcIP: netip.MustParseAddr("10.10.0.2"), DstIP: netip.MustParseAddr("10.10.1.3"), Protocol: 6, Denied: true,
		IngressPolicy: "ns/web-from-a", IngressPolicyType: ipfix.PolicyTypeK8s, IngressPolicyAction: ipfix.RuleActionDrop}
	var out bytes.Buffer
	if err := writeFlowsTable(&out, []flowaggregator.Flow{f, iso}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.Contains(lines[1], "egress:ns/allow-out ingress:DROP:deny-web/drop-client") {
		t.Errorf("row %q, want both directions, the denying one with its action and rule", lines[1])
	}
	if !strings.Contains(lines[2], "ingress:DROP:ns/web-from-a") {
		t.Errorf("row %q, want the isolating K8s NetworkPolicy", lines[2])
	}
}
