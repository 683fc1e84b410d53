package route

import "net"

// Encap decides, per peer node by its underlay IP, whether this node's
// traffic to the peer's pods goes through the tunnel (true) or is routed by
// the underlay, unencapsulated (false). The controller asks it once per
// peer, and the answer (PeerRoute.Encap) picks both the peer's flows and its
// host route, so the two never disagree.
type Encap func(peerNodeIP net.IP) bool

// EncapAll is trafficEncapMode encap: every peer through the tunnel.
func EncapAll(net.IP) bool { return true }

// EncapNone is trafficEncapMode noEncap: every peer routed by the underlay.
func EncapNone(net.IP) bool { return false }

// EncapOutside is trafficEncapMode hybrid: a peer whose node IP is inside
// one of transport (this node's underlay addresses with their prefixes,
// one per family: an IPv4 one, an IPv6 one, or both on a dual-stack node)
// shares this node's subnet, so the underlay delivers to it directly and
// its traffic is routed unencapsulated; a peer outside it, behind a router
// that knows nothing of pod CIDRs, is reached through the tunnel. A peer
// address of a family with no transport prefix (or none at all) is
// tunnelled, which works on any underlay; so is a nil peer address.
func EncapOutside(transport ...*net.IPNet) Encap {
	var locals []*net.IPNet
	for _, t := range transport {
		if t != nil {
			locals = append(locals, &net.IPNet{IP: t.IP.Mask(t.Mask), Mask: t.Mask})
		}
	}
	if len(locals) == 0 {
		return EncapAll
	}
	return func(peer net.IP) bool {
		if peer == nil {
			return true
		}
		for _, l := range locals {
			// Contains compares within one family: an IPv4 peer is
			// never inside an IPv6 prefix, nor the reverse.
			if l.Contains(peer) {
				return false
			}
		}
		return true
	}
}
