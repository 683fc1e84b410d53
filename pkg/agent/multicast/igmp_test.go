package multicast

import (
	"encoding/binary"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// igmpFrame wraps an IGMP message in an Ethernet and IPv4 header (with the
// Router Alert option, as hosts send reports).
func igmpFrame(msg []byte) []byte {
	ip := make([]byte, 24)
	ip[0] = 0x46
	binary.BigEndian.PutUint16(ip[2:4], uint16(24+len(msg)))
	ip[8], ip[9] = 1, ipProtoIGMP
	copy(ip[12:16], net.ParseIP("10.10.1.2").To4())
	copy(ip[16:20], net.ParseIP("224.0.0.22").To4())
	frame := append(make([]byte, 12), 0x08, 0x00)
	frame = append(frame, ip...)
	return append(frame, msg...)
}

func v3Record(typ byte, group string, sources ...string) []byte {
	r := []byte{typ, 0, 0, byte(len(sources))}
	r = append(r, net.ParseIP(group).To4()...)
	for _, s := range sources {
		r = append(r, net.ParseIP(s).To4()...)
	}
	return r
}

func TestParseIGMPReadsJoinsAndLeavesOfEveryVersion(t *testing.T) {
	g := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	v3 := func(records ...[]byte) []byte {
		msg := []byte{igmpReportV3, 0, 0, 0, 0, 0, 0, byte(len(records))}
		for _, r := range records {
			msg = append(msg, r...)
		}
		return msg
	}
	for _, tc := range []struct {
		name string
		msg  []byte
		want []membership
	}{
		{"a v1 report joins its group", []byte{igmpReportV1, 0, 0, 0, 225, 1, 2, 3}, []membership{{g("225.1.2.3"), true, igmpReportV1}}},
		{"a v2 report joins its group", []byte{igmpReportV2, 0, 0, 0, 239, 0, 0, 7}, []membership{{g("239.0.0.7"), true, igmpReportV2}}},
		{"a v2 leave leaves its group", []byte{igmpLeaveV2, 0, 0, 0, 225, 1, 2, 3}, []membership{{g("225.1.2.3"), false, igmpLeaveV2}}},
		{"a v3 report's EXCLUDE records join, TO_INCLUDE{} leaves, BLOCK changes nothing",
			v3(v3Record(changeToExclude, "225.1.1.1"), v3Record(modeIsExclude, "225.1.1.2"),
				v3Record(changeToInclude, "225.1.1.3"), v3Record(blockOldSources, "225.1.1.4", "10.0.0.1")),
			[]membership{{g("225.1.1.1"), true, igmpReportV3}, {g("225.1.1.2"), true, igmpReportV3}, {g("225.1.1.3"), false, igmpReportV3}}},
		{"a v3 source-specific join (INCLUDE with sources, ALLOW) joins",
			v3(v3Record(modeIsInclude, "232.1.1.1", "10.0.0.1"), v3Record(allowNewSources, "232.1.1.2", "10.0.0.2", "10.0.0.3")),
			[]membership{{g("232.1.1.1"), true, igmpReportV3}, {g("232.1.1.2"), true, igmpReportV3}}},
		{"link-local groups (224.0.0.0/24) are not kept", []byte{igmpReportV2, 0, 0, 0, 224, 0, 0, 251}, nil},
		{"a query declares nothing", []byte{igmpQuery, 100, 0, 0, 0, 0, 0, 0}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseIGMP(igmpFrame(tc.msg))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseIGMPRefusesTruncatedMessages(t *testing.T) {
	for name, frame := range map[string][]byte{
		"a short frame":            make([]byte, 20),
		"a v3 record cut short":    igmpFrame([]byte{igmpReportV3, 0, 0, 0, 0, 0, 0, 2, changeToExclude, 0, 0, 0, 225, 1, 1, 1, 4, 0}),
		"a 4-byte IGMP message":    igmpFrame([]byte{igmpReportV2, 0, 0, 0}),
		"sources beyond the frame": igmpFrame([]byte{igmpReportV3, 0, 0, 0, 0, 0, 0, 1, modeIsInclude, 0, 0, 3, 232, 1, 1, 1}),
	} {
		if _, err := parseIGMP(frame); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

// The queries are checked against the RFCs' layout: the IPv4 and IGMP
// checksums verify (the Internet checksum over a correct header is 0),
// TTL 1, the Router Alert option, 224.0.0.1 and its MAC; a v3 query
// carries QRV 2 and the interval, a v1 query a zero max response time.
func TestQueryFrameIsAWellFormedGeneralQuery(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	for _, tc := range []struct {
		v       int
		igmpLen int
		maxResp byte
	}{{1, 8, 0}, {2, 8, defaultMaxRespDsecs}, {3, 12, defaultMaxRespDsecs}} {
		f, err := queryFrame(tc.v, net.ParseIP("10.10.1.1"), mac, 125*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := net.HardwareAddr(f[0:6]).String(); got != "01:00:5e:00:00:01" {
			t.Errorf("v%d: destination MAC %s", tc.v, got)
		}
		ip := f[ethHeaderLen : ethHeaderLen+24]
		msg := f[ethHeaderLen+24:]
		if checksum(ip) != 0 || checksum(msg) != 0 {
			t.Errorf("v%d: checksums do not verify", tc.v)
		}
		if ip[8] != 1 || binary.BigEndian.Uint32(ip[20:24]) != routerAlertOption || net.IP(ip[16:20]).String() != allHostsGroup {
			t.Errorf("v%d: TTL %d, option %x, destination %s", tc.v, ip[8], ip[20:24], net.IP(ip[16:20]))
		}
		if len(msg) != tc.igmpLen || msg[0] != igmpQuery || msg[1] != tc.maxResp {
			t.Errorf("v%d: IGMP message % x", tc.v, msg)
		}
		if tc.v == 3 && (msg[8]&0x07 != 2 || msg[9] != 125) {
			t.Errorf("v3: QRV %d, QQIC %d, want 2 and 125", msg[8]&0x07, msg[9])
		}
	}
	if _, err := queryFrame(4, net.ParseIP("10.10.1.1"), mac, time.Minute); err == nil {
		t.Error("a v4 query was built")
	}
}
