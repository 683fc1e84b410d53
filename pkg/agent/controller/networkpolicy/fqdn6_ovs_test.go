package networkpolicy

import (
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"k8s.io/apimachinery/pkg/util/intstr"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// TestAToFQDNRuleAllowsTheIPv6AddressesAPodLookedUpOverIPv6: on a
// dual-stack node, a pod asks the DNS server's IPv6 address for a name's
// AAAA records (the answer comes back over IPv6, intercepted and read by
// the agent) and connects to the IPv6 address it got at the first SYN; its
// A records, looked up over IPv6 too, open the IPv4 address; a name the
// rule does not allow stays dropped on both families.
func TestAToFQDNRuleAllowsTheIPv6AddressesAPodLookedUpOverIPv6(t *testing.T) {
	n := newDualStackPolicyNode(t, func(_ *agentof.Client, o *Options) { o.FQDN = &FQDNOptions{} })
	dns := n.addPod(t, "dns", "10.10.1.20/24", "fd00:10:244:1::20/64")
	web1 := n.addPod(t, "web1", "10.10.1.10/24", "fd00:10:244:1::10/64")
	web2 := n.addPod(t, "web2", "10.10.1.11/24", "fd00:10:244:1::11/64")
	web1.ServeWho(t, 8080)
	web1.ServeWho6(t, 8080)
	web2.ServeWho6(t, 8080)
	serveDNS(t, dns, map[string]zoneRecord{
		"api.example.test":   {addrs: []net.IP{web1.IP, web1.IPv6}, ttl: 300},
		"other.example.test": {addrs: []net.IP{web2.IPv6}, ttl: 300},
	})
	udp := cpv1beta2.ProtocolUDP
	port53 := intstr.FromInt32(53)
	anyV4 := cpv1beta2.IPBlock{CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.IPv4zero.To4()), PrefixLength: 0}}
	anyV6 := cpv1beta2.IPBlock{CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.IPv6zero), PrefixLength: 0}}
	n.set(t, antreaPolicy("fqdn6", tierApplication, 1, "atg-a",
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag-dns"}}, cpv1beta2.Service{Protocol: &udp, Port: &port53}),
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{FQDNs: []string{"api.example.test"}}),
		egressTo(drop, cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{anyV4, anyV6}}),
	))
	a := n.a
	at := func(ip net.IP) string { return net.JoinHostPort(ip.String(), "8080") }
	deadline := time.Now().Add(10 * time.Second)
	for dialOutcome(t, a, at(web1.IPv6), 300*time.Millisecond) != "timeout" {
		if time.Now().After(deadline) {
			t.Fatal("the policy was not realized: a still reaches web1's IPv6 address before any lookup")
		}
	}

	got := lookupType(t, a, dns.IPv6, "udp6", "api.example.test", dnsmessage.TypeAAAA)
	if len(got) != 1 || got[0].String() != web1.IPv6.String() {
		t.Fatalf("api.example.test AAAA resolved to %v, want web1's %s", got, web1.IPv6)
	}
	who, retrans, err := firstTCP(t, a, at(web1.IPv6))
	if err != nil || who != "web1" || retrans != 0 {
		t.Fatalf("the first connection to web1's IPv6 address after the AAAA lookup answered %q with %d retransmissions (err %v), want web1 at the first SYN\ncache %v\nflows:\n%s",
			who, retrans, err, n.ctl.FQDNCache(), strings.Join(n.br.DumpFlows(t), "\n"))
	}
	if got := dialOutcome(t, a, at(web1.IP), 500*time.Millisecond); got != "timeout" {
		t.Fatalf("web1's IPv4 address was not looked up yet (no A query): a reached it (%s)", got)
	}
	got = lookupType(t, a, dns.IPv6, "udp6", "api.example.test", dnsmessage.TypeA)
	if len(got) != 1 || got[0].String() != web1.IP.String() {
		t.Fatalf("api.example.test A resolved to %v, want web1's %s", got, web1.IP)
	}
	if who, _, err := firstTCP(t, a, at(web1.IP)); err != nil || who != "web1" {
		t.Fatalf("the first connection to web1's IPv4 address after the A lookup over IPv6: %q, %v", who, err)
	}

	got = lookupType(t, a, dns.IPv6, "udp6", "other.example.test", dnsmessage.TypeAAAA)
	if len(got) != 1 || got[0].String() != web2.IPv6.String() {
		t.Fatalf("other.example.test AAAA resolved to %v, want web2's %s", got, web2.IPv6)
	}
	if got := dialOutcome(t, a, at(web2.IPv6), 500*time.Millisecond); got != "timeout" {
		t.Fatalf("a name the rule does not allow must stay dropped over IPv6: a reached web2 (%s)", got)
	}
}
