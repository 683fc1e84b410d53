package networkpolicy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// PacketIns is what the controller needs to serve its rules' packet-ins
// (Reject and audit logging).
type PacketIns struct {
	// IO delivers the packet-ins of kind agentof.PacketInPolicy and sends
	// the packet-outs of rejects.
	IO agentof.PacketIO
	// Parser reads a policy packet-in (the agent's OpenFlow client).
	Parser interface {
		ParsePolicyPacketIn(pi *binding.PacketIn) (agentof.PolicyPacketIn, bool)
	}
	// AuditLogDir is where np.log is written (DefaultAuditLogDir).
	AuditLogDir string
}

// Header sizes and numbers the packet-in handling reads and writes.
const (
	ethLen      = 14
	ipv4MinLen  = 20
	tcpMinLen   = 20
	etherIPv4   = 0x0800
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoSCTP   = 132
	tcpFIN      = 0x01
	tcpSYN      = 0x02
	tcpRST      = 0x04
	tcpACK      = 0x10
	replyTTL    = 64
	icmpLen     = 8
	icmpUnreach = 3
	// icmpHostProhibited is ICMP "destination host administratively
	// prohibited" (RFC 1812 5.2.7.1), upstream's answer to a rejected
	// packet other than TCP.
	icmpHostProhibited = 10
	// icmpMaxQuote keeps an ICMP error within 576 bytes (RFC 1812 4.3.2.3).
	icmpMaxQuote = 576 - ipv4MinLen - icmpLen
)

var errNoReply = errors.New("no reply for this packet")

// ipv4Packet is what the handling reads of a packet-in's frame.
type ipv4Packet struct {
	frame            []byte
	ip               []byte // from the IP header on
	ihl, total       int
	proto            byte
	src, dst         netip.Addr
	srcPort, dstPort uint16
	hasPorts         bool
	firstFragment    bool
}

func parseIPv4(frame []byte) (*ipv4Packet, error) {
	if len(frame) < ethLen+ipv4MinLen || binary.BigEndian.Uint16(frame[12:]) != etherIPv4 {
		return nil, fmt.Errorf("not an IPv4 frame (%d bytes)", len(frame))
	}
	ip := frame[ethLen:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < ipv4MinLen || len(ip) < ihl {
		return nil, fmt.Errorf("bad IPv4 header")
	}
	p := &ipv4Packet{frame: frame, ip: ip, ihl: ihl, total: int(binary.BigEndian.Uint16(ip[2:])), proto: ip[9],
		src: netip.AddrFrom4([4]byte(ip[12:16])), dst: netip.AddrFrom4([4]byte(ip[16:20])),
		firstFragment: binary.BigEndian.Uint16(ip[6:])&0x1fff == 0}
	if p.total < ihl {
		return nil, fmt.Errorf("IPv4 total length %d below its header's %d", p.total, ihl)
	}
	l4 := ip[ihl:]
	if p.firstFragment && (p.proto == protoTCP || p.proto == protoUDP || p.proto == protoSCTP) && len(l4) >= 4 {
		p.srcPort, p.dstPort, p.hasPorts = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:]), true
	}
	return p, nil
}

// servePacketIns handles the packet-ins of logging and rejecting rules
// until ctx ends. It reads the reconciler's record of rules under its own
// read lock only, so it never waits on an OVS write.
func (c *Controller) servePacketIns(ctx context.Context, pins *PacketIns, audit *auditLogger) {
	ins := pins.IO.PacketIns()
	for {
		select {
		case <-ctx.Done():
			return
		case f, ok := <-ins:
			if !ok {
				return
			}
			pi, err := binding.DecodeAnyPacketIn(f)
			if err != nil {
				continue
			}
			ppi, ok := pins.Parser.ParsePolicyPacketIn(pi)
			if !ok {
				continue
			}
			pkt, err := parseIPv4(pi.Data)
			if err != nil {
				klog.V(2).InfoS("Policy packet-in without an IPv4 packet", "err", err)
				continue
			}
			if ppi.Log && audit != nil {
				audit.log(c.auditEntry(ppi, pkt))
			}
			if ppi.Reject {
				if err := c.reject(ctx, pins.IO, pi, pkt); err != nil && !errors.Is(err, errNoReply) {
					klog.V(2).InfoS("Cannot answer a rejected packet", "src", pkt.src, "dst", pkt.dst, "err", err)
				}
			}
		}
	}
}

