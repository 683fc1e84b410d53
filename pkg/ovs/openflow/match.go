package openflow

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
)

// Conntrack state bits of ct_state (Open vSwitch's CS_* in lib/packets.h).
const (
	CTStateNew  uint32 = 0x01
	CTStateEst  uint32 = 0x02
	CTStateRel  uint32 = 0x04
	CTStateRpl  uint32 = 0x08
	CTStateInv  uint32 = 0x10
	CTStateTrk  uint32 = 0x20
	CTStateSNAT uint32 = 0x40
	CTStateDNAT uint32 = 0x80
)

// TCP flag bits of tcp_flags.
const (
	TCPFlagFIN uint16 = 0x001
	TCPFlagSYN uint16 = 0x002
	TCPFlagRST uint16 = 0x004
	TCPFlagPSH uint16 = 0x008
	TCPFlagACK uint16 = 0x010
	TCPFlagURG uint16 = 0x020
	TCPFlagECE uint16 = 0x040
	TCPFlagCWR uint16 = 0x080
	TCPFlagNS  uint16 = 0x100
)

// Ethernet types and IP protocols the match shortcuts (ip, tcp, arp, …) name.
const (
	EthTypeIPv4 uint16 = 0x0800
	EthTypeARP  uint16 = 0x0806
	EthTypeIPv6 uint16 = 0x86dd
	EthTypeRARP uint16 = 0x8035
	EthTypeVLAN uint16 = 0x8100

	IPProtoICMP   uint8 = 1
	IPProtoTCP    uint8 = 6
	IPProtoUDP    uint8 = 17
	IPProtoICMPv6 uint8 = 58
	IPProtoSCTP   uint8 = 132
)

// vlanPresent is OFPVID_PRESENT: set in vlan_vid when the packet has a VLAN tag.
const vlanPresent uint16 = 0x1000

// MatchField is one field of a match: a value and the mask of bits that
// matter (the value is kept with the bits outside the mask cleared).
type MatchField struct {
	Field Field
	Value U128
	Mask  U128
}

// Match is the set of fields a flow matches on. The zero value matches every
// packet. Fields are kept in encoding order, each at most once; setting a
// field again replaces it. The prerequisites Open vSwitch requires (eth_type
// for IP fields, ip_proto for TCP ports, …) need not be set: they are implied
// from the fields present when the match is encoded or printed.
type Match struct {
	fields []MatchField
}

// NewMatch returns an empty match with room for n fields.
func NewMatch(n int) Match { return Match{fields: make([]MatchField, 0, n)} }

// Fields returns the explicitly set fields in encoding order (not a copy).
func (m *Match) Fields() []MatchField { return m.fields }

// Len is the number of explicitly set fields.
func (m *Match) Len() int { return len(m.fields) }

// Get returns the field f if it is set.
func (m *Match) Get(f Field) (MatchField, bool) {
	for _, mf := range m.fields {
		if mf.Field == f {
			return mf, true
		}
	}
	return MatchField{}, false
}

// Clone returns a deep copy.
func (m Match) Clone() Match {
	return Match{fields: append([]MatchField(nil), m.fields...)}
}

// Equal reports whether two matches set the same fields to the same values.
func (m *Match) Equal(o *Match) bool {
	if len(m.fields) != len(o.fields) {
		return false
	}
	for i := range m.fields {
		if m.fields[i] != o.fields[i] {
			return false
		}
	}
	return true
}

// SetMasked sets field f to value under mask; a zero mask removes the field.
func (m *Match) SetMasked(f Field, value, mask U128) *Match {
	mask = mask.and(f.fullMask())
	i := 0
	for i < len(m.fields) && m.fields[i].Field < f {
		i++
	}
	if mask.IsZero() {
		if i < len(m.fields) && m.fields[i].Field == f {
			m.fields = append(m.fields[:i], m.fields[i+1:]...)
		}
		return m
	}
	mf := MatchField{Field: f, Value: value.and(mask), Mask: mask}
	if i < len(m.fields) && m.fields[i].Field == f {
		m.fields[i] = mf
		return m
	}
	if m.fields == nil {
		// Most flows match on a handful of fields: one allocation for them.
		m.fields = make([]MatchField, 0, 4)
	}
	m.fields = append(m.fields, MatchField{})
	copy(m.fields[i+1:], m.fields[i:])
	m.fields[i] = mf
	return m
}

