package openflow

import (
	"context"
	"fmt"
)

// The client API: intent-level calls on a Client that stays connected. Each
// call that changes flows writes one atomic bundle, so a pod's or a policy
// rule's flows appear (or fail) together.

// AddFlows installs flows as one atomic, ordered bundle: all of them or none.
// A flow that already exists (same table, priority and match) is replaced.
func (c *Client) AddFlows(ctx context.Context, flows ...*Flow) error {
	return c.Bundle(ctx, flowMods(flows, AddFlow)...)
}

// ModifyFlows replaces the actions of flows (matched strictly) in one bundle.
func (c *Client) ModifyFlows(ctx context.Context, flows ...*Flow) error {
	return c.Bundle(ctx, flowMods(flows, ModifyFlowStrict)...)
}

// DeleteFlowsStrict deletes exactly these flows (table, priority, match) in one bundle.
func (c *Client) DeleteFlowsStrict(ctx context.Context, flows ...*Flow) error {
	return c.Bundle(ctx, flowMods(flows, DeleteFlowStrict)...)
}

// DeleteFlows deletes every flow of table (TableAll: of every table) whose
// cookie matches cookie on the bits of cookieMask (0 mask: every flow).
func (c *Client) DeleteFlows(ctx context.Context, table uint8, cookie, cookieMask uint64) error {
	return c.Bundle(ctx, DeleteFlows(table, cookie, cookieMask))
}

// DumpFlows returns the flows of table (TableAll: every table) whose cookie
// matches cookie on the bits of cookieMask, with their counters.
func (c *Client) DumpFlows(ctx context.Context, table uint8, cookie, cookieMask uint64) ([]FlowStats, error) {
	var out []FlowStats
	err := c.do(ctx, func(conn *Conn) error {
		var err error
		out, err = conn.DumpFlows(ctx, FlowStatsRequest{TableID: table, Cookie: cookie, CookieMask: cookieMask})
		return err
	})
	return out, err
}

// GroupStats returns the counters of a group, or of every group for GroupIDAll.
func (c *Client) GroupStats(ctx context.Context, group uint32) ([]GroupStats, error) {
	var out []GroupStats
	err := c.do(ctx, func(conn *Conn) error {
		var err error
		out, err = conn.GroupStats(ctx, group)
		return err
	})
	return out, err
}

// Bundle applies any bundleable messages (flow, group, meter mods,
// packet-outs) atomically; see Conn.Bundle.
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
func (c *Client) SendPacketOut(ctx context.Context, po *PacketOut) error {
	return c.Apply(ctx, po)
}

// DecodeAnyPacketIn decodes a frame from PacketIns, whichever of the two
// packet-in formats it has.
func DecodeAnyPacketIn(f Frame) (*PacketIn, error) {
	switch {
	case IsPacketIn2(f):
		return DecodePacketIn2(f.Body)
	case f.Header.Type == TypePacketIn:
		return DecodePacketIn(f.Body)
	}
	return nil, fmt.Errorf("openflow: message type %d (xid %d) is not a packet-in", f.Header.Type, f.Header.Xid)
}

func flowMods(flows []*Flow, mod func(*Flow) *FlowMod) []Message {
	msgs := make([]Message, len(flows))
	for i, f := range flows {
		msgs[i] = mod(f)
	}
	return msgs
}
