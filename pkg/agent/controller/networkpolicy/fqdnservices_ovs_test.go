package networkpolicy

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/pkg/agent/dpcache"
	"antrea.io/antrea/pkg/agent/flowexporter"
	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// A toFQDN rule naming a Service (issue 27: upstream's toFQDN misses
// Services' names) on a real node with AntreaProxy and a real DNS server in
// a pod: the name answers the Service's ClusterIP, the pod connects to it,
// and EndpointDNAT has rewritten the destination to the endpoint before the
// egress rules run. The rule allows the connection to that ClusterIP and
// port from the first SYN after the lookup, and nothing else: not another
// Service with the same endpoint, nor the endpoint by its pod IP, nor the
// Service's port that the rule's ports leave out. About 5 s.
func TestAToFQDNRuleNamingAServiceMatchesItsClusterIP(t *testing.T) {
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.ServiceSpec{
		ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
		Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "alt", Protocol: corev1.ProtocolTCP, Port: 81, TargetPort: intstr.FromInt32(8080)},
		}}}
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "other"}, Spec: corev1.ServiceSpec{
		ClusterIP: "10.96.0.11", ClusterIPs: []string{"10.96.0.11"},
		Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	// web's EndpointSlice names its two ports as the Service does.
	webEPs := webSlice("web")
	webEPs.Ports = []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))},
		{Name: ptr("alt"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}}
	nn := newNodePathNode(t, nil, web, webEPs, other, webSlice("other"))
	br, flows := nn.br, nn.flows
	add := func(name, cidr string) *bridgetest.Pod {
		p := br.AddPod(t, name, cidr)
		if err := flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		iface := interfacestore.NewContainerInterface(p.HostIF, "c-"+name, name, "default", "eth0", p.MAC, []net.IP{p.IP}, 0)
		iface.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(p.OFPort)}
		nn.store.AddInterface(iface)
		return p
	}
	client, dns := add("client", "10.10.1.4/24"), add("dns", "10.10.1.20/24")
	serveDNS(t, dns, map[string]zoneRecord{
		"web.default.svc.cluster.local":   {addrs: []net.IP{net.ParseIP("10.96.0.10")}, ttl: 300},
		"other.default.svc.cluster.local": {addrs: []net.IP{net.ParseIP("10.96.0.11")}, ttl: 300},
	})

	n := &policyNode{br: br, client: newClient(&cpv1beta2.AppliedToGroup{ObjectMeta: metav1.ObjectMeta{Name: "atg-client"},
		GroupMembers: []cpv1beta2.GroupMember{member("default", "client", "10.10.1.4")}})}
	// As the agent does: the datapath cache is purged before a held DNS
	// answer goes on.
	purger := dpcache.New(dpcache.AppctlPurge(br.Dir()))
	c := NewController("node-1", n.client, flows, nn.store, Options{
		OnNarrowed: func() {
			if err := purger.Sync(nn.ctx); err != nil && nn.ctx.Err() == nil {
				t.Errorf("purge the datapath cache: %v", err)
			}
		},
		Services:  NewServiceLookup(nn.informers.Core().V1().Services()),
		PacketIns: &PacketIns{IO: nn.packets, Parser: flows, AuditLogDir: t.TempDir()},
		FQDN: &FQDNOptions{Flows: flows, Live: ConntrackLive(&flowexporter.DpctlSource{RunDir: br.Dir(), Datapath: "netdev@ovs-netdev",
			Zones: []uint16{agentof.CtZone}})},
	})
	done := make(chan struct{})
	go func() { c.Run(nn.ctx); close(done) }()
	t.Cleanup(func() { nn.cancel(); <-done })

	svc80, svc81, otherSvc, direct := "10.96.0.10:80", "10.96.0.10:81", "10.96.0.11:80", "10.10.1.3:8080"
	// AntreaProxy serves both Services before the policy comes.
	deadline := time.Now().Add(15 * time.Second)
	for dialOutcome(t, client, svc80, time.Second) != "web" || dialOutcome(t, client, otherSvc, time.Second) != "web" {
		if time.Now().After(deadline) {
			t.Fatal("AntreaProxy does not serve web and other")
		}
		time.Sleep(100 * time.Millisecond)
	}

	udp, tcp := cpv1beta2.ProtocolUDP, cpv1beta2.ProtocolTCP
	port53, port80 := intstr.FromInt32(53), intstr.FromInt32(80)
	everything := cpv1beta2.IPBlock{CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.IPv4zero.To4()), PrefixLength: 0}}
	dnsBlock := cpv1beta2.IPBlock{CIDR: cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(dns.IP.To4()), PrefixLength: 32}}
	n.set(t, antreaPolicy("fqdn-svc", tierApplication, 1, "atg-client",
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{dnsBlock}},
			cpv1beta2.Service{Protocol: &udp, Port: &port53}),
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{FQDNs: []string{"web.default.svc.cluster.local"}},
			cpv1beta2.Service{Protocol: &tcp, Port: &port80}),
		egressTo(drop, cpv1beta2.NetworkPolicyPeer{IPBlocks: []cpv1beta2.IPBlock{everything}}),
	))
	deadline = time.Now().Add(15 * time.Second)
	for dialOutcome(t, client, svc80, 300*time.Millisecond) != "timeout" {
		if time.Now().After(deadline) {
			t.Fatal("the policy was not realized: the client reaches web's ClusterIP before any lookup")
		}
	}

	for _, name := range []string{"web.default.svc.cluster.local", "other.default.svc.cluster.local"} {
		if got := lookup(t, client, dns.IP, "udp4", name); len(got) != 1 {
			t.Fatalf("%s resolved to %v", name, got)
		}
	}
	who, retrans, err := firstTCP(t, client, svc80)
	if err != nil || who != "web" || retrans != 0 {
		table := flows.Pipeline().Table(agentof.AntreaPolicyEgressRuleTable).ID
		t.Fatalf("the first connection to web's ClusterIP after the lookup answered %q with %d retransmissions (err %v), want web at the first SYN\nAntreaPolicyEgressRule:\n%s",
			who, retrans, err, strings.Join(br.DumpFlows(t, fmt.Sprintf("table=%d", table)), "\n"))
	}
	for addr, why := range map[string]string{
		svc81:    "web's port 81, which the rule's ports leave out",
		otherSvc: "another Service with the same endpoint, whose name the rule does not allow",
		direct:   "the endpoint by its pod IP",
	} {
		if got := dialOutcome(t, client, addr, 500*time.Millisecond); got != "timeout" {
			t.Errorf("%s (%s) must stay dropped, got %s", why, addr, got)
		}
	}
}
