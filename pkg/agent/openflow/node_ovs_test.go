package openflow

import (
	"context"
	"testing"

	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
)

// initializedClient is a client of round 1 writing through via (br.OF, or
// a wrapper of it) with br's pipeline installed, as the agent starts.
func initializedClient(t *testing.T, br *bridgetest.Bridge, via Bridge) *Client {
	t.Helper()
	c, err := NewClient(via, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(context.Background(), &NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort, GatewayIP: br.GatewayIP,
		GatewayMAC: br.GatewayMAC, PodCIDR: br.PodCIDR}); err != nil {
		t.Fatal(err)
	}
	return c
}
