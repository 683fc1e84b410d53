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
	for started.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
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
	for {
		p.mu.Lock()
		n := p.requested
		p.mu.Unlock()
		if n == 11 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if got := returned.Load(); got != 0 {
		t.Fatalf("%d Syncs returned with a purge that started before they were called", got)
	}
	for started.Load() != 2 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
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
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond)
	cancel()
	<-done
	if got := calls.Load(); got < 1 || got > 2 {
		t.Fatalf("100 Changed in a burst made %d purges, want 1 (or 2 if the burst straddled one)", got)
	}
}
