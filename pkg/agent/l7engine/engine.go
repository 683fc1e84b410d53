package l7engine

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// idleTimeout is how long a connection without packets is remembered.
const idleTimeout = 10 * time.Minute

// Verdict is one decision of the engine, for the audit log.
type Verdict struct {
	Rule           *Rule
	Allowed        bool
	Client, Server netip.AddrPort
	// Protocol is "http", "tls" or "unknown".
	Protocol string
	HTTP     *HTTPRequest
	SNI      string
	// Reason says why a denial was made.
	Reason string
}

// connKey names a connection by its client's address and port and the
// rule (VLAN): the server's address differs between the two directions of
// a Service connection as the engine sees them (its endpoint one way, its
// ClusterIP the other).
type connKey struct {
	vlan   uint16
	client netip.AddrPort
}

// Engine decides on the packets of layer 7 rules' connections.
type Engine struct {
	now func() time.Time

	// Report, if set, is called (under mu) with each denial and each
	// allowed request of a rule that logs; it must not block. Set it
	// before Run or with SetReport.
	Report func(Verdict)

	mu    sync.Mutex
	rules map[uint16]*Rule
	conns map[connKey]*conn
	swept time.Time
}

// New returns an engine without rules.
func New() *Engine {
	return &Engine{now: time.Now, rules: map[uint16]*Rule{}, conns: map[connKey]*conn{}}
}

// SetReport sets Report while the engine runs.
func (e *Engine) SetReport(f func(Verdict)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.Report = f
}

// SetRules makes rules, by VLAN id, the engine's rules. Connections of a
// rule that changed keep the decisions made; their next requests meet the
// new rule.
func (e *Engine) SetRules(rules map[uint16]*Rule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rules = rules
	for k, c := range e.conns {
		if r, ok := rules[k.vlan]; ok {
			c.rule = r
		} else {
			delete(e.conns, k)
		}
	}
}

// Process handles one frame read from the engine's port with the VLAN id
// it carried (0: take it from an in-frame tag) and returns the frames to
// write back, in order: the frame itself when it passes, none when it is
// held or dropped, the answers of a denial.
func (e *Engine) Process(vlan uint16, frame []byte) [][]byte {
	vid, frame := untag(frame)
	if vlan == 0 {
		vlan = vid
	}
	s, err := parseSegment(frame)
	if err != nil {
		return [][]byte{frame} // not TCP: the pipeline steers only TCP here
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.sweepLocked(now)
	rule, ok := e.rules[vlan]
	if !ok {
		// A rule the engine does not know (yet): fail closed as the rule
		// would for what it does not allow, but let connections set up.
		if len(s.payload) == 0 {
			return [][]byte{frame}
		}
		return nil
	}
	c, client := e.lookupLocked(vlan, s)
	if s.flags&tcpSYN != 0 && s.flags&tcpACK == 0 {
		// A client's SYN opens a new connection, whatever one of its
		// address and port (and this rule) left behind.
		c = nil
	}
	if c == nil {
		if s.flags&tcpSYN == 0 || s.flags&tcpACK != 0 {
			// A server's packet, or a client's of a connection begun
			// before the engine knew it: the sender of the first payload is
			// taken as the client.
			if len(s.payload) == 0 {
				return [][]byte{frame}
			}
		}
		c = &conn{rule: rule, client: s.src}
		e.conns[connKey{vlan, s.src}] = c
		client = true
	}
	c.lastSeen = now
	var out [][]byte
	if client {
		out = c.fromClient(s, e.Report)
	} else {
		out = c.fromServer(s)
	}
	if s.flags&tcpRST != 0 || c.finC && c.finS && len(c.held) == 0 {
		delete(e.conns, connKey{vlan, c.client})
	}
	return out
}

// lookupLocked finds the connection of a segment and whether it comes
// from the client.
func (e *Engine) lookupLocked(vlan uint16, s *segment) (*conn, bool) {
	if c, ok := e.conns[connKey{vlan, s.src}]; ok {
		return c, true
	}
	if c, ok := e.conns[connKey{vlan, s.dst}]; ok {
		return c, false
	}
	return nil, false
}

// sweepLocked forgets idle connections, at most once a minute.
func (e *Engine) sweepLocked(now time.Time) {
	if now.Sub(e.swept) < time.Minute {
		return
	}
	e.swept = now
	for k, c := range e.conns {
		if now.Sub(c.lastSeen) > idleTimeout {
			delete(e.conns, k)
		}
	}
}

// Conns is the number of connections the engine follows.
func (e *Engine) Conns() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.conns)
}

// PacketIO is the engine's port: frames in with their VLAN id, frames out.
type PacketIO interface {
	Read(buf []byte) (n int, vlan uint16, err error)
	Write(frame []byte) error
}

// Run reads frames from io until ctx ends or io fails, and writes back
// what Process returns.
func (e *Engine) Run(ctx context.Context, io PacketIO) error {
	buf := make([]byte, 65536+64)
	for ctx.Err() == nil {
		n, vlan, err := io.Read(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return nil
			}
			if errors.Is(err, errTimeout) {
				continue
			}
			return err
		}
		frame := append([]byte(nil), buf[:n]...)
		for _, out := range e.Process(vlan, frame) {
			if err := io.Write(out); err != nil {
				klog.ErrorS(err, "Layer 7 engine could not write a frame back", "vlan", vlan)
			}
		}
	}
	return nil
}

// errTimeout is a read that timed out (so Run sees ctx end).
var errTimeout = errors.New("read timed out")
