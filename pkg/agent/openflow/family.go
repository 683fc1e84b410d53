package openflow

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"

	"antrea.io/antrea/pkg/agent/types"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// The IP family is a parameter of every flow that matches IP packets: a
// flow about an address takes its family from the address (ethTypeOf,
// binding.Match.IPDst and the like pick the IPv4 or IPv6 field), a fixed
// flow is built once per family the node carries (NodeConfig.families), and
// a register that holds an address has a field per family
// (endpointIPField). The pipeline realizes both families (issue 33); which
// of them a node carries is the families of its gateway's addresses
// (NodeConfig.GatewayIP and GatewayIPv6): an IPv4 node's flows are those of
// IPv4 alone, a dual-stack node's add IPv6's beside them.

// Realizes reports whether the pipeline realizes family f: IPv4 and IPv6
// (a node carries those it has a gateway address of, NodeConfig.families).
// The agent's policy controller asks it too.
func Realizes(f types.IPFamily) bool { return f == types.IPv4 || f == types.IPv6 }

// checkCarried refuses an address of a family the node does not carry
// (its gateway has no address of it; an IPv4 node and an IPv6 Service),
// naming what it is (what) and the family.
func (d *datapath) checkCarried(what string, a netip.Addr) error {
	f := types.FamilyOf(a)
	if n := d.node.Load(); !Realizes(f) || (n != nil && !n.gatewayIP(f).IsValid()) {
		return fmt.Errorf("%s %s: this node carries no %s (its gateway has no %s address)", what, a, f, f)
	}
	return nil
}

// families are the IP families the node's pipeline carries: those of its
// gateway addresses that the pipeline realizes.
func (n *NodeConfig) families() []types.IPFamily {
	return types.Families(func(f types.IPFamily) bool { return n.gatewayIP(f).IsValid() && Realizes(f) })
}

// ethType is the EtherType of family f's packets.
func ethType(f types.IPFamily) uint16 {
	return types.ByFamily(f, binding.EthTypeIPv4, binding.EthTypeIPv6)
}

// ethTypeOf is the EtherType of the packets of an address's family.
func ethTypeOf(a netip.Addr) uint16 { return ethType(types.FamilyOf(a)) }

// ipSrcField and ipDstField are family f's source and destination address
// fields (nw_src and ipv6_src, …).
func ipSrcField(f types.IPFamily) binding.Field {
	return types.ByFamily(f, binding.FieldIPv4Src, binding.FieldIPv6Src)
}

func ipDstField(f types.IPFamily) binding.Field {
	return types.ByFamily(f, binding.FieldIPv4Dst, binding.FieldIPv6Dst)
}

// addr is ip as a netip.Addr of its family (4 bytes for IPv4).
func addr(ip net.IP) netip.Addr { return types.Addr(ip) }

// prefix is n as a netip.Prefix of its family.
func prefix(n *net.IPNet) netip.Prefix {
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(addr(n.IP), ones)
}

// addrValue is an address as a field value: 32 bits for IPv4, 128 for IPv6.
func addrValue(a netip.Addr) binding.U128 {
	if a.Is4() {
		v := a.As4()
		return binding.U64(uint64(binary.BigEndian.Uint32(v[:])))
	}
	v := a.As16()
	return binding.U128{Hi: binary.BigEndian.Uint64(v[:8]), Lo: binary.BigEndian.Uint64(v[8:])}
}

// valueAddr is addrValue's inverse for family f.
func valueAddr(f types.IPFamily, v binding.U128) netip.Addr {
	if f == types.IPv6 {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], v.Hi)
		binary.BigEndian.PutUint64(b[8:], v.Lo)
		return netip.AddrFrom16(b)
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(v.Lo))
	return netip.AddrFrom4(b)
}

// endpointIPField is the register field that holds an endpoint address of
// family f, from its bucket to EndpointDNAT: reg3 for IPv4, xxreg3 for
// IPv6 (fields.go).
func endpointIPField(f types.IPFamily) binding.FieldRange {
	return types.ByFamily(f, EndpointIPField, EndpointIP6Field)
}