// auditEntry is the log line of a packet a rule decided on.
func (c *Controller) auditEntry(ppi agentof.PolicyPacketIn, pkt *ipv4Packet) *auditEntry {
	e := &auditEntry{table: ppi.Table, direction: ppi.Direction.String(), action: ppi.Action.String(), src: pkt.src, dst: pkt.dst,
		protocol: protocolName(pkt.proto), length: strconv.Itoa(pkt.total)}
	if pkt.hasPorts {
		e.srcPort, e.dstPort = portString(pkt.srcPort), portString(pkt.dstPort)
	}
	if info, ok := c.reconciler.ruleInfo(ppi.RuleID); ok {
		e.policy, e.rule, e.label, e.priority = info.policy, info.name, info.logLabel, strconv.Itoa(int(info.priority))
	}
	local := pkt.dst
	if ppi.Direction == agentof.DirectionEgress {
		local = pkt.src
	}
	if iface, ok := c.ifaces.GetInterfaceByIP(local.String()); ok && iface.PodName != "" {
		e.appliedTo = iface.PodNamespace + "/" + iface.PodName
	}
	return e
}

// reject answers a packet a Reject rule dropped: a TCP reset to a TCP
// segment, an ICMP "host administratively prohibited" to anything else
// (but an ICMP error). The answer comes from the address (and port) the
// client sent to, the original destination of a Service connection (the
// conntrack tuple the packet-in carries) rather than the endpoint, and is
// output straight to the port the packet came in on (through the tunnel
// back to its node): it never enters the pipeline, so no policy sees it
// and it cannot come back as a packet-in.
func (c *Controller) reject(ctx context.Context, io agentof.PacketIO, pi *binding.PacketIn, pkt *ipv4Packet) error {
	in, ok := pi.Match.Get(binding.FieldInPort)
	if !ok {
		return fmt.Errorf("packet-in without in_port")
	}
	from, fromPort := pkt.dst, pkt.dstPort
	if v, ok := pi.Match.Get(agentof.ServiceCTMark.Field); ok && v.Value.Lo&1 != 0 {
		if d, ok := pi.Match.Get(binding.FieldCTNwDst); ok {
			from = netip.AddrFrom4([4]byte{byte(d.Value.Lo >> 24), byte(d.Value.Lo >> 16), byte(d.Value.Lo >> 8), byte(d.Value.Lo)})
		}
		if p, ok := pi.Match.Get(binding.FieldCTTpDst); ok {
			fromPort = uint16(p.Value.Lo)
		}
	}
	// The client's MAC: a local pod's own (the frame may have been routed
	// on its way here and carry the gateway's), else the frame's source.
	dstMAC := net.HardwareAddr(pkt.frame[6:12])
	if iface, ok := c.ifaces.GetInterfaceByOFPort(int32(in.Value.Lo)); ok && iface.MAC != nil && iface.PodName != "" {
		dstMAC = iface.MAC
	}
	reply, err := rejectReply(pkt, from, fromPort, dstMAC)
	if err != nil {
		return err
	}
	var acts []binding.Action
	if tun, ok := pi.Match.Get(binding.FieldTunSrc); ok && tun.Value.Lo != 0 {
		acts = append(acts, &binding.SetField{Field: binding.FieldTunDst, Value: tun.Value})
	}
	acts = append(acts, &binding.Output{Port: binding.PortInPort})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return io.SendPacketOut(ctx, &binding.PacketOut{InPort: uint32(in.Value.Lo), Actions: acts, Data: reply})
}

