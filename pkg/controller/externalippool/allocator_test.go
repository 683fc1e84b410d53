package externalippool

import (
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

func mustRanges(t *testing.T, rs ...crdv1beta1.IPRange) []Range {
	t.Helper()
	out, err := ParseRanges(crdv1beta1.ExternalIPPoolSpec{IPRanges: rs})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		name        string
		in          crdv1beta1.IPRange
		first, last string
		size        int
		err         string
	}{
		{name: "an IPv4 CIDR leaves out its network and broadcast addresses", in: crdv1beta1.IPRange{CIDR: "10.10.1.0/28"},
			first: "10.10.1.1", last: "10.10.1.14", size: 14},
		{name: "an IPv4 CIDR is masked first", in: crdv1beta1.IPRange{CIDR: "10.10.1.5/30"}, first: "10.10.1.5", last: "10.10.1.6", size: 2},
		{name: "an IPv4 /32 is its one address", in: crdv1beta1.IPRange{CIDR: "10.0.0.7/32"}, first: "10.0.0.7", last: "10.0.0.7", size: 1},
		{name: "an IPv4 /31 keeps both addresses", in: crdv1beta1.IPRange{CIDR: "10.0.0.6/31"}, first: "10.0.0.6", last: "10.0.0.7", size: 2},
		{name: "an IPv6 CIDR leaves out its first address only", in: crdv1beta1.IPRange{CIDR: "fd00:10::/126"},
			first: "fd00:10::1", last: "fd00:10::3", size: 3},
		{name: "an IPv6 /64 counts as many as an int holds", in: crdv1beta1.IPRange{CIDR: "fd00::/64"},
			first: "fd00::1", last: "fd00::ffff:ffff:ffff:ffff", size: math.MaxInt},
		{name: "start and end are inclusive", in: crdv1beta1.IPRange{Start: "10.10.0.2", End: "10.10.0.10"}, first: "10.10.0.2", last: "10.10.0.10", size: 9},
		{name: "a range of one address", in: crdv1beta1.IPRange{Start: "10.10.0.30", End: "10.10.0.30"}, first: "10.10.0.30", last: "10.10.0.30", size: 1},
		{name: "an IPv6 start and end", in: crdv1beta1.IPRange{Start: "fd00::a", End: "fd00::f"}, first: "fd00::a", last: "fd00::f", size: 6},
		{name: "start after end is refused naming end", in: crdv1beta1.IPRange{Start: "10.0.0.9", End: "10.0.0.1"}, err: "end: 10.0.0.1 is before start 10.0.0.9"},
		{name: "mixed families are refused", in: crdv1beta1.IPRange{Start: "10.0.0.1", End: "fd00::1"}, err: "end: 10.0.0.1 and fd00::1 are not of the same IP family"},
		{name: "a bad CIDR is refused naming cidr", in: crdv1beta1.IPRange{CIDR: "10.0.0.0/33"}, err: `cidr: "10.0.0.0/33" is not a CIDR`},
		{name: "a bad start is refused naming start", in: crdv1beta1.IPRange{Start: "10.0.0", End: "10.0.0.3"}, err: `start: "10.0.0" is not an IP address`},
		{name: "cidr with start and end is refused", in: crdv1beta1.IPRange{CIDR: "10.0.0.0/24", Start: "10.0.0.1", End: "10.0.0.2"}, err: "cidr: cannot be set with start and end"},
		{name: "start without end is refused", in: crdv1beta1.IPRange{Start: "10.0.0.1"}, err: "an IP range needs cidr, or start and end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRange(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want error %q", r, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.First.String() != tc.first || r.Last.String() != tc.last || r.Size() != tc.size {
				t.Errorf("got %s size %d, want %s-%s size %d", r, r.Size(), tc.first, tc.last, tc.size)
			}
		})
	}
}

func TestParseRangesNamesTheIndex(t *testing.T) {
	_, err := ParseRanges(crdv1beta1.ExternalIPPoolSpec{IPRanges: []crdv1beta1.IPRange{{CIDR: "10.0.0.0/24"}, {Start: "b", End: "10.0.0.1"}}})
	if err == nil || err.Error() != `ipRanges[1].start: "b" is not an IP address` {
		t.Fatalf("got %v", err)
	}
}

