package openflow

import "context"

// AddFlows installs flow mods (or any bundleable messages) as one atomic,
// ordered bundle: all of them or none. It is the call per pod and per policy
// change.
func (c *Client) AddFlows(ctx context.Context, flows ...Message) error {
	return c.Bundle(ctx, flows...)
}

// Bundle applies messages atomically; see Conn.Bundle.
func (c *Client) Bundle(ctx context.Context, msgs ...Message) error {
	return c.do(ctx, func(conn *Conn) error { return conn.Bundle(ctx, msgs...) })
}

// Apply sends messages one by one followed by a barrier and returns the
// errors of the rejected ones; see Conn.Apply.
func (c *Client) Apply(ctx context.Context, msgs ...Message) error {
	return c.do(ctx, func(conn *Conn) error { return conn.Apply(ctx, msgs...) })
}

// Barrier waits until the switch has processed everything sent before.
func (c *Client) Barrier(ctx context.Context) error {
	return c.do(ctx, func(conn *Conn) error { return conn.Barrier(ctx) })
}

// SendPacketOut sends a packet-out and reports whether the switch rejected it.
func (c *Client) SendPacketOut(ctx context.Context, packetOut Message) error {
	return c.Apply(ctx, packetOut)
}

// FlowStatsRaw returns the raw flow stats entries that r selects; see Conn.FlowStatsRaw.
func (c *Client) FlowStatsRaw(ctx context.Context, r FlowStatsRequest) ([]byte, error) {
	var out []byte
	err := c.do(ctx, func(conn *Conn) error {
		var err error
		out, err = conn.FlowStatsRaw(ctx, r)
		return err
	})
	return out, err
}
