package networkpolicy

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"k8s.io/apimachinery/pkg/util/sets"
)

// response builds a DNS response with the given answers, written by
// dnsmessage's builder (the wire format is the library's, not ours).
func response(t *testing.T, rcode dnsmessage.RCode, build func(b *dnsmessage.Builder)) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, Response: true, RCode: rcode})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("WWW.Example.Test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	if err := b.StartAnswers(); err != nil {
		t.Fatal(err)
	}
	build(&b)
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func rh(name string, ttl uint32) dnsmessage.ResourceHeader {
	return dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(name), Class: dnsmessage.ClassINET, TTL: ttl}
}

func TestADNSAnswerGivesItsAddressesToTheNameAskedThroughItsCNAMEChain(t *testing.T) {
	msg := response(t, dnsmessage.RCodeSuccess, func(b *dnsmessage.Builder) {
		_ = b.CNAMEResource(rh("WWW.Example.Test.", 60), dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName("edge.cdn.test.")})
		_ = b.AResource(rh("edge.cdn.test.", 300), dnsmessage.AResource{A: [4]byte{10, 0, 0, 1}})
		_ = b.AAAAResource(rh("edge.cdn.test.", 30), dnsmessage.AAAAResource{AAAA: netip.MustParseAddr("fd00::1").As16()})
		_ = b.TXTResource(rh("edge.cdn.test.", 30), dnsmessage.TXTResource{TXT: []string{"ignored"}})
	})
	got, err := parseDNSAnswers(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[dnsAnswer]bool{
		{name: "edge.cdn.test", addr: netip.MustParseAddr("10.0.0.1"), ttl: 300 * time.Second}:   true,
		{name: "www.example.test", addr: netip.MustParseAddr("10.0.0.1"), ttl: 60 * time.Second}: true, // the chain's smallest TTL
		{name: "edge.cdn.test", addr: netip.MustParseAddr("fd00::1"), ttl: 30 * time.Second}:     true,
		{name: "www.example.test", addr: netip.MustParseAddr("fd00::1"), ttl: 30 * time.Second}:  true,
	}
	if len(got) != len(want) {
		t.Fatalf("answers %v, want %v", got, want)
	}
	for _, a := range got {
		if !want[a] {
			t.Errorf("unexpected answer %+v (want %v)", a, want)
		}
	}
}

func TestAFailedDNSAnswerTeachesNothing(t *testing.T) {
	msg := response(t, dnsmessage.RCodeNameError, func(*dnsmessage.Builder) {})
	if got, err := parseDNSAnswers(msg); err != nil || len(got) != 0 {
		t.Fatalf("NXDOMAIN gave %v, %v; want nothing", got, err)
	}
	if _, err := parseDNSAnswers([]byte{1, 2, 3}); err == nil {
		t.Fatal("three bytes parsed as a DNS message")
	}
}

func TestTheFQDNCacheKeepsAnAddressForItsTTLAtLeastTheMinimum(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // a fixed clock: no wall-clock time is measured
	c := newFQDNCache(10 * time.Second)
	a1, a2 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	gained, v1 := c.learn(t0, []dnsAnswer{{name: "api.example.test", addr: a1, ttl: 0}, {name: "api.example.test", addr: a2, ttl: time.Minute}})
	if !gained.Equal(sets.New("api.example.test")) || v1 == 0 {
		t.Fatalf("gained %v at version %d", sets.List(gained), v1)
	}
	if gained, v := c.learn(t0.Add(time.Second), []dnsAnswer{{name: "api.example.test", addr: a2, ttl: time.Minute}}); gained.Len() != 0 || v != v1 {
		t.Fatalf("a known address again: gained %v, version %d (want none, %d): no rule needs writing", sets.List(gained), v, v1)
	}
	if got := c.addrs([]string{"*.example.test"}); len(got) != 2 {
		t.Fatalf("addresses of *.example.test: %v", got)
	}
	if lost := c.expire(t0.Add(9*time.Second), nil); lost.Len() != 0 {
		t.Fatalf("a TTL of 0 under a minimum of 10 s expired at 9 s: %v", sets.List(lost))
	}
	if lost := c.expire(t0.Add(10*time.Second), nil); !lost.Equal(sets.New("api.example.test")) {
		t.Fatalf("at 10 s the TTL-0 address should go: lost %v", sets.List(lost))
	}
	if got := c.addrs([]string{"api.example.test"}); len(got) != 1 || got[0] != a2 {
		t.Fatalf("after 10 s only the 1-minute address stays: %v", got)
	}
	if c.currentVersion() <= v1 {
		t.Fatal("an expiry must move the version: the policies are computed again")
	}
	if lost := c.expire(t0.Add(61*time.Second), map[netip.Addr]bool{a2: true}); lost.Len() != 0 {
		t.Fatalf("an address a live connection goes to must stay after its TTL: lost %v", sets.List(lost))
	}
	c.expire(t0.Add(62*time.Second), nil)
	if got := c.entries(); len(got) != 0 {
		t.Fatalf("after its TTL every address is gone: %v", got)
	}
}

func TestTCPDNSMessagesAreReassembledFromTheirSegments(t *testing.T) {
	msg := response(t, dnsmessage.RCodeSuccess, func(b *dnsmessage.Builder) {
		_ = b.AResource(rh("www.example.test.", 300), dnsmessage.AResource{A: [4]byte{10, 0, 0, 1}})
	})
	stream := append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...)
	var s tcpDNSStreams
	k := tcpFlowKey{src: netip.MustParseAddr("10.0.0.53"), dst: netip.MustParseAddr("10.0.0.2"), srcPort: 53, dstPort: 40000}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := s.add(now, k, 1000, stream[:2], false); len(got) != 0 {
		t.Fatalf("the length alone completed %d messages", len(got))
	}
	if got := s.add(now, k, 1000, stream[:2], false); len(got) != 0 {
		t.Fatalf("a retransmitted length completed %d messages", len(got))
	}
	got := s.add(now, k, 1002, stream[2:], false)
	if len(got) != 1 || string(got[0]) != string(msg) {
		t.Fatalf("the second segment should complete the message: %d messages", len(got))
	}
	two := append(append([]byte(nil), stream...), stream...)
	if got := s.add(now, k, 1002+uint32(len(msg)), two, true); len(got) != 2 {
		t.Fatalf("one segment with two messages gave %d", len(got))
	}
}