func TestAllocatorHandsOutTheLowestFreeIPUntilExhausted(t *testing.T) {
	a := newPoolAllocator(mustRanges(t, crdv1beta1.IPRange{Start: "10.10.0.2", End: "10.10.0.3"}, crdv1beta1.IPRange{CIDR: "10.10.1.0/30"}))
	if a.total() != 4 {
		t.Fatalf("total %d, want 4", a.total())
	}
	var got []string
	for i := 0; i < 4; i++ {
		ip, err := a.allocate("Egress/e" + string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ip.String())
	}
	if strings.Join(got, ",") != "10.10.0.2,10.10.0.3,10.10.1.1,10.10.1.2" {
		t.Errorf("allocated %v", got)
	}
	if _, err := a.allocate("Egress/late"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("fifth allocation: %v, want ErrExhausted", err)
	}
	if a.release(netip.MustParseAddr("10.10.0.3"), "Egress/other") {
		t.Error("another owner released 10.10.0.3")
	}
	if !a.release(netip.MustParseAddr("10.10.0.3"), "Egress/eb") {
		t.Error("the owner could not release 10.10.0.3")
	}
	if ip, err := a.allocate("Egress/late"); err != nil || ip.String() != "10.10.0.3" {
		t.Errorf("after a release: %v, %v; want 10.10.0.3", ip, err)
	}
	if a.used() != 4 {
		t.Errorf("used %d, want 4", a.used())
	}
}

func TestAllocatorIPv6(t *testing.T) {
	a := newPoolAllocator(mustRanges(t, crdv1beta1.IPRange{CIDR: "fd00:10::/127"}, crdv1beta1.IPRange{Start: "fd00:20::ffff", End: "fd00:20::1:0"}))
	var got []string
	for {
		ip, err := a.allocate("o")
		if errors.Is(err, ErrExhausted) {
			break
		}
		got = append(got, ip.String())
	}
	if strings.Join(got, ",") != "fd00:10::,fd00:10::1,fd00:20::ffff,fd00:20::1:0" {
		t.Errorf("allocated %v", got)
	}
}

func TestAllocateSpecificIP(t *testing.T) {
	a := newPoolAllocator(mustRanges(t, crdv1beta1.IPRange{CIDR: "10.10.1.0/28"}))
	ip := netip.MustParseAddr("10.10.1.5")
	if err := a.allocateSpecific(ip, "Egress/a"); err != nil {
		t.Fatal(err)
	}
	if err := a.allocateSpecific(ip, "Egress/a"); err != nil {
		t.Errorf("its owner allocating it again: %v", err)
	}
	if err := a.allocateSpecific(ip, "Egress/b"); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "Egress/a") {
		t.Errorf("another owner: %v, want ErrInUse naming Egress/a", err)
	}
	for _, s := range []string{"10.10.1.0", "10.10.1.15", "10.10.2.1", "fd00::1"} {
		if err := a.allocateSpecific(netip.MustParseAddr(s), "Egress/c"); !errors.Is(err, ErrNotInPool) {
			t.Errorf("%s: %v, want ErrNotInPool", s, err)
		}
	}
	if ip, _ := a.allocate("Egress/d"); ip.String() != "10.10.1.1" {
		t.Errorf("allocate after a specific one: %s", ip)
	}
}

func TestReshapeKeepsTheAllocationsStillInRange(t *testing.T) {
	a := newPoolAllocator(mustRanges(t, crdv1beta1.IPRange{Start: "10.0.0.1", End: "10.0.0.10"}))
	for _, s := range []string{"10.0.0.2", "10.0.0.9"} {
		if err := a.allocateSpecific(netip.MustParseAddr(s), "o"+s); err != nil {
			t.Fatal(err)
		}
	}
	dropped := a.reshape(mustRanges(t, crdv1beta1.IPRange{Start: "10.0.0.1", End: "10.0.0.5"}))
	if len(dropped) != 1 || dropped[netip.MustParseAddr("10.0.0.9")] != "o10.0.0.9" {
		t.Errorf("dropped %v", dropped)
	}
	if a.used() != 1 || a.total() != 5 {
		t.Errorf("used %d total %d, want 1 and 5", a.used(), a.total())
	}
}

func TestAllocateOfFamilyPicksAmongTheRangesOfThatFamily(t *testing.T) {
	a := newPoolAllocator(mustRanges(t, crdv1beta1.IPRange{CIDR: "fd00:10::/127"}, crdv1beta1.IPRange{Start: "10.0.0.1", End: "10.0.0.1"}))
	if ip, err := a.allocateOfFamily("Service/ns/v4", 32); err != nil || ip.String() != "10.0.0.1" {
		t.Errorf("IPv4 from a pool whose first range is IPv6: %v, %v; want 10.0.0.1", ip, err)
	}
	if _, err := a.allocateOfFamily("Service/ns/v4b", 32); !errors.Is(err, ErrExhausted) {
		t.Errorf("IPv4 once its range is used up: %v, want ErrExhausted", err)
	}
	if ip, err := a.allocateOfFamily("Service/ns/v6", 128); err != nil || ip.String() != "fd00:10::" {
		t.Errorf("IPv6: %v, %v; want fd00:10::", ip, err)
	}
	v4only := newPoolAllocator(mustRanges(t, crdv1beta1.IPRange{CIDR: "10.1.0.0/30"}))
	if _, err := v4only.allocateOfFamily("Service/ns/v6", 128); !errors.Is(err, ErrNoRangeOfFamily) {
		t.Errorf("IPv6 from an IPv4 pool: %v, want ErrNoRangeOfFamily", err)
	}
}
