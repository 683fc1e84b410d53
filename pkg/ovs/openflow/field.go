package openflow

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// U128 is a 128-bit value (IPv6 addresses, ct_label, xxreg). Narrower fields
// use only the low bits of Lo.
type U128 struct {
	Hi, Lo uint64
}

// U64 returns v as a U128.
func U64(v uint64) U128 { return U128{Lo: v} }

// IsZero reports whether every bit is zero.
func (u U128) IsZero() bool { return u.Hi == 0 && u.Lo == 0 }

// IPv4 reads the value's low 32 bits as an IPv4 address (nw_src,
// ct_nw_dst, tun_dst, ...).
func (u U128) IPv4() netip.Addr {
	return netip.AddrFrom4([4]byte{byte(u.Lo >> 24), byte(u.Lo >> 16), byte(u.Lo >> 8), byte(u.Lo)})
}

// IPv6 reads the value as an IPv6 address (ipv6_src, ct_ipv6_dst,
// tun_ipv6_dst, ...).
func (u U128) IPv6() netip.Addr { return u128Addr6(u) }

func (u U128) and(v U128) U128 { return U128{u.Hi & v.Hi, u.Lo & v.Lo} }
func (u U128) or(v U128) U128  { return U128{u.Hi | v.Hi, u.Lo | v.Lo} }
func (u U128) not() U128       { return U128{^u.Hi, ^u.Lo} }

// shl shifts left by n bits (n < 128).
func (u U128) shl(n uint) U128 {
	switch {
	case n == 0:
		return u
	case n >= 64:
		return U128{Hi: u.Lo << (n - 64)}
	default:
		return U128{Hi: u.Hi<<n | u.Lo>>(64-n), Lo: u.Lo << n}
	}
}

// shr shifts right by n bits (n < 128).
func (u U128) shr(n uint) U128 {
	switch {
	case n == 0:
		return u
	case n >= 64:
		return U128{Lo: u.Hi >> (n - 64)}
	default:
		return U128{Hi: u.Hi >> n, Lo: u.Lo>>n | u.Hi<<(64-n)}
	}
}

// ones returns a value with the low n bits set.
func ones(n uint) U128 {
	switch {
	case n >= 128:
		return U128{^uint64(0), ^uint64(0)}
	case n >= 64:
		return U128{Hi: 1<<(n-64) - 1, Lo: ^uint64(0)}
	default:
		return U128{Lo: 1<<n - 1}
	}
}

// bitRange returns the mask of bits [start, end] (inclusive).
func bitRange(start, end uint) U128 { return ones(end - start + 1).shl(start) }

// appendBytes appends the low n bytes of u, big endian.
func (u U128) appendBytes(b []byte, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		if i >= 8 {
			b = append(b, byte(u.Hi>>(8*(i-8))))
		} else {
			b = append(b, byte(u.Lo>>(8*i)))
		}
	}
	return b
}

// u128From reads a big-endian value of len(b) <= 16 bytes.
func u128From(b []byte) U128 {
	var u U128
	for _, c := range b {
		u.Hi = u.Hi<<8 | u.Lo>>56
		u.Lo = u.Lo<<8 | uint64(c)
	}
	return u
}

// Field names a match/set-field field known to this package. The order of the
// constants is the order in which a match encodes its fields: every field
// comes after its prerequisites (eth_type before ip_proto before tcp_dst, …),
// because Open vSwitch checks prerequisites while it decodes a match.
type Field uint8