// Set sets field f to value exactly.
func (m *Match) Set(f Field, value U128) *Match { return m.SetMasked(f, value, f.fullMask()) }

// Delete removes field f.
func (m *Match) Delete(f Field) *Match { return m.SetMasked(f, U128{}, U128{}) }

func (m *Match) setUint(f Field, v uint64) *Match { return m.Set(f, U64(v)) }

func (m *Match) setUintMasked(f Field, v, mask uint64) *Match {
	return m.SetMasked(f, U64(v), U64(mask))
}

func macU128(mac net.HardwareAddr) U128 {
	if len(mac) != 6 {
		return U128{}
	}
	return u128From(mac)
}

func addrU128(a netip.Addr) U128 {
	if a.Is4() {
		b := a.As4()
		return u128From(b[:])
	}
	b := a.As16()
	return u128From(b[:])
}

func prefixMask(p netip.Prefix) U128 {
	n := uint(32)
	if !p.Addr().Is4() {
		n = 128
	}
	bitsSet := uint(p.Bits())
	if p.Bits() < 0 {
		bitsSet = n
	}
	return ones(n).and(ones(n - bitsSet).not())
}

// InPort matches the OpenFlow ingress port.
func (m *Match) InPort(port uint32) *Match { return m.setUint(FieldInPort, uint64(port)) }

// EthSrc matches the Ethernet source address.
func (m *Match) EthSrc(mac net.HardwareAddr) *Match { return m.Set(FieldEthSrc, macU128(mac)) }

// EthSrcMasked matches the Ethernet source address under a mask.
func (m *Match) EthSrcMasked(mac, mask net.HardwareAddr) *Match {
	return m.SetMasked(FieldEthSrc, macU128(mac), macU128(mask))
}

// EthDst matches the Ethernet destination address.
func (m *Match) EthDst(mac net.HardwareAddr) *Match { return m.Set(FieldEthDst, macU128(mac)) }

// EthDstMasked matches the Ethernet destination address under a mask.
func (m *Match) EthDstMasked(mac, mask net.HardwareAddr) *Match {
	return m.SetMasked(FieldEthDst, macU128(mac), macU128(mask))
}

// EthType matches the Ethernet type.
func (m *Match) EthType(t uint16) *Match { return m.setUint(FieldEthType, uint64(t)) }

// VlanVID matches packets tagged with VLAN id vid.
func (m *Match) VlanVID(vid uint16) *Match {
	return m.setUint(FieldVlanVID, uint64(vid&0xfff|vlanPresent))
}

// VlanTCI matches the 802.1Q TCI (with the CFI bit set for tagged packets) under a mask.
func (m *Match) VlanTCI(tci, mask uint16) *Match {
	return m.setUintMasked(FieldVlanTCI, uint64(tci), uint64(mask))
}

// ARPOp matches the ARP opcode.
func (m *Match) ARPOp(op uint16) *Match { return m.setUint(FieldARPOp, uint64(op)) }

// ARPSpa matches the ARP sender protocol address.
func (m *Match) ARPSpa(a netip.Addr) *Match { return m.Set(FieldARPSpa, addrU128(a)) }

// ARPSpaPrefix matches the ARP sender protocol address within a prefix.
func (m *Match) ARPSpaPrefix(p netip.Prefix) *Match {
	return m.SetMasked(FieldARPSpa, addrU128(p.Addr()), prefixMask(p))
}

// ARPTpa matches the ARP target protocol address.
func (m *Match) ARPTpa(a netip.Addr) *Match { return m.Set(FieldARPTpa, addrU128(a)) }

// ARPTpaPrefix matches the ARP target protocol address within a prefix.
func (m *Match) ARPTpaPrefix(p netip.Prefix) *Match {
	return m.SetMasked(FieldARPTpa, addrU128(p.Addr()), prefixMask(p))
}

// ARPSha matches the ARP sender hardware address.
func (m *Match) ARPSha(mac net.HardwareAddr) *Match { return m.Set(FieldARPSha, macU128(mac)) }

// ARPTha matches the ARP target hardware address.
func (m *Match) ARPTha(mac net.HardwareAddr) *Match { return m.Set(FieldARPTha, macU128(mac)) }

