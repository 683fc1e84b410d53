package packetreply

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
)

var (
	clientMAC = net.HardwareAddr{0x0a, 0, 0, 0, 0, 2}
	gwMAC     = net.HardwareAddr{0x0a, 0, 0, 0, 0, 1}
	podMAC    = net.HardwareAddr{0x0a, 0, 0, 0, 0, 9}
	client    = netip.MustParseAddr("10.10.1.2")
	endpoint  = netip.MustParseAddr("10.10.1.7")
	service   = netip.MustParseAddr("10.96.0.20")
)

// frame is an Ethernet frame from the client to dst carrying l4.
func frame(dst netip.Addr, proto byte, l4 []byte) []byte {
	return Frame(gwMAC, clientMAC, client, dst, proto, l4)
}

func ports(n int, src, dst uint16) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint16(b[0:], src)
	binary.BigEndian.PutUint16(b[2:], dst)
	return b
}

func mustReply(t *testing.T, f []byte, a Answer) (eth, ip, l4 []byte) {
	t.Helper()
	p, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Reply(p, a)
	if err != nil {
		t.Fatal(err)
	}
	ip = r[ethLen:]
	if Checksum(nil, ip[:ipv4MinLen]) != 0 || int(binary.BigEndian.Uint16(ip[2:])) != len(ip) || ip[8] != replyTTL {
		t.Fatalf("bad IP header % x", ip[:ipv4MinLen])
	}
	if got := netip.AddrFrom4([4]byte(ip[16:20])); got != client {
		t.Fatalf("the reply should go to the client, goes to %v", got)
	}
	return r[:ethLen], ip, ip[ipv4MinLen:]
}

func TestAResetComesFromTheAddressAndPortTheCallerNames(t *testing.T) {
	syn := ports(tcpMinLen, 40000, 8080)
	binary.BigEndian.PutUint32(syn[4:], 1000)
	syn[12], syn[13] = 5<<4, tcpSYN
	// The policy reject of a Service connection answers for the original
	// tuple (service:80) though the packet went to the endpoint's 8080.
	eth, ip, tcp := mustReply(t, frame(endpoint, ProtoTCP, syn), Answer{From: service, FromPort: 80, DstMAC: podMAC})
	if !bytes.Equal(eth[0:6], podMAC) || !bytes.Equal(eth[6:12], gwMAC) {
		t.Fatalf("the reset should go from the gateway MAC to the given client MAC, got % x", eth)
	}
	if got := netip.AddrFrom4([4]byte(ip[12:16])); got != service {
		t.Fatalf("the reset should come from the Service address, comes from %v", got)
	}
	if binary.BigEndian.Uint16(tcp[0:]) != 80 || binary.BigEndian.Uint16(tcp[2:]) != 40000 ||
		binary.BigEndian.Uint32(tcp[8:]) != 1001 || tcp[13] != tcpRST|tcpACK {
		t.Fatalf("want RST+ACK 80->40000 ack 1001, got % x", tcp)
	}
	if Checksum(PseudoHeader(service, client, ProtoTCP, len(tcp)), tcp) != 0 {
		t.Fatal("bad TCP checksum")
	}
}

func TestAnICMPErrorQuotesThePacketAsTheClientSentIt(t *testing.T) {
	in := frame(endpoint, ProtoUDP, ports(udpLen+4, 40000, 5353))
	_, ip, icmp := mustReply(t, in, Answer{From: service, FromPort: 53, Reason: AdminProhibited})
	if ip[9] != ProtoICMP || icmp[0] != icmpDestUnreachable || icmp[1] != CodeHostProhibited || Checksum(nil, icmp) != 0 {
		t.Fatalf("want ICMP host administratively prohibited, got % x", icmp)
	}
	quote := icmp[icmpLen:]
	if netip.AddrFrom4([4]byte(quote[16:20])) != service || binary.BigEndian.Uint16(quote[ipv4MinLen+2:]) != 53 {
		t.Fatalf("the quote should name service:53 as its destination, got % x", quote)
	}
}

func TestWhatIsAnsweredWithICMP(t *testing.T) {
	echo := frame(endpoint, ProtoICMP, []byte{8, 0, 0, 0, 0, 1, 0, 1})
	unreachable := frame(endpoint, ProtoICMP, make([]byte, 8))
	unreachable[ethLen+ipv4MinLen] = 3
	sctp := frame(endpoint, ProtoSCTP, ports(12, 1, 2))
	for _, tc := range []struct {
		name     string
		in       []byte
		udpOnly  bool
		answered bool
	}{
		{"an echo request is refused with an ICMP error", echo, false, true},
		{"an ICMP error never gets one", unreachable, false, false},
		{"SCTP gets one", sctp, false, true},
		{"only UDP gets one when the caller says so (echo)", echo, true, false},
		{"only UDP gets one when the caller says so (SCTP)", sctp, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Reply(p, Answer{From: p.Dst, Reason: AdminProhibited, UDPOnly: tc.udpOnly})
			if tc.answered && err != nil || !tc.answered && !errors.Is(err, ErrNoReply) {
				t.Fatalf("answered %v, got err %v", tc.answered, err)
			}
		})
	}
}
