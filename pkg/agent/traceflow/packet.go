package traceflow

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"

	"antrea.io/antrea/pkg/agent/packetreply"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// IP protocols a Traceflow packet may carry (IANA).
const (
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
)

// ICMP echo request types: ICMP's (RFC 792), ICMPv6's (RFC 4443 4.1).
const (
	icmpEchoRequest   = 8
	icmpv6EchoRequest = 128
	icmpv6EchoReply   = 129
)

// defaults of an injected packet.
const (
	defaultTTL     = 64
	tcpSYN         = 0x02
	defaultDstPort = 80
)

// Frame is what the sender injects.
type Frame struct {
	SrcMAC, DstMAC net.HardwareAddr
	Src, Dst       netip.Addr
	Tag            uint8
	// Packet gives protocol, TTL (hop limit), flags and the transport
	// header; zero values take the defaults (an ICMP echo request, ICMPv6's
	// when Src and Dst are IPv6; TTL 64).
	Packet crdv1beta1.Packet
	// ServicePort and ServiceProto fill in the transport of a packet to a
	// Service whose spec gives none (its first port).
	ServicePort  uint16
	ServiceProto uint8
}

// protocol is the IP protocol of the packet: ipHeader.protocol (or
// ipv6Header.nextHeader), else the transport header's, else the Service's,
// else ICMP (ICMPv6 in an IPv6 packet).
func (f *Frame) protocol() uint8 {
	p := f.Packet
	icmp := uint8(protoICMP)
	if f.Dst.Is6() {
		icmp = protoICMPv6
		if h := p.IPv6Header; h != nil && h.NextHeader != nil && *h.NextHeader != 0 {
			return uint8(*h.NextHeader)
		}
	} else if p.IPHeader != nil && p.IPHeader.Protocol != 0 {
		return uint8(p.IPHeader.Protocol)
	}
	switch {
	case p.TransportHeader.TCP != nil:
		return protoTCP
	case p.TransportHeader.UDP != nil:
		return protoUDP
	case p.TransportHeader.ICMP != nil:
		return icmp
	case f.ServiceProto != 0:
		return f.ServiceProto
	}
	return icmp
}

