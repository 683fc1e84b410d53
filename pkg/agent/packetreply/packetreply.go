// Package packetreply builds the answer the agent sends, by packet-out, to
// a packet it refuses: a TCP reset to a TCP segment, an ICMP (ICMPv6 for
// IPv6) destination unreachable to anything else. AntreaProxy answers a
// packet to a Service without endpoints with it, the policy controller a
// packet a Reject rule dropped; each says which address the answer comes
// from and why (the reason picks the ICMP code of the packet's family).
// Parse also serves those who only read a packet-in (audit logs, DNS
// answers for FQDN rules, Traceflow), for both IP families.
package packetreply

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Numbers of the headers a reply reads and writes.
const (
	// EtherTypeIPv4 and EtherTypeIPv6 are the Ethernet types of the IP
	// families (IEEE 802 numbers).
	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86dd
	// IP protocol numbers (IANA).
	ProtoICMP   = 1
	ProtoTCP    = 6
	ProtoUDP    = 17
	ProtoICMPv6 = 58
	ProtoSCTP   = 132
	// ICMP destination unreachable codes (RFC 792; RFC 1812 5.2.7.1):
	// port unreachable is kube-proxy's REJECT, host administratively
	// prohibited upstream Antrea's answer to a rejected packet.
	CodePortUnreachable = 3
	CodeHostProhibited  = 10
	// ICMPv6 destination unreachable codes (RFC 4443 3.1), the same two
	// answers: ip6tables' REJECT is port unreachable, upstream Antrea
	// answers a rejected IPv6 packet with "administratively prohibited".
	CodeV6PortUnreachable = 4
	CodeV6AdminProhibited = 1
	icmpDestUnreachable   = 3
	icmpv6DestUnreachable = 1
	ethLen                = 14
	ipv4MinLen            = 20
	ipv6HeaderLen         = 40
	tcpMinLen             = 20
	udpLen                = 8
	icmpLen               = 8
	tcpFIN                = 0x01
	tcpSYN                = 0x02
	tcpRST                = 0x04
	tcpACK                = 0x10
	replyTTL              = 64
	// icmpMaxQuote keeps an ICMP error within 576 bytes (RFC 1812 4.3.2.3),
	// icmpv6MaxQuote an ICMPv6 one within the IPv6 minimum MTU (RFC 4443
	// 2.4 (c)).
	icmpMaxQuote   = 576 - ipv4MinLen - icmpLen
	icmpv6MaxQuote = 1280 - ipv6HeaderLen - icmpLen
	// maxExtensionHeaders bounds the walk over an IPv6 packet's extension
	// headers.
	maxExtensionHeaders = 8
)

// IPv6 extension headers Parse walks over to reach the transport header
// (RFC 8200 4; AH's length counts 4-byte units, RFC 4302 2.2).
const (
	ipv6HopByHop = 0
	ipv6Routing  = 43
	ipv6Fragment = 44
	ipv6AH       = 51
	ipv6DstOpts  = 60
)

// ErrNoReply says a packet is not answered: not its first fragment, a TCP
// reset, an ICMP error (RFC 1122 3.2.2; RFC 4443 2.4 (e)), or a protocol the
// caller does not answer.
var ErrNoReply = errors.New("no reply for this packet")

// Packet is what a reply reads of an Ethernet frame holding IPv4 or IPv6.
type Packet struct {
	// Frame is the whole frame, IP the part from the IP header on.
	Frame, IP []byte
	// IPv6 says the packet is IPv6.
	IPv6 bool
	// IHL is the number of bytes from the IP header's start to the
	// transport header: the IPv4 header's length, or the IPv6 header's and
	// its extension headers'. Total is the IP packet's length (the IPv4
	// total length; the IPv6 payload length plus 40).
	IHL, Total int
	// Proto is the transport protocol: the IPv4 protocol, or the next
	// header after the IPv6 extension headers.
	Proto byte
	// TTL is the IPv4 TTL or the IPv6 hop limit.
	TTL      byte
	Src, Dst netip.Addr
	// SrcPort and DstPort are set (HasPorts) for the first fragment of
	// TCP, UDP and SCTP.
	SrcPort, DstPort uint16
	HasPorts         bool
	FirstFragment    bool
}

