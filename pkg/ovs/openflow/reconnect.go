package openflow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Defaults of ClientOptions.
const (
	DefaultMinBackoff = 50 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// Conn configures each connection.
	Conn Options
	// MinBackoff and MaxBackoff bound the wait between connection attempts,
	// which doubles after each failure.
	MinBackoff, MaxBackoff time.Duration
	// OnConnect runs on every new connection before callers get it; a
	// reconnection (reconnect is true) happens when ovs-vswitchd restarted or
	// the channel died, and the switch may have lost every flow, so this is
	// where an agent replays its flows. An error closes the connection and
	// the client tries again after a backoff.
	OnConnect func(ctx context.Context, c *Conn, reconnect bool) error
}

// Client keeps a connection to one switch: it dials, redials with backoff
// when the connection ends, runs OnConnect on each new connection and
// announces reconnections. Async messages of every connection arrive on the
// client's own channels, which outlive connections.
type Client struct {
	addr string
	opts ClientOptions

	mu    sync.Mutex
	conn  *Conn
	ready chan struct{} // closed while conn is usable

	reconnected chan struct{}
	packetIns   chan Frame
	portStatus  chan Frame
	flowRemoved chan Frame
}

// NewClient returns a client for the switch at addr (see Dial); Run connects it.
func NewClient(addr string, opts ClientOptions) *Client {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	q := opts.Conn.withDefaults().AsyncQueue
	return &Client{
		addr:        addr,
		opts:        opts,
		ready:       make(chan struct{}),
		reconnected: make(chan struct{}, 1),
		packetIns:   make(chan Frame, q),
		portStatus:  make(chan Frame, q),
		flowRemoved: make(chan Frame, q),
	}
}

// Run keeps the client connected until ctx ends, then closes the connection.
func (c *Client) Run(ctx context.Context) {
	backoff := c.opts.MinBackoff
	for n := 0; ; {
		conn, err := c.connect(ctx, n > 0)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			klog.V(2).InfoS("OpenFlow connection attempt failed", "addr", c.addr, "err", err, "retryIn", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, c.opts.MaxBackoff)
			continue
		}
		backoff = c.opts.MinBackoff
		c.mu.Lock()
		c.conn = conn
		close(c.ready)
		c.mu.Unlock()
		if n > 0 {
			klog.InfoS("Reconnected to OpenFlow switch", "addr", c.addr, "connections", n+1)
			select {
			case c.reconnected <- struct{}{}:
			default: // one pending notification says enough
			}
		}
		n++
		var fwd sync.WaitGroup
		fwd.Add(3)
		go forward(&fwd, conn.PacketIns(), c.packetIns)
		go forward(&fwd, conn.PortStatus(), c.portStatus)
		go forward(&fwd, conn.FlowRemoved(), c.flowRemoved)
		select {
		case <-ctx.Done():
		case <-conn.Done():
			klog.InfoS("Lost OpenFlow connection, reconnecting", "addr", c.addr, "err", conn.Err())
		}
		c.mu.Lock()
		c.conn = nil
		c.ready = make(chan struct{})
		c.mu.Unlock()
		conn.Close()
		fwd.Wait()
		if ctx.Err() != nil {
			return
		}
	}
}

func (c *Client) connect(ctx context.Context, reconnect bool) (*Conn, error) {
	conn, err := Dial(ctx, c.addr, c.opts.Conn)
	if err != nil {
		return nil, err
	}
	if c.opts.OnConnect != nil {
		if err := c.opts.OnConnect(ctx, conn, reconnect); err != nil {
			conn.Close()
			return nil, fmt.Errorf("openflow: on-connect to %s: %w", c.addr, err)
		}
	}
	return conn, nil
}

// forward copies async messages of one connection to the client's channel,
// dropping them when the consumer is behind (as the connection itself does).
func forward(wg *sync.WaitGroup, from <-chan Frame, to chan Frame) {
	defer wg.Done()
	for f := range from {
		select {
		case to <- f:
		default:
		}
	}
}

// Conn waits until the client is connected and returns the connection.
func (c *Client) Conn(ctx context.Context) (*Conn, error) {
	for {
		c.mu.Lock()
		conn, ready := c.conn, c.ready
		c.mu.Unlock()
		if conn != nil && conn.Err() == nil {
			return conn, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("openflow: not connected to %s: %w", c.addr, ctx.Err())
		case <-time.After(c.opts.MinBackoff):
			// The connection may have died without Run having noticed yet.
		}
	}
}

// Reconnected receives a value after each reconnection (once OnConnect has
// replayed the flows); pending notifications coalesce.
func (c *Client) Reconnected() <-chan struct{} { return c.reconnected }

// PacketIns delivers packet-ins of every connection (needs Conn.AsyncMessages).
func (c *Client) PacketIns() <-chan Frame { return c.packetIns }

// PortStatus delivers port status messages of every connection.
func (c *Client) PortStatus() <-chan Frame { return c.portStatus }

// FlowRemoved delivers flow-removed messages of every connection.
func (c *Client) FlowRemoved() <-chan Frame { return c.flowRemoved }

// do runs fn on the current connection. It does not retry: after a
// reconnection OnConnect restores the switch's state, and the caller's
// change is either in it or must be reported as failed.
func (c *Client) do(ctx context.Context, fn func(*Conn) error) error {
	conn, err := c.Conn(ctx)
	if err != nil {
		return err
	}
	if err := fn(conn); err != nil {
		if errors.Is(err, ErrClosed) {
			return fmt.Errorf("openflow: connection to %s lost during the call: %w", c.addr, err)
		}
		return err
	}
	return nil
}
