package openflow

import (
	"context"
	"encoding/binary"
	"fmt"
)

// OFPMP_* multipart types (OpenFlow 1.5.1 section 7.3.5; 1.3 numbers agree).
const (
	MultipartDesc       uint16 = 0
	MultipartFlowDesc   uint16 = 1 // OFPMP_FLOW in 1.3, OFPMP_FLOW_DESC in 1.5
	MultipartAggregate  uint16 = 2
	MultipartTable      uint16 = 3
	MultipartPortStats  uint16 = 4
	MultipartGroupStats uint16 = 6
	MultipartGroupDesc  uint16 = 7
	MultipartMeterStats uint16 = 9
	MultipartPortDesc   uint16 = 13
)

// Multipart flags (ofp_multipart_request_flags / _reply_flags).
const multipartMore uint16 = 1

// ofpgAny is OFPG_ANY: no out_group filter in a flow stats request.
const ofpgAny uint32 = 0xffffffff

// MultipartRequest is OFPT_MULTIPART_REQUEST with an encoded request body.
type MultipartRequest struct {
	Type uint16
	Body []byte
}

// MsgType implements Message.
func (*MultipartRequest) MsgType() uint8 { return TypeMultipartRequest }

// AppendBody implements Message: ofp_multipart_request (type, flags, pad[4]) and the body.
func (m *MultipartRequest) AppendBody(b []byte, _ uint8) ([]byte, error) {
	b = binary.BigEndian.AppendUint16(b, m.Type)
	b = append(b, 0, 0, 0, 0, 0, 0)
	return append(b, m.Body...), nil
}

// String names the request in errors.
func (m *MultipartRequest) String() string { return fmt.Sprintf("multipart request type %d", m.Type) }

// Multipart sends a multipart request and returns the bodies of every reply
// part concatenated, in order (each part's ofp_multipart_reply header
// removed). Entries never straddle parts, so the result decodes like one
// long reply.
func (c *Conn) Multipart(ctx context.Context, req *MultipartRequest) ([]byte, error) {
	cl := newCall(c.allocXids(1), req, "")
	cl.multipart = true
	if err := c.register(cl); err != nil {
		return nil, err
	}
	if err := c.writeBatch(ctx, 1, func(b []byte, _ int) ([]byte, error) { return c.appendAt(b, req, cl.xid) }); err != nil {
		c.unregister(cl.xid)
		return nil, err
	}
	f, err := c.wait(ctx, cl)
	if err != nil {
		return nil, err
	}
	return f.Body, nil
}

// handleMultipart appends one reply part to its call and completes the call
// with the last part.
func (c *Conn) handleMultipart(h Header, body []byte) {
	if len(body) < 8 {
		c.fail(fmt.Errorf("multipart reply xid %d has %d body bytes, need 8", h.Xid, len(body)))
		return
	}
	flags := binary.BigEndian.Uint16(body[2:4])
	c.mu.Lock()
	cl := c.calls[h.Xid]
	if cl == nil || !cl.multipart {
		c.mu.Unlock()
		return
	}
	cl.parts = append(cl.parts, body[8:]...)
	if flags&multipartMore != 0 {
		c.mu.Unlock()
		return
	}
	delete(c.calls, h.Xid)
	c.mu.Unlock()
	cl.ch <- callResult{frame: Frame{Header: h, Body: cl.parts}}
}

// FlowStatsRequest selects flows for a flow stats (OFPMP_FLOW_DESC) request.
type FlowStatsRequest struct {
	// TableID, or TableAll. The zero value asks for table 0 only.
	TableID uint8
	// OutPort and OutGroup filter by output; zero values mean any.
	OutPort, OutGroup uint32
	// Cookie and CookieMask select flows whose cookie&mask equals Cookie&mask.
	Cookie, CookieMask uint64
	// Match selects flows whose match is at least as specific (empty: every flow).
	Match Match
}

// Encode returns the multipart request for r (the body layout of
// ofp_flow_stats_request is the same in 1.3 and 1.5).
func (r FlowStatsRequest) Encode() *MultipartRequest {
	outPort, outGroup := r.OutPort, r.OutGroup
	if outPort == 0 {
		outPort = PortAny
	}
	if outGroup == 0 {
		outGroup = ofpgAny
	}
	b := make([]byte, 0, 64)
	b = append(b, r.TableID, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, outPort)
	b = binary.BigEndian.AppendUint32(b, outGroup)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, r.Cookie)
	b = binary.BigEndian.AppendUint64(b, r.CookieMask)
	b = r.Match.AppendMatch(b)
	return &MultipartRequest{Type: MultipartFlowDesc, Body: b}
}

