package openflow

import (
	"net/netip"
	"strings"
	"testing"
)

func TestMatchBuilderKeepsOneValuePerFieldInEncodingOrder(t *testing.T) {
	var m Match
	m.TCPDst(80).IPSrc(ip("10.0.0.1")).InPort(3).TCPDst(443)
	var order []Field
	for _, mf := range m.Fields() {
		order = append(order, mf.Field)
	}
	want := []Field{FieldInPort, FieldIPv4Src, FieldTCPDst}
	if len(order) != len(want) {
		t.Fatalf("fields %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("fields %v, want %v", order, want)
		}
	}
	if mf, _ := m.Get(FieldTCPDst); mf.Value.Lo != 443 {
		t.Errorf("tcp_dst = %d, want the later 443", mf.Value.Lo)
	}
}

func TestMatchPrerequisitesFollowTheFieldsPresent(t *testing.T) {
	cases := []struct {
		name  string
		build func(m *Match)
		want  string
	}{
		{"a TCP port alone implies IPv4 TCP", func(m *Match) { m.TCPDst(80) }, "tcp,tp_dst=80"},
		{"a TCP port with an IPv6 address implies tcp6", func(m *Match) { m.TCPDst(80).IPDst(ip("fd00::1")) }, "tcp6,ipv6_dst=fd00::1,tp_dst=80"},
		{"an explicit protocol wins over the implied one", func(m *Match) { m.IPProto(47).IPDst(ip("10.0.0.1")) }, "ip,nw_dst=10.0.0.1,nw_proto=47"},
		{"an explicit Ethernet type wins", func(m *Match) { m.EthType(EthTypeIPv6).ICMPv6Type(128) }, "icmp6,icmp_type=128"},
		{"ARP fields imply arp", func(m *Match) { m.ARPTpa(ip("10.0.0.1")) }, "arp,arp_tpa=10.0.0.1"},
		{"conntrack tuple fields imply ip", func(m *Match) { m.CTState(CTStateTrk|CTStateEst, CTStateTrk|CTStateEst).CTNwDst(cidr("10.96.0.0/12")) },
			"ct_state=+est+trk,ct_nw_dst=10.96.0.0/12,ip"},
		{"a zero mask removes the field", func(m *Match) { m.IPSrc(ip("10.0.0.1")).PktMark(1, 1).PktMark(0, 0) }, "ip,nw_src=10.0.0.1"},
		{"a register range shifts the value into place", func(m *Match) { m.RegRange(Reg(4).Range(8, 15), 0xab) }, "reg4=0xab00/0xff00"},
		{"a non-CIDR IPv4 mask prints as an address", func(m *Match) { m.SetMasked(FieldIPv4Dst, addrU128(ip("10.0.1.7")), addrU128(ip("255.0.255.0"))) },
			"ip,nw_dst=10.0.1.0/255.0.255.0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m Match
			tc.build(&m)
			if got := m.String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			p := m.WithPrerequisites()
			if p.String() != tc.want {
				t.Errorf("WithPrerequisites prints %s, want %s", p.String(), tc.want)
			}
		})
	}
}

func TestMatchValuesAreClearedOutsideTheirMask(t *testing.T) {
	var m Match
	m.IPSrcPrefix(netip.MustParsePrefix("10.1.2.3/16"))
	if got := m.String(); got != "ip,nw_src=10.1.0.0/16" {
		t.Errorf("got %s", got)
	}
}

func TestEncodingRejectsWhatOvsWouldReject(t *testing.T) {
	cases := []struct {
		name string
		acts []Action
		want string
	}{
		{"a conjunction clause beyond its count", []Action{&Conjunction{ID: 1, Clause: 3, NClauses: 2}}, "conjunction"},
		{"a move between ranges of different widths", []Action{&RegMove{Src: Reg(0).Range(0, 7), Dst: Reg(1).Range(0, 15)}}, "widths differ"},
		{"a bit range past the field", []Action{&RegMove{Src: Reg(0).Range(0, 40), Dst: Reg(1).Range(0, 40)}}, "invalid"},
		{"an instruction among ct's actions", []Action{&CT{Table: NoTable, Actions: []Action{&GotoTable{1}}}}, "instruction"},
		{"learn output from an immediate value", []Action{&Learn{Specs: []LearnSpec{{Kind: LearnOutput, Immediate: true}}}}, "output"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Marshal(AddFlow(&Flow{Actions: tc.acts}), Version15, 1)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := Marshal(AddFlow(&Flow{Actions: []Action{&Meter{ID: 1}}}), Version13, 1); err != nil {
		t.Errorf("a meter in OpenFlow 1.3 should become an instruction, got %v", err)
	}
}

func TestMatchKeyIgnoresActionsAndCookie(t *testing.T) {
	a := mk(3, 100, 1, func(m *Match) { m.TCPDst(80) }, &Output{Port: 1})
	b := mk(3, 100, 2, func(m *Match) { m.IPProto(6).TCPDst(80) }, &Output{Port: 2})
	c := mk(3, 101, 1, func(m *Match) { m.TCPDst(80) }, &Output{Port: 1})
	if a.MatchKey() != b.MatchKey() {
		t.Errorf("same table, priority and match give keys %q and %q", a.MatchKey(), b.MatchKey())
	}
	if a.MatchKey() == c.MatchKey() || a.MatchKey() != "table=3,priority=100,tcp,tp_dst=80" {
		t.Errorf("keys %q and %q", a.MatchKey(), c.MatchKey())
	}
}
