// Package dnsname holds the domain-name patterns of toFQDN policy rules
// (`to: [{fqdn: ...}]`): how the controller's admission checks and
// normalizes them, and how the agent matches the names of DNS answers
// against them. Upstream Antrea's semantics: an exact name, or a pattern
// in which each "*" stands for any run of characters (dots included), so
// "*.example.com" matches "a.example.com" and "a.b.example.com" and
// "*example.com" also matches "example.com"; case is ignored, and so is a
// trailing dot (the root).
package dnsname

import (
	"fmt"
	"strings"
)

// MaxLen is the longest domain name in text form (RFC 1035 section 2.3.4:
// 255 octets on the wire, 253 characters without the trailing dot).
const MaxLen = 253

// Normalize returns a name in the form patterns and names are compared
// in: lower case, without a trailing dot.
func Normalize(s string) string {
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

// Validate checks a pattern as a rule's fqdn field holds it and says what
// is wrong with it: letters, digits, "-", "_", "." and "*" only, no empty
// label, at most MaxLen characters.
func Validate(pattern string) error {
	p := Normalize(pattern)
	switch {
	case p == "":
		return fmt.Errorf("an empty name")
	case len(p) > MaxLen:
		return fmt.Errorf("longer than %d characters", MaxLen)
	}
	for _, label := range strings.Split(p, ".") {
		if label == "" {
			return fmt.Errorf("an empty label (two dots in a row, or a leading dot)")
		}
		if len(label) > 63 && !strings.Contains(label, "*") {
			return fmt.Errorf("label %q is longer than 63 characters", label)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '*') {
				return fmt.Errorf("character %q is not allowed (letters, digits, '-', '_', '.' and the wildcard '*')", r)
			}
		}
	}
	return nil
}

// IsWildcard reports whether a pattern has a wildcard.
func IsWildcard(pattern string) bool { return strings.Contains(pattern, "*") }

// Match reports whether a name matches a pattern, both normalized.
func Match(pattern, name string) bool {
	if !IsWildcard(pattern) {
		return pattern == name
	}
	parts := strings.Split(pattern, "*")
	// The text before the first "*" is a prefix, after the last a suffix;
	// the parts between are found left to right, each as early as it can
	// be (which is optimal for a pattern with only "*" wildcards).
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	rest := name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, mid)
		if i < 0 {
			return false
		}
		rest = rest[i+len(mid):]
	}
	return len(rest) >= len(last) && strings.HasSuffix(rest, last)
}
