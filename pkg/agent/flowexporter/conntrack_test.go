package flowexporter

import (
	"net/netip"
	"testing"
)

// Lines as OVS 3.1 prints them: the first two from the userspace
// datapath of a test bridge (dpctl/dump-conntrack -m -s), the third in
// the kernel datapath's form (one state, counters in the tuples).
const dump = `tcp,orig=(src=10.10.1.2,dst=10.10.1.3,sport=53448,dport=8080),reply=(src=10.10.1.3,dst=10.10.1.2,sport=8080,dport=53448),id=0,zone=65520,status=0,timeout=86399,protoinfo=(state_orig=ESTABLISHED,state_reply=ESTABLISHED,wscale_orig=10,wscale_reply=10,flags_orig=WINDOW_SCALE,flags_reply=WINDOW_SCALE)
tcp,orig=(src=10.10.1.2,dst=10.10.1.3,sport=53448,dport=8080),reply=(src=10.10.1.3,dst=10.10.1.2,sport=8080,dport=53448),id=0,zone=65520,status=0,timeout=899,protoinfo=(state_orig=FIN_WAIT_2,state_reply=ESTABLISHED,wscale_orig=10,wscale_reply=10,flags_orig=WINDOW_SCALE,flags_reply=WINDOW_SCALE)
udp,orig=(src=10.10.1.2,dst=10.96.0.10,sport=40000,dport=53,packets=3,bytes=210),reply=(src=10.10.1.9,dst=10.10.1.2,sport=53,dport=40000,packets=2,bytes=300),zone=65521,mark=0x20,labels=0x1000000000000000000000000,timeout=25
icmp,orig=(src=10.10.1.2,dst=10.10.1.3,id=7,type=8,code=0),reply=(src=10.10.1.3,dst=10.10.1.2,id=7,type=0,code=0),zone=65520

garbage line
tcp,orig=(src=10.10.1.2,dst=10.10.1.3,sport=99999,dport=8080),reply=(src=10.10.1.3,dst=10.10.1.2,sport=8080,dport=1)
`

func TestParseDpctlReadsUserspaceAndKernelEntries(t *testing.T) {
	conns, skipped := ParseDpctl([]byte(dump))
	if skipped != 2 || len(conns) != 4 {
		t.Fatalf("%d entries, %d skipped; want 4 and 2 (the garbage line and the port out of range)", len(conns), skipped)
	}
	a := netip.MustParseAddr
	if c := conns[0]; c.Orig != (Tuple{6, a("10.10.1.2"), a("10.10.1.3"), 53448, 8080}) || c.Zone != 65520 ||
		c.TCPState != "ESTABLISHED" || c.HasCounts || c.isDNAT() {
		t.Errorf("first entry %+v", c)
	}
	if c := conns[1]; c.TCPState != "FIN_WAIT_2" {
		t.Errorf("half-closed entry reads %q, want the later state FIN_WAIT_2", c.TCPState)
	}
	c := conns[2]
	if !c.HasCounts || c.OrigCounts != (Counts{3, 210}) || c.ReplyCounts != (Counts{2, 300}) || c.Mark != 0x20 ||
		c.Labels != "0x1000000000000000000000000" || c.Zone != 65521 || !c.isDNAT() || c.TCPState != "" {
		t.Errorf("kernel-style entry %+v", c)
	}
	if c := conns[3]; c.Orig.Proto != 1 || c.Orig.SrcPort != 7 || c.Reply.Src != a("10.10.1.3") {
		t.Errorf("ICMP entry %+v", c)
	}
}

func TestLaterStateOrdersTheTCPStateMachine(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"ESTABLISHED", "ESTABLISHED", "ESTABLISHED"},
		{"SYN_SENT", "SYN_RECV", "SYN_RECV"},
		{"TIME_WAIT", "FIN_WAIT_2", "TIME_WAIT"},
		{"FIN_WAIT_2", "FIN_WAIT_2", "TIME_WAIT"},
		{"FIN_WAIT_2", "ESTABLISHED", "FIN_WAIT_2"},
		{"CLOSED", "FIN_WAIT_2", "CLOSED"},
		{"", "CLOSED", "CLOSED"},
		{"UNKNOWN", "", "UNKNOWN"},
	} {
		if got := laterState(tc.a, tc.b); got != tc.want {
			t.Errorf("laterState(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}
