package networkpolicy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/agent/flowexporter"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/ipfix"
)

// withDenied turns deny tracking on (as the agent does with the
// FlowExporter) and passes the denied packets to ch (dropping what does not
// fit).
func withDenied(ch chan<- flowexporter.DeniedPacket) func(*agentof.Client, *Options) {
	return func(flows *agentof.Client, o *Options) {
		flows.SetDenyTracking(true)
		o.Denied = func(p flowexporter.DeniedPacket) {
			select {
			case ch <- p:
			default:
			}
		}
	}
}

// waitDenied returns the first denied packet from src that ok accepts.
func waitDenied(t *testing.T, ch <-chan flowexporter.DeniedPacket, what string, ok func(flowexporter.DeniedPacket) bool) flowexporter.DeniedPacket {
	t.Helper()
	deadline := time.After(15 * time.Second)
	var seen []string
	for {
		select {
		case p := <-ch:
			if ok(p) {
				return p
			}
			seen = append(seen, fmt.Sprintf("%+v", p))
		case <-deadline:
			t.Fatalf("no denied packet %s; saw:\n%s", what, strings.Join(seen, "\n"))
		}
	}
}

// With deny tracking, the packets a Drop rule, a Reject rule and the
// isolation of a K8s NetworkPolicy deny reach the FlowExporter named with
// what denied them (policy, rule, action, direction), on a real node; the
// flows of Allow rules carry no packet-in.
func TestDeniedPacketsReachTheFlowExporterNamedWithTheirRule(t *testing.T) {
	ch := make(chan flowexporter.DeniedPacket, 1024)
	n := newPolicyNode(t, withDenied(ch))
	a, b := n.a, n.b
	from := func(c *bridgetest.Pod) func(flowexporter.DeniedPacket) bool {
		return func(p flowexporter.DeniedPacket) bool {
			return p.Tuple.Src.String() == c.IP.String() && p.Tuple.Dst.String() == n.web.IP.String() && p.Tuple.DstPort == 8080 && p.Tuple.Proto == 6
		}
	}

	dropA := ingressFrom(drop, "ag-a")
	dropA.Name = "drop-a"
	n.set(t, antreaPolicy("sec-drop-a", tierSecurityOps, 1, "atg-web", dropA), antreaPolicy("app-allow-b", tierApplication, 1, "atg-web", ingressFrom(allow, "ag-b")))
	n.expect(t, "a is dropped, b allowed", map[*bridgetest.Pod]string{a: "timeout", b: "web"})
	p := waitDenied(t, ch, "of a's connection", from(a))
	if want := flowexporter.NamedRule("AntreaClusterNetworkPolicy:sec-drop-a", "drop-a", ipfix.RuleActionDrop); !p.Ingress || p.Rule != want || p.Bytes != 60 {
		t.Errorf("a's SYN: %+v, want ingress, rule %+v, 60 bytes", p, want)
	}
	// The allow rule's conj_id flow sends nothing to the agent.
	for _, f := range n.br.DumpFlows(t, fmt.Sprintf("table=%d", n.flows.Pipeline().Table(agentof.AntreaPolicyIngressRuleTable).ID)) {
		if strings.Contains(f, "conj_id=") && strings.Contains(f, "controller(") && !strings.Contains(f, "meter_id=5") {
			t.Errorf("a conj_id flow with a packet-in other than the deny meter's: %s", f)
		}
	}

	rejectB := cpv1beta2.NetworkPolicyRule{Name: "no-web", Direction: cpv1beta2.DirectionOut, Action: ptr(reject),
		To: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag-web"}}}
	n.set(t, antreaPolicy("reject-b-out", tierApplication, 1, "atg-b", rejectB))
	n.expect(t, "an egress Reject refuses b", map[*bridgetest.Pod]string{a: "web", b: "refused"})
	p = waitDenied(t, ch, "of b's connection", from(b))
	if want := flowexporter.NamedRule("AntreaClusterNetworkPolicy:reject-b-out", "no-web", ipfix.RuleActionReject); p.Ingress || p.Rule != want {
		t.Errorf("b's SYN: %+v, want egress, rule %+v", p, want)
	}

	n.set(t, k8sPolicy("web-from-a", "ag-a"))
	n.expect(t, "the K8s NetworkPolicy isolates web: b is dropped", map[*bridgetest.Pod]string{a: "web", b: "timeout"})
	p = waitDenied(t, ch, "of b's connection dropped by isolation", func(p flowexporter.DeniedPacket) bool {
		return from(b)(p) && p.Rule.Type == ipfix.PolicyTypeK8s
	})
	if want := (flowexporter.PolicyRule{Type: ipfix.PolicyTypeK8s, Namespace: "default", Name: "web-from-a", Action: ipfix.RuleActionDrop}); !p.Ingress || p.Rule != want {
		t.Errorf("b's SYN: %+v, want ingress, %+v", p, want)
	}
}
