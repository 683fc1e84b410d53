package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/packetreply"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// Header sizes and numbers the tests' frames use.
const (
	ethLen       = 14
	ipv4MinLen   = 20
	tcpMinLen    = 20
	udpLen       = 8
	icmpLen      = 8
	etherIPv4    = packetreply.EtherTypeIPv4
	protoICMP    = packetreply.ProtoICMP
	protoTCP     = packetreply.ProtoTCP
	protoUDP     = packetreply.ProtoUDP
	tcpFIN       = 0x01
	tcpSYN       = 0x02
	tcpRST       = 0x04
	tcpACK       = 0x10
	replyTTL     = 64
	icmpUnreach  = 3
	icmpPortUnre = packetreply.CodePortUnreachable
)

var (
	checksum   = packetreply.Checksum
	errNoReply = packetreply.ErrNoReply
)

func pseudoHeader(src, dst [4]byte, proto byte, length int) []byte {
	return packetreply.PseudoHeader(netip.AddrFrom4(src), netip.AddrFrom4(dst), proto, length)
}

var (
	clientMAC = net.HardwareAddr{0x0a, 0, 0, 0, 0, 2}
	gwMAC     = net.HardwareAddr{0x0a, 0, 0, 0, 0, 1}
	clientIP  = [4]byte{10, 10, 1, 2}
	vipIP     = [4]byte{10, 96, 0, 20}
)

// ipv4Frame is an Ethernet frame from the client to the VIP carrying l4.
func ipv4Frame(proto byte, l4 []byte) []byte {
	return packetreply.Frame(gwMAC, clientMAC, netip.AddrFrom4(clientIP), netip.AddrFrom4(vipIP), proto, l4)
}

func tcpSegment(flags byte, seq, ack uint32, payload int) []byte {
	s := make([]byte, tcpMinLen+payload)
	binary.BigEndian.PutUint16(s[0:], 40000)
	binary.BigEndian.PutUint16(s[2:], 80)
	binary.BigEndian.PutUint32(s[4:], seq)
	binary.BigEndian.PutUint32(s[8:], ack)
	s[12], s[13] = 5<<4, flags
	return s
}

// checkReplyHeaders checks the Ethernet and IP headers of a reply to the
// client and returns its transport part.
func checkReplyHeaders(t *testing.T, reply []byte, proto byte) []byte {
	t.Helper()
	if !bytes.Equal(reply[0:6], clientMAC) || !bytes.Equal(reply[6:12], gwMAC) || binary.BigEndian.Uint16(reply[12:]) != etherIPv4 {
		t.Fatalf("the reply should go from the gateway MAC to the client's, got % x", reply[:14])
	}
	ip := reply[ethLen:]
	if ip[0] != 0x45 || ip[9] != proto || ip[8] != replyTTL || int(binary.BigEndian.Uint16(ip[2:])) != len(ip) {
		t.Fatalf("bad IP header % x (length %d)", ip[:ipv4MinLen], len(ip))
	}
	if !bytes.Equal(ip[12:16], vipIP[:]) || !bytes.Equal(ip[16:20], clientIP[:]) {
		t.Fatalf("the reply should come from the VIP to the client, got %v -> %v", net.IP(ip[12:16]), net.IP(ip[16:20]))
	}
	if checksum(nil, ip[:ipv4MinLen]) != 0 {
		t.Fatal("bad IP header checksum")
	}
	return ip[ipv4MinLen:]
}