// loadEndpointIP loads endpoint address a into its family's field.
func loadEndpointIP(a netip.Addr) binding.Action {
	return binding.LoadU128(endpointIPField(types.FamilyOf(a)), addrValue(a))
}

// matchEndpointIP makes m match endpoint address a in its family's field.
func matchEndpointIP(m *binding.Match, a netip.Addr) {
	r := endpointIPField(types.FamilyOf(a))
	if r == EndpointIPField {
		// Through matchField, which keeps other bits of the register.
		matchField(m, r, addrValue(a).Lo)
		return
	}
	m.Set(r.Field, addrValue(a))
}

// endpointIPOf reads the endpoint address a match (a flow's, or a
// packet-in's) holds in either family's field. Open vSwitch reports xxreg3
// in a packet-in as the 32-bit registers reg12..reg15.
func endpointIPOf(m *binding.Match) (netip.Addr, bool) {
	if v, ok := m.Get(EndpointIP6Field.Field); ok {
		return valueAddr(types.IPv6, v.Value), true
	}
	var v6 binding.U128
	var found bool
	for i := 0; i < 4; i++ {
		if v, ok := m.Get(binding.Reg(12 + i)); ok && v.Value.Lo != 0 {
			found = true
			w := v.Value.Lo << (32 * (1 - i%2))
			if i < 2 {
				v6.Hi |= w
			} else {
				v6.Lo |= w
			}
		}
	}
	if found {
		return valueAddr(types.IPv6, v6), true
	}
	if v, ok := m.Get(EndpointIPField.Field); ok {
		return valueAddr(types.IPv4, v.Value), true
	}
	return netip.Addr{}, false
}

// addrBits32 is 32 bits that name an address in a cookie: an IPv4 address
// itself, an IPv6 address's FNV-1a hash (a collision only makes two
// endpoints share the cookie of their learned affinity flows).
func addrBits32(a netip.Addr) uint64 {
	if a.Is4() {
		return addrValue(a).Lo
	}
	h := fnv.New32a()
	b := a.As16()
	h.Write(b[:])
	return uint64(h.Sum32())
}

// gatewayIP is the gateway's address of family f (the zero Addr if none).
func (n *NodeConfig) gatewayIP(f types.IPFamily) netip.Addr {
	for _, ip := range []net.IP{n.GatewayIP, n.GatewayIPv6} {
		if ip != nil && types.FamilyOfIP(ip) == f {
			return addr(ip)
		}
	}
	return netip.Addr{}
}

// nodeIP is the node's transport address of family f, if it has one
// (NodeIP, or a dual-stack node's NodeIPv6).
func (n *NodeConfig) nodeIP(f types.IPFamily) (netip.Addr, bool) {
	if n.NodeIP != nil && types.FamilyOfIP(n.NodeIP) == f {
		return addr(n.NodeIP), true
	}
	if n.NodeIPv6 != nil && f == types.IPv6 && types.FamilyOfIP(n.NodeIPv6) == f {
		return addr(n.NodeIPv6), true
	}
	return netip.Addr{}, false
}

// realizedFamilies are the families the pipeline realizes, for the flows
// that serve any family a pod has (Traceflow before the node is known).
func realizedFamilies() []types.IPFamily { return types.Families(Realizes) }

// families are the families the node carries, for the flows that serve
// any family a pod has (policy rules and isolation): IPv4 alone until
// Initialize says otherwise (a client that has not seen its node builds
// IPv4 flows, as before dual-stack).
func (b *flowBuilder) families() []types.IPFamily {
	if len(b.fams) == 0 {
		return []types.IPFamily{types.IPv4}
	}
	return b.fams
}

// matchTransport matches the IP protocol proto (0: any) and, for TCP and
// UDP, the source and destination ports that are not 0.
func matchTransport(m *binding.Match, proto uint8, src, dst uint16) {
	if proto == 0 {
		return
	}
	m.IPProto(proto)
	switch proto {
	case binding.IPProtoTCP:
		if src != 0 {
			m.TCPSrc(src)
		}
		if dst != 0 {
			m.TCPDst(dst)
		}
	case binding.IPProtoUDP:
		if src != 0 {
			m.UDPSrc(src)
		}
		if dst != 0 {
			m.UDPDst(dst)
		}
	}
}
