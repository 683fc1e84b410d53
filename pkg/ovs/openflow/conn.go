package openflow

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// ErrClosed is returned by calls on a connection that was closed or lost;
// the error wraps the reason.
var ErrClosed = errors.New("openflow: connection closed")

// Defaults of Options.
const (
	DefaultEchoInterval    = 5 * time.Second
	DefaultMaxMissedEchoes = 3
	DefaultAsyncQueue      = 1024

	// writeFlushSize bounds the write buffer: batches are written in chunks
	// of about this size, so 100,000 flows take a few hundred syscalls.
	writeFlushSize = 256 << 10
	readBufferSize = 256 << 10
)

// Options configure a connection. The zero value is usable.
type Options struct {
	// Versions offered in HELLO, default {Version15, Version13}.
	Versions []uint8
	// EchoInterval is how often an echo request checks that the switch is
	// alive; zero means DefaultEchoInterval, negative disables keepalive.
	EchoInterval time.Duration
	// MaxMissedEchoes is how many echo requests in a row may go unanswered
	// (each waits EchoInterval) before the connection is declared dead.
	MaxMissedEchoes int
	// AsyncMessages asks the switch for packet-ins (as NXT_PACKET_IN2), port
	// status and flow-removed messages. Open vSwitch sends none to a bridge's
	// management-socket connection unless it sets a nonzero miss_send_len.
	AsyncMessages bool
	// AsyncQueue is the capacity of each async channel; when a consumer falls
	// behind, further messages are dropped (and counted) rather than stalling
	// replies. Zero means DefaultAsyncQueue.
	AsyncQueue int
}

func (o Options) withDefaults() Options {
	if len(o.Versions) == 0 {
		o.Versions = []uint8{Version15, Version13}
	}
	if o.EchoInterval == 0 {
		o.EchoInterval = DefaultEchoInterval
	}
	if o.MaxMissedEchoes <= 0 {
		o.MaxMissedEchoes = DefaultMaxMissedEchoes
	}
	if o.AsyncQueue <= 0 {
		o.AsyncQueue = DefaultAsyncQueue
	}
	return o
}

// Conn is one OpenFlow channel to a switch. All methods are safe for
// concurrent use. A reader goroutine answers the switch's echo requests,
// routes replies and errors to waiting calls by xid, reassembles multipart
// replies and delivers asynchronous messages on channels.
type Conn struct {
	nc       net.Conn
	addr     string
	version  uint8
	opts     Options
	features Features

	nextXid    atomic.Uint32
	nextBundle atomic.Uint32

	// wmu serialises writes so that messages of one batch are contiguous.
	wmu  sync.Mutex
	wbuf []byte

	mu       sync.Mutex
	calls    map[uint32]*call
	batches  map[*batch]struct{}
	closeErr error

	done       chan struct{}
	readerDone chan struct{}
	closeOnce  sync.Once

	packetIns   chan Frame
	portStatus  chan Frame
	flowRemoved chan Frame
	dropped     atomic.Uint64
}

// call is a request waiting for its reply.
type call struct {
	xid       uint32
	msg       Message
	desc      string
	multipart bool
	parts     []byte
	ch        chan callResult
}

type callResult struct {
	frame Frame
	err   error
}

// batch watches a block of consecutive xids of messages that get no reply
// unless they fail, so that their errors can be returned to the sender with
// the failed message named.
type batch struct {
	first uint32
	msgs  []Message
	errs  []*Error
}

func (b *batch) contains(xid uint32) bool { return xid-b.first < uint32(len(b.msgs)) }

// Dial connects to a switch and completes the handshake. addr is
// "unix:/path", "tcp:host:port", or a bare path of a unix socket such as
// the bridge's management socket <rundir>/<bridge>.mgmt.
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	network, address := "unix", addr
	switch {
	case strings.HasPrefix(addr, "unix:"):
		address = strings.TrimPrefix(addr, "unix:")
	case strings.HasPrefix(addr, "tcp:"):
		network, address = "tcp", strings.TrimPrefix(addr, "tcp:")
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("openflow: dial %s: %w", addr, err)
	}
	c, err := NewConn(ctx, nc, opts)
	if err != nil {
		return nil, fmt.Errorf("openflow: handshake with %s: %w", addr, err)
	}
	return c, nil
}

