package types

import (
	"fmt"
	"net"
	"net/netip"
)

// IPFamily is an IP address family. Every address, match and desired state
// of the agent's data path carries one, so that a second family is added
// by realizing it, not by finding where IPv4 was assumed (issue 35).
type IPFamily uint8

// The IP families, numbered as IP's version field.
const (
	IPv4 IPFamily = 4
	IPv6 IPFamily = 6
)

// IPFamilies are both families, IPv4 first: the order in which dual-stack
// state is computed and listed (kube-proxy's, and Kubernetes' ipFamilies).
var IPFamilies = []IPFamily{IPv4, IPv6}

// FamilyOf is the family of an address; an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d) is IPv6, as netip has it: unmap it first to treat it
// as IPv4. The zero Addr has no family (0).
func FamilyOf(a netip.Addr) IPFamily {
	switch {
	case a.Is4():
		return IPv4
	case a.Is6():
		return IPv6
	}
	return 0
}

// FamilyOfIP is FamilyOf for a net.IP, which holds an IPv4 address in 4 or
// in 16 bytes (To4 tells them apart); nil and malformed slices have none.
func FamilyOfIP(ip net.IP) IPFamily {
	switch {
	case ip.To4() != nil:
		return IPv4
	case len(ip) == net.IPv6len:
		return IPv6
	}
	return 0
}

// Addr is ip as a netip.Addr of its family: 4 bytes for IPv4 however ip
// holds it, so that it compares equal to a parsed IPv4 address. The zero
// Addr for nil or malformed slices.
func Addr(ip net.IP) netip.Addr {
	if v4 := ip.To4(); v4 != nil {
		return netip.AddrFrom4([4]byte(v4))
	}
	a, _ := netip.AddrFromSlice(ip)
	return a
}

// ByFamily is the value of family f among a pair: v6 for IPv6, v4
// otherwise. What differs by family (a field, an EtherType, a virtual
// address) is declared as such a pair, in one place.
func ByFamily[T any](f IPFamily, v4, v6 T) T {
	if f == IPv6 {
		return v6
	}
	return v4
}

// Families are the families, IPv4 first, that keep accepts: the families a
// component realizes, given its one boundary.
func Families(keep func(IPFamily) bool) []IPFamily {
	var out []IPFamily
	for _, f := range IPFamilies {
		if keep(f) {
			out = append(out, f)
		}
	}
	return out
}

// Bits is the length of the family's addresses in bits.
func (f IPFamily) Bits() int { return ByFamily(f, 32, 128) }

// String is "IPv4" or "IPv6", as Kubernetes spells corev1.IPFamily.
func (f IPFamily) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("IPFamily(%d)", uint8(f))
}

// Of keeps the addresses of as that are of family f.
func (f IPFamily) Of(as []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range as {
		if FamilyOf(a) == f {
			out = append(out, a)
		}
	}
	return out
}

// ErrFamilyNotSupported is the error of a component asked for a family it
// does not realize yet: what names the component and the family.
func ErrFamilyNotSupported(what string, f IPFamily) error {
	return fmt.Errorf("%s: %s is not supported yet (docs/ipv6.md says what of IPv6 is built)", what, f)
}

// The IPv6 virtual addresses, upstream Antrea's VirtualServiceIPv6 and
// VirtualNodePortDNATIPv6: declared with their IPv4 twins so that a family
// is one lookup (HairpinIPOf, NodePortVirtualIPOf). A dual-stack node's
// pipeline SNATs IPv6 hairpin connections to HairpinIPv6, and its node
// path DNATs NodePorts on the node's IPv6 addresses to NodePortVirtualIPv6
// and routes both to the gateway (pkg/agent/route, docs/ipv6.md).
var (
	HairpinIPv6         = netip.MustParseAddr("fc01::aabb:ccdd:eeff")
	NodePortVirtualIPv6 = netip.MustParseAddr("fc01::aabb:ccdd:eefe")
)

// HairpinIPOf is HairpinIP of family f.
func HairpinIPOf(f IPFamily) netip.Addr { return ByFamily(f, HairpinIP, HairpinIPv6) }

// NodePortVirtualIPOf is NodePortVirtualIP of family f.
func NodePortVirtualIPOf(f IPFamily) netip.Addr {
	return ByFamily(f, NodePortVirtualIP, NodePortVirtualIPv6)
}
