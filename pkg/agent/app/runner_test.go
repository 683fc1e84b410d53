package app

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// trail keeps what the parts of a test did, in order.
type trail struct {
	mu     sync.Mutex
	events []string
}

func (r *trail) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// expect fails t unless the events are want.
func (r *trail) expect(t *testing.T, want ...string) {
	t.Helper()
	if got := r.get(); !equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

func (r *trail) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// until is a part whose component runs until its ctx ends and records
// "set up NAME" and "stopped NAME".
func until(rec *trail, name string) part {
	return part{name, func(context.Context, *deps) (component, error) {
		rec.add("set up " + name)
		return onStop(func() { rec.add("stopped " + name) }), nil
	}}
}

// runAsync runs parts and returns where runParts' answer arrives.
func runAsync(ctx context.Context, parts []part, timeout time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() { done <- runParts(ctx, &deps{}, parts, timeout) }()
	return done
}

func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("runParts did not return")
		return nil
	}
}

func equal(a, b []string) bool {
	return strings.Join(a, "|") == strings.Join(b, "|")
}

func TestAFailingComponentStopsTheOthersAndTheErrorNamesIt(t *testing.T) {
	rec := &trail{}
	boom := errors.New("boom")
	cSetUp := make(chan struct{})
	parts := []part{
		until(rec, "a"),
		{"b", func(context.Context, *deps) (component, error) {
			return runFunc(func(ctx context.Context) error {
				select {
				case <-cSetUp:
					return boom
				case <-ctx.Done():
					return nil
				}
			}), nil
		}},
		{"c", func(ctx context.Context, d *deps) (component, error) {
			defer close(cSetUp)
			return until(rec, "c").setup(ctx, d)
		}},
	}
	err := waitRun(t, runAsync(context.Background(), parts, time.Minute))
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "b: ") {
		t.Fatalf("runParts = %v, want b's error named by b", err)
	}
	rec.expect(t, "set up a", "set up c", "stopped c", "stopped a")
}

func TestPartsStopInTheReverseOrderOfTheirStartEachWhileTheEarlierRun(t *testing.T) {
	rec := &trail{}
	var aCtx context.Context
	parts := []part{
		{"a", func(ctx context.Context, d *deps) (component, error) {
			aCtx = ctx
			return until(rec, "a").setup(ctx, d)
		}},
		until(rec, "b"),
		{"no component", func(context.Context, *deps) (component, error) { return nil, nil }},
		{"c", func(context.Context, *deps) (component, error) {
			rec.add("set up c")
			return runFunc(func(ctx context.Context) error {
				<-ctx.Done()
				time.Sleep(20 * time.Millisecond) // a slow stop
				if aCtx.Err() != nil {
					t.Errorf("a's ctx ended while c was stopping")
				}
				rec.add("stopped c")
				return nil
			}), nil
		}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, parts, time.Minute)
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatalf("runParts = %v after ctx ended, want nil", err)
	}
	rec.expect(t, "set up a", "set up b", "set up c", "stopped c", "stopped b", "stopped a")
}

func TestASetupFailureStopsThePartsStartedAndSetsUpNoMore(t *testing.T) {
	rec := &trail{}
	boom := errors.New("no bridge")
	parts := []part{
		until(rec, "a"),
		{"b", func(context.Context, *deps) (component, error) { return nil, boom }},
		until(rec, "c"),
	}
	err := waitRun(t, runAsync(context.Background(), parts, time.Minute))
	if !errors.Is(err, boom) || err.Error() != "b: no bridge" {
		t.Fatalf("runParts = %v, want b's setup error named by b", err)
	}
	rec.expect(t, "set up a", "stopped a")
}

func TestStoppingDuringASetupCutsItShortAndIsNoFailure(t *testing.T) {
	rec := &trail{}
	waiting := make(chan struct{})
	parts := []part{
		until(rec, "a"),
		{"b", func(ctx context.Context, _ *deps) (component, error) {
			close(waiting)
			<-ctx.Done() // waiting for the Node, say
			return nil, ctx.Err()
		}},
		until(rec, "c"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, parts, time.Minute)
	<-waiting
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatalf("runParts = %v, want nil: the agent was asked to stop", err)
	}
	rec.expect(t, "set up a", "stopped a")
}

func TestAComponentWhoseWorkIsDoneDoesNotStopTheAgent(t *testing.T) {
	rec := &trail{}
	finished := make(chan struct{})
	parts := []part{
		until(rec, "a"),
		{"restore", func(context.Context, *deps) (component, error) {
			return runFunc(func(context.Context) error { close(finished); return nil }), nil
		}},
		until(rec, "c"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, parts, time.Minute)
	<-finished
	select {
	case err := <-done:
		t.Fatalf("runParts returned %v when a component finished its work", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := waitRun(t, done); err != nil {
		t.Fatalf("runParts = %v, want nil", err)
	}
	rec.expect(t, "set up a", "set up c", "stopped c", "stopped a")
}

func TestAComponentThatDoesNotStopIsNamedAndTheOthersStillStop(t *testing.T) {
	rec := &trail{}
	release := make(chan struct{})
	defer close(release)
	parts := []part{
		until(rec, "a"),
		{"stubborn", func(context.Context, *deps) (component, error) {
			return runFunc(func(context.Context) error { <-release; return nil }), nil
		}},
		until(rec, "c"),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, parts, 100*time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	cancel()
	err := waitRun(t, done)
	if err == nil || !strings.Contains(err.Error(), "did not stop within 100ms: stubborn") {
		t.Fatalf("runParts = %v, want an error naming stubborn", err)
	}
	// a was told to stop when time ran out; it stops on its own time.
	deadline := time.Now().Add(5 * time.Second)
	for !equal(rec.get(), []string{"set up a", "set up c", "stopped c", "stopped a"}) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := rec.get(); !equal(got, []string{"set up a", "set up c", "stopped c", "stopped a"}) {
		t.Errorf("events %q, want c then a stopped", got)
	}
}
