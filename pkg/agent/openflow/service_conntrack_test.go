package openflow

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// flushBridge is groupBridge that also takes messages outside bundles (the
// conntrack flushes), recording them with the number of bundles written
// before each.
type flushBridge struct {
	*groupBridge
	mu      sync.Mutex
	flushes []string
	after   []int
}

func (f *flushBridge) Apply(_ context.Context, msgs ...binding.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range msgs {
		if _, ok := m.(*binding.MeterMod); ok {
			continue // Initialize's reject meter
		}
		fl, ok := m.(*binding.CTFlush)
		if !ok {
			return fmt.Errorf("unexpected message %T outside a bundle", m)
		}
		f.flushes = append(f.flushes, fl.String())
		f.after = append(f.after, f.bundleCount())
	}
	return nil
}

// take returns the flushes since the last take.
func (f *flushBridge) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.flushes
	f.flushes, f.after = nil, nil
	return out
}

func newFlushClient(t *testing.T) (*Client, *flushBridge) {
	t.Helper()
	br := &flushBridge{groupBridge: newGroupBridge()}
	c, err := NewClient(br, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(context.Background(), testNode()); err != nil {
		t.Fatal(err)
	}
	return c, br
}

// TestStaleUDPConntrackIsFlushed follows kube-proxy's conntrack cleanup
// (pkg/proxy/conntrack): a UDP endpoint that leaves a Service port has the
// entries of that port DNATed to it flushed; a UDP Service port that goes
// has every entry to it flushed; the source NATs to an endpoint go once no
// port uses it; TCP, unchanged states and endpoints still used elsewhere
// flush nothing; flushes go out after the bundle that removed the endpoint.
func TestStaleUDPConntrackIsFlushed(t *testing.T) {
	udp := func(ip string, port uint16) ServicePort {
		return ServicePort{IP: netip.MustParseAddr(ip), Protocol: binding.IPProtoUDP, Port: port}
	}
	dnsA := Endpoint{IP: netip.MustParseAddr("10.10.1.3"), Port: 5353, Local: true}
	dnsB := Endpoint{IP: netip.MustParseAddr("10.10.2.3"), Port: 5353}
	dns := udp("10.96.0.10", 53)
	const (
		flushB    = "zone=65520 'ct_nw_src=::,ct_nw_dst=10.96.0.10,ct_tp_src=0,ct_tp_dst=53,ct_nw_proto=17' 'ct_nw_src=10.10.2.3,ct_nw_dst=::,ct_tp_src=5353,ct_tp_dst=0'"
		flushSNAT = "zone=65521 'ct_nw_src=::,ct_nw_dst=10.10.2.3,ct_tp_src=0,ct_tp_dst=5353,ct_nw_proto=17' 'ct_nw_src=::,ct_nw_dst=::,ct_tp_src=0,ct_tp_dst=0'"
	)
	for _, tc := range []struct {
		name   string
		before map[string]ServiceState
		change string
		after  ServiceState
		want   []string
	}{
		{
			name:   "an endpoint leaving a UDP port: its DNATed entries of that port, and its source NATs",
			before: map[string]ServiceState{"kube-system/dns": {dns: {Endpoints: []Endpoint{dnsA, dnsB}}}},
			change: "kube-system/dns", after: ServiceState{dns: {Endpoints: []Endpoint{dnsA}}},
			want: []string{flushB, flushSNAT},
		},
		{
			name: "an endpoint leaving one Service but used by another: only the port's entries",
			before: map[string]ServiceState{
				"kube-system/dns":  {dns: {Endpoints: []Endpoint{dnsA, dnsB}}},
				"kube-system/dns2": {udp("10.96.0.11", 53): {Endpoints: []Endpoint{dnsB}}},
			},
			change: "kube-system/dns", after: ServiceState{dns: {Endpoints: []Endpoint{dnsA}}},
			want: []string{flushB},
		},
		{
			name:   "a UDP Service going: every entry to its address and port, and the source NATs of its endpoints",
			before: map[string]ServiceState{"kube-system/dns": {dns: {Endpoints: []Endpoint{dnsB}}}},
			change: "kube-system/dns", after: nil,
			want: []string{
				"zone=65520 'ct_nw_src=::,ct_nw_dst=10.96.0.10,ct_tp_src=0,ct_tp_dst=53,ct_nw_proto=17' 'ct_nw_src=::,ct_nw_dst=::,ct_tp_src=0,ct_tp_dst=0'",
				flushSNAT,
			},
		},
		{
			name:   "the Service port changing its number: the old one is gone",
			before: map[string]ServiceState{"kube-system/dns": {dns: {Endpoints: []Endpoint{dnsA}}}},
			change: "kube-system/dns", after: ServiceState{udp("10.96.0.10", 54): {Endpoints: []Endpoint{dnsA}}},
			want: []string{"zone=65520 'ct_nw_src=::,ct_nw_dst=10.96.0.10,ct_tp_src=0,ct_tp_dst=53,ct_nw_proto=17' 'ct_nw_src=::,ct_nw_dst=::,ct_tp_src=0,ct_tp_dst=0'"},
		},
		{
			name:   "externalTrafficPolicy Local to Cluster: the address keeps its endpoints, nothing is stale",
			before: map[string]ServiceState{"default/lb": {udp("192.168.77.10", 53): {Endpoints: []Endpoint{dnsA, dnsB}}, {IP: netip.MustParseAddr("192.168.77.10"), Protocol: 17, Port: 53, External: true}: {Endpoints: []Endpoint{dnsA}}}},
			change: "default/lb", after: ServiceState{udp("192.168.77.10", 53): {Endpoints: []Endpoint{dnsA, dnsB}}},
		},
		{
			name:   "a new endpoint: nothing is stale",
			before: map[string]ServiceState{"kube-system/dns": {dns: {Endpoints: []Endpoint{dnsA}}}},
			change: "kube-system/dns", after: ServiceState{dns: {Endpoints: []Endpoint{dnsA, dnsB}}},
		},
		{
			name:   "TCP endpoints leaving: nothing is flushed",
			before: map[string]ServiceState{"default/web": {webTCP: {Endpoints: []Endpoint{ep1, ep2}}}},
			change: "default/web", after: ServiceState{webTCP: {Endpoints: []Endpoint{ep1}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := newFlushClient(t)
			ctx := context.Background()
			for name, st := range tc.before {
				if err := c.InstallService(ctx, name, st); err != nil {
					t.Fatal(err)
				}
			}
			if got := br.take(); len(got) != 0 {
				t.Fatalf("installing should flush nothing, flushed:\n%s", strings.Join(got, "\n"))
			}
			bundles := br.bundleCount()
			if err := c.InstallService(ctx, tc.change, tc.after); err != nil {
				t.Fatal(err)
			}
			br.mu.Lock()
			for _, n := range br.after {
				if n != bundles+1 {
					t.Errorf("a flush went out after %d bundles, want after the change's bundle (%d)", n, bundles+1)
				}
			}
			br.mu.Unlock()
			if got := br.take(); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("flushes\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			// The same state again flushes nothing.
			if err := c.InstallService(ctx, tc.change, tc.after); err != nil {
				t.Fatal(err)
			}
			if got := br.take(); len(got) != 0 {
				t.Fatalf("an unchanged state should flush nothing, flushed:\n%s", strings.Join(got, "\n"))
			}
		})
	}
}
