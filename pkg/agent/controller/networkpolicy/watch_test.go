package networkpolicy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
)

// TestWatchBackOffStartsOverAfterAWatchThatWorked: refused watches wait
// longer each time (100 ms doubling, at most 6.4 s), but once the controller
// took a watch, the next wait is 100 ms again, also when the watch ended
// before its initial state was complete (a new CA closes the connections
// right after a controller restart). Before, the wait only grew over an
// agent's life: every watch the server ended (timeouts, a controller
// restart) was followed by a wait of 6.4 s without policy updates.
func TestWatchBackOffStartsOverAfterAWatchThatWorked(t *testing.T) {
	c := NewController("n1", newClient(), &fakeFlows{rules: map[uint32]*agentof.PolicyRule{}}, interfacestore.NewInterfaceStore(), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Attempts: 8 refused watches, 3 watches that bring the initial state
	// and are ended by the server, one that ends before its initial state
	// is complete, two refused.
	const refused, synced, cut = 0, 1, 2
	script := []int{refused, refused, refused, refused, refused, refused, refused, refused, synced, synced, synced, cut, refused, refused}
	attempt := 0
	var waits []time.Duration
	w := &watcher{
		c:    c,
		kind: "networkpolicies",
		watch: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			step := script[attempt]
			attempt++
			if o.SendInitialEvents == nil || !*o.SendInitialEvents || !o.AllowWatchBookmarks || o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
				t.Errorf("the watch's options %+v are not a watch-list (sendInitialEvents, bookmarks, NotOlderThan)", o)
			}
			if step == refused {
				return nil, errors.New("the server is currently unable to handle the request")
			}
			fw := watch.NewFakeWithChanSize(2, false)
			fw.Add(&cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}})
			if step == synced {
				fw.Action(watch.Bookmark, initialEnd())
			}
			fw.Stop() // the server ends the watch
			return fw, nil
		},
		replace: func([]runtime.Object) sets.Set[string] { return nil },
		apply:   func(watch.Event) (sets.Set[string], error) { return nil, nil },
		after: func(d time.Duration) <-chan time.Time {
			waits = append(waits, d)
			if len(waits) == len(script) {
				cancel()
			}
			ch := make(chan time.Time, 1)
			ch <- time.Time{}
			return ch
		},
	}
	w.run(ctx)
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 6400 * ms,
		100 * ms, 100 * ms, 100 * ms, 100 * ms, 200 * ms, 400 * ms}
	if !slices.Equal(waits, want) {
		t.Errorf("waits between attempts = %v, want %v", waits, want)
	}
}

// initialEnd is the bookmark that ends a watch-list's initial state.
func initialEnd() *cpv1beta2.NetworkPolicy {
	return &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
}

// TestAWatchReplacesTheCacheOnceItsInitialStateIsComplete: the ADDED events
// before the bookmark are the whole state, handed to replace at once (what
// the watch does not send any more is gone); events after it are applied one
// by one; the watcher counts as listed only then.
func TestAWatchReplacesTheCacheOnceItsInitialStateIsComplete(t *testing.T) {
	c := NewController("n1", newClient(), &fakeFlows{rules: map[uint32]*agentof.PolicyRule{}}, interfacestore.NewInterfaceStore(), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	np := func(name string) *cpv1beta2.NetworkPolicy {
		return &cpv1beta2.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	fw := watch.NewFakeWithChanSize(8, false)
	var log []string
	step := make(chan struct{}, 8)
	w := &watcher{
		c:     c,
		kind:  "networkpolicies",
		watch: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
		replace: func(objs []runtime.Object) sets.Set[string] {
			names := []string{}
			for _, o := range objs {
				names = append(names, o.(*cpv1beta2.NetworkPolicy).Name)
			}
			log = append(log, fmt.Sprintf("replace %v listed=%v", names, c.listed.Has("networkpolicies")))
			step <- struct{}{}
			return nil
		},
		apply: func(ev watch.Event) (sets.Set[string], error) {
			log = append(log, fmt.Sprintf("%s %s listed=%v", ev.Type, ev.Object.(*cpv1beta2.NetworkPolicy).Name, c.listed.Has("networkpolicies")))
			step <- struct{}{}
			return nil, nil
		},
	}
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	fw.Add(np("a"))
	fw.Add(np("b"))
	fw.Action(watch.Bookmark, initialEnd())
	<-step
	fw.Modify(np("a"))
	fw.Delete(np("b"))
	<-step
	<-step
	cancel()
	<-done
	want := []string{"replace [a b] listed=false", "MODIFIED a listed=true", "DELETED b listed=true"}
	if !slices.Equal(log, want) {
		t.Errorf("the watcher did %q, want %q", log, want)
	}
}