// NewConn runs the handshake on an established stream (HELLO and version
// negotiation, features request, async configuration) and starts the reader
// and keepalive goroutines. It takes ownership of nc, and closes it on failure.
func NewConn(ctx context.Context, nc net.Conn, opts Options) (*Conn, error) {
	opts = opts.withDefaults()
	c := &Conn{
		nc:          nc,
		addr:        nc.RemoteAddr().String(),
		opts:        opts,
		calls:       make(map[uint32]*call),
		batches:     make(map[*batch]struct{}),
		done:        make(chan struct{}),
		readerDone:  make(chan struct{}),
		packetIns:   make(chan Frame, opts.AsyncQueue),
		portStatus:  make(chan Frame, opts.AsyncQueue),
		flowRemoved: make(chan Frame, opts.AsyncQueue),
	}
	br := bufio.NewReaderSize(nc, readBufferSize)
	if err := c.hello(ctx, br); err != nil {
		nc.Close()
		return nil, err
	}
	go c.readLoop(br)
	if opts.EchoInterval > 0 {
		go c.keepalive()
	}
	reply, err := c.roundTrip(ctx, FeaturesRequest{}, "features request")
	if err != nil {
		c.Close()
		return nil, err
	}
	if c.features, err = DecodeFeatures(reply.Body); err != nil {
		c.Close()
		return nil, err
	}
	if opts.AsyncMessages {
		if err := c.Apply(ctx, setConfig(0xffff), setPacketInFormat(nxPacketInFormatNXT2)); err != nil {
			c.Close()
			return nil, fmt.Errorf("openflow: enable async messages: %w", err)
		}
	}
	klog.V(2).InfoS("OpenFlow connection established", "addr", c.addr, "version", c.version, "datapathID", fmt.Sprintf("%016x", c.features.DatapathID))
	return c, nil
}

// hello sends our HELLO and reads the switch's, before the reader starts.
func (c *Conn) hello(ctx context.Context, br *bufio.Reader) error {
	defer interruptOnCancel(ctx, c.nc.SetDeadline)()
	msg, err := Marshal(&Hello{Versions: c.opts.Versions}, highestVersion(c.opts.Versions), c.allocXids(1))
	if err != nil {
		return err
	}
	if _, err := c.nc.Write(msg); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	var hdr [HeaderLen]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return fmt.Errorf("read hello: %w", contextErr(ctx, err))
	}
	h, err := ParseHeader(hdr[:])
	if err != nil {
		return err
	}
	body := make([]byte, int(h.Length)-HeaderLen)
	if _, err := io.ReadFull(br, body); err != nil {
		return fmt.Errorf("read hello: %w", contextErr(ctx, err))
	}
	switch h.Type {
	case TypeHello:
	case TypeError:
		e, err := DecodeError(h.Xid, body)
		if err != nil {
			return err
		}
		e.Request = "hello"
		return e
	default:
		return fmt.Errorf("expected hello, got message type %d", h.Type)
	}
	c.version, err = NegotiateVersion(c.opts.Versions, h, body)
	return err
}

// interruptOnCancel makes blocking I/O return when ctx ends, by moving a
// deadline (set is SetDeadline or SetWriteDeadline) to now. Only the
// handshake uses it: afterwards an interrupted write could cut a message. The returned
// func undoes it; it waits for a racing cancellation so that no stale
// deadline is left behind to break the next, unrelated, I/O.
func interruptOnCancel(ctx context.Context, set func(time.Time) error) (restore func()) {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = set(time.Now())
		close(fired)
	})
	return func() {
		if !stop() {
			<-fired
			_ = set(time.Time{})
		}
	}
}

// contextErr prefers the context's error over the I/O error it caused.
func contextErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Version is the negotiated OpenFlow version.
func (c *Conn) Version() uint8 { return c.version }

// Features is the switch's features reply, read during the handshake.
func (c *Conn) Features() Features { return c.features }

// Done is closed when the connection is closed or lost.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection ended (nil while it is up).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeErr
}

// PacketIns delivers packet-ins (OFPT_PACKET_IN or NXT_PACKET_IN2 frames).
// The channel is closed when the connection ends.
func (c *Conn) PacketIns() <-chan Frame { return c.packetIns }

// PortStatus delivers OFPT_PORT_STATUS frames; closed when the connection ends.
func (c *Conn) PortStatus() <-chan Frame { return c.portStatus }

