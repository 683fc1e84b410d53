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
// transport (this node's underlay address with its prefix) shares this
// node's subnet, so the underlay delivers to it directly and its traffic is
// routed unencapsulated; a peer outside it, behind a router that knows
// nothing of pod CIDRs, is reached through the tunnel. A nil transport (no
// known subnet) encapsulates everything, which works on any underlay.
func EncapOutside(transport *net.IPNet) Encap {
	if transport == nil {
		return EncapAll
	}
	local := &net.IPNet{IP: transport.IP.Mask(transport.Mask), Mask: transport.Mask}
	return func(peer net.IP) bool {
		if peer == nil {
			return true
		}
		return !local.Contains(peer)
	}
}
