// Package packetreply builds the answer the agent sends, by packet-out, to
// a packet it refuses: a TCP reset to a TCP segment, an ICMP destination
// unreachable to anything else. AntreaProxy answers a packet to a Service
// without endpoints with it, the policy controller a packet a Reject rule
// dropped; each says which address the answer comes from and which ICMP
// code it carries.
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
	// EtherTypeIPv4 is the Ethernet type of IPv4 (IEEE 802 numbers).
	EtherTypeIPv4 = 0x0800
	// IP protocol numbers (IANA).
	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17
	ProtoSCTP = 132
	// ICMP destination unreachable codes (RFC 792; RFC 1812 5.2.7.1):
	// port unreachable is kube-proxy's REJECT, host administratively
	// prohibited upstream Antrea's answer to a rejected packet.
	CodePortUnreachable = 3
	CodeHostProhibited  = 10
	icmpDestUnreachable = 3
	ethLen              = 14
	ipv4MinLen          = 20
	tcpMinLen           = 20
	udpLen              = 8
	icmpLen             = 8
	tcpFIN              = 0x01
	tcpSYN              = 0x02
	tcpRST              = 0x04
	tcpACK              = 0x10
	replyTTL            = 64
	// icmpMaxQuote keeps an ICMP error within 576 bytes (RFC 1812 4.3.2.3).
	icmpMaxQuote = 576 - ipv4MinLen - icmpLen
)

// ErrNoReply says a packet is not answered: not its first fragment, a TCP
// reset, an ICMP error (RFC 1122 3.2.2), or a protocol the caller does not
// answer.
var ErrNoReply = errors.New("no reply for this packet")

// Packet is what a reply reads of an Ethernet frame holding IPv4.
type Packet struct {
	// Frame is the whole frame, IP the part from the IP header on.
	Frame, IP []byte
	// IHL is the IP header's length, Total the IP packet's (its header's
	// total length field).
	IHL, Total int
	Proto      byte
	Src, Dst   netip.Addr
	// SrcPort and DstPort are set (HasPorts) for the first fragment of
	// TCP, UDP and SCTP.
	SrcPort, DstPort uint16
	HasPorts         bool
	FirstFragment    bool
}

// Parse reads an Ethernet frame holding an IPv4 packet.
func Parse(frame []byte) (*Packet, error) {
	if len(frame) < ethLen+ipv4MinLen || binary.BigEndian.Uint16(frame[12:]) != EtherTypeIPv4 {
		return nil, fmt.Errorf("not an IPv4 frame (%d bytes)", len(frame))
	}
	ip := frame[ethLen:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < ipv4MinLen || len(ip) < ihl {
		return nil, fmt.Errorf("bad IPv4 header")
	}
	p := &Packet{Frame: frame, IP: ip, IHL: ihl, Total: int(binary.BigEndian.Uint16(ip[2:])), Proto: ip[9],
		Src: netip.AddrFrom4([4]byte(ip[12:16])), Dst: netip.AddrFrom4([4]byte(ip[16:20])),
		FirstFragment: binary.BigEndian.Uint16(ip[6:])&0x1fff == 0}
	if p.Total < ihl {
		return nil, fmt.Errorf("IPv4 total length %d below its header's %d", p.Total, ihl)
	}
	l4 := ip[ihl:]
	if p.FirstFragment && (p.Proto == ProtoTCP || p.Proto == ProtoUDP || p.Proto == ProtoSCTP) && len(l4) >= 4 {
		p.SrcPort, p.DstPort, p.HasPorts = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:]), true
	}
	return p, nil
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
	// ICMPCode is the destination unreachable code sent to what is not TCP.
	ICMPCode byte
	// UDPOnly answers only UDP with ICMP (other protocols get ErrNoReply).
	UDPOnly bool
}

// Reply builds the frame answering p. A TCP segment gets a reset (RFC 9293
// 3.10.7.1: to a segment with an ACK, RST with that ack as its sequence
// number; otherwise RST+ACK acknowledging it); anything else but an ICMP
// error gets an ICMP destination unreachable (a.ICMPCode) quoting it. The
// frame goes from the MAC the packet was sent to.
func Reply(p *Packet, a Answer) ([]byte, error) {
	if !p.FirstFragment {
		return nil, ErrNoReply // no transport header to answer
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
	case p.Proto == ProtoICMP && (len(l4) < 1 || !icmpQuery(l4[0])):
		return nil, ErrNoReply // never an ICMP error about an ICMP error (RFC 1122 3.2.2)
	default:
		quote := append([]byte(nil), p.IP[:min(len(p.IP), p.Total, icmpMaxQuote)]...)
		if p.Proto == ProtoUDP && len(quote) < p.IHL+udpLen {
			return nil, fmt.Errorf("truncated UDP datagram")
		}
		// Quote the packet as the client sent it.
		copy(quote[16:20], a.From.AsSlice())
		if p.HasPorts && len(quote) >= p.IHL+4 {
			binary.BigEndian.PutUint16(quote[p.IHL+2:], a.FromPort)
		}
		msg := make([]byte, icmpLen, icmpLen+len(quote))
		msg[0], msg[1] = icmpDestUnreachable, a.ICMPCode
		msg = append(msg, quote...)
		binary.BigEndian.PutUint16(msg[2:], Checksum(nil, msg))
		proto, payload = ProtoICMP, msg
	}
	dstMAC := a.DstMAC
	if dstMAC == nil {
		dstMAC = p.Frame[6:12]
	}
	return Frame(dstMAC, p.Frame[0:6], a.From, p.Src, proto, payload), nil
}

// Frame is an Ethernet frame from srcMAC to dstMAC holding an IPv4 packet
// (no options, TTL 64, checksummed) from src to dst of protocol proto
// carrying payload.
func Frame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, proto byte, payload []byte) []byte {
	out := make([]byte, ethLen+ipv4MinLen, ethLen+ipv4MinLen+len(payload))
	copy(out[0:6], dstMAC)
	copy(out[6:12], srcMAC)
	binary.BigEndian.PutUint16(out[12:], EtherTypeIPv4)
	h := out[ethLen:]
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

// PseudoHeader is the IPv4 pseudo-header TCP and UDP checksums cover
// (RFC 9293 3.1).
func PseudoHeader(src, dst netip.Addr, proto byte, length int) []byte {
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
