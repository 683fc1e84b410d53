package proxy

import (
	"net/netip"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"

	agenttypes "antrea.io/antrea/pkg/agent/types"
)

// The proxy computes a Service's desired state per IP family
// (familyState), as kube-proxy runs one proxier per family, and joins the
// families it realizes (desiredState), as kube-proxy's metaproxier joins
// its two proxiers. realizes is the one place that says which: IPv4 until
// dual-stack lands (issue 33); the other family's part of a Service is left
// unrealized with a Warning Event (events.go).

// realizes reports whether AntreaProxy realizes Services of family f.
func realizes(f agenttypes.IPFamily) bool { return f == agenttypes.IPv4 }

// realizedFamilies are the families realizes accepts, IPv4 first.
func realizedFamilies() []agenttypes.IPFamily { return agenttypes.Families(realizes) }

// realizedNames names the realized families for messages ("IPv4").
func realizedNames() string {
	var names []string
	for _, f := range realizedFamilies() {
		names = append(names, f.String())
	}
	return strings.Join(names, " and ")
}

// realizedAddrs keeps the addresses of the families AntreaProxy realizes.
func realizedAddrs(as []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range as {
		if realizes(agenttypes.FamilyOf(a)) {
			out = append(out, a)
		}
	}
	return out
}

// parseAddrs parses the addresses of a list, of either family (an
// IPv4-mapped IPv6 address is IPv6, as netip has it); what does not parse
// is left out.
func parseAddrs(ss []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// sliceFamily is the family of an EndpointSlice's addresses; ok is false
// for FQDN slices, which the proxy ignores as kube-proxy does.
func sliceFamily(t discoveryv1.AddressType) (agenttypes.IPFamily, bool) {
	switch t {
	case discoveryv1.AddressTypeIPv4:
		return agenttypes.IPv4, true
	case discoveryv1.AddressTypeIPv6:
		return agenttypes.IPv6, true
	}
	return 0, false
}
