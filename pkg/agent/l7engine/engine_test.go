package l7engine

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
)

// peers of the crafted connections: a client pod and a server pod.
var (
	clientMAC = net.HardwareAddr{0x0a, 0, 0, 0, 0, 1}
	serverMAC = net.HardwareAddr{0x0a, 0, 0, 0, 0, 2}
	clientEP  = netip.MustParseAddrPort("10.10.1.9:40000")
	serverEP  = netip.MustParseAddrPort("10.10.1.10:80")
	c2sPath   = path{dstMAC: serverMAC, srcMAC: clientMAC, src: clientEP, dst: serverEP}
	s2cPath   = path{dstMAC: clientMAC, srcMAC: serverMAC, src: serverEP, dst: clientEP}
)

const (
	clientISN = 1000
	serverISN = 5000
	vlan      = 7
)

// handshake runs the three-way handshake through e; each packet must pass.
func handshake(t *testing.T, e *Engine) {
	t.Helper()
	for _, f := range [][]byte{
		buildSegment(c2sPath, clientISN, 0, tcpSYN, nil),
		buildSegment(s2cPath, serverISN, clientISN+1, tcpSYN|tcpACK, nil),
		buildSegment(c2sPath, clientISN+1, serverISN+1, tcpACK, nil),
	} {
		if out := e.Process(vlan, f); len(out) != 1 || !bytes.Equal(out[0], f) {
			t.Fatalf("a handshake packet did not pass unchanged: %d frames out", len(out))
		}
	}
}

func engineWith(r *Rule) (*Engine, *[]Verdict) {
	e := New()
	var verdicts []Verdict
	e.Report = func(v Verdict) { verdicts = append(verdicts, v) }
	e.SetRules(map[uint16]*Rule{vlan: r})
	return e, &verdicts
}

