package openflow

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSwitch is the switch end of an in-memory channel, for behaviour a real
// Open vSwitch cannot be made to show on demand (silence, split replies).
type fakeSwitch struct {
	t          *testing.T
	nc         net.Conn
	answerEcho bool
	wmu        sync.Mutex
	received   chan Frame
	// onMultipart answers a multipart request with the given parts.
	onMultipart func(xid uint32) [][]byte
}

func newFakeSwitch(t *testing.T, answerEcho bool) (*fakeSwitch, net.Conn) {
	a, b := net.Pipe()
	fs := &fakeSwitch{t: t, nc: b, answerEcho: answerEcho, received: make(chan Frame, 10000)}
	done := make(chan struct{})
	go fs.run(done)
	t.Cleanup(func() { b.Close(); a.Close(); <-done })
	return fs, a
}

func (fs *fakeSwitch) send(typ uint8, xid uint32, body []byte) {
	fs.wmu.Lock()
	defer fs.wmu.Unlock()
	msg, _ := Marshal(&RawMessage{Type: typ, Body: body}, Version15, xid)
	_, _ = fs.nc.Write(msg)
}

func (fs *fakeSwitch) run(done chan struct{}) {
	defer close(done)
	hello, _ := (&Hello{Versions: []uint8{Version13, Version15}}).AppendBody(nil, Version15)
	go fs.send(TypeHello, 1, hello)
	var hdr [HeaderLen]byte
	for {
		if _, err := io.ReadFull(fs.nc, hdr[:]); err != nil {
			return
		}
		h, err := ParseHeader(hdr[:])
		if err != nil {
			return
		}
		body := make([]byte, int(h.Length)-HeaderLen)
		if _, err := io.ReadFull(fs.nc, body); err != nil {
			return
		}
		switch h.Type {
		case TypeHello:
		case TypeFeaturesRequest:
			feat := make([]byte, 24)
			binary.BigEndian.PutUint64(feat, 0xabcdef)
			feat[12] = 254
			go fs.send(TypeFeaturesReply, h.Xid, feat)
		case TypeEchoRequest:
			if fs.answerEcho {
				go fs.send(TypeEchoReply, h.Xid, body)
			}
		case TypeMultipartRequest:
			if fs.onMultipart != nil {
				parts := fs.onMultipart(h.Xid)
				go func() {
					for i, p := range parts {
						var flags uint16
						if i < len(parts)-1 {
							flags = multipartMore
						}
						b := binary.BigEndian.AppendUint16(nil, binary.BigEndian.Uint16(body))
						b = binary.BigEndian.AppendUint16(b, flags)
						b = append(append(b, 0, 0, 0, 0), p...)
						fs.send(TypeMultipartReply, h.Xid, b)
					}
				}()
			}
		default:
			select {
			case fs.received <- Frame{Header: h, Body: body}:
			default:
				fs.t.Errorf("fake switch: too many unread messages")
				return
			}
		}
	}
}

