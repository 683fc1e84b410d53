package multicast

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// IGMP message types (RFC 1112 appendix I, RFC 2236 §2.1, RFC 3376 §4).
const (
	igmpQuery    = 0x11
	igmpReportV1 = 0x12
	igmpReportV2 = 0x16
	igmpLeaveV2  = 0x17
	igmpReportV3 = 0x22
)

// IGMPv3 group record types (RFC 3376 §4.2.12).
const (
	modeIsInclude       = 1
	modeIsExclude       = 2
	changeToInclude     = 3
	changeToExclude     = 4
	allowNewSources     = 5
	blockOldSources     = 6
	ipProtoIGMP         = 2
	ethTypeIPv4         = 0x0800
	ethHeaderLen        = 14
	allHostsGroup       = "224.0.0.1"
	routerAlertOption   = 0x94040000
	defaultMaxRespDsecs = 100 // 10 s, in tenths of a second
)

// linkLocalGroups (224.0.0.0/24) are never forwarded off a link (RFC
// 5771): no membership is kept for them.
var linkLocalGroups = netip.MustParsePrefix("224.0.0.0/24")

// membership is what one IGMP message says of one group: joined or left,
// and the message's type (which IGMP policy rules match).
type membership struct {
	group netip.Addr
	join  bool
	typ   uint8
}

// parseIGMP reads the memberships an IGMP report or leave in an Ethernet
// frame declares. A v3 report's EXCLUDE records (any-source joins) and
// INCLUDE or ALLOW records with sources (source-specific joins, which are
// forwarded as any-source) join; TO_INCLUDE and IS_INCLUDE records without
// sources leave; BLOCK records change nothing. Queries and other messages
// declare none.
func parseIGMP(frame []byte) ([]membership, error) {
	if len(frame) < ethHeaderLen+20 || binary.BigEndian.Uint16(frame[12:14]) != ethTypeIPv4 {
		return nil, fmt.Errorf("not an IPv4 frame")
	}
	ip := frame[ethHeaderLen:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < 20 || len(ip) < ihl || ip[9] != ipProtoIGMP {
		return nil, fmt.Errorf("not an IGMP packet")
	}
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if total > len(ip) || total < ihl {
		return nil, fmt.Errorf("IPv4 total length %d beyond the frame (%d bytes)", total, len(ip))
	}
	msg := ip[ihl:total]
	if len(msg) < 8 {
		return nil, fmt.Errorf("IGMP message of %d bytes, want 8 or more", len(msg))
	}
	group := func(b []byte) netip.Addr { return netip.AddrFrom4([4]byte(b[:4])) }
	var out []membership
	add := func(g netip.Addr, join bool) {
		if g.IsMulticast() && !linkLocalGroups.Contains(g) {
			out = append(out, membership{group: g, join: join, typ: msg[0]})
		}
	}
	switch msg[0] {
	case igmpReportV1, igmpReportV2:
		add(group(msg[4:8]), true)
	case igmpLeaveV2:
		add(group(msg[4:8]), false)
	case igmpReportV3:
		n := int(binary.BigEndian.Uint16(msg[6:8]))
		rec := msg[8:]
		for i := 0; i < n; i++ {
			if len(rec) < 8 {
				return out, fmt.Errorf("IGMPv3 report: record %d of %d truncated", i+1, n)
			}
			typ, aux, srcs := rec[0], int(rec[1]), int(binary.BigEndian.Uint16(rec[2:4]))
			size := 8 + 4*srcs + 4*aux
			if len(rec) < size {
				return out, fmt.Errorf("IGMPv3 report: record %d of %d truncated", i+1, n)
			}
			g := group(rec[4:8])
			switch {
			case typ == modeIsExclude || typ == changeToExclude:
				add(g, true)
			case (typ == modeIsInclude || typ == changeToInclude) && srcs == 0:
				add(g, false)
			case (typ == modeIsInclude || typ == changeToInclude || typ == allowNewSources) && srcs > 0:
				add(g, true)
			}
			rec = rec[size:]
		}
	}
	return out, nil
}

// queryFrame is an IGMP general query of version v (1, 2 or 3) from the
// gateway (src, srcMAC) to all hosts (224.0.0.1), with the Router Alert
// option and TTL 1 (RFC 3376 §4.1, RFC 2236 §2). interval is the querier's
// query interval, which a v3 query carries (QQIC).
func queryFrame(v int, src net.IP, srcMAC net.HardwareAddr, interval time.Duration) ([]byte, error) {
	src4 := src.To4()
	if src4 == nil {
		return nil, fmt.Errorf("query source %s is not IPv4", src)
	}
	var msg []byte
	switch v {
	case 1:
		msg = []byte{igmpQuery, 0, 0, 0, 0, 0, 0, 0}
	case 2:
		msg = []byte{igmpQuery, defaultMaxRespDsecs, 0, 0, 0, 0, 0, 0}
	case 3:
		qqic := byte(127)
		if s := interval / time.Second; s < 128 {
			qqic = byte(s)
		}
		// Resv/S/QRV: robustness 2; no sources.
		msg = []byte{igmpQuery, defaultMaxRespDsecs, 0, 0, 0, 0, 0, 0, 0x02, qqic, 0, 0}
	default:
		return nil, fmt.Errorf("IGMP version %d (want 1, 2 or 3)", v)
	}
	binary.BigEndian.PutUint16(msg[2:4], checksum(msg))
	dst := net.ParseIP(allHostsGroup).To4()
	ip := make([]byte, 24, 24+len(msg))
	ip[0], ip[1] = 0x46, 0xc0 // IPv4 with one option word; DSCP CS6 (network control)
	binary.BigEndian.PutUint16(ip[2:4], uint16(24+len(msg)))
	ip[8], ip[9] = 1, ipProtoIGMP
	copy(ip[12:16], src4)
	copy(ip[16:20], dst)
	binary.BigEndian.PutUint32(ip[20:24], routerAlertOption)
	binary.BigEndian.PutUint16(ip[10:12], checksum(ip))
	frame := make([]byte, 0, ethHeaderLen+len(ip)+len(msg))
	frame = append(frame, 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01) // 224.0.0.1's MAC
	frame = append(frame, srcMAC...)
	frame = append(frame, 0x08, 0x00)
	frame = append(frame, ip...)
	return append(frame, msg...), nil
}

// checksum is the Internet checksum of b (RFC 1071).
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