// Build makes the Ethernet frame: IPv4 with the tag in the TOS's DSCP
// bits, or IPv6 (Src and Dst IPv6) with it in the traffic class's.
func (f *Frame) Build() ([]byte, error) {
	if !f.Src.IsValid() || !f.Dst.IsValid() || f.Src.Is4() != f.Dst.Is4() {
		return nil, fmt.Errorf("traceflow packet %s -> %s: want two addresses of one family", f.Src, f.Dst)
	}
	v6 := f.Dst.Is6()
	proto := f.protocol()
	th := f.Packet.TransportHeader
	var l4 []byte
	switch {
	case proto == protoTCP:
		src, dst, flags := uint16(0), f.ServicePort, uint8(tcpSYN)
		if h := th.TCP; h != nil {
			src, dst = uint16(h.SrcPort), uint16(h.DstPort)
			if h.Flags != nil {
				flags = uint8(*h.Flags)
			}
		}
		if src == 0 {
			src = uint16(10000 + rand.IntN(50000))
		}
		if dst == 0 {
			dst = defaultDstPort
		}
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], src)
		binary.BigEndian.PutUint16(l4[2:], dst)
		binary.BigEndian.PutUint32(l4[4:], rand.Uint32())
		l4[12] = 5 << 4
		l4[13] = flags
		binary.BigEndian.PutUint16(l4[14:], 64240)
		binary.BigEndian.PutUint16(l4[16:], packetreply.Checksum(packetreply.PseudoHeader(f.Src, f.Dst, protoTCP, len(l4)), l4))
	case proto == protoUDP:
		src, dst := uint16(0), f.ServicePort
		if h := th.UDP; h != nil {
			src, dst = uint16(h.SrcPort), uint16(h.DstPort)
		}
		if src == 0 {
			src = uint16(10000 + rand.IntN(50000))
		}
		if dst == 0 {
			dst = defaultDstPort
		}
		l4 = make([]byte, 8)
		binary.BigEndian.PutUint16(l4[0:], src)
		binary.BigEndian.PutUint16(l4[2:], dst)
		binary.BigEndian.PutUint16(l4[4:], 8)
		sum := packetreply.Checksum(packetreply.PseudoHeader(f.Src, f.Dst, protoUDP, len(l4)), l4)
		if sum == 0 {
			sum = 0xffff
		}
		binary.BigEndian.PutUint16(l4[6:], sum)
	case proto == protoICMP && !v6, proto == protoICMPv6 && v6:
		l4 = make([]byte, 8)
		l4[0] = icmpEchoRequest
		if v6 {
			l4[0] = icmpv6EchoRequest
		}
		id, seq := uint16(rand.IntN(0xffff)), uint16(1)
		if h := th.ICMP; h != nil {
			if h.ID != 0 {
				id = uint16(h.ID)
			}
			if h.Sequence != 0 {
				seq = uint16(h.Sequence)
			}
		}
		binary.BigEndian.PutUint16(l4[4:], id)
		binary.BigEndian.PutUint16(l4[6:], seq)
		// ICMPv6's checksum covers the IPv6 pseudo-header (RFC 4443
		// 2.3), ICMP's the message alone.
		var pseudo []byte
		if v6 {
			pseudo = packetreply.PseudoHeader(f.Src, f.Dst, protoICMPv6, len(l4))
		}
		binary.BigEndian.PutUint16(l4[2:], packetreply.Checksum(pseudo, l4))
	case v6:
		return nil, fmt.Errorf("IPv6 next header %d: an IPv6 traceflow packet is TCP, UDP or ICMPv6", proto)
	default:
		return nil, fmt.Errorf("IP protocol %d: a traceflow packet is TCP, UDP or ICMP", proto)
	}
	frame := packetreply.Frame(f.DstMAC, f.SrcMAC, f.Src, f.Dst, proto, l4)
	ip := frame[14:]
	if v6 {
		// Version 6, the tag in the traffic class's DSCP bits (its high
		// six: the low two bits of byte 0 and the high four of byte 1),
		// flow label 0 (RFC 8200 3, RFC 2474 3).
		hop := uint8(defaultTTL)
		if h := f.Packet.IPv6Header; h != nil && h.HopLimit != 0 {
			hop = uint8(h.HopLimit)
		}
		tc := f.Tag << 2
		ip[0], ip[1], ip[2], ip[3] = 6<<4|tc>>4, tc<<4, 0, 0
		ip[7] = hop
		return frame, nil
	}
	ttl := uint8(defaultTTL)
	if h := f.Packet.IPHeader; h != nil {
		if h.TTL != 0 {
			ttl = uint8(h.TTL)
		}
		if h.Flags != 0 {
			binary.BigEndian.PutUint16(ip[6:], uint16(h.Flags&0x7)<<13)
		}
	}
	ip[1] = f.Tag << 2
	ip[8] = ttl
	binary.BigEndian.PutUint16(ip[4:], uint16(rand.IntN(0xffff)))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], packetreply.Checksum(nil, ip[:20]))
	return frame, nil
}

// Captured reads a packet-in's frame into the status's Packet form: an
// IPv6 packet's header as ipv6Header, an IPv4 packet's as ipHeader.
func Captured(frame []byte) (*crdv1beta1.Packet, error) {
	p, err := packetreply.Parse(frame)
	if err != nil {
		return nil, err
	}
	out := &crdv1beta1.Packet{SrcIP: p.Src.String(), DstIP: p.Dst.String(), Length: int32(p.Total)}
	if p.IPv6 {
		next := int32(p.Proto)
		out.IPv6Header = &crdv1beta1.IPv6Header{NextHeader: &next, HopLimit: int32(p.TTL)}
	} else {
		out.IPHeader = &crdv1beta1.IPHeader{Protocol: int32(p.Proto), TTL: int32(p.TTL), Flags: int32(binary.BigEndian.Uint16(p.IP[6:]) >> 13)}
	}
	l4 := p.IP[p.IHL:]
	switch {
	case p.Proto == protoTCP && p.HasPorts:
		var flags *int32
		if len(l4) >= 14 {
			v := int32(l4[13])
			flags = &v
		}
		out.TransportHeader.TCP = &crdv1beta1.TCPHeader{SrcPort: int32(p.SrcPort), DstPort: int32(p.DstPort), Flags: flags}
	case p.Proto == protoUDP && p.HasPorts:
		out.TransportHeader.UDP = &crdv1beta1.UDPHeader{SrcPort: int32(p.SrcPort), DstPort: int32(p.DstPort)}
	case p.Proto == protoICMP && !p.IPv6 && len(l4) >= 8,
		p.Proto == protoICMPv6 && p.IPv6 && len(l4) >= 8 && (l4[0] == icmpv6EchoRequest || l4[0] == icmpv6EchoReply):
		out.TransportHeader.ICMP = &crdv1beta1.ICMPEchoRequestHeader{ID: int32(binary.BigEndian.Uint16(l4[4:])),
			Sequence: int32(binary.BigEndian.Uint16(l4[6:]))}
	}
	return out, nil
}
