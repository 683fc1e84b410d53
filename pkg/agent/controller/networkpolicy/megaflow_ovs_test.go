package networkpolicy

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A policy that narrows what is allowed is enforced for every connection that
// starts after the policy is reported realized, although OVS re-translates
// its cached datapath flows only after a commit is answered (package dpcache):
// client a opens new UDP connections (a new source port each) to web as fast
// as it can, so a megaflow made before the policy is hot when the policy
// forbids a; not one datagram sent after the realization may arrive.
func TestNarrowingPolicyHoldsForConnectionsStartedAfterRealization(t *testing.T) {
	n := newPolicyNode(t)
	var realizedAt atomic.Int64
	narrowed := make(chan struct{}, 1)
	n.narrowed = func() {
		realizedAt.CompareAndSwap(0, time.Now().UnixNano())
		select {
		case narrowed <- struct{}{}:
		default:
		}
	}

	// web counts datagrams on 9999; each carries the time it was sent.
	var sink net.PacketConn
	if err := n.web.Do(t, func() (err error) { sink, err = net.ListenPacket("udp4", ":9999"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	var mu sync.Mutex
	var received []int64
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 64)
		for {
			k, _, err := sink.ReadFrom(buf)
			if err != nil {
				return
			}
			if k >= 8 {
				mu.Lock()
				received = append(received, int64(binary.BigEndian.Uint64(buf[:8])))
				mu.Unlock()
			}
		}
	}()

	// a sends from a new socket each time (a new conntrack connection),
	// bounded in count and time.
	stop := make(chan struct{})
	var sent, sentAfter atomic.Int64
	sendDone := make(chan error, 1)
	go func() {
		sendDone <- n.a.Do(t, func() error {
			dst := &unix.SockaddrInet4{Port: 9999}
			copy(dst.Addr[:], n.web.IP.To4())
			msg := make([]byte, 8)
			deadline := time.Now().Add(20 * time.Second)
			for i := 0; i < 200000 && time.Now().Before(deadline); i++ {
				select {
				case <-stop:
					return nil
				default:
				}
				fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
				if err != nil {
					return err
				}
				now := time.Now().UnixNano()
				binary.BigEndian.PutUint64(msg, uint64(now))
				err = unix.Sendto(fd, msg, 0, dst)
				unix.Close(fd)
				if err != nil {
					return err
				}
				sent.Add(1)
				if r := realizedAt.Load(); r != 0 && now > r {
					sentAfter.Add(1)
				}
				time.Sleep(50 * time.Microsecond)
			}
			return nil
		})
	}()

	// Without policy the datagrams arrive (and the megaflows are made).
	waitFor(t, "datagrams from a to reach web before any policy", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(received) > 200
	})
	// web isolated for ingress, only b allowed: a is forbidden now.
	n.set(t, k8sPolicy("only-b", "ag-b"))
	select {
	case <-narrowed:
	case <-time.After(15 * time.Second):
		t.Fatal("the policy was not realized")
	}
	waitFor(t, "a to send for a while after the realization", func() bool { return sentAfter.Load() > 2000 })
	close(stop)
	if err := <-sendDone; err != nil {
		t.Fatalf("sending from a: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // datagrams in flight
	sink.Close()
	<-readDone

	r := realizedAt.Load()
	mu.Lock()
	defer mu.Unlock()
	var late []float64
	for _, ts := range received {
		if ts > r {
			late = append(late, float64(ts-r)/1e6)
		}
	}
	t.Logf("a sent %d datagrams, %d after the policy was realized; web received %d", sent.Load(), sentAfter.Load(), len(received))
	if len(late) > 0 {
		t.Fatalf("%d datagrams sent after the narrowing policy was realized reached web (sent up to %.2f ms after): a cached datapath flow forwarded them", len(late), late[len(late)-1])
	}
}

// waitFor polls cond for at most 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
