package openflow

import (
	"fmt"
	"strings"
	"testing"
)

func TestParsedFlowsPrintAsTheTextTheyCameFrom(t *testing.T) {
	for _, tc := range flowCases() {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFlow(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.String(); got != tc.want {
				t.Errorf("ParseFlow(s).String()\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

// TestParsedFlowsEncodeToWhatOvsDecodesAsTheirText feeds the encoding of
// every parsed flow to ovs-ofctl ofp-parse.
func TestParsedFlowsEncodeToWhatOvsDecodesAsTheirText(t *testing.T) {
	var msgs [][]byte
	var want []string
	for i, tc := range flowCases() {
		f, err := ParseFlow(tc.want)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Marshal(AddFlow(f), Version15, uint32(i+1))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		msgs = append(msgs, b)
		want = append(want, fmt.Sprintf("OFPT_FLOW_MOD (OF1.5) (xid=0x%x): %s", i+1, AddFlow(tc.flow).String()))
	}
	got := ofpParse(t, msgs...)
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Errorf("ofp-parse\n got: %v\nwant: %s", got[min(i, len(got)-1)], want[i])
		}
	}
}

func TestParseFlowAcceptsDumpFlowsStatisticsAndSpacing(t *testing.T) {
	s := "cookie=0x5, duration=12.5s, table=3, n_packets=10, n_bytes=600, idle_timeout=7, idle_age=1, priority=9,tcp,nw_dst=10.0.0.0/255.0.255.0,tp_dst=80 actions=output:2"
	f, err := ParseFlow(s)
	if err != nil {
		t.Fatal(err)
	}
	want := "cookie=0x5, table=3, idle_timeout=7, priority=9,tcp,nw_dst=10.0.0.0/255.0.255.0,tp_dst=80 actions=output:2"
	if f.String() != want {
		t.Errorf("got %s, want %s", f.String(), want)
	}
}

func TestParseFlowRejectsWhatItCannotRepresent(t *testing.T) {
	for _, s := range []string{
		"priority=1", // no actions
		"priority=1,nw_src=10.0.0.300 actions=drop", // bad address
		"priority=1,tp_dst=80 actions=drop",         // port without protocol
		"priority=1,foo=1 actions=drop",             // unknown field
		"priority=1 actions=frobnicate",             // unknown action
		"priority=1 actions=move:NXM_NX_REG0[0..40]->NXM_NX_REG1[]",
		"priority=1,ct_state=+bogus actions=drop",
		"priority=1,in_port=1/0xff actions=drop", // in_port is not maskable
	} {
		if f, err := ParseFlow(s); err == nil {
			t.Errorf("ParseFlow(%q) = %s, want an error", s, f)
		}
	}
}

func TestParseMatchReadsShortcutsAndMasks(t *testing.T) {
	m, err := ParseMatch("udp6,ipv6_src=fd00::/8,tp_src=0x100/0xff00,reg3=0x5/0xf")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.String(), "udp6,reg3=0x5/0xf,ipv6_src=fd00::/8,tp_src=0x100/0xff00"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, ok := m.Get(FieldUDPSrc); !ok || !strings.Contains(m.String(), "udp6") {
		t.Errorf("tp_src of udp6 did not become udp_src: %v", m.Fields())
	}
}
