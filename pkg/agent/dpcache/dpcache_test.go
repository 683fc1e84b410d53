package dpcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every Sync returns only after a purge that started after it was called,
// and calls that come while a purge runs share the next one.
func TestSyncWaitsForAPurgeStartedAfterTheCall(t *testing.T) {
	var started atomic.Int64 // purges started
	release := make(chan struct{})
	p := New(func(context.Context) error {
		started.Add(1)
		<-release
		return nil
	})
	ctx := context.Background()

	first := make(chan error, 1)
	go func() { first <- p.Sync(ctx) }()
	waitFor(t, "the first purge to start", func() bool { return started.Load() == 1 })
	// Ten writes while the first purge runs: it started before them, so
	// none may return with it; they share one purge after it.
	var wg sync.WaitGroup
	var returned atomic.Int64
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Sync(ctx); err != nil {
				t.Error(err)
			}
			returned.Add(1)
		}()
	}
	waitFor(t, "11 Syncs to be requested", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.requested == 11
	})
	release <- struct{}{}
	if err := receive(t, "the first Sync's result", first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if got := returned.Load(); got != 0 {
		t.Fatalf("%d Syncs returned with a purge that started before they were called", got)
	}
	waitFor(t, "the second purge to start", func() bool { return started.Load() == 2 })
	close(release)
	returnedAll := make(chan struct{})
	go func() { wg.Wait(); close(returnedAll) }()
	receive(t, "the ten Syncs to return", returnedAll)
	if got := started.Load(); got != 2 {
		t.Fatalf("11 Syncs (1, then 10 during its purge) ran %d purges, want 2", got)
	}
}

// A failed purge is reported to the caller whose purge failed; a waiter
// then purges itself.
func TestSyncReportsAFailedPurgeAndTheNextCallPurgesAgain(t *testing.T) {
	var calls atomic.Int64
	boom := errors.New("boom")
	p := New(func(context.Context) error {
		if calls.Add(1) == 1 {
			return boom
		}
		return nil
	})
	if err := p.Sync(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("first Sync: got %v, want %v", err, boom)
	}
	if err := p.Sync(context.Background()); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("purges: got %d, want 2", got)
	}
}

// Changed never blocks and Run purges once for a burst.
func TestChangedCoalescesABurst(t *testing.T) {
	var calls atomic.Int64
	p := New(func(context.Context) error { calls.Add(1); return nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	for range 100 {
		p.Changed()
	}
	waitFor(t, "a purge after the burst", func() bool { return calls.Load() > 0 })
	time.Sleep(150 * time.Millisecond)
	cancel()
	receive(t, "Run to return after its context ended", done)
	if got := calls.Load(); got < 1 || got > 2 {
		t.Fatalf("100 Changed in a burst made %d purges, want 1 (or 2 if the burst straddled one)", got)
	}
}

// waitDeadline bounds every wait of these tests: a Sync or Run that never
// returns fails the test instead of hanging it until go test's timeout.
const waitDeadline = 10 * time.Second

// waitFor polls cond until it holds, failing the test after waitDeadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", waitDeadline, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// receive takes one value from ch, failing the test after waitDeadline.
func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitDeadline):
		t.Fatalf("waited %s for %s", waitDeadline, what)
	}
	var zero T
	return zero
}