// Parse reads an Ethernet frame holding an IPv4 or an IPv6 packet.
func Parse(frame []byte) (*Packet, error) {
	if len(frame) < ethLen {
		return nil, fmt.Errorf("not an IP frame (%d bytes)", len(frame))
	}
	var p *Packet
	var err error
	switch et := binary.BigEndian.Uint16(frame[12:]); et {
	case EtherTypeIPv4:
		p, err = parseIPv4(frame)
	case EtherTypeIPv6:
		p, err = parseIPv6(frame)
	default:
		return nil, fmt.Errorf("not an IP frame (EtherType %#04x, %d bytes)", et, len(frame))
	}
	if err != nil {
		return nil, err
	}
	l4 := p.IP[p.IHL:]
	if p.FirstFragment && (p.Proto == ProtoTCP || p.Proto == ProtoUDP || p.Proto == ProtoSCTP) && len(l4) >= 4 {
		p.SrcPort, p.DstPort, p.HasPorts = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:]), true
	}
	return p, nil
}

func parseIPv4(frame []byte) (*Packet, error) {
	if len(frame) < ethLen+ipv4MinLen {
		return nil, fmt.Errorf("not an IPv4 frame (%d bytes)", len(frame))
	}
	ip := frame[ethLen:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < ipv4MinLen || len(ip) < ihl {
		return nil, fmt.Errorf("bad IPv4 header")
	}
	p := &Packet{Frame: frame, IP: ip, IHL: ihl, Total: int(binary.BigEndian.Uint16(ip[2:])), Proto: ip[9], TTL: ip[8],
		Src: netip.AddrFrom4([4]byte(ip[12:16])), Dst: netip.AddrFrom4([4]byte(ip[16:20])),
		FirstFragment: binary.BigEndian.Uint16(ip[6:])&0x1fff == 0}
	if p.Total < ihl {
		return nil, fmt.Errorf("IPv4 total length %d below its header's %d", p.Total, ihl)
	}
	return p, nil
}

// parseIPv6 reads the IPv6 header and walks its extension headers to the
// transport header; a fragment header with a non-zero offset makes the
// packet a later fragment (its next header names the transport protocol,
// whose header is not in this packet).
func parseIPv6(frame []byte) (*Packet, error) {
	if len(frame) < ethLen+ipv6HeaderLen {
		return nil, fmt.Errorf("not an IPv6 frame (%d bytes)", len(frame))
	}
	ip := frame[ethLen:]
	if ip[0]>>4 != 6 {
		return nil, fmt.Errorf("bad IPv6 header: version %d", ip[0]>>4)
	}
	p := &Packet{Frame: frame, IP: ip, IPv6: true, Total: ipv6HeaderLen + int(binary.BigEndian.Uint16(ip[4:])), TTL: ip[7],
		Src: netip.AddrFrom16([16]byte(ip[8:24])), Dst: netip.AddrFrom16([16]byte(ip[24:40])), FirstFragment: true}
	next, off := ip[6], ipv6HeaderLen
	for range maxExtensionHeaders {
		var size int
		switch next {
		case ipv6HopByHop, ipv6Routing, ipv6DstOpts, ipv6AH, ipv6Fragment:
		default:
			p.IHL, p.Proto = off, next
			if off > len(ip) || off > p.Total {
				return nil, fmt.Errorf("IPv6 extension headers (%d bytes) beyond the packet (%d)", off, min(len(ip), p.Total))
			}
			return p, nil
		}
		if len(ip) < off+8 {
			return nil, fmt.Errorf("truncated IPv6 extension header %d", next)
		}
		switch next {
		case ipv6Fragment:
			size = 8
			if binary.BigEndian.Uint16(ip[off+2:])>>3 != 0 {
				p.FirstFragment = false
			}
		case ipv6AH:
			size = (int(ip[off+1]) + 2) * 4
		default:
			size = (int(ip[off+1]) + 1) * 8
		}
		next, off = ip[off], off+size
	}
	return nil, fmt.Errorf("more than %d IPv6 extension headers", maxExtensionHeaders)
}

// Reason says why a packet is refused; it picks the ICMP code of the
// packet's family.
type Reason byte

// Reasons for refusing a packet.
const (
	// PortUnreachable: nothing serves the port (a Service without
	// endpoints), as kube-proxy's REJECT.
	PortUnreachable Reason = iota + 1
	// AdminProhibited: a policy refused it (a Reject rule).
	AdminProhibited
)

// code is the ICMP (v6: ICMPv6) destination unreachable code of r.
func (r Reason) code(v6 bool) (byte, error) {
	switch {
	case r == PortUnreachable && v6:
		return CodeV6PortUnreachable, nil
	case r == PortUnreachable:
		return CodePortUnreachable, nil
	case r == AdminProhibited && v6:
		return CodeV6AdminProhibited, nil
	case r == AdminProhibited:
		return CodeHostProhibited, nil
	}
	return 0, fmt.Errorf("no ICMP code for reason %d", r)
}

// Answer says how a packet is answered.
type Answer struct {
	// From and FromPort are the address and port the reply comes from:
	// the ones the client sent to (a Service's, when the packet was DNATed
	// on its way), so the client's kernel matches the reply to its socket.
	// The ICMP error quotes the packet with them as its destination.
	From     netip.Addr
	FromPort uint16
	// DstMAC is the client's MAC; nil takes the frame's source.
	DstMAC net.HardwareAddr
	// Reason picks the destination unreachable code sent to what is not
	// TCP.
	Reason Reason
	// UDPOnly answers only UDP with ICMP (other protocols get ErrNoReply).
	UDPOnly bool
}

// Reply builds the frame answering p. A TCP segment gets a reset (RFC 9293
// 3.10.7.1: to a segment with an ACK, RST with that ack as its sequence
// number; otherwise RST+ACK acknowledging it); anything else but an ICMP
// error gets a destination unreachable of the packet's family (ICMP for
// IPv4, ICMPv6 for IPv6) with a.Reason's code, quoting it. The frame goes
// from the MAC the packet was sent to.
func Reply(p *Packet, a Answer) ([]byte, error) {
	if !p.FirstFragment {
		return nil, ErrNoReply // no transport header to answer
	}
	if a.From.Is6() != p.IPv6 {
		return nil, fmt.Errorf("an answer from %s to a packet from %s: not the same IP family", a.From, p.Src)
	}
	l4 := p.IP[p.IHL:]
	var proto byte
	var payload []byte
	switch {
	case p.Proto == ProtoTCP:
		if len(l4) < tcpMinLen {
			return nil, fmt.Errorf("truncated TCP header")
		}
		flags := l4[13]
		if flags&tcpRST != 0 {
			return nil, ErrNoReply
		}
		dataLen := p.Total - p.IHL - int(l4[12]>>4)*4
		if dataLen < 0 {
			return nil, fmt.Errorf("TCP header longer than its packet")
		}
		seg := make([]byte, tcpMinLen)
		binary.BigEndian.PutUint16(seg[0:], a.FromPort)
		copy(seg[2:4], l4[0:2])
		if flags&tcpACK != 0 {
			copy(seg[4:8], l4[8:12])
			seg[13] = tcpRST
		} else {
			ack := binary.BigEndian.Uint32(l4[4:]) + uint32(dataLen)
			if flags&tcpSYN != 0 {
				ack++
			}
			if flags&tcpFIN != 0 {
				ack++
			}
			binary.BigEndian.PutUint32(seg[8:], ack)
			seg[13] = tcpRST | tcpACK
		}
		seg[12] = tcpMinLen / 4 << 4
		binary.BigEndian.PutUint16(seg[16:], Checksum(PseudoHeader(a.From, p.Src, ProtoTCP, len(seg)), seg))
		proto, payload = ProtoTCP, seg
	case a.UDPOnly && p.Proto != ProtoUDP:
		return nil, ErrNoReply
	case !p.IPv6 && p.Proto == ProtoICMP && (len(l4) < 1 || !icmpQuery(l4[0])):
		return nil, ErrNoReply // never an ICMP error about an ICMP error (RFC 1122 3.2.2)
	case p.IPv6 && p.Proto == ProtoICMPv6 && (len(l4) < 1 || l4[0] < 128):
		return nil, ErrNoReply // nor an ICMPv6 error about an ICMPv6 error (RFC 4443 2.4 (e))
	default:
		code, err := a.Reason.code(p.IPv6)
		if err != nil {
			return nil, err
		}
		maxQuote, dstOff, typ := icmpMaxQuote, 16, byte(icmpDestUnreachable)
		proto = ProtoICMP
		if p.IPv6 {
			maxQuote, dstOff, typ, proto = icmpv6MaxQuote, 24, icmpv6DestUnreachable, ProtoICMPv6
		}
		quote := append([]byte(nil), p.IP[:min(len(p.IP), p.Total, maxQuote)]...)
		if p.Proto == ProtoUDP && len(quote) < p.IHL+udpLen {
			return nil, fmt.Errorf("truncated UDP datagram")
		}
		// Quote the packet as the client sent it.
		copy(quote[dstOff:dstOff+a.From.BitLen()/8], a.From.AsSlice())
		if p.HasPorts && len(quote) >= p.IHL+4 {
			binary.BigEndian.PutUint16(quote[p.IHL+2:], a.FromPort)
		}
		msg := make([]byte, icmpLen, icmpLen+len(quote))
		msg[0], msg[1] = typ, code
		msg = append(msg, quote...)
		var pseudo []byte // ICMP's checksum covers the message alone, ICMPv6's a pseudo-header too
		if p.IPv6 {
			pseudo = PseudoHeader(a.From, p.Src, ProtoICMPv6, len(msg))
		}
		binary.BigEndian.PutUint16(msg[2:], Checksum(pseudo, msg))
		payload = msg
	}
	dstMAC := a.DstMAC
	if dstMAC == nil {
		dstMAC = p.Frame[6:12]
	}
	return Frame(dstMAC, p.Frame[0:6], a.From, p.Src, proto, payload), nil
}

// Frame is an Ethernet frame from srcMAC to dstMAC holding an IP packet of
// src's family from src to dst of protocol proto carrying payload: IPv4
// (no options, TTL 64, checksummed) or IPv6 (no extension headers, hop
// limit 64).
func Frame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, proto byte, payload []byte) []byte {
	hdrLen, etherType := ipv4MinLen, uint16(EtherTypeIPv4)
	if src.Is6() {
		hdrLen, etherType = ipv6HeaderLen, EtherTypeIPv6
	}
	out := make([]byte, ethLen+hdrLen, ethLen+hdrLen+len(payload))
	copy(out[0:6], dstMAC)
	copy(out[6:12], srcMAC)
	binary.BigEndian.PutUint16(out[12:], etherType)
	h := out[ethLen:]
	if src.Is6() {
		h[0] = 6 << 4
		binary.BigEndian.PutUint16(h[4:], uint16(len(payload)))
		h[6], h[7] = proto, replyTTL
		copy(h[8:24], src.AsSlice())
		copy(h[24:40], dst.AsSlice())
		return append(out, payload...)
	}
	h[0] = 4<<4 | ipv4MinLen/4
	binary.BigEndian.PutUint16(h[2:], uint16(ipv4MinLen+len(payload)))
	h[8], h[9] = replyTTL, proto
	copy(h[12:16], src.AsSlice())
	copy(h[16:20], dst.AsSlice())
	binary.BigEndian.PutUint16(h[10:], Checksum(nil, h[:ipv4MinLen]))
	return append(out, payload...)
}

