package l7engine

import (
	"fmt"
	"net/netip"
	"time"
)

// appProto is what a connection has been found to carry.
type appProto int

const (
	protoUnknown appProto = iota // no client byte yet
	protoHTTP
	protoTLSPassed // an allowed ClientHello: the rest passes
	protoDenied    // answered and reset: every later packet drops
)

// heldFrame is a client segment held until the bytes it carries are
// decided: end is the sequence number after its payload.
type heldFrame struct {
	frame []byte
	end   uint32
}

// conn is the engine's view of one connection: the client's stream from
// the first undecided byte, the client segments held back, and the two
// paths (for the segments the engine makes).
type conn struct {
	rule   *Rule
	client netip.AddrPort
	// c2s and s2c are the paths of the latest client and server packets
	// seen; s2c carries the address the client knows the server by (a
	// Service's, after the pipeline undid its DNAT).
	c2s, s2c   path
	seenS2C    bool
	synced     bool   // the client's initial sequence number is known
	decided    uint32 // bytes before it are allowed (or passed)
	next       uint32 // the next client byte expected
	serverNext uint32 // the server's next sequence number
	buf        []byte // client bytes [decided, next)
	held       []heldFrame
	proto      appProto
	http       httpParser
	finC, finS bool
	lastSeen   time.Time
	requests   int
}

// seqLE is a <= b in sequence space (RFC 9293 section 3.4).
func seqLE(a, b uint32) bool { return int32(a-b) <= 0 }

// seqLT is a < b in sequence space.
func seqLT(a, b uint32) bool { return int32(a-b) < 0 }

// fromClient handles a client segment and returns the frames to send.
func (c *conn) fromClient(s *segment, report func(Verdict)) [][]byte {
	c.c2s = pathOf(s)
	if c.proto == protoDenied {
		return nil
	}
	if s.flags&tcpSYN != 0 {
		c.synced, c.decided, c.next, c.buf = true, s.seq+1, s.seq+1, nil
		return [][]byte{s.frame}
	}
	if s.flags&tcpFIN != 0 {
		c.finC = true
	}
	if !c.synced {
		// Joined mid-connection (the agent restarted): start from here.
		c.synced, c.decided, c.next = true, s.seq, s.seq
	}
	if len(s.payload) == 0 || c.proto == protoTLSPassed {
		return [][]byte{s.frame}
	}
	end := s.seq + uint32(len(s.payload))
	switch {
	case seqLE(end, c.decided):
		return [][]byte{s.frame} // a retransmission of allowed bytes
	case seqLT(c.next, s.seq):
		return nil // beyond a hole: dropped, the client sends it again
	case seqLE(end, c.next):
		return nil // a retransmission of held bytes: they are already here
	}
	c.buf = append(c.buf, s.payload[c.next-s.seq:]...)
	c.next = end
	c.held = append(c.held, heldFrame{frame: s.frame, end: end})
	if out, deny := c.decide(report); deny {
		return out
	}
	var out [][]byte
	for len(c.held) > 0 && seqLE(c.held[0].end, c.decided) {
		out = append(out, c.held[0].frame)
		c.held = c.held[1:]
	}
	return out
}

// fromServer handles a server segment and returns the frames to send.
func (c *conn) fromServer(s *segment) [][]byte {
	c.s2c, c.seenS2C = pathOf(s), true
	if c.proto == protoDenied {
		return nil
	}
	if e := s.seqEnd(); seqLT(c.serverNext, e) || c.serverNext == 0 {
		c.serverNext = e
	}
	if s.flags&tcpFIN != 0 {
		c.finS = true
	}
	return [][]byte{s.frame}
}

// decide reads the undecided bytes: it advances decided over what is
// allowed and, at the first denied request, returns the frames that answer
// it (deny true).
func (c *conn) decide(report func(Verdict)) ([][]byte, bool) {
	for len(c.buf) > 0 {
		if c.proto == protoUnknown {
			switch {
			case len(c.rule.HTTP) > 0 && c.buf[0] >= 'A' && c.buf[0] <= 'Z':
				c.proto = protoHTTP
			case len(c.rule.TLS) > 0 && c.buf[0] == 0x16:
				sni, _, complete, err := clientHelloSNI(c.buf)
				if err != nil {
					return c.deny(report, Verdict{Protocol: "tls", Reason: err.Error()}), true
				}
				if !complete {
					return nil, false
				}
				v := Verdict{Protocol: "tls", SNI: sni}
				if !c.rule.AllowsSNI(sni) {
					v.Reason = "no tls entry of the rule matches the server name"
					return c.deny(report, v), true
				}
				c.report(report, v, true)
				// The handshake is allowed: it and all that follows pass.
				c.proto = protoTLSPassed
				c.decided += uint32(len(c.buf))
				c.buf = nil
				return nil, false
			default:
				return c.deny(report, Verdict{Protocol: "unknown", Reason: "the stream is neither of the rule's protocols"}), true
			}
		}
		n, req, err := c.http.step(c.buf)
		if err != nil {
			return c.deny(report, Verdict{Protocol: "http", Reason: err.Error()}), true
		}
		if n == 0 {
			return nil, false
		}
		if req != nil {
			c.requests++
			v := Verdict{Protocol: "http", HTTP: req}
			if !c.rule.AllowsHTTP(*req) {
				v.Reason = "no http entry of the rule matches the request"
				return c.deny(report, v), true
			}
			c.report(report, v, true)
		}
		c.decided += uint32(n)
		c.buf = c.buf[n:]
	}
	return nil, false
}

func (c *conn) report(report func(Verdict), v Verdict, allowed bool) {
	if report == nil || allowed && !c.rule.Log {
		return
	}
	v.Rule, v.Allowed = c.rule, allowed
	v.Client, v.Server = c.c2s.src, c.c2s.dst
	report(v)
}

// forbiddenBody is the body of the answer to a denied HTTP request.
const forbiddenBody = "Request denied by an Antrea layer 7 NetworkPolicy rule\n"

// forbidden is the answer to a denied HTTP request.
var forbidden = fmt.Appendf(nil, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
	len(forbiddenBody), forbiddenBody)

// deny drops the held segments and makes the answer: to the client a 403
// and a FIN (HTTP) or a RST (otherwise), acknowledging every byte it sent;
// to the server a RST at the first byte it did not get.
func (c *conn) deny(report func(Verdict), v Verdict) [][]byte {
	c.report(report, v, false)
	c.proto, c.held, c.buf = protoDenied, nil, nil
	toClient := c.s2c
	if !c.seenS2C {
		toClient = path{dstMAC: c.c2s.srcMAC, srcMAC: c.c2s.dstMAC, src: c.c2s.dst, dst: c.c2s.src}
	}
	var out [][]byte
	if v.Protocol == "http" && v.HTTP != nil {
		out = append(out, buildSegment(toClient, c.serverNext, c.next, tcpACK|tcpPSH|tcpFIN, forbidden))
	} else {
		out = append(out, buildSegment(toClient, c.serverNext, c.next, tcpRST|tcpACK, nil))
	}
	return append(out, buildSegment(c.c2s, c.decided, c.serverNext, tcpRST|tcpACK, nil))
}
