package testpod

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// The zone server on loopback, asked by a real DNS client over UDP and
// TCP: the file's records, a rewritten file's at the next query, NXDOMAIN
// for an unknown name of the zone, REFUSED outside it; a malformed file is
// refused naming its line.
func TestTheZoneServerAnswersFromItsFileAsItChanges(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lab.test.zone")
	if err := WriteZone(file, []ZoneRecord{{Name: "www.lab.test", TTL: 30, Addr: netip.MustParseAddr("172.30.0.3")},
		{Name: "www.lab.test", TTL: 30, Addr: netip.MustParseAddr("fd00::3")}}); err != nil {
		t.Fatal(err)
	}
	// A free port on loopback for both protocols.
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.LocalAddr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- ServeDNS(ctx, DNSConfig{Zone: "lab.test", File: file, Addr: addr, Ready: ready}) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ServeDNS: %v", err)
	}
	ask := func(proto, name string, qtype uint16) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		r, _, err := (&dns.Client{Net: proto}).Exchange(m, addr)
		if err != nil {
			t.Fatalf("%s %s: %v", proto, name, err)
		}
		return r
	}
	for _, proto := range []string{"udp", "tcp"} {
		r := ask(proto, "WWW.lab.test", dns.TypeA)
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "172.30.0.3" || r.Answer[0].Header().Ttl != 30 || !r.Authoritative {
			t.Errorf("%s A: %v", proto, r)
		}
		if r := ask(proto, "www.lab.test", dns.TypeAAAA); len(r.Answer) != 1 || r.Answer[0].(*dns.AAAA).AAAA.String() != "fd00::3" {
			t.Errorf("%s AAAA: %v", proto, r)
		}
	}
	if err := WriteZone(file, []ZoneRecord{{Name: "www.lab.test", TTL: 2, Addr: netip.MustParseAddr("192.168.77.2")},
		{Name: "www.lab.test", TTL: 2, Addr: netip.MustParseAddr("172.30.0.5")}}); err != nil {
		t.Fatal(err)
	}
	r := ask("udp", "www.lab.test", dns.TypeA)
	var got []string
	for _, rr := range r.Answer {
		got = append(got, rr.(*dns.A).A.String())
	}
	if strings.Join(got, ",") != "192.168.77.2,172.30.0.5" {
		t.Errorf("after the rewrite: %v", got)
	}
	if r := ask("udp", "nothing.lab.test", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("unknown name: rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	if r := ask("tcp", "example.com", dns.TypeA); r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
		t.Errorf("outside the zone: rcode %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if err := os.WriteFile(file, []byte("www.lab.test 30 A fd00::3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadZone(file); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("a malformed line: %v, want an error naming line 1", err)
	}
	if r := ask("udp", "www.lab.test", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("a malformed file: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
}