// Fields. Registers are contiguous so that FieldReg0+n names reg<n>.
const (
	FieldInPort Field = iota
	FieldMetadata
	FieldTunID
	FieldTunSrc
	FieldTunDst
	FieldTunIPv6Src
	FieldTunIPv6Dst
	FieldPktMark
	FieldConjID
	FieldCTState
	FieldCTZone
	FieldCTMark
	FieldCTLabel
	FieldCTNwProto
	FieldCTNwSrc
	FieldCTNwDst
	FieldCTIPv6Src
	FieldCTIPv6Dst
	FieldCTTpSrc
	FieldCTTpDst
	FieldReg0
	FieldReg1
	FieldReg2
	FieldReg3
	FieldReg4
	FieldReg5
	FieldReg6
	FieldReg7
	FieldReg8
	FieldReg9
	FieldReg10
	FieldReg11
	FieldReg12
	FieldReg13
	FieldReg14
	FieldReg15
	FieldXXReg0
	FieldXXReg1
	FieldXXReg2
	FieldXXReg3
	FieldEthSrc
	FieldEthDst
	FieldEthType
	FieldVlanTCI
	FieldVlanVID
	FieldVlanPCP
	FieldARPOp
	FieldARPSpa
	FieldARPTpa
	FieldARPSha
	FieldARPTha
	FieldIPv4Src
	FieldIPv4Dst
	FieldIPv6Src
	FieldIPv6Dst
	FieldIPv6Label
	FieldIPProto
	FieldIPDSCP
	FieldIPECN
	FieldIPTTL
	FieldIPFrag
	FieldTCPSrc
	FieldTCPDst
	FieldTCPFlags
	FieldUDPSrc
	FieldUDPDst
	FieldSCTPSrc
	FieldSCTPDst
	FieldICMPv4Type
	FieldICMPv4Code
	FieldICMPv6Type
	FieldICMPv6Code
	FieldNDTarget
	FieldNDSLL
	FieldNDTLL
	numFields
)

// OXM classes (OpenFlow 1.5.1 section 7.2.3.2, enum ofp_oxm_class).
const (
	oxmClassNXM0     uint16 = 0x0000
	oxmClassNXM1     uint16 = 0x0001
	oxmClassBasic    uint16 = 0x8000
	oxmClassExperim  uint16 = 0xffff
	noCode           int16  = -1
	oxmHeaderLen            = 4
	oxmExpHeaderLen         = 8
	oxmClassPacketRg uint16 = 0x8001
)

// fieldFormat says how Open vSwitch prints a field's value (meta-flow.h "Formatting").
type fieldFormat uint8

const (
	fmtDecimal fieldFormat = iota
	fmtHex
	fmtIPv4
	fmtIPv6
	fmtEthernet
	fmtPort
	fmtCTState
	fmtTCPFlags
)

// fieldInfo describes a field: its names in Open vSwitch's text syntax, its
// size and its NXM/OXM codes (from include/openvswitch/meta-flow.h).
type fieldInfo struct {
	name     string // the name set_field and learn print ("ip_dst")
	nxmName  string // the name subfield syntax prints ("NXM_OF_IP_DST")
	size     uint8  // bytes on the wire
	nbits    uint8  // significant bits (a "[]" subfield covers them all)
	maskable bool
	format   fieldFormat
	oxm      int16 // OXM_OF_* field number in class 0x8000, or noCode
	nxmClass uint16
	nxm      int16 // NXM field number in nxmClass, or noCode
}

