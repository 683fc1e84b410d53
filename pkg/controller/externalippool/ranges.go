package externalippool

import (
	"fmt"
	"math"
	"math/big"
	"net/netip"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// Range is contiguous addresses of one family, First to Last inclusive.
type Range struct {
	First, Last netip.Addr
}

// Contains reports whether ip is in the range.
func (r Range) Contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.BitLen() == r.First.BitLen() && r.First.Compare(ip) <= 0 && ip.Compare(r.Last) <= 0
}

// Overlaps reports whether two ranges share an address.
func (r Range) Overlaps(o Range) bool {
	return r.First.BitLen() == o.First.BitLen() && r.First.Compare(o.Last) <= 0 && o.First.Compare(r.Last) <= 0
}

// Size is the number of addresses, at most math.MaxInt (an IPv6 /64 holds more).
func (r Range) Size() int {
	d := new(big.Int).Sub(new(big.Int).SetBytes(r.Last.AsSlice()), new(big.Int).SetBytes(r.First.AsSlice()))
	d.Add(d, big.NewInt(1))
	if !d.IsInt64() || d.Int64() > math.MaxInt {
		return math.MaxInt
	}
	return int(d.Int64())
}

func (r Range) String() string {
	return r.First.String() + "-" + r.Last.String()
}

// ParseRange turns one entry of spec.ipRanges into a Range. A CIDR's first
// address (the network's) is not allocated, nor, for IPv4, its last (the
// broadcast address), as upstream's allocator does; a CIDR without room for
// that (IPv4 /31 and /32, IPv6 /128) keeps all its addresses (RFC 3021).
// Start and End are inclusive and must be of one family with Start <= End.
// The error names the field (cidr, start or end).
func ParseRange(r crdv1beta1.IPRange) (Range, error) {
	if r.CIDR != "" {
		if r.Start != "" || r.End != "" {
			return Range{}, &FieldError{Field: "cidr", Msg: "cannot be set with start and end"}
		}
		p, err := netip.ParsePrefix(r.CIDR)
		if err != nil {
			return Range{}, &FieldError{Field: "cidr", Msg: fmt.Sprintf("%q is not a CIDR", r.CIDR)}
		}
		if p.Addr().Zone() != "" || p.Addr().Is4In6() {
			return Range{}, &FieldError{Field: "cidr", Msg: fmt.Sprintf("%q is not a CIDR", r.CIDR)}
		}
		p = p.Masked()
		first := p.Addr()
		last := lastAddr(p)
		if first.BitLen()-p.Bits() > 1 {
			first = first.Next()
			if first.Is4() {
				last = last.Prev()
			}
		}
		return Range{First: first, Last: last}, nil
	}
	if r.Start == "" || r.End == "" {
		return Range{}, &FieldError{Field: "cidr", Msg: "an IP range needs cidr, or start and end"}
	}
	start, err := parseIP(r.Start)
	if err != nil {
		return Range{}, &FieldError{Field: "start", Msg: err.Error()}
	}
	end, err := parseIP(r.End)
	if err != nil {
		return Range{}, &FieldError{Field: "end", Msg: err.Error()}
	}
	if start.BitLen() != end.BitLen() {
		return Range{}, &FieldError{Field: "end", Msg: fmt.Sprintf("%s and %s are not of the same IP family", start, end)}
	}
	if start.Compare(end) > 0 {
		return Range{}, &FieldError{Field: "end", Msg: fmt.Sprintf("%s is before start %s", end, start)}
	}
	return Range{First: start, Last: end}, nil
}

func parseIP(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	return ip.Unmap(), nil
}

// lastAddr is the last address of a masked prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// FieldError is a bad IP range, with the field of the range it is about.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// ParseRanges parses every range of a pool; the error names the index and
// field (ipRanges[1].end: ...).
func ParseRanges(spec crdv1beta1.ExternalIPPoolSpec) ([]Range, error) {
	out := make([]Range, 0, len(spec.IPRanges))
	for i, r := range spec.IPRanges {
		pr, err := ParseRange(r)
		if err != nil {
			return nil, fmt.Errorf("ipRanges[%d].%w", i, err)
		}
		out = append(out, pr)
	}
	return out, nil
}
