package proxy

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	agentof "antrea.io/antrea/pkg/agent/openflow"
)

func lbWithRanges(ranges ...string) *corev1.Service {
	return withSpec(service("lb", "10.96.0.12", svcPort("http", corev1.ProtocolTCP, 80, 8080), svcPort("dns", corev1.ProtocolUDP, 53, 5353)),
		func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalIPs = []string{"192.168.100.10"}
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.LoadBalancerSourceRanges = ranges
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.168.100.11"},
				{IP: "192.168.100.12", IPMode: ptr(corev1.LoadBalancerIPModeProxy)}}
		})
}

func TestSourceRangesGuardTheIngressIPsPortsOnly(t *testing.T) {
	svc := lbWithRanges(" 10.10.1.0/24 ", "not-a-cidr", "192.168.77.2/32", "")
	want := desiredState(svc, nil, nodeView{name: "node-1"})
	got := sourceRanges(svc, want)
	ranges := []netip.Prefix{netip.MustParsePrefix("10.10.1.0/24"), netip.MustParsePrefix("192.168.77.2/32")}
	exp := agentof.SourceRanges{
		vipPort("192.168.100.11", 6, 80):  ranges,
		vipPort("192.168.100.11", 17, 53): ranges,
	}
	if !got.Equal(exp) {
		t.Fatalf("the ranges (padding trimmed, the invalid entry skipped) should guard the VIP ingress IP's ports only (not the ClusterIP, external IP or ipMode Proxy ingress IP); got %v, want %v", got, exp)
	}
	if got := sourceRanges(lbWithRanges(), want); got != nil {
		t.Fatalf("no range should guard nothing, got %v", got)
	}
	if got := sourceRanges(lbWithRanges("bad", "worse/33"), want); got != nil {
		t.Fatalf("only invalid ranges should guard nothing (as kube-proxy), got %v", got)
	}
	// A port another Service holds (not in want) gets no range.
	delete(want, vipPort("192.168.100.11", 17, 53))
	if got := sourceRanges(svc, want); len(got) != 1 {
		t.Fatalf("only the realized port should get ranges, got %v", got)
	}
}

func TestSourceRangesFollowTheService(t *testing.T) {
	client, flows := startProxy(t, lbWithRanges("10.10.1.0/24"))
	lb := vipPort("192.168.100.11", 6, 80)
	rangesOf := func() agentof.SourceRanges {
		flows.mu.Lock()
		defer flows.mu.Unlock()
		return flows.ranges["default/lb"]
	}
	waitRanges := func(what string, cond func(agentof.SourceRanges) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true,
			func(context.Context) (bool, error) { return cond(rangesOf()), nil }); err != nil {
			t.Fatalf("%s; ranges: %v", what, rangesOf())
		}
	}
	waitRanges("the Service's range should be set", func(r agentof.SourceRanges) bool {
		return len(r[lb]) == 1 && r[lb][0] == netip.MustParsePrefix("10.10.1.0/24")
	})
	update := func(ranges ...string) {
		svc, err := client.CoreV1().Services("default").Get(context.Background(), "lb", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Spec.LoadBalancerSourceRanges = ranges
		if _, err := client.CoreV1().Services("default").Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update("255.0.0.0/32")
	waitRanges("a changed range should replace the old one", func(r agentof.SourceRanges) bool {
		return len(r[lb]) == 1 && r[lb][0] == netip.MustParsePrefix("255.0.0.0/32")
	})
	update()
	waitRanges("cleared ranges should be removed", func(r agentof.SourceRanges) bool { return r == nil })
	update("10.0.0.0/8")
	waitRanges("ranges should come back", func(r agentof.SourceRanges) bool { return len(r[lb]) == 1 })
	if err := client.CoreV1().Services("default").Delete(context.Background(), "lb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRanges("a deleted Service's ranges should go", func(r agentof.SourceRanges) bool { return r == nil })
}