// IPSrc matches the IPv4 or IPv6 source address.
func (m *Match) IPSrc(a netip.Addr) *Match {
	if a.Is4() {
		return m.Set(FieldIPv4Src, addrU128(a))
	}
	return m.Set(FieldIPv6Src, addrU128(a))
}

// IPDst matches the IPv4 or IPv6 destination address.
func (m *Match) IPDst(a netip.Addr) *Match {
	if a.Is4() {
		return m.Set(FieldIPv4Dst, addrU128(a))
	}
	return m.Set(FieldIPv6Dst, addrU128(a))
}

// IPSrcPrefix matches an IPv4 or IPv6 source prefix.
func (m *Match) IPSrcPrefix(p netip.Prefix) *Match {
	if p.Addr().Is4() {
		return m.SetMasked(FieldIPv4Src, addrU128(p.Addr()), prefixMask(p))
	}
	return m.SetMasked(FieldIPv6Src, addrU128(p.Addr()), prefixMask(p))
}

// IPDstPrefix matches an IPv4 or IPv6 destination prefix.
func (m *Match) IPDstPrefix(p netip.Prefix) *Match {
	if p.Addr().Is4() {
		return m.SetMasked(FieldIPv4Dst, addrU128(p.Addr()), prefixMask(p))
	}
	return m.SetMasked(FieldIPv6Dst, addrU128(p.Addr()), prefixMask(p))
}

// IPProto matches the IP protocol.
func (m *Match) IPProto(p uint8) *Match { return m.setUint(FieldIPProto, uint64(p)) }

// IPDSCP matches the DSCP (the six high bits of the IPv4 TOS / IPv6 traffic class), 0..63.
func (m *Match) IPDSCP(dscp uint8) *Match { return m.setUint(FieldIPDSCP, uint64(dscp&0x3f)) }

// IPTTL matches the IPv4 TTL / IPv6 hop limit.
func (m *Match) IPTTL(ttl uint8) *Match { return m.setUint(FieldIPTTL, uint64(ttl)) }

// The bits of nw_frag (meta-flow.h FLOW_NW_FRAG_*): IPFragAny is set in
// every fragment, IPFragLater in every fragment but the first.
const (
	IPFragAny   uint8 = 1
	IPFragLater uint8 = 2
)

// IPFrag matches the fragment bits under mask: (IPFragAny, IPFragAny) is
// ovs-ofctl's nw_frag=yes, (0, IPFragAny) nw_frag=no, (IPFragAny,
// IPFragAny|IPFragLater) nw_frag=first, (IPFragLater, IPFragLater)
// nw_frag=later. Unlike the other IP fields it implies no IP version.
func (m *Match) IPFrag(bits, mask uint8) *Match {
	return m.setUintMasked(FieldIPFrag, uint64(bits), uint64(mask))
}

// TCPSrc matches the TCP source port.
func (m *Match) TCPSrc(port uint16) *Match { return m.setUint(FieldTCPSrc, uint64(port)) }

// TCPDst matches the TCP destination port.
func (m *Match) TCPDst(port uint16) *Match { return m.setUint(FieldTCPDst, uint64(port)) }

// TCPSrcMasked matches the TCP source port under a mask (port ranges).
func (m *Match) TCPSrcMasked(port, mask uint16) *Match {
	return m.setUintMasked(FieldTCPSrc, uint64(port), uint64(mask))
}

// TCPDstMasked matches the TCP destination port under a mask (port ranges).
func (m *Match) TCPDstMasked(port, mask uint16) *Match {
	return m.setUintMasked(FieldTCPDst, uint64(port), uint64(mask))
}

// TCPFlags matches TCP flags (TCPFlag*) under a mask.
func (m *Match) TCPFlags(flags, mask uint16) *Match {
	return m.setUintMasked(FieldTCPFlags, uint64(flags), uint64(mask))
}

// UDPSrc matches the UDP source port.
func (m *Match) UDPSrc(port uint16) *Match { return m.setUint(FieldUDPSrc, uint64(port)) }

// UDPDst matches the UDP destination port.
func (m *Match) UDPDst(port uint16) *Match { return m.setUint(FieldUDPDst, uint64(port)) }

// UDPSrcMasked matches the UDP source port under a mask.
func (m *Match) UDPSrcMasked(port, mask uint16) *Match {
	return m.setUintMasked(FieldUDPSrc, uint64(port), uint64(mask))
}

