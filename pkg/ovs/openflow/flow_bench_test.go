package openflow

import (
	"net/netip"
	"testing"
)

// typicalFlow is the flow of the install benchmark:
// table=0,priority=100,ip,nw_src=10.0.x.y,tcp,tp_dst=80 actions=resubmit(,1).
func typicalFlow(i int) *Flow {
	f := &Flow{Table: 0, Priority: 100, Actions: []Action{ResubmitToTable(1)}}
	f.Match.IPSrc(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})).TCPDst(80)
	return f
}

// BenchmarkEncodeTypicalFlow encodes one prebuilt flow-mod into a reused buffer.
func BenchmarkEncodeTypicalFlow(b *testing.B) {
	fm := AddFlow(typicalFlow(1))
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var err error
		if buf, err = AppendMessage(buf[:0], fm, Version15, uint32(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkBuildAndEncodeTypicalFlow builds the flow with the builder API and encodes it.
func BenchmarkBuildAndEncodeTypicalFlow(b *testing.B) {
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var err error
		if buf, err = AppendMessage(buf[:0], AddFlow(typicalFlow(i)), Version15, uint32(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTypicalFlowString prints the flow as dump-flows does.
func BenchmarkTypicalFlowString(b *testing.B) {
	f := typicalFlow(1)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = f.String()
	}
}

// BenchmarkDecodeTypicalFlowStats decodes one flow stats entry.
func BenchmarkDecodeTypicalFlowStats(b *testing.B) {
	body, err := AppendFlowStats(nil, []FlowStats{{Flow: *typicalFlow(1), PacketCount: 1, ByteCount: 60}}, Version15)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeFlowStats(body, Version15); err != nil {
			b.Fatal(err)
		}
	}
}
