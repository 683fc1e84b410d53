package openflow

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// fakePacketIO is a switch channel fed by the test.
type fakePacketIO struct {
	ins chan binding.Frame
	out chan *binding.PacketOut
}

func (f *fakePacketIO) PacketIns() <-chan binding.Frame { return f.ins }

func (f *fakePacketIO) Apply(context.Context, ...binding.Message) error { return nil }

func (f *fakePacketIO) SendPacketOut(_ context.Context, po *binding.PacketOut) error {
	f.out <- po
	return nil
}

// packetInFrame is a packet-in as the switch sends it (NXT_PACKET_IN2).
func packetInFrame(t *testing.T, userData ...byte) binding.Frame {
	t.Helper()
	raw, err := binding.Marshal(&binding.PacketIn{Data: []byte{1, 2, 3}, TableID: 7, UserData: userData}, binding.Version15, 1)
	if err != nil {
		t.Fatal(err)
	}
	frames, err := binding.SplitMessages(raw)
	if err != nil || len(frames) != 1 {
		t.Fatalf("split %d bytes: %v (%d frames)", len(raw), err, len(frames))
	}
	return frames[0]
}

func TestThePacketInDispatcherHandsEachKindToItsHandlerAndASlowOneBlocksNoOther(t *testing.T) {
	io := &fakePacketIO{ins: make(chan binding.Frame), out: make(chan *binding.PacketOut, 1)}
	d := NewPacketInDispatcher(io)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()

	release, started := make(chan struct{}), make(chan struct{}, packetInQueue+20)
	var slowSeen atomic.Int64
	d.Handle(PacketInPolicy, func(context.Context, *binding.PacketIn) {
		slowSeen.Add(1)
		started <- struct{}{}
		<-release
	})
	traced := make(chan *binding.PacketIn, 1)
	d.Handle(PacketInTraceflow, func(_ context.Context, pi *binding.PacketIn) { traced <- pi })

	// The policy handler is stuck on its first packet-in, and more than
	// its queue holds wait behind it: they are dropped, not waited for.
	for range packetInQueue + 10 {
		io.ins <- packetInFrame(t, byte(PacketInPolicy), 1, 0, 0)
	}
	io.ins <- packetInFrame(t, 0x7e) // a kind nobody handles
	io.ins <- packetInFrame(t, byte(PacketInTraceflow), 5, byte(TraceflowOutput))
	select {
	case pi := <-traced:
		if pi.TableID != 7 || len(pi.UserData) != 3 || pi.UserData[1] != 5 {
			t.Fatalf("the Traceflow handler should get the decoded packet-in, got table %d userdata %v", pi.TableID, pi.UserData)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Traceflow packet-in waited behind the stuck policy handler")
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the policy handler never got its packet-in")
	}
	close(release)
	time.Sleep(100 * time.Millisecond) // it drains its queue
	if n := slowSeen.Load(); n < 1 || n > packetInQueue+1 {
		t.Fatalf("the policy handler should see between 1 and %d packet-ins (its queue and the one it holds), saw %d", packetInQueue+1, n)
	}
	if err := d.SendPacketOut(ctx, &binding.PacketOut{InPort: 3}); err != nil {
		t.Fatal(err)
	}
	if po := <-io.out; po.InPort != 3 {
		t.Fatalf("the packet-out should go to the switch as it was, got in_port %d", po.InPort)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end with its context")
	}
}

func TestPacketInsThatArriveBeforeTheirHandlerWaitForIt(t *testing.T) {
	io := &fakePacketIO{ins: make(chan binding.Frame), out: make(chan *binding.PacketOut, 1)}
	d := NewPacketInDispatcher(io)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)
	for i := range 3 {
		io.ins <- packetInFrame(t, byte(PacketInServiceReject), byte(i))
	}
	got := make(chan byte, 3)
	d.Handle(PacketInServiceReject, func(_ context.Context, pi *binding.PacketIn) { got <- pi.UserData[1] })
	for want := range byte(3) {
		select {
		case b := <-got:
			if b != want {
				t.Fatalf("the queued packet-ins should come in order: got %d, want %d", b, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("packet-in %d, sent before its handler registered, never reached it", want)
		}
	}
}

func TestEveryPacketInKindHasAName(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range []PacketInKind{PacketInServiceReject, PacketInPolicy, PacketInTraceflow} {
		n := k.String()
		if n == "unknown" || seen[n] {
			t.Fatalf("kind %d has no name of its own: %q", k, n)
		}
		seen[n] = true
		if got := k.userData(9); len(got) != 2 || PacketInKind(got[0]) != k || got[1] != 9 {
			t.Fatalf("userdata of kind %s should start with the kind, got %v", k, got)
		}
	}
}
