package app

import (
	"net"
	"testing"

	agentconfig "antrea.io/antrea/pkg/config/agent"
)

// TestEachModeDecidesEncapPerPeer: the decision each trafficEncapMode gives
// the route controller, for a node at 172.30.0.11/24, and which modes spare
// the cluster's pod CIDRs from the masquerade.
func TestEachModeDecidesEncapPerPeer(t *testing.T) {
	nodeIP := &net.IPNet{IP: net.ParseIP("172.30.0.11"), Mask: net.CIDRMask(24, 32)}
	same, other := net.ParseIP("172.30.0.12"), net.ParseIP("172.30.1.13")
	for _, tc := range []struct {
		mode              string
		sameEnc, otherEnc bool
		routed            bool
	}{
		{agentconfig.EncapModeEncap, true, true, false},
		{agentconfig.EncapModeNoEncap, false, false, true},
		{agentconfig.EncapModeHybrid, false, true, true},
	} {
		d := encapDecision(tc.mode, nodeIP)
		if d(same) != tc.sameEnc || d(other) != tc.otherEnc {
			t.Errorf("%s: same subnet encap %t, other subnet encap %t; want %t, %t", tc.mode, d(same), d(other), tc.sameEnc, tc.otherEnc)
		}
		if routedPeers(tc.mode) != tc.routed {
			t.Errorf("%s: routedPeers %t, want %t", tc.mode, routedPeers(tc.mode), tc.routed)
		}
	}
}