var fieldInfos = [numFields]fieldInfo{
	FieldInPort:     {"in_port", "OXM_OF_IN_PORT", 4, 32, false, fmtPort, 0, 0, noCode},
	FieldMetadata:   {"metadata", "OXM_OF_METADATA", 8, 64, true, fmtHex, 2, 0, noCode},
	FieldTunID:      {"tun_id", "NXM_NX_TUN_ID", 8, 64, true, fmtHex, 38, oxmClassNXM1, 16},
	FieldTunSrc:     {"tun_src", "NXM_NX_TUN_IPV4_SRC", 4, 32, true, fmtIPv4, noCode, oxmClassNXM1, 31},
	FieldTunDst:     {"tun_dst", "NXM_NX_TUN_IPV4_DST", 4, 32, true, fmtIPv4, noCode, oxmClassNXM1, 32},
	FieldTunIPv6Src: {"tun_ipv6_src", "NXM_NX_TUN_IPV6_SRC", 16, 128, true, fmtIPv6, noCode, oxmClassNXM1, 109},
	FieldTunIPv6Dst: {"tun_ipv6_dst", "NXM_NX_TUN_IPV6_DST", 16, 128, true, fmtIPv6, noCode, oxmClassNXM1, 110},
	FieldPktMark:    {"pkt_mark", "NXM_NX_PKT_MARK", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 33},
	FieldConjID:     {"conj_id", "NXM_NX_CONJ_ID", 4, 32, false, fmtDecimal, noCode, oxmClassNXM1, 37},
	FieldCTState:    {"ct_state", "NXM_NX_CT_STATE", 4, 32, true, fmtCTState, noCode, oxmClassNXM1, 105},
	FieldCTZone:     {"ct_zone", "NXM_NX_CT_ZONE", 2, 16, false, fmtHex, noCode, oxmClassNXM1, 106},
	FieldCTMark:     {"ct_mark", "NXM_NX_CT_MARK", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 107},
	FieldCTLabel:    {"ct_label", "NXM_NX_CT_LABEL", 16, 128, true, fmtHex, noCode, oxmClassNXM1, 108},
	FieldCTNwProto:  {"ct_nw_proto", "NXM_NX_CT_NW_PROTO", 1, 8, false, fmtDecimal, noCode, oxmClassNXM1, 119},
	FieldCTNwSrc:    {"ct_nw_src", "NXM_NX_CT_NW_SRC", 4, 32, true, fmtIPv4, noCode, oxmClassNXM1, 120},
	FieldCTNwDst:    {"ct_nw_dst", "NXM_NX_CT_NW_DST", 4, 32, true, fmtIPv4, noCode, oxmClassNXM1, 121},
	FieldCTIPv6Src:  {"ct_ipv6_src", "NXM_NX_CT_IPV6_SRC", 16, 128, true, fmtIPv6, noCode, oxmClassNXM1, 122},
	FieldCTIPv6Dst:  {"ct_ipv6_dst", "NXM_NX_CT_IPV6_DST", 16, 128, true, fmtIPv6, noCode, oxmClassNXM1, 123},
	FieldCTTpSrc:    {"ct_tp_src", "NXM_NX_CT_TP_SRC", 2, 16, true, fmtDecimal, noCode, oxmClassNXM1, 124},
	FieldCTTpDst:    {"ct_tp_dst", "NXM_NX_CT_TP_DST", 2, 16, true, fmtDecimal, noCode, oxmClassNXM1, 125},
	FieldReg0:       {"reg0", "NXM_NX_REG0", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 0},
	FieldReg1:       {"reg1", "NXM_NX_REG1", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 1},
	FieldReg2:       {"reg2", "NXM_NX_REG2", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 2},
	FieldReg3:       {"reg3", "NXM_NX_REG3", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 3},
	FieldReg4:       {"reg4", "NXM_NX_REG4", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 4},
	FieldReg5:       {"reg5", "NXM_NX_REG5", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 5},
	FieldReg6:       {"reg6", "NXM_NX_REG6", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 6},
	FieldReg7:       {"reg7", "NXM_NX_REG7", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 7},
	FieldReg8:       {"reg8", "NXM_NX_REG8", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 8},
	FieldReg9:       {"reg9", "NXM_NX_REG9", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 9},
	FieldReg10:      {"reg10", "NXM_NX_REG10", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 10},
	FieldReg11:      {"reg11", "NXM_NX_REG11", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 11},
	FieldReg12:      {"reg12", "NXM_NX_REG12", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 12},
	FieldReg13:      {"reg13", "NXM_NX_REG13", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 13},
	FieldReg14:      {"reg14", "NXM_NX_REG14", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 14},
	FieldReg15:      {"reg15", "NXM_NX_REG15", 4, 32, true, fmtHex, noCode, oxmClassNXM1, 15},
	FieldXXReg0:     {"xxreg0", "NXM_NX_XXREG0", 16, 128, true, fmtHex, noCode, oxmClassNXM1, 111},
	FieldXXReg1:     {"xxreg1", "NXM_NX_XXREG1", 16, 128, true, fmtHex, noCode, oxmClassNXM1, 112},
	FieldXXReg2:     {"xxreg2", "NXM_NX_XXREG2", 16, 128, true, fmtHex, noCode, oxmClassNXM1, 113},
	FieldXXReg3:     {"xxreg3", "NXM_NX_XXREG3", 16, 128, true, fmtHex, noCode, oxmClassNXM1, 114},
	FieldEthSrc:     {"eth_src", "NXM_OF_ETH_SRC", 6, 48, true, fmtEthernet, 4, oxmClassNXM0, 2},
	FieldEthDst:     {"eth_dst", "NXM_OF_ETH_DST", 6, 48, true, fmtEthernet, 3, oxmClassNXM0, 1},
	FieldEthType:    {"eth_type", "NXM_OF_ETH_TYPE", 2, 16, false, fmtHex, 5, oxmClassNXM0, 3},
	FieldVlanTCI:    {"vlan_tci", "NXM_OF_VLAN_TCI", 2, 16, true, fmtHex, noCode, oxmClassNXM0, 4},
	FieldVlanVID:    {"vlan_vid", "OXM_OF_VLAN_VID", 2, 12, true, fmtDecimal, 6, 0, noCode},
	FieldVlanPCP:    {"vlan_pcp", "OXM_OF_VLAN_PCP", 1, 3, false, fmtDecimal, 7, 0, noCode},
	FieldARPOp:      {"arp_op", "NXM_OF_ARP_OP", 2, 16, false, fmtDecimal, 21, oxmClassNXM0, 15},
	FieldARPSpa:     {"arp_spa", "NXM_OF_ARP_SPA", 4, 32, true, fmtIPv4, 22, oxmClassNXM0, 16},
	FieldARPTpa:     {"arp_tpa", "NXM_OF_ARP_TPA", 4, 32, true, fmtIPv4, 23, oxmClassNXM0, 17},
	FieldARPSha:     {"arp_sha", "NXM_NX_ARP_SHA", 6, 48, true, fmtEthernet, 24, oxmClassNXM1, 17},
	FieldARPTha:     {"arp_tha", "NXM_NX_ARP_THA", 6, 48, true, fmtEthernet, 25, oxmClassNXM1, 18},
	FieldIPv4Src:    {"ip_src", "NXM_OF_IP_SRC", 4, 32, true, fmtIPv4, 11, oxmClassNXM0, 7},
	FieldIPv4Dst:    {"ip_dst", "NXM_OF_IP_DST", 4, 32, true, fmtIPv4, 12, oxmClassNXM0, 8},
	FieldIPv6Src:    {"ipv6_src", "NXM_NX_IPV6_SRC", 16, 128, true, fmtIPv6, 26, oxmClassNXM1, 19},
	FieldIPv6Dst:    {"ipv6_dst", "NXM_NX_IPV6_DST", 16, 128, true, fmtIPv6, 27, oxmClassNXM1, 20},
	FieldIPv6Label:  {"ipv6_label", "NXM_NX_IPV6_LABEL", 4, 20, true, fmtHex, 28, oxmClassNXM1, 27},
	FieldIPProto:    {"nw_proto", "NXM_OF_IP_PROTO", 1, 8, false, fmtDecimal, 10, oxmClassNXM0, 6},
	FieldIPDSCP:     {"ip_dscp", "OXM_OF_IP_DSCP", 1, 6, false, fmtDecimal, 8, 0, noCode},
	FieldIPECN:      {"nw_ecn", "NXM_NX_IP_ECN", 1, 2, false, fmtDecimal, 9, oxmClassNXM1, 28},
	FieldIPTTL:      {"nw_ttl", "NXM_NX_IP_TTL", 1, 8, false, fmtDecimal, noCode, oxmClassNXM1, 29},
	FieldIPFrag:     {"nw_frag", "NXM_NX_IP_FRAG", 1, 2, true, fmtHex, noCode, oxmClassNXM1, 26},
	FieldTCPSrc:     {"tcp_src", "NXM_OF_TCP_SRC", 2, 16, true, fmtDecimal, 13, oxmClassNXM0, 9},
	FieldTCPDst:     {"tcp_dst", "NXM_OF_TCP_DST", 2, 16, true, fmtDecimal, 14, oxmClassNXM0, 10},
	FieldTCPFlags:   {"tcp_flags", "NXM_NX_TCP_FLAGS", 2, 12, true, fmtTCPFlags, 42, oxmClassNXM1, 34},
	FieldUDPSrc:     {"udp_src", "NXM_OF_UDP_SRC", 2, 16, true, fmtDecimal, 15, oxmClassNXM0, 11},
	FieldUDPDst:     {"udp_dst", "NXM_OF_UDP_DST", 2, 16, true, fmtDecimal, 16, oxmClassNXM0, 12},
	FieldSCTPSrc:    {"sctp_src", "OXM_OF_SCTP_SRC", 2, 16, true, fmtDecimal, 17, 0, noCode},
	FieldSCTPDst:    {"sctp_dst", "OXM_OF_SCTP_DST", 2, 16, true, fmtDecimal, 18, 0, noCode},
	FieldICMPv4Type: {"icmp_type", "NXM_OF_ICMP_TYPE", 1, 8, false, fmtDecimal, 19, oxmClassNXM0, 13},
	FieldICMPv4Code: {"icmp_code", "NXM_OF_ICMP_CODE", 1, 8, false, fmtDecimal, 20, oxmClassNXM0, 14},
	FieldICMPv6Type: {"icmpv6_type", "NXM_NX_ICMPV6_TYPE", 1, 8, false, fmtDecimal, 29, oxmClassNXM1, 21},
	FieldICMPv6Code: {"icmpv6_code", "NXM_NX_ICMPV6_CODE", 1, 8, false, fmtDecimal, 30, oxmClassNXM1, 22},
	FieldNDTarget:   {"nd_target", "NXM_NX_ND_TARGET", 16, 128, true, fmtIPv6, 31, oxmClassNXM1, 23},
	FieldNDSLL:      {"nd_sll", "NXM_NX_ND_SLL", 6, 48, true, fmtEthernet, 32, oxmClassNXM1, 24},
	FieldNDTLL:      {"nd_tll", "NXM_NX_ND_TLL", 6, 48, true, fmtEthernet, 33, oxmClassNXM1, 25},
}