// FlowRemoved delivers OFPT_FLOW_REMOVED frames; closed when the connection ends.
func (c *Conn) FlowRemoved() <-chan Frame { return c.flowRemoved }

// DroppedAsync counts async messages dropped because their channel was full.
func (c *Conn) DroppedAsync() uint64 { return c.dropped.Load() }

// Close closes the connection; pending calls fail with ErrClosed.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	<-c.readerDone
	return nil
}

// fail ends the connection once, with the given reason.
func (c *Conn) fail(reason error) {
	c.closeOnce.Do(func() {
		if !errors.Is(reason, ErrClosed) {
			reason = fmt.Errorf("%w: %w", ErrClosed, reason)
		}
		c.mu.Lock()
		c.closeErr = reason
		calls := c.calls
		c.calls = map[uint32]*call{}
		c.mu.Unlock()
		close(c.done)
		_ = c.nc.Close()
		for _, cl := range calls {
			cl.ch <- callResult{err: reason}
		}
	})
}

// allocXids reserves n consecutive transaction ids and returns the first.
func (c *Conn) allocXids(n int) uint32 {
	return c.nextXid.Add(uint32(n)) - uint32(n) + 1
}

// encoder appends the i-th message of a batch to b.
type encoder func(b []byte, i int) ([]byte, error)