// UDPDstMasked matches the UDP destination port under a mask.
func (m *Match) UDPDstMasked(port, mask uint16) *Match {
	return m.setUintMasked(FieldUDPDst, uint64(port), uint64(mask))
}

// SCTPSrc matches the SCTP source port.
func (m *Match) SCTPSrc(port uint16) *Match { return m.setUint(FieldSCTPSrc, uint64(port)) }

// SCTPDst matches the SCTP destination port.
func (m *Match) SCTPDst(port uint16) *Match { return m.setUint(FieldSCTPDst, uint64(port)) }

// SCTPSrcMasked matches the SCTP source port under a mask.
func (m *Match) SCTPSrcMasked(port, mask uint16) *Match {
	return m.setUintMasked(FieldSCTPSrc, uint64(port), uint64(mask))
}

// SCTPDstMasked matches the SCTP destination port under a mask.
func (m *Match) SCTPDstMasked(port, mask uint16) *Match {
	return m.setUintMasked(FieldSCTPDst, uint64(port), uint64(mask))
}

// ICMPType matches the ICMPv4 type.
func (m *Match) ICMPType(t uint8) *Match { return m.setUint(FieldICMPv4Type, uint64(t)) }

// ICMPCode matches the ICMPv4 code.
func (m *Match) ICMPCode(c uint8) *Match { return m.setUint(FieldICMPv4Code, uint64(c)) }

// ICMPv6Type matches the ICMPv6 type.
func (m *Match) ICMPv6Type(t uint8) *Match { return m.setUint(FieldICMPv6Type, uint64(t)) }

// NDTarget matches the target address of an IPv6 Neighbor Solicitation or
// Advertisement (nd_target; needs icmp6 and its ICMPv6 type).
func (m *Match) NDTarget(a netip.Addr) *Match { return m.Set(FieldNDTarget, addrU128(a)) }

// NDTargetPrefix matches an IPv6 prefix of the neighbour discovery target.
func (m *Match) NDTargetPrefix(p netip.Prefix) *Match {
	return m.SetMasked(FieldNDTarget, addrU128(p.Addr()), prefixMask(p))
}

// ICMPv6Code matches the ICMPv6 code.
func (m *Match) ICMPv6Code(c uint8) *Match { return m.setUint(FieldICMPv6Code, uint64(c)) }

// Reg matches the whole 32-bit register reg<n>.
func (m *Match) Reg(n int, v uint32) *Match { return m.setUint(Reg(n), uint64(v)) }

// RegMasked matches register reg<n> under a mask.
func (m *Match) RegMasked(n int, v, mask uint32) *Match {
	return m.setUintMasked(Reg(n), uint64(v), uint64(mask))
}

// RegRange matches bits [r.Start, r.End] of a field (usually a register)
// against v, given unshifted: RegRange(Reg(0).Range(16, 31), 5) matches
// reg0=0x50000/0xffff0000.
func (m *Match) RegRange(r FieldRange, v uint64) *Match {
	mask := bitRange(uint(r.Start), uint(r.End))
	return m.SetMasked(r.Field, U64(v).shl(uint(r.Start)).and(mask), mask)
}

// XXReg matches the 128-bit register xxreg<n> under a mask.
func (m *Match) XXReg(n int, v, mask U128) *Match { return m.SetMasked(XXReg(n), v, mask) }

// CTState matches conntrack state bits (CTState*) under a mask: CTState(CTStateTrk|CTStateEst,
// CTStateTrk|CTStateEst|CTStateNew) is "+trk+est-new".
func (m *Match) CTState(state, mask uint32) *Match {
	return m.setUintMasked(FieldCTState, uint64(state), uint64(mask))
}

// CTZone matches the conntrack zone.
func (m *Match) CTZone(zone uint16) *Match { return m.setUint(FieldCTZone, uint64(zone)) }

// CTMark matches the conntrack mark under a mask.
func (m *Match) CTMark(mark, mask uint32) *Match {
	return m.setUintMasked(FieldCTMark, uint64(mark), uint64(mask))
}

// CTLabel matches the 128-bit conntrack label under a mask.
func (m *Match) CTLabel(label, mask U128) *Match { return m.SetMasked(FieldCTLabel, label, mask) }

