package openflow

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// TestTheIPv6EndpointLayoutOnRealOVS writes what an IPv6 Service port would
// get (the pipeline refuses it until dual-stack) to a real switch beside an
// IPv4 one: OVS accepts a bucket loading an IPv6 endpoint into xxreg3 and
// an EndpointDNAT flow matching it, and traces an IPv6 packet through the
// bucket's actions to the DNAT, while the IPv4 port keeps reg3.
func TestTheIPv6EndpointLayoutOnRealOVS(t *testing.T) {
	br := bridgetest.New(t)
	c := initializedClient(t, br, br.OF)
	ctx := context.Background()
	b := &c.b
	var msgs []binding.Message
	var v6Bucket []binding.Action
	for i, pe := range []struct{ vip, ep string }{{"10.96.0.10", "10.10.0.7"}, {"fd00:10:96::a", "fd00:10:244:1::7"}} {
		p := ServicePort{IP: netip.MustParseAddr(pe.vip), Protocol: binding.IPProtoTCP, Port: 80}
		e := Endpoint{IP: netip.MustParseAddr(pe.ep), Port: 8080}
		id := uint32(100 + i)
		g := b.serviceGroup(binding.GroupAdd, id, PortState{Endpoints: []Endpoint{e}})
		v6Bucket = g.Buckets[0].Actions
		msgs = append(msgs, g,
			binding.AddFlow(b.endpointFlow(keyOf(p.Protocol, e), false, p.Protocol)),
			binding.AddFlow(b.serviceLBFlow(p, id, nil)))
	}
	if err := br.OF.Bundle(ctx, msgs...); err != nil {
		t.Fatalf("OVS refused the IPv4 and IPv6 endpoint layout: %v", err)
	}
	groups := strings.Join(br.DumpGroups(t), "\n")
	for _, want := range []string{"->reg3", "->xxreg3"} {
		if !strings.Contains(groups, want) {
			t.Errorf("groups lack a load %s:\n%s", want, groups)
		}
	}
	// The IPv6 bucket's actions in a flow of its own, which the trace
	// follows (it stops at a select group's recirculation); the node's
	// pipeline does not classify IPv6 yet.
	bucket := &binding.Flow{Table: 0, Priority: 65000, Actions: v6Bucket}
	bucket.Match.EthType(binding.EthTypeIPv6)
	if err := br.OF.Bundle(ctx, binding.AddFlow(bucket)); err != nil {
		t.Fatal(err)
	}
	trace := br.Trace(t, "in_port=2,tcp6,ipv6_src=fd00:10:244:1::9,ipv6_dst=fd00:10:96::a,tcp_dst=80,ct_state=new|trk")
	if !strings.Contains(trace, "nat(dst=[fd00:10:244:1::7]:8080)") {
		t.Errorf("an IPv6 packet to the IPv6 port is not DNATed to its endpoint:\n%s", trace)
	}
}
