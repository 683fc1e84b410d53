package l7engine

import (
	"net"
	"strings"
)

// HTTPMatch is one http entry of a rule; an empty field matches all.
type HTTPMatch struct {
	Host, Method, Path string
}

// TLSMatch is one tls entry of a rule; an empty SNI matches all.
type TLSMatch struct {
	SNI string
}

// Rule is a layer 7 rule as the engine applies it: the policy and rule it
// came from (for the audit log) and its entries. A connection of the rule
// carries either HTTP or TLS; what no entry matches is denied.
type Rule struct {
	// Policy names the policy as the audit log does ("AntreaNetworkPolicy:ns/name").
	Policy string
	// Name is the rule's name in its policy.
	Name string
	// Direction ("Ingress" or "Egress") and LogLabel are for the audit log.
	Direction, LogLabel string
	HTTP                []HTTPMatch
	TLS                 []TLSMatch
	// Log asks for an audit line for allowed requests too (denials are
	// always logged).
	Log bool
}

// HTTPRequest is what the engine reads of a request head.
type HTTPRequest struct {
	Method, Host, Path string
}

// AllowsHTTP reports whether an entry of r matches req.
func (r *Rule) AllowsHTTP(req HTTPRequest) bool {
	for _, m := range r.HTTP {
		if m.Method != "" && m.Method != req.Method {
			continue
		}
		if m.Host != "" && !globMatch(strings.ToLower(m.Host), strings.ToLower(hostWithoutPort(req.Host))) {
			continue
		}
		if m.Path != "" && !globMatch(m.Path, req.Path) {
			continue
		}
		return true
	}
	return false
}

// AllowsSNI reports whether an entry of r matches a ClientHello's server
// name (empty when the client sent none, which only an empty sni matches).
func (r *Rule) AllowsSNI(sni string) bool {
	for _, m := range r.TLS {
		if m.SNI == "" || sni != "" && globMatch(strings.ToLower(m.SNI), strings.ToLower(sni)) {
			return true
		}
	}
	return false
}

// hostWithoutPort strips a ":port" from a Host header ("[v6]:port" too):
// upstream's host "does not contain the port".
func hostWithoutPort(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// globMatch matches s against pattern, in which "*" stands for any run of
// characters (empty included) and every other character for itself, as
// upstream documents for host, path and sni ("*.foo.com", "*.foo.*",
// "/api/v2/*", "*/v2/*"). The whole of s must match.
func globMatch(pattern, s string) bool {
	// Iterative matching with one backtrack point: the last star seen.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