// CTNwProto matches the IP protocol of the conntrack original direction.
func (m *Match) CTNwProto(p uint8) *Match { return m.setUint(FieldCTNwProto, uint64(p)) }

// CTNwSrc matches the conntrack original-direction source address (IPv4 or IPv6) within a prefix.
func (m *Match) CTNwSrc(p netip.Prefix) *Match {
	if p.Addr().Is4() {
		return m.SetMasked(FieldCTNwSrc, addrU128(p.Addr()), prefixMask(p))
	}
	return m.SetMasked(FieldCTIPv6Src, addrU128(p.Addr()), prefixMask(p))
}

// CTNwDst matches the conntrack original-direction destination address within a prefix.
func (m *Match) CTNwDst(p netip.Prefix) *Match {
	if p.Addr().Is4() {
		return m.SetMasked(FieldCTNwDst, addrU128(p.Addr()), prefixMask(p))
	}
	return m.SetMasked(FieldCTIPv6Dst, addrU128(p.Addr()), prefixMask(p))
}

// CTTpSrc matches the conntrack original-direction transport source port.
func (m *Match) CTTpSrc(port uint16) *Match { return m.setUint(FieldCTTpSrc, uint64(port)) }

// CTTpDst matches the conntrack original-direction transport destination port.
func (m *Match) CTTpDst(port uint16) *Match { return m.setUint(FieldCTTpDst, uint64(port)) }

// TunID matches the tunnel id (VNI).
func (m *Match) TunID(id uint64) *Match { return m.setUint(FieldTunID, id) }

// TunSrc matches the outer IPv4 source of a received tunnel packet.
func (m *Match) TunSrc(a netip.Addr) *Match { return m.Set(FieldTunSrc, addrU128(a)) }

// TunDst matches the outer IPv4 destination of a received tunnel packet.
func (m *Match) TunDst(a netip.Addr) *Match { return m.Set(FieldTunDst, addrU128(a)) }

// ConjID matches the conjunction id set by a conjunctive match.
func (m *Match) ConjID(id uint32) *Match { return m.setUint(FieldConjID, uint64(id)) }

// PktMark matches the packet mark (skb mark) under a mask.
func (m *Match) PktMark(mark, mask uint32) *Match {
	return m.setUintMasked(FieldPktMark, uint64(mark), uint64(mask))
}

// Metadata matches the OpenFlow metadata under a mask.
func (m *Match) Metadata(v, mask uint64) *Match { return m.setUintMasked(FieldMetadata, v, mask) }

// implied returns the eth_type and ip_proto the match implies (0 when none).
func (m *Match) implied() (ethType uint16, proto uint8) {
	var explicitEth, explicitProto bool
	var v6, arp, v4 bool
	for _, mf := range m.fields {
		switch mf.Field {
		case FieldEthType:
			explicitEth, ethType = true, uint16(mf.Value.Lo)
		case FieldIPProto:
			explicitProto, proto = true, uint8(mf.Value.Lo)
		case FieldIPv6Src, FieldIPv6Dst, FieldIPv6Label, FieldCTIPv6Src, FieldCTIPv6Dst:
			v6 = true
		case FieldICMPv6Type, FieldICMPv6Code, FieldNDTarget, FieldNDSLL, FieldNDTLL:
			v6 = true
			if !explicitProto {
				proto = IPProtoICMPv6
			}
		case FieldARPOp, FieldARPSpa, FieldARPTpa, FieldARPSha, FieldARPTha:
			arp = true
		case FieldIPv4Src, FieldIPv4Dst, FieldIPDSCP, FieldIPECN, FieldIPTTL, FieldCTNwSrc, FieldCTNwDst, FieldCTNwProto, FieldCTTpSrc, FieldCTTpDst:
			v4 = true
		case FieldTCPSrc, FieldTCPDst, FieldTCPFlags:
			v4 = true
			if !explicitProto {
				proto = IPProtoTCP
			}
		case FieldUDPSrc, FieldUDPDst:
			v4 = true
			if !explicitProto {
				proto = IPProtoUDP
			}
		case FieldSCTPSrc, FieldSCTPDst:
			v4 = true
			if !explicitProto {
				proto = IPProtoSCTP
			}
		case FieldICMPv4Type, FieldICMPv4Code:
			v4 = true
			if !explicitProto {
				proto = IPProtoICMP
			}
		}
	}
	if !explicitEth {
		switch {
		case v6:
			ethType = EthTypeIPv6
		case arp:
			ethType = EthTypeARP
		case v4 || proto != 0:
			ethType = EthTypeIPv4
		}
	}
	return ethType, proto
}