// writeBatch encodes n messages into the write buffer and writes them in
// chunks of about writeFlushSize. The context is checked between chunks,
// which are whole messages: a caller that gives up stops the batch without
// cutting a message in half, so the shared stream stays usable. A write that
// blocks because the switch stopped reading ends with the connection, which
// the keepalive declares dead.
func (c *Conn) writeBatch(ctx context.Context, n int, enc encoder) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.done:
		return c.Err()
	default:
	}
	b := c.wbuf[:0]
	defer func() {
		if cap(b) <= 4*writeFlushSize {
			c.wbuf = b[:0]
		}
	}()
	var err error
	for i := 0; i < n; i++ {
		if b, err = enc(b, i); err != nil {
			// Nothing of this message is in the buffer (the encoders cut it
			// back), so flushing what came before keeps the stream whole.
			if werr := c.flush(ctx, b); werr != nil {
				return werr
			}
			return err
		}
		if len(b) >= writeFlushSize {
			if err := c.flush(ctx, b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	return c.flush(ctx, b)
}

// flush writes whole messages, unless ctx is already done.
func (c *Conn) flush(ctx context.Context, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("openflow: write to %s: %w", c.addr, err)
	}
	if _, err := c.nc.Write(b); err != nil {
		err = fmt.Errorf("openflow: write to %s: %w", c.addr, err)
		c.fail(err)
		return err
	}
	return nil
}

// appendAt encodes message m with xid and the negotiated version.
func (c *Conn) appendAt(b []byte, m Message, xid uint32) ([]byte, error) {
	b, err := AppendMessage(b, m, c.version, xid)
	if err != nil {
		return b, fmt.Errorf("openflow: encode %s: %w", describe(m), err)
	}
	return b, nil
}

// describe names a message for errors: its String() (a flow prints as
// ovs-ofctl would) or its Go type and OpenFlow type. Called only on failure,
// so the hot path never formats.
func describe(m Message) string {
	if s, ok := m.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T (type %d)", m, m.MsgType())
}

// register adds a call waiting on xid.
func (c *Conn) register(cl *call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeErr != nil {
		return c.closeErr
	}
	c.calls[cl.xid] = cl
	return nil
}

func (c *Conn) unregister(xid uint32) {
	c.mu.Lock()
	delete(c.calls, xid)
	c.mu.Unlock()
}

func newCall(xid uint32, m Message, desc string) *call {
	return &call{xid: xid, msg: m, desc: desc, ch: make(chan callResult, 1)}
}

// wait waits for a call's reply, the context or the end of the connection.
func (c *Conn) wait(ctx context.Context, cl *call) (Frame, error) {
	select {
	case r := <-cl.ch:
		return r.frame, r.err
	case <-ctx.Done():
		c.unregister(cl.xid)
		return Frame{}, fmt.Errorf("openflow: waiting for reply to %s (xid %d): %w", cl.desc, cl.xid, ctx.Err())
	}
}

// roundTrip sends one request and waits for its single reply.
func (c *Conn) roundTrip(ctx context.Context, m Message, desc string) (Frame, error) {
	cl := newCall(c.allocXids(1), m, desc)
	if err := c.register(cl); err != nil {
		return Frame{}, err
	}
	if err := c.writeBatch(ctx, 1, func(b []byte, _ int) ([]byte, error) { return c.appendAt(b, m, cl.xid) }); err != nil {
		c.unregister(cl.xid)
		return Frame{}, err
	}
	return c.wait(ctx, cl)
}

// Request sends a message that the switch answers with one reply (not
// multipart) and returns that reply; an OFPT_ERROR answer is returned as *Error.
func (c *Conn) Request(ctx context.Context, m Message) (Frame, error) {
	return c.roundTrip(ctx, m, describe(m))
}

// Echo sends an echo request and waits for the reply.
func (c *Conn) Echo(ctx context.Context) error {
	_, err := c.roundTrip(ctx, &EchoRequest{}, "echo request")
	return err
}

// Barrier waits until the switch has processed every message sent before.
func (c *Conn) Barrier(ctx context.Context) error {
	_, err := c.roundTrip(ctx, BarrierRequest{}, "barrier")
	return err
}

// Send writes messages without waiting for anything. Errors the switch
// returns for them are only logged; use Apply to learn about them.
func (c *Conn) Send(ctx context.Context, msgs ...Message) error {
	first := c.allocXids(len(msgs))
	return c.writeBatch(ctx, len(msgs), func(b []byte, i int) ([]byte, error) {
		return c.appendAt(b, msgs[i], first+uint32(i))
	})
}

// SendRaw writes already encoded messages (whole, with headers) as they are.
// It is the floor of what any client can do and what benchmarks compare with.
func (c *Conn) SendRaw(ctx context.Context, encoded []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.flush(ctx, encoded)
}

// Apply sends messages one after another, not atomically, followed by a
// barrier, and returns the errors of the messages the switch rejected (each
// naming its message), joined; nil when all were applied.
func (c *Conn) Apply(ctx context.Context, msgs ...Message) error {
	n := len(msgs)
	first := c.allocXids(n + 1)
	bt := &batch{first: first, msgs: msgs}
	barrier := newCall(first+uint32(n), BarrierRequest{}, "barrier")
	if err := c.watch(bt, barrier); err != nil {
		return err
	}
	defer c.unwatch(bt)
	err := c.writeBatch(ctx, n+1, func(b []byte, i int) ([]byte, error) {
		if i == n {
			return c.appendAt(b, BarrierRequest{}, barrier.xid)
		}
		return c.appendAt(b, msgs[i], first+uint32(i))
	})
	if err != nil {
		c.unregister(barrier.xid)
		return err
	}
	if _, err := c.wait(ctx, barrier); err != nil {
		return err
	}
	return joinErrors(c.batchErrors(bt))
}

// watch registers a batch and the calls that follow it.
func (c *Conn) watch(bt *batch, calls ...*call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closeErr != nil {
		return c.closeErr
	}
	c.batches[bt] = struct{}{}
	for _, cl := range calls {
		c.calls[cl.xid] = cl
	}
	return nil
}

func (c *Conn) unwatch(bt *batch) {
	c.mu.Lock()
	delete(c.batches, bt)
	c.mu.Unlock()
}

func (c *Conn) batchErrors(bt *batch) []*Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Error(nil), bt.errs...)
}

// joinErrors returns nil, the only error, or the first error with a count of
// the others (a batch of thousands of bad flows should not make a megabyte
// error string).
func joinErrors(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return &BatchError{Errors: errs}
}

// BatchError holds every error of a batch; it unwraps to each of them.
type BatchError struct {
	Errors []*Error
}

// Error implements error.
func (e *BatchError) Error() string {
	return fmt.Sprintf("%v (and %d more failed messages)", e.Errors[0], len(e.Errors)-1)
}

// Unwrap lets errors.Is/As look at every failed message.
func (e *BatchError) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, err := range e.Errors {
		out[i] = err
	}
	return out
}

// keepalive sends echo requests and declares the switch dead when
// MaxMissedEchoes of them in a row stay unanswered.
func (c *Conn) keepalive() {
	t := time.NewTicker(c.opts.EchoInterval)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.EchoInterval)
		err := c.Echo(ctx)
		cancel()
		switch {
		case err == nil:
			missed = 0
		case errors.Is(err, context.DeadlineExceeded):
			missed++
			klog.V(2).InfoS("OpenFlow echo unanswered", "addr", c.addr, "missed", missed)
			if missed >= c.opts.MaxMissedEchoes {
				c.fail(fmt.Errorf("switch %s did not answer %d echo requests", c.addr, missed))
				return
			}
		default:
			return
		}
	}
}

