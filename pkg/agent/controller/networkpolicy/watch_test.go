package networkpolicy

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"

	"antrea.io/antrea/pkg/agent/interfacestore"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/client/clientset/versioned/fake"
)

// TestWatchBackOffStartsOverAfterAWatchThatWorked: failed lists wait longer
// each time (100 ms doubling, at most 6.4 s), but once a list and its watch
// worked, the next wait is 100 ms again. Before, the wait only grew over an
// agent's life: every watch the server ended (timeouts, a controller
// restart) was followed by a wait of 6.4 s without policy updates.
func TestWatchBackOffStartsOverAfterAWatchThatWorked(t *testing.T) {
	c := NewController("n1", fake.NewSimpleClientset(), &fakeFlows{rules: map[uint32]*agentof.PolicyRule{}}, interfacestore.NewInterfaceStore(), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Attempts: 8 failed lists, then 3 lists whose watch opens and is ended
	// by the server, then 2 failed lists.
	script := []bool{false, false, false, false, false, false, false, false, true, true, true, false, false}
	attempt := 0
	var waits []time.Duration
	w := &watcher{
		c:    c,
		kind: "networkpolicies",
		list: func(context.Context, metav1.ListOptions) ([]runtime.Object, string, error) {
			ok := script[attempt]
			attempt++
			if !ok {
				return nil, "", errors.New("the server is currently unable to handle the request")
			}
			return nil, "1", nil
		},
		watch: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			fw := watch.NewFake()
			fw.Stop() // the server ends the watch at once
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
		100 * ms, 100 * ms, 100 * ms, 200 * ms, 400 * ms}
	if !slices.Equal(waits, want) {
		t.Errorf("waits between attempts = %v, want %v", waits, want)
	}
}