func TestConnAnswersTheSwitchsEchoRequests(t *testing.T) {
	fs, nc := newFakeSwitch(t, true)
	c, err := NewConn(testCtx(t), nc, Options{EchoInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Version() != Version15 || c.Features().DatapathID != 0xabcdef {
		t.Fatalf("handshake: version %#x features %+v", c.Version(), c.Features())
	}
	fs.send(TypeEchoRequest, 77, []byte("are you there"))
	select {
	case f := <-fs.received:
		if f.Header.Type != TypeEchoReply || f.Header.Xid != 77 || string(f.Body) != "are you there" {
			t.Fatalf("want echo reply xid 77 with the request's data, got %+v %q", f.Header, f.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no echo reply")
	}
}

func TestConnDeclaresASilentSwitchDead(t *testing.T) {
	_, nc := newFakeSwitch(t, false)
	c, err := NewConn(testCtx(t), nc, Options{EchoInterval: 20 * time.Millisecond, MaxMissedEchoes: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection still considered alive after echoes went unanswered")
	}
	if err := c.Err(); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "echo") {
		t.Fatalf("want a closed connection blaming echoes, got %v", err)
	}
	if err := c.Barrier(testCtx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("calls on a dead connection should fail with ErrClosed, got %v", err)
	}
}

func TestConnKeepsAnAnsweringSwitchAlive(t *testing.T) {
	_, nc := newFakeSwitch(t, true)
	c, err := NewConn(testCtx(t), nc, Options{EchoInterval: 10 * time.Millisecond, MaxMissedEchoes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Twenty echo rounds, bounded by a count, not by a timing assertion.
	for range 20 {
		if err := c.Echo(testCtx(t)); err != nil {
			t.Fatalf("echo: %v", err)
		}
	}
	if c.Err() != nil {
		t.Fatalf("connection died: %v", c.Err())
	}
}

func TestMultipartRepliesInSeveralPartsAreJoinedInOrder(t *testing.T) {
	fs, nc := newFakeSwitch(t, true)
	fs.onMultipart = func(uint32) [][]byte { return [][]byte{[]byte("one,"), []byte("two,"), []byte("three")} }
	c, err := NewConn(testCtx(t), nc, Options{EchoInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.Multipart(testCtx(t), &MultipartRequest{Type: MultipartTable})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "one,two,three" {
		t.Fatalf("got %q", got)
	}
}

func TestACallThatIsNeverAnsweredEndsWithItsContext(t *testing.T) {
	fs, nc := newFakeSwitch(t, true)
	c, err := NewConn(testCtx(t), nc, Options{EchoInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Barrier(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want DeadlineExceeded, got %v", err)
	}
	<-fs.received // the barrier reached the switch
	if err := c.Echo(testCtx(t)); err != nil {
		t.Fatalf("the connection should stay usable: %v", err)
	}
}

func TestCallsFailWhenTheSwitchHangsUp(t *testing.T) {
	fs, nc := newFakeSwitch(t, true)
	c, err := NewConn(testCtx(t), nc, Options{EchoInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	errc := make(chan error, 1)
	go func() { errc <- c.Barrier(testCtx(t)) }()
	<-fs.received
	fs.nc.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("want ErrClosed, got %v", err)
	}
	if _, ok := <-c.PacketIns(); ok {
		t.Fatal("async channels should close with the connection")
	}
}

func TestSendWritesBatchesWholeAndInOrder(t *testing.T) {
	fs, nc := newFakeSwitch(t, true)
	c, err := NewConn(testCtx(t), nc, Options{EchoInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// More than writeFlushSize, so the batch goes out in several writes.
	const n = 3000
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = &RawMessage{Type: 14, Body: bytes.Repeat([]byte{byte(i)}, 100)}
	}
	if err := c.Send(testCtx(t), msgs...); err != nil {
		t.Fatal(err)
	}
	var prev uint32
	for i := range n {
		f := <-fs.received
		if f.Header.Type != 14 || len(f.Body) != 100 || f.Body[0] != byte(i) {
			t.Fatalf("message %d arrived as %+v", i, f.Header)
		}
		if i > 0 && f.Header.Xid != prev+1 {
			t.Fatalf("xids of a batch should be consecutive: %d after %d", f.Header.Xid, prev)
		}
		prev = f.Header.Xid
	}
}

func TestContextsEndingAroundCallsLeaveTheConnectionUsable(t *testing.T) {
	_, nc := newFakeSwitch(t, true)
	c, err := NewConn(testCtx(t), nc, Options{EchoInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Cancel each context before, while or right after its call writes:
	// giving up on a call must never break the shared connection.
	for i := range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		go cancel()
		_ = c.Echo(ctx)
		if c.Err() != nil {
			t.Fatalf("connection died after %d cancelled calls: %v", i, c.Err())
		}
	}
	if err := c.Echo(testCtx(t)); err != nil {
		t.Fatalf("echo after cancelled calls: %v", err)
	}
}