func TestRejectReplies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       []byte
		seq, ack uint32
		flags    byte
	}{
		{"a SYN gets RST+ACK acknowledging the SYN", ipv4Frame(protoTCP, tcpSegment(tcpSYN, 1000, 0, 0)), 0, 1001, tcpRST | tcpACK},
		{"a SYN with data (fast open) gets its data acknowledged too", ipv4Frame(protoTCP, tcpSegment(tcpSYN, 1000, 0, 10)), 0, 1011, tcpRST | tcpACK},
		{"a segment with an ACK gets a RST with that sequence number", ipv4Frame(protoTCP, tcpSegment(tcpACK|tcpFIN, 5, 777, 0)), 777, 0, tcpRST},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, err := rejectReply(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			tcp := checkReplyHeaders(t, reply, protoTCP)
			if len(tcp) != tcpMinLen || binary.BigEndian.Uint16(tcp[0:]) != 80 || binary.BigEndian.Uint16(tcp[2:]) != 40000 {
				t.Fatalf("the reset should go from port 80 to 40000, got % x", tcp)
			}
			if seq, ack := binary.BigEndian.Uint32(tcp[4:]), binary.BigEndian.Uint32(tcp[8:]); seq != tc.seq || ack != tc.ack || tcp[13] != tc.flags {
				t.Fatalf("seq %d ack %d flags %#x, want %d %d %#x", seq, ack, tcp[13], tc.seq, tc.ack, tc.flags)
			}
			if checksum(pseudoHeader(vipIP, clientIP, protoTCP, len(tcp)), tcp) != 0 {
				t.Fatal("bad TCP checksum")
			}
		})
	}

	t.Run("a UDP datagram gets an ICMP port unreachable quoting it", func(t *testing.T) {
		udp := make([]byte, udpLen+4)
		binary.BigEndian.PutUint16(udp[0:], 40000)
		binary.BigEndian.PutUint16(udp[2:], 53)
		binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
		in := ipv4Frame(protoUDP, udp)
		reply, err := rejectReply(in)
		if err != nil {
			t.Fatal(err)
		}
		icmp := checkReplyHeaders(t, reply, protoICMP)
		if icmp[0] != icmpUnreach || icmp[1] != icmpPortUnre || !bytes.Equal(icmp[icmpLen:], in[ethLen:]) || checksum(nil, icmp) != 0 {
			t.Fatalf("bad ICMP port unreachable % x", icmp)
		}
	})

	t.Run("a large UDP datagram is quoted within 576 bytes", func(t *testing.T) {
		reply, err := rejectReply(ipv4Frame(protoUDP, make([]byte, 1400)))
		if err != nil {
			t.Fatal(err)
		}
		if len(reply)-ethLen > 576 {
			t.Fatalf("ICMP error of %d bytes", len(reply)-ethLen)
		}
	})

	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"a reset", ipv4Frame(protoTCP, tcpSegment(tcpRST, 1, 0, 0))},
		{"ICMP", ipv4Frame(protoICMP, make([]byte, 8))},
		{"a later fragment", func() []byte {
			f := ipv4Frame(protoUDP, make([]byte, 16))
			binary.BigEndian.PutUint16(f[ethLen+6:], 100)
			return f
		}()},
	} {
		t.Run(tc.name+" gets no answer", func(t *testing.T) {
			if _, err := rejectReply(tc.in); !errors.Is(err, errNoReply) {
				t.Fatalf("want no reply, got %v", err)
			}
		})
	}

	t.Run("truncated packets are refused", func(t *testing.T) {
		syn := ipv4Frame(protoTCP, tcpSegment(tcpSYN, 1, 0, 0))
		for n := 0; n < len(syn); n++ {
			if _, err := rejectReply(syn[:n]); err == nil {
				t.Fatalf("a frame cut at %d bytes was answered", n)
			}
		}
	})
}

func TestRejectPacketOutGoesStraightBackToTheInPort(t *testing.T) {
	pi := &openflow.PacketIn{Data: ipv4Frame(protoTCP, tcpSegment(tcpSYN, 1, 0, 0)), UserData: []byte{byte(agentof.PacketInServiceReject)}}
	pi.Match.InPort(7)
	po, err := rejectPacketOut(pi)
	if err != nil {
		t.Fatal(err)
	}
	if got := openflow.ActionsString(po.Actions); got != "output:7" || po.InPort != 0 {
		t.Fatalf("the reply should leave from the controller straight to port 7 (never through the tables), got in_port %d actions %s", po.InPort, got)
	}
}

func TestRejectPacketOutGoesBackToTheTunnelPeerOfEitherFamily(t *testing.T) {
	for _, tc := range []struct {
		src  netip.Addr
		want string
	}{
		{netip.MustParseAddr("192.168.77.12"), "set_field:192.168.77.12->tun_dst,output:1"},
		{netip.MustParseAddr("fd00:77::12"), "set_field:fd00:77::12->tun_ipv6_dst,output:1"},
	} {
		pi := &openflow.PacketIn{Data: ipv4Frame(protoTCP, tcpSegment(tcpSYN, 1, 0, 0)), UserData: []byte{byte(agentof.PacketInServiceReject)}}
		pi.Match.InPort(1)
		f := openflow.FieldTunSrc
		if tc.src.Is6() {
			f = openflow.FieldTunIPv6Src
		}
		b := tc.src.AsSlice()
		var v openflow.U128
		for i, x := range b {
			if len(b)-i > 8 {
				v.Hi = v.Hi<<8 | uint64(x)
			} else {
				v.Lo = v.Lo<<8 | uint64(x)
			}
		}
		pi.Match.Set(f, v)
		po, err := rejectPacketOut(pi)
		if err != nil {
			t.Fatal(err)
		}
		if got := openflow.ActionsString(po.Actions); got != tc.want {
			t.Errorf("reply to a packet from tunnel peer %s: actions %s, want %s", tc.src, got, tc.want)
		}
	}
}
