package openflow

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// Helpers of the connection tests: a live bridge, and hand-encoded messages
// so the connection is tested on its own bytes (independent of the
// package's flow encoder).

const testBridge = "br0"

// startBridge starts OVS in a fresh netns with a netdev bridge that speaks
// OpenFlow 1.3 and 1.5, and returns the instance and the bridge's socket.
func startBridge(t *testing.T) (*ovsinstance.Instance, string) {
	t.Helper()
	return startBridgeTB(t)
}

// startBridgeB is startBridge for benchmarks; it returns the bridge's socket.
func startBridgeB(b *testing.B) string {
	b.Helper()
	_, mgmt := startBridgeTB(b)
	return mgmt
}

func startBridgeTB(t testing.TB) (*ovsinstance.Instance, string) {
	t.Helper()
	in := ovsinstance.StartForTest(t, "ofconn")
	if _, err := in.Vsctl("add-br", testBridge, "--", "set", "bridge", testBridge,
		"datapath_type=netdev", "protocols=OpenFlow13,OpenFlow15", "fail_mode=secure"); err != nil {
		t.Fatal(err)
	}
	return in, in.BridgeMgmt(testBridge)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dialForTest(t *testing.T, addr string, opts Options) *Conn {
	t.Helper()
	c, err := Dial(testCtx(t), addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dumpFlows returns the bridge's flows as ovs-ofctl prints them without
// statistics, sorted.
func dumpFlows(t *testing.T, in *ovsinstance.Instance) []string {
	t.Helper()
	out, err := in.Ofctl("dump-flows", testBridge, "--no-stats")
	if err != nil {
		t.Fatal(err)
	}
	var flows []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			flows = append(flows, l)
		}
	}
	sort.Strings(flows)
	return flows
}

// testFlow is a hand-encoded OFPT_FLOW_MOD whose String() is its text.
type testFlow struct {
	RawMessage
	text string
}

func (f *testFlow) String() string { return f.text }

const (
	ofpfcAdd          = 0
	ofpfcDelete       = 3
	ofpffCheckOverlap = 1 << 1
	ofppTable         = 0xfffffff9
	ofppController    = 0xfffffffd
)

// oxmInPort, oxmEthType, oxmIPv4Src, oxmUDPDst encode OXM basic fields.
func oxmField(field uint8, value []byte) []byte {
	b := []byte{0x80, 0x00, field << 1, byte(len(value))}
	return append(b, value...)
}

func oxmInPort(p uint32) []byte         { return oxmField(0, binary.BigEndian.AppendUint32(nil, p)) }
func oxmEthType(t uint16) []byte        { return oxmField(5, binary.BigEndian.AppendUint16(nil, t)) }
func oxmIPv4Src(a, b, c, d byte) []byte { return oxmField(11, []byte{a, b, c, d}) }

// actOutput is OFPAT_OUTPUT.
func actOutput(port uint32) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	b = binary.BigEndian.AppendUint16(b, 16)
	b = binary.BigEndian.AppendUint32(b, port)
	b = binary.BigEndian.AppendUint16(b, 0xffff)
	return append(b, 0, 0, 0, 0, 0, 0)
}

// instApply is OFPIT_APPLY_ACTIONS holding actions.
func instApply(actions ...[]byte) []byte {
	var acts []byte
	for _, a := range actions {
		acts = append(acts, a...)
	}
	b := binary.BigEndian.AppendUint16(nil, 4)
	b = binary.BigEndian.AppendUint16(b, uint16(8+len(acts)))
	b = append(b, 0, 0, 0, 0)
	return append(b, acts...)
}

// flowMod hand-encodes ofp_flow_mod (same layout in 1.3 and 1.5).
func flowMod(text string, cmd uint8, table uint8, priority uint16, cookie, cookieMask uint64, flags uint16, match []byte, insts ...[]byte) *testFlow {
	b := binary.BigEndian.AppendUint64(nil, cookie)
	b = binary.BigEndian.AppendUint64(b, cookieMask)
	b = append(b, table, cmd)
	b = binary.BigEndian.AppendUint16(b, 0) // idle
	b = binary.BigEndian.AppendUint16(b, 0) // hard
	b = binary.BigEndian.AppendUint16(b, priority)
	b = binary.BigEndian.AppendUint32(b, 0xffffffff) // buffer_id
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = appendOXMMatch(b, match)
	for _, in := range insts {
		b = append(b, in...)
	}
	return &testFlow{RawMessage: RawMessage{Type: 14, Body: b}, text: text}
}

// addIPFlow is "table=T, priority=100, ip, nw_src=10.0.x.y, actions=output:port".
func addIPFlow(table uint8, cookie uint64, x, y byte, port uint32) *testFlow {
	match := append(oxmEthType(0x0800), oxmIPv4Src(10, 0, x, y)...)
	text := fmt.Sprintf("cookie=%#x, table=%d, priority=100,ip,nw_src=10.0.%d.%d actions=output:%d", cookie, table, x, y, port)
	return flowMod(text, ofpfcAdd, table, 100, cookie, 0, 0, match, instApply(actOutput(port)))
}

// deleteByCookie deletes every flow of every table whose cookie matches.
func deleteByCookie(cookie, mask uint64) *testFlow {
	return flowMod(fmt.Sprintf("delete cookie=%#x/%#x", cookie, mask), ofpfcDelete, TableAll, 0, cookie, mask, 0, nil)
}

// flowStatsCookies decodes the cookie of each entry of a flow stats reply
// (ofp_flow_desc in 1.5, ofp_flow_stats in 1.3), by the spec's offsets.
func flowStatsCookies(t *testing.T, version uint8, body []byte) []uint64 {
	t.Helper()
	entries, err := SplitEntries(body, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := 16 // 1.5: length, pad2, table, pad, priority, idle, hard, flags, importance
	if version == Version13 {
		off = 24 // 1.3: ... duration_sec, duration_nsec, priority, idle, hard, flags, pad2[4]
	}
	var cookies []uint64
	for _, e := range entries {
		cookies = append(cookies, binary.BigEndian.Uint64(e[off:off+8]))
	}
	return cookies
}

// appendOXMMatch appends an ofp_match of type OFPMT_OXM holding the encoded
// OXM fields, padded to a multiple of 8 bytes.
func appendOXMMatch(b []byte, fields []byte) []byte {
	n := 4 + len(fields)
	b = binary.BigEndian.AppendUint16(b, 1) // OFPMT_OXM
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	b = append(b, fields...)
	for pad := (n+7)&^7 - n; pad > 0; pad-- {
		b = append(b, 0)
	}
	return b
}
