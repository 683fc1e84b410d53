package openflow

import (
	"net/netip"
	"strings"
	"testing"
)

// TestCTFlushAsOVSDecodesIt: every NXT_CT_FLUSH we encode is decoded by
// ovs-ofctl ofp-parse (the oracle) into what our String() prints, for
// partial tuples (a Service address and an endpoint), whole ones, no zone,
// no address at all and IPv6.
func TestCTFlushAsOVSDecodesIt(t *testing.T) {
	zone := uint16(0xfff0)
	a := netip.MustParseAddr
	for _, m := range []*CTFlush{
		{Protocol: 17, Zone: &zone, Orig: CTTuple{Dst: a("10.96.0.10"), DstPort: 53}, Reply: CTTuple{Src: a("10.10.1.3"), SrcPort: 5353}},
		{Protocol: 17, Zone: &zone, Orig: CTTuple{Dst: a("10.10.1.3"), DstPort: 5353}},
		{Protocol: 17},
		{Protocol: 6, Orig: CTTuple{Src: a("10.0.0.1"), SrcPort: 1, Dst: a("10.0.0.2"), DstPort: 2}},
		{Zone: &zone, Reply: CTTuple{Src: a("fd00::1")}},
	} {
		for _, v := range []uint8{Version13, Version15} {
			b, err := Marshal(m, v, 7)
			if err != nil {
				t.Fatal(err)
			}
			got := ofpParse(t, b)
			if len(got) != 1 {
				t.Fatalf("ofp-parse printed %d messages: %v", len(got), got)
			}
			_, body, _ := strings.Cut(got[0], "(xid=0x7): ")
			if body != m.String() {
				t.Errorf("version %#x: ofp-parse\n got: %s\nwant: %s", v, body, m.String())
			}
		}
	}
}