// Reg returns the field of register reg<n> (0..15).
func Reg(n int) Field { return FieldReg0 + Field(n) }

// XXReg returns the field of the 128-bit register xxreg<n> (0..3).
func XXReg(n int) Field { return FieldXXReg0 + Field(n) }

// Name is the field's name in Open vSwitch's text syntax (e.g. "ip_dst").
func (f Field) Name() string {
	if f >= numFields {
		return fmt.Sprintf("field%d", f)
	}
	return fieldInfos[f].name
}

// NXMName is the field's name in subfield syntax (e.g. "NXM_NX_REG0").
func (f Field) NXMName() string {
	if f >= numFields {
		return fmt.Sprintf("field%d", f)
	}
	return fieldInfos[f].nxmName
}

// Bits is the number of significant bits of the field.
func (f Field) Bits() uint { return uint(fieldInfos[f].nbits) }

// String implements fmt.Stringer.
func (f Field) String() string { return f.Name() }

func (f Field) valid() bool { return f < numFields }

// fullMask is the mask with every significant bit of f set.
func (f Field) fullMask() U128 { return ones(uint(fieldInfos[f].size) * 8) }

// appendOXMHeader appends the 32-bit OXM/NXM header of f for a payload of
// the field's size (doubled when masked).
func (f Field) appendOXMHeader(b []byte, masked bool) []byte {
	fi := &fieldInfos[f]
	class, code := oxmClassBasic, fi.oxm
	if code == noCode {
		class, code = fi.nxmClass, fi.nxm
	}
	n := fi.size
	hm := uint32(0)
	if masked {
		n *= 2
		hm = 1
	}
	return binary.BigEndian.AppendUint32(b, uint32(class)<<16|uint32(code)<<9|hm<<8|uint32(n))
}