func TestAnAllowedRequestPassesUnchangedEvenWhenSplit(t *testing.T) {
	e, _ := engineWith(&Rule{Name: "allow-http", HTTP: []HTTPMatch{{Method: "GET", Path: "/api/v2/*"}}})
	handshake(t, e)
	req := []byte("GET /api/v2/x HTTP/1.1\r\nHost: foo.bar.com\r\n\r\n")
	first := buildSegment(c2sPath, clientISN+1, serverISN+1, tcpACK, req[:10])
	second := buildSegment(c2sPath, clientISN+11, serverISN+1, tcpACK|tcpPSH, req[10:])
	if out := e.Process(vlan, first); len(out) != 0 {
		t.Fatalf("the first part of an incomplete head passed: %d frames", len(out))
	}
	// Its retransmission is not held twice.
	if out := e.Process(vlan, first); len(out) != 0 {
		t.Fatalf("a retransmitted held segment passed: %d frames", len(out))
	}
	out := e.Process(vlan, second)
	if len(out) != 2 || !bytes.Equal(out[0], first) || !bytes.Equal(out[1], second) {
		t.Fatalf("the complete allowed head did not release both segments in order: %d frames", len(out))
	}
	// The server's answer passes.
	resp := buildSegment(s2cPath, serverISN+1, clientISN+1+uint32(len(req)), tcpACK|tcpPSH, []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	if out := e.Process(vlan, resp); len(out) != 1 || !bytes.Equal(out[0], resp) {
		t.Fatal("the server's answer did not pass")
	}
}

func TestADeniedRequestGets403AndTheServerAReset(t *testing.T) {
	e, verdicts := engineWith(&Rule{Policy: "AntreaNetworkPolicy:default/p", Name: "allow-get", HTTP: []HTTPMatch{{Method: "GET"}}})
	handshake(t, e)
	get := []byte("GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
	if out := e.Process(vlan, buildSegment(c2sPath, clientISN+1, serverISN+1, tcpACK|tcpPSH, get)); len(out) != 1 {
		t.Fatal("the allowed GET did not pass")
	}
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	e.Process(vlan, buildSegment(s2cPath, serverISN+1, clientISN+1+uint32(len(get)), tcpACK|tcpPSH, answer))
	// The second request of the keep-alive connection is a DELETE.
	del := []byte("DELETE /a HTTP/1.1\r\nHost: h\r\n\r\n")
	delSeq := clientISN + 1 + uint32(len(get))
	serverNext := serverISN + 1 + uint32(len(answer))
	out := e.Process(vlan, buildSegment(c2sPath, delSeq, serverNext, tcpACK|tcpPSH, del))
	if len(out) != 2 {
		t.Fatalf("want a 403 to the client and a reset to the server, got %d frames", len(out))
	}
	toClient, err := parseSegment(out[0])
	if err != nil {
		t.Fatal(err)
	}
	if toClient.src != serverEP || toClient.dst != clientEP || !bytes.Equal(toClient.dstMAC, clientMAC) {
		t.Errorf("the 403 goes %v -> %v (MAC %v)", toClient.src, toClient.dst, toClient.dstMAC)
	}
	if toClient.seq != serverNext || toClient.ack != delSeq+uint32(len(del)) || toClient.flags&tcpFIN == 0 {
		t.Errorf("the 403 has seq %d ack %d flags %#x, want seq %d ack %d and FIN", toClient.seq, toClient.ack, toClient.flags,
			serverNext, delSeq+uint32(len(del)))
	}
	if !bytes.HasPrefix(toClient.payload, []byte("HTTP/1.1 403 Forbidden\r\n")) {
		t.Errorf("the answer is %q", toClient.payload)
	}
	toServer, err := parseSegment(out[1])
	if err != nil {
		t.Fatal(err)
	}
	if toServer.src != clientEP || toServer.dst != serverEP || toServer.flags&tcpRST == 0 || toServer.seq != delSeq {
		t.Errorf("the reset goes %v -> %v flags %#x seq %d, want a RST at %d", toServer.src, toServer.dst, toServer.flags, toServer.seq, delSeq)
	}
	// Valid checksums: the kernel of the pods checks them.
	for _, f := range out {
		if !validChecksums(f) {
			t.Error("a made segment has a bad checksum")
		}
	}
	// Everything after the denial drops.
	if out := e.Process(vlan, buildSegment(s2cPath, serverNext, delSeq, tcpACK, nil)); len(out) != 0 {
		t.Error("a packet of a denied connection passed")
	}
	if len(*verdicts) != 1 || (*verdicts)[0].Allowed || (*verdicts)[0].HTTP.Method != "DELETE" || (*verdicts)[0].Rule.Name != "allow-get" {
		t.Errorf("verdicts reported: %+v", *verdicts)
	}
}

func TestTLSIsDecidedOnTheClientHelloServerName(t *testing.T) {
	for _, tc := range []struct {
		sni   string
		allow bool
	}{{"foo.bar.com", true}, {"evil.example", false}} {
		e, _ := engineWith(&Rule{TLS: []TLSMatch{{SNI: "*.bar.com"}}})
		handshake(t, e)
		hello := clientHello(t, tc.sni, 0)
		out := e.Process(vlan, buildSegment(c2sPath, clientISN+1, serverISN+1, tcpACK|tcpPSH, hello))
		if tc.allow {
			if len(out) != 1 {
				t.Fatalf("%s: the allowed ClientHello did not pass", tc.sni)
			}
			// Later records pass without inspection.
			if out := e.Process(vlan, buildSegment(c2sPath, clientISN+1+uint32(len(hello)), serverISN+1, tcpACK, []byte{0x17, 3, 3, 0, 1, 0})); len(out) != 1 {
				t.Fatalf("%s: application data after the handshake did not pass", tc.sni)
			}
			continue
		}
		if len(out) != 2 {
			t.Fatalf("%s: want two resets, got %d frames", tc.sni, len(out))
		}
		for _, f := range out {
			s, _ := parseSegment(f)
			if s.flags&tcpRST == 0 || len(s.payload) != 0 {
				t.Errorf("%s: a denial frame is not a bare reset: flags %#x", tc.sni, s.flags)
			}
		}
	}
}

func TestTrafficOfNeitherProtocolIsReset(t *testing.T) {
	e, verdicts := engineWith(&Rule{HTTP: []HTTPMatch{{}}})
	handshake(t, e)
	out := e.Process(vlan, buildSegment(c2sPath, clientISN+1, serverISN+1, tcpACK|tcpPSH, []byte("\x00\x01binary")))
	if len(out) != 2 {
		t.Fatalf("want two resets, got %d frames", len(out))
	}
	if len(*verdicts) != 1 || (*verdicts)[0].Protocol != "unknown" {
		t.Errorf("verdicts: %+v", *verdicts)
	}
}

// validChecksums checks the IPv4 header and TCP checksums of a frame.
func validChecksums(f []byte) bool {
	ip := f[14:34]
	if checksum(nil, ip) != 0 {
		return false
	}
	tcp := f[34:]
	pseudo := append(append(append([]byte{}, ip[12:16]...), ip[16:20]...), 0, protoTCP, byte(len(tcp)>>8), byte(len(tcp)))
	return checksum(pseudo, tcp) == 0
}

func TestANewConnectionFromTheSamePortStartsFresh(t *testing.T) {
	e, _ := engineWith(&Rule{TLS: []TLSMatch{{SNI: "*.bar.com"}}})
	handshake(t, e)
	hello := clientHello(t, "www.bar.com", 0)
	if out := e.Process(vlan, buildSegment(c2sPath, clientISN+1, serverISN+1, tcpACK|tcpPSH, hello)); len(out) != 1 {
		t.Fatal("the allowed ClientHello did not pass")
	}
	// The client reuses its port without the engine seeing the first
	// connection end: the new one is inspected, not passed on the old one's
	// verdict.
	if out := e.Process(vlan, buildSegment(c2sPath, 9000, 0, tcpSYN, nil)); len(out) != 1 {
		t.Fatal("the new SYN did not pass")
	}
	e.Process(vlan, buildSegment(s2cPath, 7000, 9001, tcpSYN|tcpACK, nil))
	evil := clientHello(t, "evil.example", 0)
	if out := e.Process(vlan, buildSegment(c2sPath, 9001, 7001, tcpACK|tcpPSH, evil)); len(out) != 2 {
		t.Fatalf("a denied ClientHello on a reused port got %d frames, want two resets", len(out))
	}
}
