package bridgetest

import (
	"context"
	"sync"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Counting passes bundles on to a switch's client and counts them and
// their messages: what a code path wrote, counted at the OpenFlow
// connection. Its other calls (dumps) go to the client unchanged.
type Counting struct {
	*binding.Client
	mu       sync.Mutex
	bundles  int
	messages int
}

// Bundle implements the agent client's Bridge.
func (c *Counting) Bundle(ctx context.Context, msgs ...binding.Message) error {
	c.mu.Lock()
	c.bundles++
	c.messages += len(msgs)
	c.mu.Unlock()
	return c.Client.Bundle(ctx, msgs...)
}

// Reset returns the bundles and messages counted since the last Reset.
func (c *Counting) Reset() (bundles, messages int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bundles, messages = c.bundles, c.messages
	c.bundles, c.messages = 0, 0
	return bundles, messages
}
