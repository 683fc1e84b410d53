package openflow

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// nxtCTFlush is NXT_CT_FLUSH (Open vSwitch 3.1+, include/openvswitch/ofp-msgs.h:
// "NXT 1.0+ (32): struct nx_ct_flush, uint8_t[8][]").
const nxtCTFlush uint32 = 32

// TLV types of NXT_CT_FLUSH (nicira-ext.h, enum nx_ct_flush_tlv_type and
// enum nx_ct_flush_tuple_tlv_type).
const (
	ctFlushOrigTuple  uint16 = 0
	ctFlushReplyTuple uint16 = 1
	ctFlushZoneID     uint16 = 2

	ctTupleSrc     uint16 = 0
	ctTupleDst     uint16 = 1
	ctTupleSrcPort uint16 = 2
	ctTupleDstPort uint16 = 3
)

// CTTuple is one direction of a connection as conntrack records it. A zero
// field matches anything (Open vSwitch compares the fields that are set).
type CTTuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

func (t CTTuple) isZero() bool {
	return !t.Src.IsValid() && !t.Dst.IsValid() && t.SrcPort == 0 && t.DstPort == 0
}

// CTFlush is NXT_CT_FLUSH: it deletes the conntrack entries of the switch's
// datapath whose protocol, zone and tuples match (nicira-ext.h, struct
// nx_ct_flush, followed by the TLVs of the tuples and the zone). Open
// vSwitch 3.1 matches partial tuples: the fields left zero are wildcards.
// It is not bundlable: send it with Apply (the switch answers an error or
// nothing).
type CTFlush struct {
	// Protocol is the IP protocol (6 TCP, 17 UDP); 0: any.
	Protocol uint8
	// Zone is the conntrack zone; nil: every zone.
	Zone *uint16
	// Orig and Reply are the original and reply tuples; zero: any.
	Orig, Reply CTTuple
}

// MsgType implements Message.
func (m *CTFlush) MsgType() uint8 { return TypeExperimenter }

// AppendBody implements Message: the experimenter header, nx_ct_flush
// (ip_proto and 7 bytes of padding), then the tuple TLVs (properties nested
// in a property, ofp-prop.c's layout) and the zone TLV.
func (m *CTFlush) AppendBody(b []byte, _ uint8) ([]byte, error) {
	for _, a := range []netip.Addr{m.Orig.Src, m.Orig.Dst, m.Reply.Src, m.Reply.Dst} {
		if a.IsValid() && a.Zone() != "" {
			return b, fmt.Errorf("ct flush: address %s has a zone", a)
		}
	}
	b = appendExperimenter(b, NiciraExperimenter, nxtCTFlush)
	b = append(b, m.Protocol, 0, 0, 0, 0, 0, 0, 0)
	b = appendCTTuple(b, ctFlushOrigTuple, m.Orig)
	b = appendCTTuple(b, ctFlushReplyTuple, m.Reply)
	if m.Zone != nil {
		b = appendProp(b, ctFlushZoneID, be16Padded(*m.Zone))
	}
	return b, nil
}

// appendCTTuple appends a tuple as a property holding one property per set
// field (nothing for a zero tuple): addresses as 16 bytes, IPv4 mapped
// into IPv6; ports as be16 properties of length 8 (ofpprop_put_be16 pads
// 16-bit values to 4 bytes).
func appendCTTuple(b []byte, typ uint16, t CTTuple) []byte {
	if t.isZero() {
		return b
	}
	var inner []byte
	for _, f := range []struct {
		typ uint16
		a   netip.Addr
	}{{ctTupleSrc, t.Src}, {ctTupleDst, t.Dst}} {
		if f.a.IsValid() {
			v := f.a.As16() // an IPv4 address comes out as ::ffff:a.b.c.d
			inner = appendProp(inner, f.typ, v[:])
		}
	}
	for _, f := range []struct {
		typ  uint16
		port uint16
	}{{ctTupleSrcPort, t.SrcPort}, {ctTupleDstPort, t.DstPort}} {
		if f.port != 0 {
			inner = appendProp(inner, f.typ, be16Padded(f.port))
		}
	}
	// A nested property: its header, 4 bytes of padding so the nested
	// properties start 8-aligned, then them (ofpprop_start_nested).
	start := len(b)
	b = append(b, byte(typ>>8), byte(typ), 0, 0, 0, 0, 0, 0)
	b = append(b, inner...)
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

// be16Padded is a 16-bit property value as Open vSwitch writes it: the
// value and two bytes of padding, inside the property's length
// (ofpprop_put_be16).
func be16Padded(v uint16) []byte { return []byte{byte(v >> 8), byte(v), 0, 0} }

// String prints the flush as ovs-ofctl ofp-parse prints NXT_CT_FLUSH
// (after the message name and xid): "zone=Z 'orig fields,ct_nw_proto=P'
// 'reply fields'", zone 0 when none is given, an unset address as "::",
// the field names of IPv6 unless an address is IPv4.
func (m *CTFlush) String() string {
	var zone uint16
	if m.Zone != nil {
		zone = *m.Zone
	}
	v4 := false
	for _, a := range []netip.Addr{m.Orig.Src, m.Orig.Dst, m.Reply.Src, m.Reply.Dst} {
		if a.IsValid() && a.Unmap().Is4() {
			v4 = true
		}
	}
	return fmt.Sprintf("zone=%d '%s,ct_nw_proto=%d' '%s'", zone, m.Orig.format(v4), m.Protocol, m.Reply.format(v4))
}

func (t CTTuple) format(v4 bool) string {
	addr := func(a netip.Addr) string {
		if !a.IsValid() {
			return "::"
		}
		return a.Unmap().String()
	}
	name := "ipv6"
	if v4 {
		name = "nw"
	}
	return fmt.Sprintf("ct_%s_src=%s,ct_%s_dst=%s,ct_tp_src=%d,ct_tp_dst=%d", name, addr(t.Src), name, addr(t.Dst), t.SrcPort, t.DstPort)
}