// portOrGroupRequest is the 8-byte request body {id, pad[4]} of port stats,
// group stats and (in 1.5) port desc and group desc.
func portOrGroupRequest(typ uint16, id uint32) *MultipartRequest {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 8), id)
	return &MultipartRequest{Type: typ, Body: append(b, 0, 0, 0, 0)}
}

// FlowStatsRaw returns the concatenated ofp_flow_stats (1.3) or
// ofp_flow_desc (1.5) entries of the flows r selects.
func (c *Conn) FlowStatsRaw(ctx context.Context, r FlowStatsRequest) ([]byte, error) {
	return c.Multipart(ctx, r.Encode())
}

// TableStatsRaw returns the concatenated ofp_table_stats entries (24 bytes each).
func (c *Conn) TableStatsRaw(ctx context.Context) ([]byte, error) {
	return c.Multipart(ctx, &MultipartRequest{Type: MultipartTable})
}

// PortStatsRaw returns the port stats entries of a port (or PortAny).
func (c *Conn) PortStatsRaw(ctx context.Context, port uint32) ([]byte, error) {
	return c.Multipart(ctx, portOrGroupRequest(MultipartPortStats, port))
}

// PortDescRaw returns the ofp_port entries of every port.
func (c *Conn) PortDescRaw(ctx context.Context) ([]byte, error) {
	if c.version >= Version15 {
		return c.Multipart(ctx, portOrGroupRequest(MultipartPortDesc, PortAny))
	}
	return c.Multipart(ctx, &MultipartRequest{Type: MultipartPortDesc})
}

// GroupStatsRaw returns the group stats entries of a group (or GroupIDAll).
func (c *Conn) GroupStatsRaw(ctx context.Context, group uint32) ([]byte, error) {
	return c.Multipart(ctx, portOrGroupRequest(MultipartGroupStats, group))
}

// GroupDescRaw returns the group desc entries of a group (or GroupIDAll; 1.3
// always returns every group).
func (c *Conn) GroupDescRaw(ctx context.Context, group uint32) ([]byte, error) {
	if c.version >= Version15 {
		return c.Multipart(ctx, portOrGroupRequest(MultipartGroupDesc, group))
	}
	return c.Multipart(ctx, &MultipartRequest{Type: MultipartGroupDesc})
}

// SplitEntries splits a multipart reply body into its entries, each starting
// with its own 16-bit length at lenOffset (0 for flow, group and 1.5 port
// stats entries; 4 for 1.5 ofp_port). It rejects entries that are shorter
// than their length field or overrun the body.
func SplitEntries(body []byte, lenOffset int) ([][]byte, error) {
	var out [][]byte
	for len(body) > 0 {
		if len(body) < lenOffset+2 {
			return out, fmt.Errorf("openflow: truncated multipart entry of %d bytes", len(body))
		}
		n := int(binary.BigEndian.Uint16(body[lenOffset:]))
		if n < lenOffset+2 || n > len(body) {
			return out, fmt.Errorf("openflow: multipart entry claims %d bytes, %d left", n, len(body))
		}
		out = append(out, body[:n])
		body = body[n:]
	}
	return out, nil
}

// DumpFlows returns the flows r selects with their counters.
func (c *Conn) DumpFlows(ctx context.Context, r FlowStatsRequest) ([]FlowStats, error) {
	body, err := c.FlowStatsRaw(ctx, r)
	if err != nil {
		return nil, err
	}
	return DecodeFlowStats(body, c.version)
}

// TableStats returns the statistics of every table.
func (c *Conn) TableStats(ctx context.Context) ([]TableStats, error) {
	body, err := c.TableStatsRaw(ctx)
	if err != nil {
		return nil, err
	}
	return DecodeTableStats(body)
}

// PortDesc returns the description of every port.
func (c *Conn) PortDesc(ctx context.Context) ([]PortDesc, error) {
	body, err := c.PortDescRaw(ctx)
	if err != nil {
		return nil, err
	}
	return DecodePortDesc(body, c.version)
}

// PortStats returns the counters of a port, or of every port for PortAny.
func (c *Conn) PortStats(ctx context.Context, port uint32) ([]PortStats, error) {
	body, err := c.PortStatsRaw(ctx, port)
	if err != nil {
		return nil, err
	}
	return DecodePortStats(body, c.version)
}

// GroupDesc returns the buckets of a group, or of every group for GroupIDAll.
func (c *Conn) GroupDesc(ctx context.Context, group uint32) ([]GroupDesc, error) {
	body, err := c.GroupDescRaw(ctx, group)
	if err != nil {
		return nil, err
	}
	return DecodeGroupDesc(body, c.version)
}

// GroupStats returns the counters of a group, or of every group for GroupIDAll.
func (c *Conn) GroupStats(ctx context.Context, group uint32) ([]GroupStats, error) {
	body, err := c.GroupStatsRaw(ctx, group)
	if err != nil {
		return nil, err
	}
	return DecodeGroupStats(body)
}
