package l7engine

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
)

// Header numbers (IEEE 802.3, RFC 791, RFC 8200, RFC 9293).
const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86dd
	etherTypeVLAN = 0x8100
	protoTCP      = 6

	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
)

var errNotTCP = errors.New("not a TCP segment over IPv4 or IPv6")

// segment is what the engine reads of a frame: its addresses and TCP header
// fields, and where its payload is.
type segment struct {
	frame          []byte // untagged Ethernet frame
	dstMAC, srcMAC net.HardwareAddr
	src, dst       netip.AddrPort
	seq, ack       uint32
	flags          uint8
	payload        []byte
	ipv6           bool
}

// untag removes an 802.1Q tag carried inside the frame (when the kernel
// did not take it out into the packet's metadata) and returns the VLAN id
// (0 when there was none) and the untagged frame.
func untag(frame []byte) (uint16, []byte) {
	if len(frame) < 18 || binary.BigEndian.Uint16(frame[12:14]) != etherTypeVLAN {
		return 0, frame
	}
	vid := binary.BigEndian.Uint16(frame[14:16]) & 0x0fff
	out := make([]byte, 0, len(frame)-4)
	out = append(out, frame[:12]...)
	out = append(out, frame[16:]...)
	return vid, out
}

// parseSegment reads an untagged Ethernet frame holding a TCP segment.
func parseSegment(frame []byte) (*segment, error) {
	if len(frame) < 14 {
		return nil, errNotTCP
	}
	s := &segment{frame: frame, dstMAC: net.HardwareAddr(frame[0:6]), srcMAC: net.HardwareAddr(frame[6:12])}
	ip := frame[14:]
	var tcp []byte
	var src, dst netip.Addr
	switch binary.BigEndian.Uint16(frame[12:14]) {
	case etherTypeIPv4:
		if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != protoTCP {
			return nil, errNotTCP
		}
		ihl := int(ip[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(ip[2:4]))
		if ihl < 20 || total < ihl || total > len(ip) || binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 {
			return nil, errNotTCP // a fragment is not inspected
		}
		src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		tcp = ip[ihl:total]
	case etherTypeIPv6:
		if len(ip) < 40 || ip[6] != protoTCP {
			return nil, errNotTCP
		}
		plen := int(binary.BigEndian.Uint16(ip[4:6]))
		if 40+plen > len(ip) {
			return nil, errNotTCP
		}
		src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		tcp = ip[40 : 40+plen]
		s.ipv6 = true
	default:
		return nil, errNotTCP
	}
	if len(tcp) < 20 {
		return nil, errNotTCP
	}
	off := int(tcp[12]>>4) * 4
	if off < 20 || off > len(tcp) {
		return nil, errNotTCP
	}
	s.src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(tcp[0:2]))
	s.dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(tcp[2:4]))
	s.seq = binary.BigEndian.Uint32(tcp[4:8])
	s.ack = binary.BigEndian.Uint32(tcp[8:12])
	s.flags = tcp[13]
	s.payload = tcp[off:]
	return s, nil
}

// seqEnd is the sequence number after the segment (SYN and FIN count one).
func (s *segment) seqEnd() uint32 {
	n := s.seq + uint32(len(s.payload))
	if s.flags&tcpSYN != 0 {
		n++
	}
	if s.flags&tcpFIN != 0 {
		n++
	}
	return n
}

// path is one direction of a connection as a frame carries it: the MACs
// and the addresses, which the engine copies into the segments it makes.
type path struct {
	dstMAC, srcMAC net.HardwareAddr
	src, dst       netip.AddrPort
}

func pathOf(s *segment) path {
	return path{dstMAC: append(net.HardwareAddr(nil), s.dstMAC...), srcMAC: append(net.HardwareAddr(nil), s.srcMAC...), src: s.src, dst: s.dst}
}

// buildSegment makes an Ethernet frame holding one TCP segment along p,
// with valid IP and TCP checksums (nothing downstream fills them in).
func buildSegment(p path, seq, ack uint32, flags uint8, payload []byte) []byte {
	tcp := make([]byte, 20+len(payload))
	binary.BigEndian.PutUint16(tcp[0:2], p.src.Port())
	binary.BigEndian.PutUint16(tcp[2:4], p.dst.Port())
	binary.BigEndian.PutUint32(tcp[4:8], seq)
	binary.BigEndian.PutUint32(tcp[8:12], ack)
	tcp[12] = 5 << 4
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:16], 65535)
	copy(tcp[20:], payload)

	src, dst := p.src.Addr(), p.dst.Addr()
	var pseudo, ip []byte
	etherType := uint16(etherTypeIPv4)
	if src.Is4() {
		ip = make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:4], uint16(20+len(tcp)))
		binary.BigEndian.PutUint16(ip[6:8], 0x4000) // don't fragment
		ip[8] = 64
		ip[9] = protoTCP
		s4, d4 := src.As4(), dst.As4()
		copy(ip[12:16], s4[:])
		copy(ip[16:20], d4[:])
		binary.BigEndian.PutUint16(ip[10:12], checksum(nil, ip))
		pseudo = append(append(append([]byte{}, s4[:]...), d4[:]...), 0, protoTCP, byte(len(tcp)>>8), byte(len(tcp)))
	} else {
		etherType = etherTypeIPv6
		ip = make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:6], uint16(len(tcp)))
		ip[6] = protoTCP
		ip[7] = 64
		s16, d16 := src.As16(), dst.As16()
		copy(ip[8:24], s16[:])
		copy(ip[24:40], d16[:])
		pseudo = append(append(append([]byte{}, s16[:]...), d16[:]...), 0, 0, byte(len(tcp)>>8), byte(len(tcp)), 0, 0, 0, protoTCP)
	}
	binary.BigEndian.PutUint16(tcp[16:18], checksum(pseudo, tcp))

	frame := make([]byte, 0, 14+len(ip)+len(tcp))
	frame = append(frame, p.dstMAC...)
	frame = append(frame, p.srcMAC...)
	frame = binary.BigEndian.AppendUint16(frame, etherType)
	frame = append(frame, ip...)
	return append(frame, tcp...)
}

// checksum is the Internet checksum (RFC 1071) of pre (even length) then data.
func checksum(pre, data []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(pre)
	add(data)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
