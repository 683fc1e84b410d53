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
// its two proxiers. realizes says IPv4 always; a node that carries IPv6
// (Config.IPv6: dual-stack or IPv6-only) realizes IPv6 too
// (nodeView.families). On an IPv4 node a Service's IPv6 part is left
// unrealized with a Warning Event (events.go).

// realizes reports whether AntreaProxy realizes Services of family f.
func realizes(f agenttypes.IPFamily) bool { return f == agenttypes.IPv4 }

// familyNames names families for messages ("IPv4", "IPv4 and IPv6").
func familyNames(fams []agenttypes.IPFamily) string {
	var names []string
	for _, f := range fams {
		names = append(names, f.String())
	}
	return strings.Join(names, " and ")
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
