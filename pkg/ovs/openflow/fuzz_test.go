package openflow

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// newUnhandshakedConn returns a connection over an in-memory pipe whose
// reader has not started, with calls waiting on xids 1 (a plain reply) and 2
// (a multipart reply) and a batch watching xids 100-199, so that every
// routing path of the reader is reachable. The switch end is returned.
func newUnhandshakedConn() (*Conn, net.Conn) {
	a, b := net.Pipe()
	opts := Options{}.withDefaults()
	c := &Conn{
		nc: a, addr: "fuzz", version: Version15, opts: opts,
		calls:       map[uint32]*call{},
		batches:     map[*batch]struct{}{},
		done:        make(chan struct{}),
		readerDone:  make(chan struct{}),
		packetIns:   make(chan Frame, 4),
		portStatus:  make(chan Frame, 4),
		flowRemoved: make(chan Frame, 4),
	}
	c.calls[1] = newCall(1, nil, "plain")
	mp := newCall(2, nil, "multipart")
	mp.multipart = true
	c.calls[2] = mp
	msgs := make([]Message, 100)
	for i := range msgs {
		msgs[i] = &RawMessage{Type: 14}
	}
	c.batches[&batch{first: 100, msgs: msgs}] = struct{}{}
	return c, b
}

func fuzzSeeds() [][]byte {
	m := func(typ uint8, xid uint32, body []byte) []byte {
		b, _ := Marshal(&RawMessage{Type: typ, Body: body}, Version15, xid)
		return b
	}
	hello, _ := (&Hello{Versions: []uint8{Version13, Version15}}).AppendBody(nil, 0)
	errBody := AppendErrorBody(nil, &Error{Type: 2, Code: 4, Data: m(14, 100, []byte{1, 2, 3})})
	nxErr := AppendErrorBody(nil, &Error{Type: 0xffff, Code: 15, Experimenter: NiciraExperimenter})
	mpMore := []byte{0, 1, 0, 1, 0, 0, 0, 0, 0, 8, 0, 0, 1, 2, 3, 4}
	mpLast := []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 5, 6, 7, 8}
	pin2 := appendExperimenter(nil, NiciraExperimenter, nxtPacketIn2)
	pin2 = append(pin2, 0, 7, 0, 6, 0xab, 0xcd, 0, 0)
	return [][]byte{
		m(TypeHello, 1, hello),
		m(TypeEchoRequest, 5, []byte("ping")),
		m(TypeBarrierReply, 1, nil),
		m(TypeError, 100, errBody),
		m(TypeError, 1, nxErr),
		append(m(TypeMultipartReply, 2, mpMore), m(TypeMultipartReply, 2, mpLast)...),
		m(TypeExperimenter, 0, pin2),
		m(TypePortStatus, 0, make([]byte, 56)),
		m(TypeMultipartReply, 2, []byte{0, 1}),
		{6, 1, 0, 4, 0, 0, 0, 0},
	}
}

// FuzzReader feeds arbitrary bytes to the connection's reader as if the
// switch had sent them: framing, error decoding and naming, multipart
// reassembly, async delivery. Nothing may panic or hang.
func FuzzReader(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, sw := newUnhandshakedConn()
		go c.readLoop(bufio.NewReaderSize(c.nc, 4096))
		drained := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, sw); close(drained) }()
		_ = sw.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = sw.Write(data)
		c.fail(ErrClosed)
		<-c.readerDone
		sw.Close()
		<-drained
		for bt := range c.batches {
			for _, e := range bt.errs {
				_ = e.Error()
			}
		}
	})
}

// FuzzDecoders runs the stand-alone decoders of this half of the package on
// arbitrary bytes.
func FuzzDecoders(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, _ := SplitMessages(data)
		for _, fr := range frames {
			if e, err := DecodeError(fr.Header.Xid, fr.Body); err == nil {
				_ = e.Error()
				_, _ = e.FailedHeader()
				if got, err := DecodeError(e.Xid, AppendErrorBody(nil, e)); err != nil || got.Type != e.Type || got.Code != e.Code {
					t.Fatalf("error round trip: %+v -> %+v, %v", e, got, err)
				}
			}
			_, _ = NegotiateVersion([]uint8{Version15, Version13}, fr.Header, fr.Body)
			_, _ = DecodeFeatures(fr.Body)
			_ = IsPacketIn2(fr)
			_, _ = DecodeAnyPacketIn(fr)
		}
		for off := range 6 {
			entries, _ := SplitEntries(data, off)
			total := 0
			for _, e := range entries {
				if len(e) < off+2 || int(binary.BigEndian.Uint16(e[off:])) != len(e) {
					t.Fatalf("entry of %d bytes does not carry its length at %d", len(e), off)
				}
				total += len(e)
			}
			if total > len(data) {
				t.Fatalf("entries cover %d bytes of %d", total, len(data))
			}
		}
	})
}