// effective appends to buf the fields to encode or print: the explicit ones
// plus the implied eth_type and ip_proto, in encoding order.
func (m *Match) effective(buf []MatchField) []MatchField {
	ethType, proto := m.implied()
	_, hasEth := m.Get(FieldEthType)
	_, hasProto := m.Get(FieldIPProto)
	addEth := !hasEth && ethType != 0
	addProto := !hasProto && proto != 0
	for _, mf := range m.fields {
		if addEth && mf.Field > FieldEthType {
			buf = append(buf, MatchField{FieldEthType, U64(uint64(ethType)), U64(0xffff)})
			addEth = false
		}
		if addProto && mf.Field > FieldIPProto {
			buf = append(buf, MatchField{FieldIPProto, U64(uint64(proto)), U64(0xff)})
			addProto = false
		}
		buf = append(buf, mf)
	}
	if addEth {
		buf = append(buf, MatchField{FieldEthType, U64(uint64(ethType)), U64(0xffff)})
	}
	if addProto {
		buf = append(buf, MatchField{FieldIPProto, U64(uint64(proto)), U64(0xff)})
	}
	return buf
}

// WithPrerequisites returns a copy of m with the implied eth_type and
// ip_proto set explicitly: what a switch reports back for the match.
func (m *Match) WithPrerequisites() Match {
	var buf [16]MatchField
	return Match{fields: append([]MatchField(nil), m.effective(buf[:0])...)}
}

// appendOXMFields appends the OXM TLVs of the match without the ofp_match header.
func (m *Match) AppendOXMFields(b []byte) []byte {
	var buf [16]MatchField
	for _, mf := range m.effective(buf[:0]) {
		b = appendOXM(b, mf.Field, mf.Value, mf.Mask)
	}
	return b
}

// appendOXM appends one OXM TLV: header, value, and the mask when partial.
func appendOXM(b []byte, f Field, value, mask U128) []byte {
	full := f.fullMask()
	masked := mask != full && fieldInfos[f].maskable
	b = f.appendOXMHeader(b, masked)
	n := int(fieldInfos[f].size)
	b = value.appendBytes(b, n)
	if masked {
		b = mask.appendBytes(b, n)
	}
	return b
}

// AppendMatch appends an OpenFlow 1.3+ ofp_match (type OXM) with its padding
// to a multiple of 8 bytes.
func (m *Match) AppendMatch(b []byte) []byte {
	start := len(b)
	b = append(b, 0, 1, 0, 0) // OFPMT_OXM, length filled below
	b = m.AppendOXMFields(b)
	n := len(b) - start
	binary.BigEndian.PutUint16(b[start+2:], uint16(n))
	return appendPad8(b, n)
}

// appendPad8 appends zeros so that a structure of n bytes reaches a multiple of 8.
func appendPad8(b []byte, n int) []byte {
	for ; n%8 != 0; n++ {
		b = append(b, 0)
	}
	return b
}

// DecodeMatch decodes an ofp_match (type OXM) at the start of b and returns
// it with the number of bytes it occupies including padding.
func DecodeMatch(b []byte) (Match, int, error) {
	if len(b) < 4 {
		return Match{}, 0, fmt.Errorf("openflow: ofp_match needs 4 bytes, have %d", len(b))
	}
	typ, length := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
	if typ != 1 {
		return Match{}, 0, fmt.Errorf("openflow: ofp_match type %d is not OXM", typ)
	}
	padded := (length + 7) / 8 * 8
	if length < 4 || padded > len(b) {
		return Match{}, 0, fmt.Errorf("openflow: ofp_match length %d does not fit in %d bytes", length, len(b))
	}
	m, err := decodeOXMFields(b[4:length])
	return m, padded, err
}

// decodeOXMFields decodes back-to-back OXM TLVs.
func decodeOXMFields(b []byte) (Match, error) {
	var m Match
	for len(b) > 0 {
		if n, ok, err := decodePacketReg(&m, b); ok || err != nil {
			if err != nil {
				return m, err
			}
			b = b[n:]
			continue
		}
		f, value, mask, n, err := decodeOXM(b)
		if err != nil {
			return m, err
		}
		m.SetMasked(f, value, mask)
		b = b[n:]
	}
	return m, nil
}