// oxmHeader is the 32-bit header of f without mask, as reg_move, learn and
// ct(zone=...) name a field.
func (f Field) oxmHeader() uint32 {
	return binary.BigEndian.Uint32(f.appendOXMHeader(make([]byte, 0, 4), false))
}

// fieldByHeader finds the field an OXM/NXM header names (class and field
// number, ignoring the mask bit and length).
func fieldByHeader(class uint16, code uint8) (Field, bool) {
	for i := range fieldInfos {
		fi := &fieldInfos[i]
		if class == oxmClassBasic && fi.oxm == int16(code) {
			return Field(i), true
		}
		if fi.nxm != noCode && class == fi.nxmClass && fi.nxm == int16(code) {
			return Field(i), true
		}
	}
	// NXM_OF_IN_PORT (16 bits) and NXM_OF_IP_TOS (the DSCP bits in place):
	// Open vSwitch may use either form for the same field.
	if class == oxmClassNXM0 && code == 0 {
		return FieldInPort, true
	}
	if class == oxmClassNXM0 && code == 5 {
		return FieldIPDSCP, true
	}
	return 0, false
}

// FieldByName finds a field by its name in Open vSwitch's text syntax, by an
// alias (nw_src, dl_src, tp_dst, …) or by its NXM/OXM name.
func FieldByName(name string) (Field, bool) {
	for i := range fieldInfos {
		if fieldInfos[i].name == name || fieldInfos[i].nxmName == name {
			return Field(i), true
		}
	}
	switch name {
	case "nw_src":
		return FieldIPv4Src, true
	case "nw_dst":
		return FieldIPv4Dst, true
	case "dl_src":
		return FieldEthSrc, true
	case "dl_dst":
		return FieldEthDst, true
	case "dl_type":
		return FieldEthType, true
	case "ip_proto":
		return FieldIPProto, true
	case "tunnel_id", "OXM_OF_TUNNEL_ID":
		return FieldTunID, true
	case "tun_ipv4_src":
		return FieldTunSrc, true
	case "tun_ipv4_dst":
		return FieldTunDst, true
	case "ip_ecn":
		return FieldIPECN, true
	case "in_port_oxm", "NXM_OF_IN_PORT":
		return FieldInPort, true
	}
	return 0, false
}

