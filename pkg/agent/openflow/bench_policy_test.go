package openflow

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	binding "antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// BenchmarkPolicyRuleNxM installs one ingress rule with N peer addresses and
// M applied-to ports on real OVS (userspace datapath) and reports the flows
// the bridge holds for it and the install time. Conjunctive flows make the
// count N + M + services + 1, not N x M: flows/(N+M) stays near 1 as N grows.
//
//	go test -run '^$' -bench PolicyRuleNxM -benchtime 3x ./pkg/agent/openflow/
func BenchmarkPolicyRuleNxM(b *testing.B) {
	ovsinstance.RequireRoot(b)
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("N=M=%d", n), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			in, c := benchBridge(ctx, b)
			rw := NewRuleWriter(c)
			base := countFlows(b, in)
			rule := nxmRule(1, n, n)
			var flows int
			var installs time.Duration
			for b.Loop() {
				start := time.Now()
				if err := rw.Install(ctx, rule); err != nil {
					b.Fatalf("install rule %d: %v", rule.ID, err)
				}
				installs += time.Since(start)
				b.StopTimer()
				flows = countFlows(b, in) - base
				if err := rw.Uninstall(ctx, rule.ID); err != nil {
					b.Fatalf("uninstall rule %d: %v", rule.ID, err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(flows), "flows")
			b.ReportMetric(float64(flows)/float64(2*n), "flows/(N+M)")
			b.ReportMetric(installs.Seconds()*1000/float64(b.N), "ms/install")
		})
	}
}

// nxmRule is a rule from n distinct /32 sources to m local ports, TCP 80.
func nxmRule(id uint32, n, m int) *PolicyRule {
	r := &PolicyRule{ID: id, Direction: DirectionIngress, Priority: PolicyRulePriority,
		Services: []PolicyPort{{Protocol: 6, Port: 80}}}
	for i := range n {
		// 10.20.0.0/16 and up: outside the test bridge's pod CIDR.
		r.Peers = append(r.Peers, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(20 + i>>16), byte(i >> 8), byte(i)}), 32))
	}
	for i := range m {
		r.AppliedTo = append(r.AppliedTo, uint32(100+i))
	}
	return r
}

// benchBridge starts OVS with br-int and an initialized client. Policy
// flows need no real pod or gateway port: they match on port numbers only.
func benchBridge(ctx context.Context, b *testing.B) (*ovsinstance.Instance, *Client) {
	b.Helper()
	in := ovsinstance.StartForTest(b, "ofbench")
	if _, err := in.Vsctl("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev",
		"protocols=OpenFlow13,OpenFlow15", "fail_mode=secure"); err != nil {
		b.Fatalf("create br-int: %v", err)
	}
	ofc := binding.NewClient(in.BridgeMgmt("br-int"), binding.ClientOptions{})
	c, err := NewClient(ofc, 1)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	b.Cleanup(cancel)
	go ofc.Run(runCtx)
	mac, _ := net.ParseMAC("0a:00:00:00:00:01")
	_, cidr, _ := net.ParseCIDR("10.10.1.0/24")
	if err := c.Initialize(ctx, &NodeConfig{GatewayOFPort: 2, GatewayIP: net.ParseIP("10.10.1.1"), GatewayMAC: mac, PodCIDR: cidr}); err != nil {
		b.Fatalf("initialize the pipeline: %v", err)
	}
	return in, c
}

// countFlows is the number of flows br-int holds.
func countFlows(tb testing.TB, in *ovsinstance.Instance) int {
	tb.Helper()
	out, err := in.Ofctl("dump-aggregate", "br-int")
	if err != nil {
		tb.Fatalf("dump-aggregate br-int: %v", err)
	}
	i := strings.Index(out, "flow_count=")
	if i < 0 {
		tb.Fatalf("dump-aggregate br-int printed no flow_count: %q", out)
	}
	n, err := strconv.Atoi(strings.TrimSpace(out[i+len("flow_count="):]))
	if err != nil {
		tb.Fatalf("parse dump-aggregate %q: %v", out, err)
	}
	return n
}

// BenchmarkPodFlowsDuringPolicyWrite installs one pod's flows while a
// policy rule of 2,000 x 2,000 (4,002 flows) is being written on real OVS,
// and reports how long the pod's install took (ms/pod-add) next to the
// policy write (ms/policy). Pod and policy flows are serialized apart, so
// the pod waits for the switch only, not for the policy write.
//
//	go test -run '^$' -bench PodFlowsDuringPolicyWrite -benchtime 10x ./pkg/agent/openflow/
func BenchmarkPodFlowsDuringPolicyWrite(b *testing.B) {
	ovsinstance.RequireRoot(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, c := benchBridge(ctx, b)
	rw := NewRuleWriter(c)
	rule := nxmRule(1, 2000, 2000)
	mac, _ := net.ParseMAC("0a:00:00:00:01:02")
	var podTime, policyTime time.Duration
	for b.Loop() {
		policyDone := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			if err := rw.Install(ctx, rule); err != nil {
				b.Errorf("install rule: %v", err)
			}
			policyDone <- time.Since(start)
		}()
		time.Sleep(2 * time.Millisecond) // the policy write is under way
		start := time.Now()
		if err := c.InstallPodFlows("veth-bench", []net.IP{net.ParseIP("10.10.1.50")}, mac, 50); err != nil {
			b.Fatal(err)
		}
		podTime += time.Since(start)
		policyTime += <-policyDone
		b.StopTimer()
		if err := rw.Uninstall(ctx, rule.ID); err != nil {
			b.Fatal(err)
		}
		if err := c.UninstallPodFlows("veth-bench"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(podTime.Seconds()*1000/float64(b.N), "ms/pod-add")
	b.ReportMetric(policyTime.Seconds()*1000/float64(b.N), "ms/policy")
}
