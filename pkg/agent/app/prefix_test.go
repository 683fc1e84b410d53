package app

import (
	"net"
	"testing"
)

// TestPrefixOfKeepsEachFamily: a Node's pod CIDRs of both families become
// valid prefixes of their own family (an IPv6 one was an invalid prefix,
// which the node policy wrote as "invalid Prefix" and the kernel refused on
// every dual-stack Node).
func TestPrefixOfKeepsEachFamily(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"10.10.1.0/24", "10.10.1.0/24"},
		{"10.10.1.7/24", "10.10.1.0/24"},
		{"fd00:10:244::/64", "fd00:10:244::/64"},
		{"fd00:10:244:1::9/64", "fd00:10:244:1::/64"},
	} {
		_, n, err := net.ParseCIDR(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := prefixOf(n); !got.IsValid() || got.String() != c.want {
			t.Errorf("prefixOf(%s) = %v, want %s", c.in, got, c.want)
		}
		// The 16-byte form of an IPv4 address with its 4-byte mask.
		if ip := n.IP.To4(); ip != nil {
			n16 := &net.IPNet{IP: ip.To16(), Mask: n.Mask}
			if got := prefixOf(n16); got.String() != c.want {
				t.Errorf("prefixOf(16-byte %s) = %v, want %s", c.in, got, c.want)
			}
		}
	}
}
