package types

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestTheFamilyOfAnAddress(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want IPFamily
	}{
		{"10.0.0.1", IPv4},
		{"fd00::1", IPv6},
		{"::ffff:10.0.0.1", IPv6},
	} {
		if got := FamilyOf(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("FamilyOf(%s) = %s, want %s", tc.addr, got, tc.want)
		}
	}
	if got := FamilyOf(netip.Addr{}); got != 0 {
		t.Errorf("FamilyOf(zero Addr) = %s, want none", got)
	}
}

func TestTheFamilyOfANetIPWhateverItsLength(t *testing.T) {
	for _, tc := range []struct {
		ip   net.IP
		want IPFamily
	}{
		{net.ParseIP("10.0.0.1"), IPv4}, // 16 bytes
		{net.ParseIP("10.0.0.1").To4(), IPv4},
		{net.ParseIP("fd00::1"), IPv6},
		{nil, 0},
		{net.IP{1, 2, 3}, 0},
	} {
		if got := FamilyOfIP(tc.ip); got != tc.want {
			t.Errorf("FamilyOfIP(%v) = %s, want %s", tc.ip, got, tc.want)
		}
	}
	if a := Addr(net.ParseIP("10.0.0.1")); a != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("Addr of a 16-byte IPv4 = %v, want the 4-byte form", a)
	}
	if a := Addr(net.ParseIP("fd00::1")); a != netip.MustParseAddr("fd00::1") {
		t.Errorf("Addr(fd00::1) = %v", a)
	}
}

func TestAFamilyKeepsItsOwnAddresses(t *testing.T) {
	as := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1"), netip.MustParseAddr("10.0.0.2")}
	if got := IPv4.Of(as); len(got) != 2 || got[1].String() != "10.0.0.2" {
		t.Errorf("IPv4.Of = %v", got)
	}
	if got := IPv6.Of(as); len(got) != 1 || got[0].String() != "fd00::1" {
		t.Errorf("IPv6.Of = %v", got)
	}
}

func TestEachFamilyHasItsVirtualAddresses(t *testing.T) {
	for _, f := range IPFamilies {
		for name, a := range map[string]netip.Addr{"hairpin": HairpinIPOf(f), "NodePort": NodePortVirtualIPOf(f)} {
			if FamilyOf(a) != f {
				t.Errorf("%s address of %s is %s", name, f, a)
			}
		}
	}
	if HairpinIPOf(IPv4) != HairpinIP || NodePortVirtualIPOf(IPv4) != NodePortVirtualIP {
		t.Error("IPv4's virtual addresses changed")
	}
}

func TestTheNotSupportedErrorNamesTheFamily(t *testing.T) {
	err := ErrFamilyNotSupported("service ns/a port [fd00::a]:80/TCP", IPv6)
	if !strings.Contains(err.Error(), "IPv6 is not supported yet") || !strings.Contains(err.Error(), "ns/a") {
		t.Errorf("error = %v", err)
	}
}