// icmpQuery reports whether an ICMP type is a query (echo, timestamp, ...)
// rather than an error (RFC 792 types 3, 4, 5, 11, 12).
func icmpQuery(t byte) bool {
	switch t {
	case 3, 4, 5, 11, 12:
		return false
	}
	return true
}

// PseudoHeader is the pseudo-header TCP, UDP and ICMPv6 checksums cover:
// IPv4's (RFC 9293 3.1), or IPv6's when src is IPv6 (RFC 8200 8.1).
func PseudoHeader(src, dst netip.Addr, proto byte, length int) []byte {
	if src.Is6() {
		b := make([]byte, 40)
		copy(b[0:16], src.AsSlice())
		copy(b[16:32], dst.AsSlice())
		binary.BigEndian.PutUint32(b[32:], uint32(length))
		b[39] = proto
		return b
	}
	b := make([]byte, 12)
	copy(b[0:4], src.AsSlice())
	copy(b[4:8], dst.AsSlice())
	b[9] = proto
	binary.BigEndian.PutUint16(b[10:], uint16(length))
	return b
}

// Checksum is the Internet checksum (RFC 1071) of pre (of even length)
// followed by data.
func Checksum(pre, data []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			sum += uint32(binary.BigEndian.Uint16(b))
			b = b[2:]
		}
		if len(b) == 1 {
			sum += uint32(b[0]) << 8
		}
	}
	add(pre)
	add(data)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
