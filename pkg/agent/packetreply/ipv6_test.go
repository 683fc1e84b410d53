package packetreply

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

var (
	client6   = netip.MustParseAddr("fd00:10:244:1::2")
	endpoint6 = netip.MustParseAddr("fd00:10:244:1::7")
	service6  = netip.MustParseAddr("fd00:10:96::14")
)

// frame6 is an Ethernet frame from client6 to dst: an IPv6 header whose
// next header is first, the extension headers ext (already chained), and
// l4.
func frame6(dst netip.Addr, first byte, ext, l4 []byte) []byte {
	return Frame(gwMAC, clientMAC, client6, dst, first, append(append([]byte(nil), ext...), l4...))
}

// parse6 reads an IPv6 reply with golang.org/x/net's decoder, not ours.
func parse6(t *testing.T, f []byte) (*ipv6.Header, []byte) {
	t.Helper()
	if et := binary.BigEndian.Uint16(f[12:]); et != EtherTypeIPv6 {
		t.Fatalf("EtherType %#x, want IPv6", et)
	}
	h, err := ipv6.ParseHeader(f[ethLen:])
	if err != nil {
		t.Fatal(err)
	}
	if h.PayloadLen != len(f)-ethLen-ipv6HeaderLen || h.HopLimit != replyTTL || h.Src.String() == "" {
		t.Fatalf("bad IPv6 header %+v for a %d-byte frame", h, len(f))
	}
	return h, f[ethLen+ipv6HeaderLen:]
}

// sum16 is the one's complement sum an IPv6 upper-layer checksum must make
// 0xffff (RFC 8200 8.1), computed here from the decoded header.
func sum16(h *ipv6.Header, proto byte, l4 []byte) uint16 {
	var b []byte
	b = append(b, h.Src.To16()...)
	b = append(b, h.Dst.To16()...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(l4)))
	b = append(b, 0, 0, 0, proto)
	b = append(b, l4...)
	if len(b)%2 == 1 {
		b = append(b, 0)
	}
	var s uint32
	for i := 0; i < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func TestParseWalksIPv6ExtensionHeadersToTheTransport(t *testing.T) {
	udp := ports(udpLen, 40000, 53)
	hopByHop := []byte{ProtoUDP, 0, 0, 0, 0, 0, 0, 0} // next: UDP, 8 bytes
	dstOpts := []byte{ipv6HopByHop, 1}                // next: the hop-by-hop header, 16 bytes
	dstOpts = append(dstOpts, make([]byte, 14)...)
	firstFrag := []byte{ProtoUDP, 0, 0, 0, 0, 0, 0, 1} // offset 0, more fragments
	laterFrag := []byte{ProtoUDP, 0, 0x05, 0xa8, 0, 0, 0, 1}
	for _, tc := range []struct {
		name          string
		first         byte
		ext           []byte
		ihl           int
		firstFragment bool
		withPorts     bool
	}{
		{"no extension header", ProtoUDP, nil, 40, true, true},
		{"destination options then hop-by-hop", ipv6DstOpts, append(append([]byte(nil), dstOpts...), hopByHop...), 64, true, true},
		{"a first fragment", ipv6Fragment, firstFrag, 48, true, true},
		{"a later fragment", ipv6Fragment, laterFrag, 48, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(frame6(service6, tc.first, tc.ext, udp))
			if err != nil {
				t.Fatal(err)
			}
			if !p.IPv6 || p.Proto != ProtoUDP || p.IHL != tc.ihl || p.Total != tc.ihl+udpLen || p.TTL != replyTTL ||
				p.Src != client6 || p.Dst != service6 || p.FirstFragment != tc.firstFragment || p.HasPorts != tc.withPorts {
				t.Fatalf("got %+v", p)
			}
			if tc.withPorts && (p.SrcPort != 40000 || p.DstPort != 53) {
				t.Fatalf("ports %d -> %d, want 40000 -> 53", p.SrcPort, p.DstPort)
			}
		})
	}
	bad := map[string][]byte{
		"a truncated extension header":    frame6(service6, ipv6DstOpts, []byte{ProtoUDP, 4}, nil),
		"a version 4 header in IPv6":      func() []byte { f := frame6(service6, ProtoUDP, nil, udp); f[ethLen] = 0x45; return f }(),
		"an ARP frame":                    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x06, 0, 1},
		"an IPv6 frame shorter than 40 B": frame6(service6, ProtoUDP, nil, nil)[:ethLen+39],
	}
	for name, f := range bad {
		if _, err := Parse(f); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestAnIPv6ResetComesFromTheServiceWithAChecksumOverTheIPv6PseudoHeader(t *testing.T) {
	syn := ports(tcpMinLen, 40000, 8080)
	binary.BigEndian.PutUint32(syn[4:], 1000)
	syn[12], syn[13] = 5<<4, tcpSYN
	p, err := Parse(frame6(endpoint6, ProtoTCP, nil, syn))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Reply(p, Answer{From: service6, FromPort: 80, DstMAC: podMAC})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r[0:6], podMAC) || !bytes.Equal(r[6:12], gwMAC) {
		t.Fatalf("the reset should go from the gateway MAC to the client's, got % x", r[:12])
	}
	h, tcp := parse6(t, r)
	if h.NextHeader != ProtoTCP || !h.Src.Equal(service6.AsSlice()) || !h.Dst.Equal(client6.AsSlice()) {
		t.Fatalf("want TCP from %s to %s, got %+v", service6, client6, h)
	}
	if binary.BigEndian.Uint16(tcp[0:]) != 80 || binary.BigEndian.Uint16(tcp[2:]) != 40000 ||
		binary.BigEndian.Uint32(tcp[8:]) != 1001 || tcp[13] != tcpRST|tcpACK {
		t.Fatalf("want RST+ACK 80->40000 ack 1001, got % x", tcp)
	}
	if s := sum16(h, ProtoTCP, tcp); s != 0xffff {
		t.Fatalf("TCP checksum does not verify over the IPv6 pseudo-header (sum %#x)", s)
	}
}

