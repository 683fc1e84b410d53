package networkpolicy

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// Figures of toFQDN rules on a real node, printed, never asserted (set
// ANTREA_FQDN_MEASURE=1; about 30 s): what a lookup of a name a rule
// matches costs the pod (the answer is held until the rule's flows hold the
// new address), against the same lookups without any policy; then 1,000
// distinct names resolved: the rule's flows and the cache's memory.
func TestMeasureToFQDNLookups(t *testing.T) {
	if os.Getenv("ANTREA_FQDN_MEASURE") == "" {
		t.Skip("set ANTREA_FQDN_MEASURE=1 to measure")
	}
	const trials, names = 200, 1000
	n := newPolicyNode(t, func(_ *agentof.Client, o *Options) { o.FQDN = &FQDNOptions{} })
	dns := n.addPod(t, "dns", "10.10.1.20/24")
	zone := map[string]zoneRecord{}
	for i := range names + 2*trials {
		zone[fmt.Sprintf("n%d.example.test", i)] = zoneRecord{addrs: []net.IP{net.IPv4(10, 20, byte(i/250), byte(1+i%250))}, ttl: 3600}
	}
	serveDNS(t, dns, zone)
	a := n.a
	rtts := func(first, count int) []time.Duration {
		var out []time.Duration
		for i := first; i < first+count; i++ {
			start := time.Now()
			if got := lookup(t, a, dns.IP, "udp4", fmt.Sprintf("n%d.example.test", i)); len(got) != 1 {
				t.Fatalf("n%d: %v", i, got)
			}
			out = append(out, time.Since(start))
		}
		slices.Sort(out)
		return out
	}
	pct := func(d []time.Duration, p int) time.Duration { return d[(len(d)-1)*p/100] }
	// Warm up the path (ARP, the first megaflows).
	rtts(0, 5)
	plain := rtts(names, trials)

	udp, tcp := cpv1beta2.ProtocolUDP, cpv1beta2.ProtocolTCP
	port53 := intstr.FromInt32(53)
	n.set(t, antreaPolicy("fqdn", tierApplication, 1, "atg-a",
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{AddressGroups: []string{"ag-dns"}},
			cpv1beta2.Service{Protocol: &udp, Port: &port53}, cpv1beta2.Service{Protocol: &tcp, Port: &port53}),
		egressTo(allow, cpv1beta2.NetworkPolicyPeer{FQDNs: []string{"*.example.test"}}),
	))
	deadline := time.Now().Add(10 * time.Second)
	for len(n.br.DumpFlows(t, "table=19,tp_src=53")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the DNS interception flows were not installed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	held := rtts(names+trials, trials)
	t.Logf("lookup of a new name, query to answer at the pod (%d each): no policy p50 %v p99 %v; under a toFQDN rule (answer held until its address is realized) p50 %v p99 %v; added p50 %v p99 %v",
		trials, pct(plain, 50), pct(plain, 99), pct(held, 50), pct(held, 99), pct(held, 50)-pct(plain, 50), pct(held, 99)-pct(plain, 99))

	flowsBefore := len(n.br.DumpFlows(t))
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	rtts(0, names)
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	flows := n.br.DumpFlows(t)
	peer := 0
	for _, f := range flows {
		if strings.Contains(f, "nw_dst=10.20.") {
			peer++
		}
	}
	t.Logf("%d more distinct names resolved in %v: %d addresses in the cache, bridge flows %d -> %d (%d clause flows of the learned addresses); heap %d KiB -> %d KiB",
		names, took.Round(time.Millisecond), len(n.ctl.FQDNCache()), flowsBefore, len(flows), peer, m0.HeapAlloc/1024, m1.HeapAlloc/1024)
}
