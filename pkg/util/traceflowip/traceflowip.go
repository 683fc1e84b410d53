// Package traceflowip says which IP family a Traceflow's packet is and so
// which of its source's and destination's addresses it goes between
// (docs/traceflow.md, "IPv6"). The antrea-controller validates a Traceflow
// with it and the agents build the packet with it, so both read the spec
// the same way:
//
//   - spec.packet.ipv6Header makes the packet IPv6, spec.packet.ipHeader
//     IPv4; the two together are refused;
//   - without either, the packet takes the family of the address the spec
//     gives (spec.destination.ip, spec.source.ip), else IPv4 when the
//     source and the destination both have an IPv4 address (a dual-stack
//     Pod or Service), else IPv6 (IPv6-only);
//   - an address the spec gives of the other family is refused, naming the
//     field and the header that decided.
package traceflowip

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// End is a source or a destination of a Traceflow: what it is, for
// errors ("source Pod ns/name", "spec.destination.ip"), and its addresses
// (a Pod's PodIPs, a Service's ClusterIPs, or the one address a field
// gives, Given).
type End struct {
	What  string
	Addrs []netip.Addr
	// Given: Addrs is the address a field of the spec holds, not one the
	// cluster assigned.
	Given bool
}

// Family names of the packet.
const (
	IPv4 = "IPv4"
	IPv6 = "IPv6"
)

// HeaderError refuses ipHeader and ipv6Header together ("" when the
// packet has at most one).
func HeaderError(p *crdv1beta1.Packet) string {
	if p.IPHeader != nil && p.IPv6Header != nil {
		return "spec.packet.ipHeader and spec.packet.ipv6Header are exclusive (ipHeader makes the packet IPv4, ipv6Header IPv6): give one"
	}
	return ""
}

// Pick returns the family of the packet (IPv4 or IPv6) and the source's
// and destination's addresses of it. An End without addresses (a source
// this node does not know) is left out of the choice; its address is then
// the zero Addr. The error names what is wrong.
func Pick(p *crdv1beta1.Packet, src, dst End) (family string, srcIP, dstIP netip.Addr, err error) {
	if msg := HeaderError(p); msg != "" {
		return "", netip.Addr{}, netip.Addr{}, fmt.Errorf("%s", msg)
	}
	why := ""
	switch {
	case p.IPv6Header != nil:
		family, why = IPv6, "spec.packet.ipv6Header makes the packet IPv6"
	case p.IPHeader != nil:
		family, why = IPv4, "spec.packet.ipHeader makes the packet IPv4"
	}
	if family == "" {
		for _, e := range []End{dst, src} {
			if e.Given && len(e.Addrs) > 0 {
				family, why = familyOf(e.Addrs[0]), fmt.Sprintf("%s %s makes the packet %s", e.What, e.Addrs[0], familyOf(e.Addrs[0]))
				break
			}
		}
	}
	if family == "" {
		for _, f := range []string{IPv4, IPv6} {
			if (len(src.Addrs) == 0 || has(src.Addrs, f)) && has(dst.Addrs, f) {
				family = f
				break
			}
		}
		if family == "" {
			return "", netip.Addr{}, netip.Addr{}, fmt.Errorf("%s (%s) and %s (%s) have no IP family in common",
				src.What, list(src.Addrs), dst.What, list(dst.Addrs))
		}
		return family, first(src.Addrs, family), first(dst.Addrs, family), nil
	}
	for _, e := range []End{src, dst} {
		if len(e.Addrs) == 0 || has(e.Addrs, family) {
			continue
		}
		if e.Given {
			return "", netip.Addr{}, netip.Addr{}, fmt.Errorf("%s %s is %s, but %s", e.What, e.Addrs[0], familyOf(e.Addrs[0]), why)
		}
		return "", netip.Addr{}, netip.Addr{}, fmt.Errorf("%s has no %s address (it has %s), but %s", e.What, family, list(e.Addrs), why)
	}
	return family, first(src.Addrs, family), first(dst.Addrs, family), nil
}

// PodAddrs are a Pod's addresses (status.podIPs, else status.podIP).
func PodAddrs(pod *corev1.Pod) []netip.Addr {
	ips := []string{pod.Status.PodIP}
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	return Addrs(ips...)
}

// ServiceAddrs are a Service's ClusterIPs (spec.clusterIPs, else
// spec.clusterIP; none for a headless Service).
func ServiceAddrs(svc *corev1.Service) []netip.Addr {
	return Addrs(append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...)...)
}

// Addrs parses the addresses of a Pod's or a Service's status or spec
// (PodIPs, ClusterIPs), skipping what is no address ("None", "").
func Addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if a, err := netip.ParseAddr(s); err == nil && !has1(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func familyOf(a netip.Addr) string {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

func has(as []netip.Addr, family string) bool { return first(as, family).IsValid() }

func has1(as []netip.Addr, a netip.Addr) bool {
	for _, b := range as {
		if a == b {
			return true
		}
	}
	return false
}

func first(as []netip.Addr, family string) netip.Addr {
	for _, a := range as {
		if familyOf(a) == family {
			return a
		}
	}
	return netip.Addr{}
}

func list(as []netip.Addr) string {
	if len(as) == 0 {
		return "no address"
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