func TestAnIPv6PacketGetsAnICMPv6DestinationUnreachableQuotingItAsSent(t *testing.T) {
	for _, tc := range []struct {
		reason Reason
		code   int
	}{{PortUnreachable, 4}, {AdminProhibited, 1}} {
		in := frame6(endpoint6, ProtoUDP, nil, ports(udpLen+4, 40000, 5353))
		p, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Reply(p, Answer{From: service6, FromPort: 53, Reason: tc.reason})
		if err != nil {
			t.Fatal(err)
		}
		h, body := parse6(t, r)
		if h.NextHeader != ProtoICMPv6 || !h.Src.Equal(service6.AsSlice()) || !h.Dst.Equal(client6.AsSlice()) {
			t.Fatalf("want ICMPv6 from %s to %s, got %+v", service6, client6, h)
		}
		if s := sum16(h, ProtoICMPv6, body); s != 0xffff {
			t.Fatalf("ICMPv6 checksum does not verify over the IPv6 pseudo-header (sum %#x)", s)
		}
		m, err := icmp.ParseMessage(ProtoICMPv6, body)
		if err != nil {
			t.Fatal(err)
		}
		du, ok := m.Body.(*icmp.DstUnreach)
		if m.Type != ipv6.ICMPTypeDestinationUnreachable || m.Code != tc.code || !ok {
			t.Fatalf("reason %d: want destination unreachable code %d, got %v code %d", tc.reason, tc.code, m.Type, m.Code)
		}
		quoted, err := ipv6.ParseHeader(du.Data)
		if err != nil {
			t.Fatal(err)
		}
		if !quoted.Dst.Equal(service6.AsSlice()) || binary.BigEndian.Uint16(du.Data[ipv6HeaderLen+2:]) != 53 ||
			!quoted.Src.Equal(client6.AsSlice()) || len(du.Data) != len(in)-ethLen {
			t.Fatalf("the quote should be the datagram with service:53 as its destination, got %+v % x", quoted, du.Data)
		}
	}
}

func TestWhatIsAnsweredWithICMPv6(t *testing.T) {
	echo := frame6(endpoint6, ProtoICMPv6, nil, []byte{128, 0, 0, 0, 0, 1, 0, 1})
	unreachable := frame6(endpoint6, ProtoICMPv6, nil, []byte{1, 4, 0, 0, 0, 0, 0, 0})
	tooBig := frame6(endpoint6, ProtoICMPv6, nil, []byte{2, 0, 0, 0, 0, 0, 5, 0})
	later := frame6(endpoint6, ipv6Fragment, []byte{ProtoUDP, 0, 0x05, 0xa8, 0, 0, 0, 1}, make([]byte, 64))
	big := frame6(endpoint6, ProtoUDP, nil, ports(3000, 40000, 53))
	for _, tc := range []struct {
		name     string
		in       []byte
		answered bool
	}{
		{"an echo request is refused with an ICMPv6 error", echo, true},
		{"an ICMPv6 error never gets one (destination unreachable)", unreachable, false},
		{"an ICMPv6 error never gets one (packet too big)", tooBig, false},
		{"a later fragment has no transport header to answer", later, false},
		{"a large datagram is answered within the minimum MTU", big, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Reply(p, Answer{From: p.Dst, Reason: AdminProhibited})
			if tc.answered && err != nil || !tc.answered && !errors.Is(err, ErrNoReply) {
				t.Fatalf("answered %v, got err %v", tc.answered, err)
			}
			if tc.answered && len(r)-ethLen > 1280 {
				t.Fatalf("an ICMPv6 error of %d bytes exceeds the IPv6 minimum MTU", len(r)-ethLen)
			}
		})
	}
	p, err := Parse(echo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Reply(p, Answer{From: service, Reason: AdminProhibited}); err == nil || errors.Is(err, ErrNoReply) {
		t.Fatalf("an IPv4 source for an answer to an IPv6 packet should be an error, got %v", err)
	}
}