// readLoop reads messages until the connection fails.
func (c *Conn) readLoop(br *bufio.Reader) {
	defer close(c.readerDone)
	defer func() {
		close(c.packetIns)
		close(c.portStatus)
		close(c.flowRemoved)
	}()
	var hdr [HeaderLen]byte
	var scratch []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			c.fail(fmt.Errorf("read from %s: %w", c.addr, err))
			return
		}
		h, err := ParseHeader(hdr[:])
		if err != nil {
			c.fail(err)
			return
		}
		n := int(h.Length) - HeaderLen
		if cap(scratch) < n {
			scratch = make([]byte, n)
		}
		body := scratch[:n]
		if _, err := io.ReadFull(br, body); err != nil {
			c.fail(fmt.Errorf("read from %s: %w", c.addr, err))
			return
		}
		c.dispatch(h, body)
	}
}

// dispatch handles one received message. body is reused by the next read,
// so everything kept is copied.
func (c *Conn) dispatch(h Header, body []byte) {
	switch h.Type {
	case TypeEchoRequest:
		// Never write from the reader: a writer blocked on a full socket
		// waits for the switch, which may be waiting for us to read.
		data := append([]byte(nil), body...)
		go func() {
			_ = c.writeBatch(context.Background(), 1, func(b []byte, _ int) ([]byte, error) {
				return c.appendAt(b, &EchoReply{Data: data}, h.Xid)
			})
		}()
	case TypeError:
		c.handleError(h, body)
	case TypeMultipartReply:
		c.handleMultipart(h, body)
	case TypePacketIn:
		c.deliver(c.packetIns, "packet-in", h, body)
	case TypePortStatus:
		c.deliver(c.portStatus, "port status", h, body)
	case TypeFlowRemoved:
		c.deliver(c.flowRemoved, "flow removed", h, body)
	case TypeExperimenter:
		if exp, sub, _, ok := experimenterHeader(body); ok && exp == NiciraExperimenter && sub == nxtPacketIn2 {
			c.deliver(c.packetIns, "packet-in2", h, body)
			return
		}
		c.complete(h, body)
	default:
		c.complete(h, body)
	}
}

func (c *Conn) deliver(ch chan Frame, kind string, h Header, body []byte) {
	select {
	case ch <- Frame{Header: h, Body: append([]byte(nil), body...)}:
	default:
		c.dropped.Add(1)
		klog.V(2).InfoS("Dropped OpenFlow async message, consumer too slow", "kind", kind, "addr", c.addr)
	}
}

// complete hands a reply to the call waiting on its xid.
func (c *Conn) complete(h Header, body []byte) {
	c.mu.Lock()
	cl := c.calls[h.Xid]
	delete(c.calls, h.Xid)
	c.mu.Unlock()
	if cl == nil {
		klog.V(4).InfoS("Unsolicited OpenFlow message", "type", h.Type, "xid", h.Xid, "addr", c.addr)
		return
	}
	cl.ch <- callResult{frame: Frame{Header: h, Body: append([]byte(nil), body...)}}
}

func (c *Conn) handleError(h Header, body []byte) {
	e, err := DecodeError(h.Xid, body)
	if err != nil {
		klog.ErrorS(err, "Undecodable OpenFlow error message", "addr", c.addr)
		return
	}
	c.mu.Lock()
	if cl := c.calls[h.Xid]; cl != nil {
		delete(c.calls, h.Xid)
		c.mu.Unlock()
		if cl.msg != nil {
			e.Request = describe(cl.msg)
		} else {
			e.Request = cl.desc
		}
		cl.ch <- callResult{err: e}
		return
	}
	var owner *batch
	for bt := range c.batches {
		if bt.contains(h.Xid) {
			owner = bt
			break
		}
	}
	if owner != nil {
		c.mu.Unlock()
		// Describe the failed message (a flow's text) outside the lock, then
		// hand the complete error over.
		e.Request = describe(owner.msgs[h.Xid-owner.first])
		c.mu.Lock()
		owner.errs = append(owner.errs, e)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	klog.ErrorS(e, "OpenFlow error for a request nobody waits for", "addr", c.addr)
}
