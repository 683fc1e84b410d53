package openflow

import (
	"context"
	"net/netip"
	"sort"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Stale UDP conntrack entries. A UDP "connection" through a Service is a
// conntrack entry that DNATs the client's datagrams to one endpoint; it
// lives as long as datagrams keep coming (a DNS client reusing its socket
// does so forever), so once the endpoint is gone every datagram of the
// client goes to a dead address, never through the group again. As
// kube-proxy does (pkg/proxy/conntrack), the client flushes such entries
// once OVS has the new state:
//   - in CtZone (CtZoneV6 for IPv6), the entries of a UDP Service address and port DNATed to
//     an endpoint the port no longer has (original destination the Service
//     address and port, reply source the endpoint), and every entry to a
//     UDP Service address and port that is gone;
//   - in SNATCtZone (SNATCtZoneV6), the entries to a UDP endpoint no Service port uses any
//     more (original destination the endpoint): the source NATs of the node
//     path and of hairpin connections.
//
// TCP needs nothing: a TCP connection to a dead endpoint fails on its own
// (reset or timeout) and the client reconnects. The flushes are
// NXT_CT_FLUSH messages (Open vSwitch 3.1; not bundlable), sent after the
// bundle, so no new connection to the old endpoint can be created after
// them.

// ctFlusher is a bridge that can send messages outside bundles (a
// *binding.Client).
type ctFlusher interface {
	Apply(ctx context.Context, msgs ...binding.Message) error
}

// staleUDPFlushes are the conntrack flushes a change of one Service's state
// from have to want calls for (both normalized), given the endpoints whose
// DNAT flows go (no port uses them any more).
func staleUDPFlushes(have, want ServiceState, endpointsGone []endpointKey) []*binding.CTFlush {
	// Each address's entries are in its family's zones.
	zoneOf := func(a netip.Addr) *uint16 { z := ctZone(types.FamilyOf(a)); return &z }
	snatZoneOf := func(a netip.Addr) *uint16 { z := snatCtZone(types.FamilyOf(a)); return &z }
	// What each UDP Service address and port keeps, over its ports (an
	// address with externalTrafficPolicy Local has two: one for traffic
	// from outside the node, one for the rest).
	kept := map[ServicePort]map[Endpoint]bool{}
	for p, ps := range want {
		if p.Protocol != binding.IPProtoUDP {
			continue
		}
		v := p.vip()
		if kept[v] == nil {
			kept[v] = map[Endpoint]bool{}
		}
		for _, e := range ps.Endpoints {
			kept[v][Endpoint{IP: e.IP, Port: e.Port}] = true
		}
	}
	var out []*binding.CTFlush
	seen := map[string]bool{}
	add := func(f *binding.CTFlush) {
		if s := f.String(); !seen[s] {
			seen[s] = true
			out = append(out, f)
		}
	}
	for _, p := range sortedPorts(have) {
		if p.Protocol != binding.IPProtoUDP {
			continue
		}
		v := p.vip()
		keep, ok := kept[v]
		if !ok {
			add(&binding.CTFlush{Protocol: binding.IPProtoUDP, Zone: zoneOf(v.IP), Orig: binding.CTTuple{Dst: v.IP, DstPort: v.Port}})
			continue
		}
		for _, e := range have[p].Endpoints {
			if keep[Endpoint{IP: e.IP, Port: e.Port}] {
				continue
			}
			add(&binding.CTFlush{Protocol: binding.IPProtoUDP, Zone: zoneOf(v.IP),
				Orig: binding.CTTuple{Dst: v.IP, DstPort: v.Port}, Reply: binding.CTTuple{Src: e.IP, SrcPort: e.Port}})
		}
	}
	sort.Slice(endpointsGone, func(i, j int) bool {
		if c := endpointsGone[i].IP.Compare(endpointsGone[j].IP); c != 0 {
			return c < 0
		}
		return endpointsGone[i].Port < endpointsGone[j].Port
	})
	for _, k := range endpointsGone {
		if k.Protocol == binding.IPProtoUDP {
			add(&binding.CTFlush{Protocol: binding.IPProtoUDP, Zone: snatZoneOf(k.IP), Orig: binding.CTTuple{Dst: k.IP, DstPort: k.Port}})
		}
	}
	return out
}

// flushConntrack sends the flushes. A failure is logged, not returned: the
// Service's flows are in, and the stale entries expire by themselves (the
// UDP timeout) — what a failed flush costs is that wait. c.mu is held, so
// no later change of the Service can come between its bundle and these.
func (c *services) flushConntrack(ctx context.Context, service string, flushes []*binding.CTFlush) {
	if len(flushes) == 0 {
		return
	}
	f, ok := c.bridge.(ctFlusher)
	if !ok {
		klog.V(2).InfoS("The bridge cannot flush conntrack entries; stale UDP entries expire by themselves", "service", service)
		return
	}
	msgs := make([]binding.Message, len(flushes))
	for i, fl := range flushes {
		msgs[i] = fl
	}
	if err := f.Apply(ctx, msgs...); err != nil {
		klog.ErrorS(err, "Cannot flush the conntrack entries of removed UDP endpoints; they expire by themselves", "service", service, "flushes", len(flushes))
		return
	}
	for _, fl := range flushes {
		klog.V(2).InfoS("Flushed stale UDP conntrack entries", "service", service, "match", fl.String())
	}
}
