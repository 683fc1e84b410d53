package openflow

import (
	"context"
	"net"
	"testing"
)

// BenchmarkApplyPolicyChangeCPU adds, then removes, 100 Allow rules of 10
// peers x 10 ports each (one PolicyChange each way) on a client that
// writes nowhere: the agent's own cost of computing and recording a policy
// change, without the switch's (BenchmarkPolicyRuleNxM has that).
//
//	go test -run '^$' -bench ApplyPolicyChangeCPU ./pkg/agent/openflow/
func BenchmarkApplyPolicyChangeCPU(b *testing.B) {
	ctx := context.Background()
	c := discardClient(b, ctx)
	var add, del PolicyChange
	for i := range 100 {
		r := nxmRule(uint32(i+1), 10, 10)
		add.Rules = append(add.Rules, RuleChange{New: r})
		del.Rules = append(del.Rules, RuleChange{Old: r})
	}
	var msgs int
	for b.Loop() {
		w, err := c.ApplyPolicyChange(ctx, add)
		if err != nil {
			b.Fatal(err)
		}
		msgs = w.Messages
		if _, err := c.ApplyPolicyChange(ctx, del); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(msgs), "flowmods/add")
}

// BenchmarkUpdatePolicyRulesCPU changes 100 installed Allow rules (one more
// peer each, then back: one PolicyChange each way) on a client that writes
// nowhere: the agent's own cost of a policy update that keeps its rules.
//
//	go test -run '^$' -bench UpdatePolicyRulesCPU ./pkg/agent/openflow/
func BenchmarkUpdatePolicyRulesCPU(b *testing.B) {
	ctx := context.Background()
	c := discardClient(b, ctx)
	var add, widen, narrow PolicyChange
	for i := range 100 {
		r := nxmRule(uint32(i+1), 10, 10)
		w := nxmRule(uint32(i+1), 11, 10)
		add.Rules = append(add.Rules, RuleChange{New: r})
		widen.Rules = append(widen.Rules, RuleChange{Old: r, New: w})
		narrow.Rules = append(narrow.Rules, RuleChange{Old: w, New: r})
	}
	if _, err := c.ApplyPolicyChange(ctx, add); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := c.ApplyPolicyChange(ctx, widen); err != nil {
			b.Fatal(err)
		}
		if _, err := c.ApplyPolicyChange(ctx, narrow); err != nil {
			b.Fatal(err)
		}
	}
}

// discardClient is an initialized client whose bridge writes nowhere.
func discardClient(b *testing.B, ctx context.Context) *Client {
	b.Helper()
	c, err := NewClient(discardBridge{}, 1)
	if err != nil {
		b.Fatal(err)
	}
	_, cidr, _ := net.ParseCIDR("10.10.1.0/24")
	if err := c.Initialize(ctx, &NodeConfig{GatewayOFPort: 2, GatewayIP: net.ParseIP("10.10.1.1"),
		GatewayMAC: net.HardwareAddr{0x0a, 0, 0, 0, 0, 1}, PodCIDR: cidr}); err != nil {
		b.Fatal(err)
	}
	return c
}