// rejectReply builds the answer to pkt from address from (port fromPort)
// to the client at dstMAC. A TCP segment gets a reset (RFC 9293 3.10.7.1:
// to a segment with ACK, RST with its ack as sequence number; otherwise
// RST+ACK acknowledging it); anything else but ICMP errors an ICMP
// destination unreachable, host administratively prohibited, quoting it.
func rejectReply(pkt *ipv4Packet, from netip.Addr, fromPort uint16, dstMAC net.HardwareAddr) ([]byte, error) {
	if !pkt.firstFragment {
		return nil, errNoReply
	}
	l4 := pkt.ip[pkt.ihl:]
	var proto byte
	var payload []byte
	switch pkt.proto {
	case protoTCP:
		if len(l4) < tcpMinLen {
			return nil, fmt.Errorf("truncated TCP header")
		}
		flags := l4[13]
		if flags&tcpRST != 0 {
			return nil, errNoReply
		}
		dataLen := pkt.total - pkt.ihl - int(l4[12]>>4)*4
		if dataLen < 0 {
			return nil, fmt.Errorf("TCP header longer than its packet")
		}
		seg := make([]byte, tcpMinLen)
		binary.BigEndian.PutUint16(seg[0:], fromPort)
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
		binary.BigEndian.PutUint16(seg[16:], checksum(pseudoHeader(from, pkt.src, protoTCP, len(seg)), seg))
		proto, payload = protoTCP, seg
	case protoICMP:
		if len(l4) < 1 || !icmpQuery(l4[0]) {
			return nil, errNoReply // never an ICMP error about an ICMP error (RFC 1122 3.2.2)
		}
		fallthrough
	default:
		quote := append([]byte(nil), pkt.ip[:min(len(pkt.ip), pkt.total, icmpMaxQuote)]...)
		// Quote the packet as the client sent it (to a Service address).
		copy(quote[16:20], from.AsSlice())
		if pkt.hasPorts && len(quote) >= pkt.ihl+4 {
			binary.BigEndian.PutUint16(quote[pkt.ihl+2:], fromPort)
		}
		msg := make([]byte, icmpLen, icmpLen+len(quote))
		msg[0], msg[1] = icmpUnreach, icmpHostProhibited
		msg = append(msg, quote...)
		binary.BigEndian.PutUint16(msg[2:], checksum(nil, msg))
		proto, payload = protoICMP, msg
	}
	out := make([]byte, ethLen+ipv4MinLen, ethLen+ipv4MinLen+len(payload))
	copy(out[0:6], dstMAC)
	copy(out[6:12], pkt.frame[0:6]) // from the MAC the packet was sent to
	binary.BigEndian.PutUint16(out[12:], etherIPv4)
	h := out[ethLen:]
	h[0] = 4<<4 | ipv4MinLen/4
	binary.BigEndian.PutUint16(h[2:], uint16(ipv4MinLen+len(payload)))
	h[8], h[9] = replyTTL, proto
	copy(h[12:16], from.AsSlice())
	copy(h[16:20], pkt.src.AsSlice())
	binary.BigEndian.PutUint16(h[10:], checksum(nil, h[:ipv4MinLen]))
	return append(out, payload...), nil
}

// icmpQuery reports whether an ICMP type is a query (echo, timestamp, ...)
// rather than an error.
func icmpQuery(t byte) bool {
	switch t {
	case 3, 4, 5, 11, 12:
		return false
	}
	return true
}

// pseudoHeader is the IPv4 pseudo-header the TCP checksum covers.
func pseudoHeader(src, dst netip.Addr, proto byte, length int) []byte {
	b := make([]byte, 12)
	copy(b[0:4], src.AsSlice())
	copy(b[4:8], dst.AsSlice())
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
	add(pre)
	add(data)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