// FieldRange is a bit range [Start, End] of a field, as Nicira actions
// address it: NXM_NX_REG0[0..15] is FieldRange{FieldReg0, 0, 15}.
type FieldRange struct {
	Field      Field
	Start, End uint8
}

// Range returns the bit range [start, end] of f.
func (f Field) Range(start, end uint8) FieldRange { return FieldRange{f, start, end} }

// All returns the range covering every bit of f.
func (f Field) All() FieldRange { return FieldRange{f, 0, uint8(fieldInfos[f].nbits - 1)} }

// Bits is the number of bits of the range.
func (r FieldRange) Bits() uint { return uint(r.End) - uint(r.Start) + 1 }

// ofsNbits is the Nicira "ofs_nbits" encoding: offset << 6 | (n_bits - 1).
func (r FieldRange) ofsNbits() uint16 { return uint16(r.Start)<<6 | uint16(r.End-r.Start) }

func rangeFromOfsNbits(f Field, v uint16) FieldRange {
	start := uint8(v >> 6)
	return FieldRange{f, start, start + uint8(v&0x3f)}
}

// String prints the range as Open vSwitch does: NXM_NX_REG0[], NXM_NX_REG0[3],
// NXM_NX_REG0[0..15].
func (r FieldRange) String() string { return string(r.appendText(nil)) }

func (r FieldRange) appendText(b []byte) []byte {
	if !r.Field.valid() {
		return append(b, "<unknown>"...)
	}
	b = append(b, r.Field.NXMName()...)
	switch {
	case r.Start == 0 && uint(r.End) == r.Field.Bits()-1:
		return append(b, "[]"...)
	case r.Start == r.End:
		return fmt.Appendf(b, "[%d]", r.Start)
	default:
		return fmt.Appendf(b, "[%d..%d]", r.Start, r.End)
	}
}

func (r FieldRange) valid() error {
	if !r.Field.valid() || r.End < r.Start || uint(r.End) >= r.Field.Bits() {
		return fmt.Errorf("openflow: bit range %d..%d invalid for field %s", r.Start, r.End, r.Field)
	}
	return nil
}

// decodeOXMHeader splits a 32-bit OXM header; experimenter headers are 8
// bytes long and are reported with hdrLen 8.
func decodeOXMHeader(b []byte) (class uint16, code uint8, hasMask bool, length int, hdrLen int, err error) {
	if len(b) < oxmHeaderLen {
		return 0, 0, false, 0, 0, fmt.Errorf("openflow: OXM header needs 4 bytes, have %d", len(b))
	}
	h := binary.BigEndian.Uint32(b)
	class, code, hasMask, length = uint16(h>>16), uint8(h>>9)&0x7f, h&0x100 != 0, int(h&0xff)
	hdrLen = oxmHeaderLen
	if class == oxmClassExperim {
		if len(b) < oxmExpHeaderLen || length < 4 {
			return 0, 0, false, 0, 0, fmt.Errorf("openflow: short experimenter OXM header")
		}
		hdrLen = oxmExpHeaderLen
		length -= 4
	}
	return class, code, hasMask, length, hdrLen, nil
}

// fieldFromHeader32 maps a bare 32-bit header (as in reg_move) to a field.
func fieldFromHeader32(h uint32) (Field, error) {
	f, ok := fieldByHeader(uint16(h>>16), uint8(h>>9)&0x7f)
	if !ok {
		return 0, fmt.Errorf("openflow: unknown field header 0x%08x", h)
	}
	return f, nil
}
