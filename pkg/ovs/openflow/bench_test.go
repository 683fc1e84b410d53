package openflow

import (
	"context"
	"net/netip"
	"testing"
)

// Benchmarks of the connection's hot path. hack/bench/openflow.sh prints the
// same figures side by side with ovs-ofctl; these are for `go test -bench`
// and -benchmem.

func benchFlows(n int) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		f := &Flow{Table: 0, Priority: 100, Actions: []Action{ResubmitToTable(1)}}
		f.Match.IPSrc(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})).IPProto(6).TCPDst(80)
		msgs[i] = AddFlow(f)
	}
	return msgs
}

// BenchmarkAppendBundleAdd measures framing one flow mod as a bundle add
// message, encoding included (-benchmem gives bytes per flow).
func BenchmarkAppendBundleAdd(b *testing.B) {
	c := &Conn{version: Version15}
	msgs := benchFlows(1024)
	buf := make([]byte, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		if buf, err = c.appendBundleAdd(buf[:0], 1, BundleAtomic|BundleOrdered, msgs[i%len(msgs)], uint32(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBundleOfFivePodFlows measures one pod's batch of 5 flows as an
// atomic bundle on a live bridge (each iteration replaces the same flows).
func BenchmarkBundleOfFivePodFlows(b *testing.B) {
	in := startBridgeB(b)
	c, err := Dial(context.Background(), in, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msgs := benchFlows(5)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Bundle(ctx, msgs...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBulkInstallPerFlow measures installing 10,000 flows in one bundle
// into an empty table; ns/op is per flow.
func BenchmarkBulkInstallPerFlow(b *testing.B) {
	in := startBridgeB(b)
	c, err := Dial(context.Background(), in, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const n = 10000
	msgs := benchFlows(n)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += n {
		b.StopTimer()
		if err := c.Bundle(ctx, DeleteFlows(TableAll, 0, 0)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := c.Bundle(ctx, msgs...); err != nil {
			b.Fatal(err)
		}
	}
}