// decodePacketReg decodes an OXM_OF_PKT_REG<n> TLV (class
// OFPXMC_PACKET_REGS, 64 bits), as Open vSwitch reports registers in
// OpenFlow 1.5, into the two 32-bit registers it holds: reg<2n> in the high
// half, reg<2n+1> in the low half. ok is false for any other TLV.
func decodePacketReg(m *Match, b []byte) (n int, ok bool, err error) {
	class, code, hasMask, length, hdrLen, err := decodeOXMHeader(b)
	if err != nil || class != oxmClassPacketRg {
		return 0, false, nil
	}
	want := 8
	if hasMask {
		want = 16
	}
	if code > 7 || length != want || hdrLen+length > len(b) {
		return 0, true, fmt.Errorf("openflow: bad packet register OXM %d of %d bytes", code, length)
	}
	v := binary.BigEndian.Uint64(b[hdrLen:])
	mask := ^uint64(0)
	if hasMask {
		mask = binary.BigEndian.Uint64(b[hdrLen+8:])
	}
	m.SetMasked(Reg(2*int(code)), U64(v>>32), U64(mask>>32))
	m.SetMasked(Reg(2*int(code)+1), U64(v&0xffffffff), U64(mask&0xffffffff))
	return hdrLen + length, true, nil
}

// decodeOXM decodes one OXM TLV and returns the field, value, mask and its length.
func decodeOXM(b []byte) (Field, U128, U128, int, error) {
	class, code, hasMask, length, hdrLen, err := decodeOXMHeader(b)
	if err != nil {
		return 0, U128{}, U128{}, 0, err
	}
	if hdrLen+length > len(b) {
		return 0, U128{}, U128{}, 0, fmt.Errorf("openflow: OXM class 0x%04x field %d length %d exceeds %d bytes", class, code, length, len(b)-hdrLen)
	}
	f, ok := fieldByHeader(class, code)
	if class == oxmClassExperim {
		// ONFOXM_ET_TCP_FLAGS: tcp_flags as Open vSwitch sends it in OpenFlow 1.3.
		ok = binary.BigEndian.Uint32(b[4:]) == ONFExperimenter && code == 42
		f = FieldTCPFlags
	}
	if !ok {
		return 0, U128{}, U128{}, 0, fmt.Errorf("openflow: unsupported OXM class 0x%04x field %d", class, code)
	}
	payload := b[hdrLen : hdrLen+length]
	n := len(payload)
	if hasMask {
		if n%2 != 0 {
			return 0, U128{}, U128{}, 0, fmt.Errorf("openflow: masked OXM %s has odd length %d", f, n)
		}
		n /= 2
	}
	if hasMask && !fieldInfos[f].maskable {
		return 0, U128{}, U128{}, 0, fmt.Errorf("openflow: OXM %s cannot be masked", f)
	}
	if n == 0 || n > 16 {
		return 0, U128{}, U128{}, 0, fmt.Errorf("openflow: OXM %s has bad length %d", f, len(payload))
	}
	value := u128From(payload[:n])
	mask := ones(uint(n) * 8)
	if hasMask {
		mask = u128From(payload[n:])
	}
	switch {
	case class == oxmClassNXM0 && code == 0: // NXM_OF_IN_PORT: 16-bit port numbers
		value = U64(uint64(port16To32(uint16(value.Lo))))
		mask = f.fullMask()
	case class == oxmClassNXM0 && code == 5: // NXM_OF_IP_TOS: DSCP in place
		value = U64(value.Lo >> 2)
		mask = f.fullMask()
	default:
		if n != int(fieldInfos[f].size) {
			return 0, U128{}, U128{}, 0, fmt.Errorf("openflow: OXM %s has length %d, want %d", f, n, fieldInfos[f].size)
		}
	}
	return f, value, mask, hdrLen + length, nil
}

// port16To32 maps an OpenFlow 1.0 port number to the 1.1+ space (reserved
// ports 0xfff8.. become 0xfffffff8..).
func port16To32(p uint16) uint32 {
	if p >= 0xff00 {
		return uint32(p) + 0xffff0000
	}
	return uint32(p)
}
