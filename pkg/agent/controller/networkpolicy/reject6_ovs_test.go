package networkpolicy

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// TestRejectOverIPv6AnswersWithAResetAndICMPv6 is
// TestRejectRefusesTCPAndAnswersUDPWithICMP on a dual-stack node, over
// IPv6: the client's own kernel judges the answers. Its connect() to web's
// IPv6 address is refused (a TCP reset over IPv6), its UDP socket gets the
// ICMPv6 "administratively prohibited" (type 1 code 1, which Linux reports
// as EACCES) quoting its datagram, on ingress and on egress; IPv4 beside
// it is rejected as before. The rule logs: np.log names the IPv6 packet's
// addresses, as upstream's audit log does.
func TestRejectOverIPv6AnswersWithAResetAndICMPv6(t *testing.T) {
	n := newDualStackPolicyNode(t)
	web6 := net.JoinHostPort(n.web.IPv6.String(), "8080")
	n.expectAt(t, "without policy a reaches web over IPv6", web6, map[*bridgetest.Pod]string{n.a: "web"})

	rejectA := ingressFrom(reject, "ag-a")
	rejectA.EnableLogging, rejectA.Name = true, "reject-a"
	n.set(t, antreaPolicy("reject-a", tierApplication, 1, "atg-web", rejectA))
	n.expectAt(t, "an ingress Reject refuses a's IPv6 connection (a reset), b still connects", web6,
		map[*bridgetest.Pod]string{n.a: "refused", n.b: "web"})
	n.expect(t, "and a's IPv4 connection", map[*bridgetest.Pod]string{n.a: "refused", n.b: "web"})
	if err := udpOutcomeTo(t, n.a, n.web.IPv6); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("a UDP datagram to a rejecting pod's IPv6 address gets ICMPv6 administratively prohibited, which the client's read reports as EACCES; got %v", err)
	}
	lines := n.auditLines(t, func(log string) bool {
		return strings.Contains(log, n.a.IPv6.String()) && strings.Contains(log, " TCP ")
	})
	line := lastLine(lines, n.a.IPv6.String(), n.web.IPv6.String(), " TCP ")
	for _, want := range []string{"AntreaPolicyIngressRule", "reject-a", "Reject", "default/web", n.a.IPv6.String(), n.web.IPv6.String(), "8080"} {
		if !strings.Contains(line, want) {
			t.Errorf("np.log's line of a's rejected IPv6 connection should hold %q; got %q", want, line)
		}
	}

	egress := antreaPolicy("reject-b-out", tierApplication, 1, "atg-b", cpv1beta2.NetworkPolicyRule{Direction: cpv1beta2.DirectionOut,
		Action: ptr(reject), To: cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag-web"}}})
	n.set(t, egress)
	n.expectAt(t, "an egress Reject on b refuses b's IPv6 connection to web, a connects", web6, map[*bridgetest.Pod]string{n.a: "web", n.b: "refused"})
	if err := udpOutcomeTo(t, n.b, n.web.IPv6); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("b's UDP datagram to web's IPv6 address is rejected on egress: want EACCES, got %v", err)
	}
}
