package openflow

import (
	"fmt"
	"math/bits"
	"net/netip"
)

// defaultPriority is OFP_DEFAULT_PRIORITY: ovs-ofctl omits it when printing.
const defaultPriority uint16 = 0x8000

// appendHexBytes prints the low n bytes of v as Open vSwitch's ds_put_hex:
// "0x" and the value without leading zeros, or "0".
func appendHexBytes(b []byte, v U128, n int) []byte {
	if n < 16 {
		v = v.and(ones(uint(n) * 8))
	}
	return appendHexU128(b, v)
}

func appendHexU128(b []byte, v U128) []byte {
	switch {
	case v.Hi != 0:
		return fmt.Appendf(b, "0x%x%016x", v.Hi, v.Lo)
	case v.Lo != 0:
		return fmt.Appendf(b, "0x%x", v.Lo)
	}
	return append(b, '0')
}

// appendCHex prints v as C's "%#x": "0x1f", but "0" for zero.
func appendCHex(b []byte, v uint64) []byte {
	if v == 0 {
		return append(b, '0')
	}
	return fmt.Appendf(b, "0x%x", v)
}

// appendIPv4 prints a 32-bit address.
func appendIPv4(b []byte, v uint32) []byte {
	return fmt.Appendf(b, "%d.%d.%d.%d", byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendIPv4Masked prints as ip_format_masked: a.b.c.d, a.b.c.d/len or a.b.c.d/m.m.m.m.
func appendIPv4Masked(b []byte, v, mask uint32) []byte {
	b = appendIPv4(b, v)
	if mask != 0xffffffff {
		if n := bits.LeadingZeros32(^mask); mask<<n == 0 {
			return fmt.Appendf(b, "/%d", n)
		}
		b = append(b, '/')
		b = appendIPv4(b, mask)
	}
	return b
}

func u128Addr6(v U128) netip.Addr {
	var a [16]byte
	for i := 0; i < 8; i++ {
		a[i] = byte(v.Hi >> (56 - 8*i))
		a[8+i] = byte(v.Lo >> (56 - 8*i))
	}
	return netip.AddrFrom16(a)
}

// appendIPv6Masked prints as ipv6_format_masked.
func appendIPv6Masked(b []byte, v, mask U128) []byte {
	b = u128Addr6(v).AppendTo(b)
	if mask != ones(128) {
		n := bits.LeadingZeros64(^mask.Hi)
		if n == 64 {
			n += bits.LeadingZeros64(^mask.Lo)
		}
		if ones(128).and(ones(128-uint(n)).not()) == mask {
			return fmt.Appendf(b, "/%d", n)
		}
		b = append(b, '/')
		b = u128Addr6(mask).AppendTo(b)
	}
	return b
}

func appendMAC(b []byte, v uint64) []byte {
	return fmt.Appendf(b, "%02x:%02x:%02x:%02x:%02x:%02x",
		byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func appendMACMasked(b []byte, v, mask uint64) []byte {
	b = appendMAC(b, v)
	if mask != 1<<48-1 {
		b = append(b, '/')
		b = appendMAC(b, mask)
	}
	return b
}

// appendFieldValue prints a field's value (and partial mask) as mf_format does.
func appendFieldValue(b []byte, f Field, v, mask U128) []byte {
	fi := &fieldInfos[f]
	full := mask == f.fullMask()
	switch fi.format {
	case fmtIPv4:
		return appendIPv4Masked(b, uint32(v.Lo), uint32(mask.Lo))
	case fmtIPv6:
		return appendIPv6Masked(b, v, mask)
	case fmtEthernet:
		return appendMACMasked(b, v.Lo, mask.Lo)
	case fmtPort:
		if full {
			return appendPort(b, uint32(v.Lo))
		}
	case fmtHex:
		b = appendHexU128(b, v)
		if !full {
			b = append(b, '/')
			b = appendHexU128(b, mask)
		}
		return b
	}
	b = fmt.Appendf(b, "%d", v.Lo)
	if !full {
		b = append(b, '/')
		b = appendHexU128(b, mask)
	}
	return b
}

var ctStateNames = [8]string{"new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"}

var tcpFlagNames = [12]string{"fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]"}

// appendFlagsMasked prints flags as format_flags / format_flags_masked.
func appendFlagsMasked(b []byte, names []string, v, mask, max uint32) []byte {
	if mask == max {
		if v == 0 {
			return append(b, '0')
		}
		first := true
		for i, n := range names {
			if v&(1<<i) != 0 {
				if !first {
					b = append(b, '|')
				}
				b = append(b, n...)
				first = false
			}
		}
		return b
	}
	if mask == 0 {
		return append(b, "0/0"...)
	}
	for i, n := range names {
		if mask&(1<<i) == 0 {
			continue
		}
		if v&(1<<i) != 0 {
			b = append(b, '+')
		} else {
			b = append(b, '-')
		}
		b = append(b, n...)
	}
	return b
}

// matchText prints a match as Open vSwitch's match_format, with priority.
type matchText struct {
	fields []MatchField
}

func (t *matchText) get(f Field) (MatchField, bool) {
	for _, mf := range t.fields {
		if mf.Field == f {
			return mf, true
		}
	}
	return MatchField{}, false
}

func (t *matchText) u(f Field) (v, mask uint64, ok bool) {
	mf, ok := t.get(f)
	return mf.Value.Lo, mf.Mask.Lo, ok
}

// appendMatchText appends the match (and priority when not the default) the
// way match_format does, without a trailing comma.
func appendMatchText(b []byte, m *Match, priority uint16) []byte {
	var buf [16]MatchField
	t := matchText{fields: m.effective(buf[:0])}
	start := len(b)
	if priority != defaultPriority {
		b = fmt.Appendf(b, "priority=%d,", priority)
	}
	hex32 := func(name string, f Field) {
		if v, mask, ok := t.u(f); ok {
			b = append(b, name...)
			b = append(b, '=')
			b = appendCHex(b, v)
			if mask != 0xffffffff {
				b = append(b, '/')
				b = appendCHex(b, mask)
			}
			b = append(b, ',')
		}
	}
	hex64 := func(name string, f Field) {
		if v, mask, ok := t.u(f); ok {
			b = append(b, name...)
			b = append(b, '=')
			b = appendCHex(b, v)
			if mask != ^uint64(0) {
				b = append(b, '/')
				b = appendCHex(b, mask)
			}
			b = append(b, ',')
		}
	}
	dec16 := func(name string, f Field) {
		if v, mask, ok := t.u(f); ok {
			if mask == f.fullMask().Lo {
				b = fmt.Appendf(b, "%s=%d,", name, v)
			} else {
				b = fmt.Appendf(b, "%s=0x%x/0x%x,", name, v, mask)
			}
		}
	}
	ip4 := func(name string, f Field) {
		if v, mask, ok := t.u(f); ok {
			b = append(b, name...)
			b = append(b, '=')
			b = appendIPv4Masked(b, uint32(v), uint32(mask))
			b = append(b, ',')
		}
	}
	ip6 := func(name string, f Field) {
		if mf, ok := t.get(f); ok {
			b = append(b, name...)
			b = append(b, '=')
			b = appendIPv6Masked(b, mf.Value, mf.Mask)
			b = append(b, ',')
		}
	}
	eth := func(name string, f Field) {
		if v, mask, ok := t.u(f); ok {
			b = append(b, name...)
			b = append(b, '=')
			b = appendMACMasked(b, v, mask)
			b = append(b, ',')
		}
	}

	hex32("pkt_mark", FieldPktMark)
	if v, _, ok := t.u(FieldConjID); ok {
		b = fmt.Appendf(b, "conj_id=%d,", v)
	}
	if v, mask, ok := t.u(FieldCTState); ok && mask&0xff != 0 {
		b = append(b, "ct_state="...)
		b = appendFlagsMasked(b, ctStateNames[:], uint32(v&0xff), uint32(mask&0xff), 0xff)
		b = append(b, ',')
	}
	if v, _, ok := t.u(FieldCTZone); ok {
		b = fmt.Appendf(b, "ct_zone=%d,", v)
	}
	hex32("ct_mark", FieldCTMark)
	if mf, ok := t.get(FieldCTLabel); ok {
		b = append(b, "ct_label="...)
		b = appendHexU128(b, mf.Value)
		if mf.Mask != ones(128) {
			b = append(b, '/')
			b = appendHexU128(b, mf.Mask)
		}
		b = append(b, ',')
	}
	ip4("ct_nw_src", FieldCTNwSrc)
	ip6("ct_ipv6_src", FieldCTIPv6Src)
	ip4("ct_nw_dst", FieldCTNwDst)
	ip6("ct_ipv6_dst", FieldCTIPv6Dst)
	if v, _, ok := t.u(FieldCTNwProto); ok {
		b = fmt.Appendf(b, "ct_nw_proto=%d,", v)
		dec16("ct_tp_src", FieldCTTpSrc)
		dec16("ct_tp_dst", FieldCTTpDst)
	}

	ethType, _, hasEthType := t.u(FieldEthType)
	proto, _, hasProto := t.u(FieldIPProto)
	skipType, skipProto := false, false
	if hasEthType {
		skipType = true
		switch uint16(ethType) {
		case EthTypeIPv4, EthTypeIPv6:
			v6 := uint16(ethType) == EthTypeIPv6
			name := ""
			if hasProto {
				skipProto = true
				switch uint8(proto) {
				case IPProtoICMP:
					if !v6 {
						name = "icmp"
					}
				case IPProtoICMPv6:
					if v6 {
						name = "icmp6"
					}
				case IPProtoTCP:
					name = "tcp"
				case IPProtoUDP:
					name = "udp"
				case IPProtoSCTP:
					name = "sctp"
				}
				if name == "" {
					skipProto = false
				} else if v6 && name != "icmp6" {
					name += "6"
				}
			}
			if name == "" {
				name = "ip"
				if v6 {
					name = "ipv6"
				}
			}
			b = append(b, name...)
			b = append(b, ',')
		case EthTypeARP:
			b = append(b, "arp,"...)
		case EthTypeRARP:
			b = append(b, "rarp,"...)
		case 0x8847:
			b = append(b, "mpls,"...)
		case 0x8848:
			b = append(b, "mplsm,"...)
		default:
			skipType = false
		}
	}
	// Registers, with xxreg<n> shown as the four 32-bit registers it spans.
	var regV, regM [16]uint32
	for i := 0; i < 4; i++ {
		if mf, ok := t.get(XXReg(i)); ok {
			for j := 0; j < 4; j++ {
				sh := uint(96 - 32*j)
				regV[4*i+j] = uint32(mf.Value.shr(sh).Lo)
				regM[4*i+j] = uint32(mf.Mask.shr(sh).Lo)
			}
		}
	}
	for i := 0; i < 16; i++ {
		if v, mask, ok := t.u(Reg(i)); ok {
			regV[i], regM[i] = uint32(v), uint32(mask)
		}
		if regM[i] != 0 {
			b = fmt.Appendf(b, "reg%d=", i)
			b = appendCHex(b, uint64(regV[i]))
			if regM[i] != 0xffffffff {
				b = append(b, '/')
				b = appendCHex(b, uint64(regM[i]))
			}
			b = append(b, ',')
		}
	}
	hex64("tun_id", FieldTunID)
	ip4("tun_src", FieldTunSrc)
	ip4("tun_dst", FieldTunDst)
	ip6("tun_ipv6_src", FieldTunIPv6Src)
	ip6("tun_ipv6_dst", FieldTunIPv6Dst)
	hex64("metadata", FieldMetadata)
	if v, _, ok := t.u(FieldInPort); ok {
		b = append(b, "in_port="...)
		b = appendPort(b, uint32(v))
		b = append(b, ',')
	}
	b = appendVlanText(b, &t)
	eth("dl_src", FieldEthSrc)
	eth("dl_dst", FieldEthDst)
	if !skipType && hasEthType {
		b = fmt.Appendf(b, "dl_type=0x%04x,", ethType)
	}
	switch uint16(ethType) {
	case EthTypeIPv6:
		ip6("ipv6_src", FieldIPv6Src)
		ip6("ipv6_dst", FieldIPv6Dst)
		if v, mask, ok := t.u(FieldIPv6Label); ok {
			if mask == 0xffffffff {
				b = fmt.Appendf(b, "ipv6_label=0x%05x,", v)
			} else {
				b = fmt.Appendf(b, "ipv6_label=0x%05x/0x%05x,", v, mask)
			}
		}
	case EthTypeARP, EthTypeRARP:
		ip4("arp_spa", FieldARPSpa)
		ip4("arp_tpa", FieldARPTpa)
	default:
		ip4("nw_src", FieldIPv4Src)
		ip4("nw_dst", FieldIPv4Dst)
	}
	isARP := uint16(ethType) == EthTypeARP || uint16(ethType) == EthTypeRARP
	if isARP {
		if v, _, ok := t.u(FieldARPOp); ok {
			b = fmt.Appendf(b, "arp_op=%d,", v)
		}
	}
	if !skipProto && hasProto {
		b = fmt.Appendf(b, "nw_proto=%d,", proto)
	}
	if isARP {
		eth("arp_sha", FieldARPSha)
		eth("arp_tha", FieldARPTha)
	}
	if v, _, ok := t.u(FieldIPDSCP); ok {
		b = fmt.Appendf(b, "nw_tos=%d,", v<<2)
	}
	if v, _, ok := t.u(FieldIPECN); ok {
		b = fmt.Appendf(b, "nw_ecn=%d,", v)
	}
	if v, _, ok := t.u(FieldIPTTL); ok {
		b = fmt.Appendf(b, "nw_ttl=%d,", v)
	}
	if v, mask, ok := t.u(FieldIPFrag); ok {
		b = fmt.Appendf(b, "nw_frag=%s,", ipFragText(uint8(v), uint8(mask)))
	}
	switch {
	case uint16(ethType) == EthTypeIPv4 && uint8(proto) == IPProtoICMP && hasProto:
		dec16("icmp_type", FieldICMPv4Type)
		dec16("icmp_code", FieldICMPv4Code)
	case uint16(ethType) == EthTypeIPv6 && uint8(proto) == IPProtoICMPv6 && hasProto:
		dec16("icmp_type", FieldICMPv6Type)
		dec16("icmp_code", FieldICMPv6Code)
		ip6("nd_target", FieldNDTarget)
		eth("nd_sll", FieldNDSLL)
		eth("nd_tll", FieldNDTLL)
	default:
		for _, f := range [...]Field{FieldTCPSrc, FieldUDPSrc, FieldSCTPSrc} {
			dec16("tp_src", f)
		}
		for _, f := range [...]Field{FieldTCPDst, FieldUDPDst, FieldSCTPDst} {
			dec16("tp_dst", f)
		}
	}
	if v, mask, ok := t.u(FieldTCPFlags); ok && uint8(proto) == IPProtoTCP {
		b = append(b, "tcp_flags="...)
		b = appendFlagsMasked(b, tcpFlagNames[:], uint32(v), uint32(mask), 0xfff)
		b = append(b, ',')
	}
	if len(b) > start && b[len(b)-1] == ',' {
		b = b[:len(b)-1]
	}
	return b
}

// appendVlanText prints VLAN matches as match_format does for the first tag.
func appendVlanText(b []byte, t *matchText) []byte {
	var tci, mask uint16
	if v, m, ok := t.u(FieldVlanTCI); ok {
		tci, mask = uint16(v), uint16(m)
	}
	if v, m, ok := t.u(FieldVlanVID); ok {
		// OXM vlan_vid carries OFPVID_PRESENT where the TCI has CFI.
		tci = tci&^0x1fff | uint16(v)&0x1fff
		mask = mask&^0x1fff | uint16(m)&0x1fff
	}
	if v, _, ok := t.u(FieldVlanPCP); ok {
		tci = tci&^0xe000 | uint16(v&7)<<13
		mask |= 0xe000
	}
	if mask == 0 {
		return b
	}
	vidMask, pcpMask, cfi := mask&0x0fff, mask&0xe000, mask&0x1000
	if cfi != 0 && tci&0x1000 != 0 && (vidMask == 0 || vidMask == 0xfff) && (pcpMask == 0 || pcpMask == 0xe000) && (vidMask|pcpMask) != 0 {
		if vidMask != 0 {
			b = fmt.Appendf(b, "dl_vlan=%d,", tci&0xfff)
		}
		if pcpMask != 0 {
			b = fmt.Appendf(b, "dl_vlan_pcp=%d,", tci>>13)
		}
		return b
	}
	if mask == 0xffff {
		return fmt.Appendf(b, "vlan_tci=0x%04x,", tci)
	}
	return fmt.Appendf(b, "vlan_tci=0x%04x/0x%04x,", tci, mask)
}

// String prints the match as ovs-ofctl does (with the implied prerequisites).
func (m *Match) String() string { return string(appendMatchText(nil, m, defaultPriority)) }

// ipFragText is how Open vSwitch prints nw_frag (match.c, match_format).
func ipFragText(v, mask uint8) string {
	switch mask {
	case IPFragAny | IPFragLater:
		switch v {
		case IPFragAny | IPFragLater:
			return "later"
		case IPFragAny:
			return "first"
		case 0:
			return "no"
		}
		return "<error>"
	case IPFragAny:
		if v&IPFragAny != 0 {
			return "yes"
		}
		return "no"
	default:
		if v&IPFragLater != 0 {
			return "later"
		}
		return "not_later"
	}
}
