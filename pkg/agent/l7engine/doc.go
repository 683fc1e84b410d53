// Package l7engine is the agent's layer 7 policy engine: an inline ("bump
// in the wire") inspector for the TCP connections that an Allow rule with
// l7Protocols matches.
//
// The OpenFlow pipeline (pkg/agent/openflow, l7_policy.go) outputs every
// packet of such a connection, both directions, to the port
// antrea-l7-tap0 tagged with a VLAN id naming the layer 7 rule; the engine
// reads the other end of that veth pair (AF_PACKET, afpacket_linux.go),
// follows the client's byte stream per connection (conn.go), and writes
// the packets it lets through back, untagged and unchanged, into the
// pipeline, which resumes them after the policy stage.
//
// Per connection the engine holds the client's segments until what they
// carry is decided: an HTTP/1.x request head (http.go; keep-alive and
// pipelining: every request of the connection, bodies skipped by
// Content-Length or chunked framing) or a TLS ClientHello (tls.go, its
// server_name). A request one of the rule's entries matches (match.go:
// host, path and SNI globs, exact method) is released; a denied HTTP
// request is dropped and answered with "HTTP/1.1 403 Forbidden" and a FIN
// to the client and a RST to the server; a denied TLS handshake, or traffic
// that is neither protocol the rule names, resets both sides. Each
// decision is reported (Verdict) for the agent's audit log.
package l7engine
