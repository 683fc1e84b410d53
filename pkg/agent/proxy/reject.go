package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// PacketIO is the switch's packet-in and packet-out channel: an
// *openflow.Client whose connections ask for async messages
// (openflow.Options.AsyncMessages).
type PacketIO interface {
	PacketIns() <-chan openflow.Frame
	SendPacketOut(ctx context.Context, po *openflow.PacketOut) error
}

// errNoReply says a packet is not answered: not the first fragment, a TCP
// reset, or not TCP or UDP.
var errNoReply = errors.New("no reply for this packet")

// serveRejects answers the packets the data path sends up because their
// Service port has no endpoints (EndpointDNAT's reject flow, behind the
// reject meter): a TCP reset to a TCP packet, an ICMP port unreachable to a
// UDP datagram, so the client's connect or send fails at once instead of
// timing out (kube-proxy's REJECT). The answer is output straight to the
// port the packet came in on: it never enters the pipeline, so it can never
// come back as another packet-in.
func (p *Proxy) serveRejects(ctx context.Context) {
	ins := p.packets.PacketIns()
	for {
		select {
		case <-ctx.Done():
			return
		case f, ok := <-ins:
			if !ok {
				return
			}
			p.handlePacketIn(ctx, f)
		}
	}
}

func (p *Proxy) handlePacketIn(ctx context.Context, f openflow.Frame) {
	pi, err := openflow.DecodeAnyPacketIn(f)
	if err != nil {
		klog.V(2).InfoS("Undecodable packet-in", "err", err)
		return
	}
	if len(pi.UserData) == 0 || pi.UserData[0] != agentof.PacketInServiceReject {
		return // not ours
	}
	po, err := rejectPacketOut(pi)
	if err != nil {
		if !errors.Is(err, errNoReply) {
			klog.V(2).InfoS("Cannot reject packet of a Service without endpoints", "err", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.packets.SendPacketOut(ctx, po); err != nil {
		klog.ErrorS(err, "Cannot send the reject of a packet to a Service without endpoints")
		return
	}
	p.rejected.Add(1)
}

// Rejected counts the packets answered with a reset or port unreachable.
func (p *Proxy) Rejected() uint64 { return p.rejected.Load() }

// rejectPacketOut builds the packet-out answering a packet-in: the reply
// output to the packet's in_port (with the tunnel destination set to the
// sender's node when it came through the tunnel).
func rejectPacketOut(pi *openflow.PacketIn) (*openflow.PacketOut, error) {
	in, ok := pi.Match.Get(openflow.FieldInPort)
	if !ok {
		return nil, fmt.Errorf("packet-in without in_port")
	}
	reply, err := rejectReply(pi.Data)
	if err != nil {
		return nil, err
	}
	var acts []openflow.Action
	if tun, ok := pi.Match.Get(openflow.FieldTunSrc); ok && tun.Value.Lo != 0 {
		acts = append(acts, &openflow.SetField{Field: openflow.FieldTunDst, Value: tun.Value})
	}
	acts = append(acts, &openflow.Output{Port: uint32(in.Value.Lo)})
	return &openflow.PacketOut{Actions: acts, Data: reply}, nil
}

// Sizes and numbers of the headers rejectReply reads and writes.
const (
	ethLen       = 14
	ipv4MinLen   = 20
	tcpMinLen    = 20
	udpLen       = 8
	icmpLen      = 8
	etherIPv4    = 0x0800
	protoICMP    = 1
	protoTCP     = 6
	protoUDP     = 17
	tcpFIN       = 0x01
	tcpSYN       = 0x02
	tcpRST       = 0x04
	tcpACK       = 0x10
	replyTTL     = 64
	icmpUnreach  = 3
	icmpPortUnre = 3
	// icmpMaxQuote keeps an ICMP error within 576 bytes (RFC 1812 4.3.2.3).
	icmpMaxQuote = 576 - ipv4MinLen - icmpLen
)

// rejectReply answers an Ethernet frame holding an IPv4 packet to a Service
// port: a TCP segment gets a reset (RFC 9293 3.10.7.1: to a segment with an
// ACK, RST with that sequence number; otherwise RST+ACK acknowledging it),
// a UDP datagram an ICMP port unreachable quoting it. The reply comes from
// the address and port the client asked for (the Service), from the MAC the
// client sent to, so the client's kernel matches it to its socket.
func rejectReply(frame []byte) ([]byte, error) {
	if len(frame) < ethLen+ipv4MinLen || binary.BigEndian.Uint16(frame[12:]) != etherIPv4 {
		return nil, fmt.Errorf("not an IPv4 frame (%d bytes)", len(frame))
	}
	ip := frame[ethLen:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < ipv4MinLen || len(ip) < ihl {
		return nil, fmt.Errorf("bad IPv4 header")
	}
	if binary.BigEndian.Uint16(ip[6:])&0x1fff != 0 {
		return nil, errNoReply // not the first fragment: no transport header
	}
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if total < ihl {
		return nil, fmt.Errorf("IPv4 total length %d below its header's %d", total, ihl)
	}
	var src, dst [4]byte
	copy(src[:], ip[12:16])
	copy(dst[:], ip[16:20])
	l4 := ip[ihl:]
	var proto byte
	var payload []byte
	switch ip[9] {
	case protoTCP:
		if len(l4) < tcpMinLen {
			return nil, fmt.Errorf("truncated TCP header")
		}
		flags := l4[13]
		if flags&tcpRST != 0 {
			return nil, errNoReply
		}
		dataLen := total - ihl - int(l4[12]>>4)*4
		if dataLen < 0 {
			return nil, fmt.Errorf("TCP header longer than its packet")
		}
		seg := make([]byte, tcpMinLen)
		copy(seg[0:2], l4[2:4]) // from the port the client asked for
		copy(seg[2:4], l4[0:2])
		if flags&tcpACK != 0 {
			copy(seg[4:8], l4[8:12]) // seq = the segment's ack
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
		binary.BigEndian.PutUint16(seg[16:], checksum(pseudoHeader(dst, src, protoTCP, len(seg)), seg))
		proto, payload = protoTCP, seg
	case protoUDP:
		quote := ip[:min(len(ip), total, icmpMaxQuote)]
		if len(quote) < ihl+udpLen {
			return nil, fmt.Errorf("truncated UDP datagram")
		}
		msg := make([]byte, icmpLen, icmpLen+len(quote))
		msg[0], msg[1] = icmpUnreach, icmpPortUnre
		msg = append(msg, quote...)
		binary.BigEndian.PutUint16(msg[2:], checksum(nil, msg))
		proto, payload = protoICMP, msg
	default:
		return nil, errNoReply
	}
	out := make([]byte, ethLen+ipv4MinLen, ethLen+ipv4MinLen+len(payload))
	copy(out[0:6], frame[6:12]) // to the client's MAC
	copy(out[6:12], frame[0:6]) // from the MAC it sent to
	binary.BigEndian.PutUint16(out[12:], etherIPv4)
	h := out[ethLen:]
	h[0] = 4<<4 | ipv4MinLen/4
	binary.BigEndian.PutUint16(h[2:], uint16(ipv4MinLen+len(payload)))
	h[8], h[9] = replyTTL, proto
	copy(h[12:16], dst[:])
	copy(h[16:20], src[:])
	binary.BigEndian.PutUint16(h[10:], checksum(nil, h[:ipv4MinLen]))
	return append(out, payload...), nil
}

// pseudoHeader is the IPv4 pseudo-header TCP and UDP checksums cover.
func pseudoHeader(src, dst [4]byte, proto byte, length int) []byte {
	b := make([]byte, 12)
	copy(b[0:4], src[:])
	copy(b[4:8], dst[:])
	b[9] = proto
	binary.BigEndian.PutUint16(b[10:], uint16(length))
	return b
}

// checksum is the Internet checksum (RFC 1071) of pre followed by data.
func checksum(pre, data []byte) uint16 {
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
	add(pre) // always of even length
	add(data)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
