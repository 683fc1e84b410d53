package networkpolicy

import (
	"net"
	"net/netip"
	"reflect"
	"testing"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

func ipNet(cidr string) cpv1beta2.IPNet {
	p := netip.MustParsePrefix(cidr)
	return cpv1beta2.IPNet{IP: cpv1beta2.IPAddress(net.IP(p.Addr().AsSlice())), PrefixLength: int32(p.Bits())}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestSubtractKeepsThePrefixFamily(t *testing.T) {
	for _, tc := range []struct {
		p, ex string
		want  []netip.Prefix
	}{
		{"10.0.0.0/24", "10.0.0.128/25", prefixes("10.0.0.0/25")},
		{"10.0.0.0/30", "10.0.0.1/32", prefixes("10.0.0.0/32", "10.0.0.2/31")},
		{"fd00::/126", "fd00::1/128", prefixes("fd00::/128", "fd00::2/127")},
		{"fd00::/64", "10.0.0.0/8", prefixes("fd00::/64")}, // another family never overlaps
	} {
		if got := subtract(netip.MustParsePrefix(tc.p), netip.MustParsePrefix(tc.ex)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("subtract(%s, %s) = %v, want %v", tc.p, tc.ex, got, tc.want)
		}
	}
}

func TestAnIPBlockKeepsItsFamilyAndItsExceptsOfThatFamily(t *testing.T) {
	v4 := cpv1beta2.IPBlock{CIDR: ipNet("10.0.0.0/24"), Except: []cpv1beta2.IPNet{ipNet("10.0.0.0/25"), ipNet("fd00::/64")}}
	if got, want := ipBlockPrefixes(v4), prefixes("10.0.0.128/25"); !reflect.DeepEqual(got, want) {
		t.Errorf("ipBlockPrefixes(IPv4 block) = %v, want %v", got, want)
	}
	// The pipeline realizes IPv6 (dual-stack nodes): an IPv6 ipBlock is
	// its prefixes, minus its IPv6 excepts.
	v6 := cpv1beta2.IPBlock{CIDR: ipNet("fd00::/64"), Except: []cpv1beta2.IPNet{ipNet("fd00::/65"), ipNet("10.0.0.0/8")}}
	if got, want := ipBlockPrefixes(v6), prefixes("fd00::8000:0:0:0/65"); !reflect.DeepEqual(got, want) {
		t.Errorf("ipBlockPrefixes(IPv6 block) = %v, want %v", got, want)
	}
}
