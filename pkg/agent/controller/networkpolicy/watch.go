package networkpolicy

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// watcher watches one resource with nodeName=<this node>, applying events to
// the cache and enqueueing the policies they affect. Each watch is a
// watch-list (sendInitialEvents): the controller sends the current state as
// ADDED events, then a bookmark marking its end, then the changes, all on one
// stream. The watcher replaces its part of the cache with that state, which
// marks as changed only what differs. A list followed by a watch from the
// list's version had a gap between the two: while the controller recomputes
// (its first minutes after a restart) more than its watch history changed in
// that gap, the watch was refused as too old, and the agent listed again
// (issue 31, bottleneck 2; docs/scale.md).
type watcher struct {
	c       *Controller
	kind    string
	watch   func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	replace func(objs []runtime.Object) sets.Set[string]
	apply   func(ev watch.Event) (sets.Set[string], error)
	// after waits between attempts (time.After when nil).
	after func(time.Duration) <-chan time.Time
}

func (w *watcher) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	listedOnce := false
	for ctx.Err() == nil {
		opened, err := w.watchList(ctx, &listedOnce)
		if opened {
			// The controller took the watch: the back-off starts over, so
			// that a watch the server ended (a timeout, a restart, a new CA
			// closing the connections) is followed by a prompt new one,
			// however many failed before it.
			backoff = 100 * time.Millisecond
		}
		if err != nil && ctx.Err() == nil {
			klog.InfoS("Watch of controlplane resource ended; watching again", "resource", w.kind, "err", err, "in", backoff)
			after := w.after
			if after == nil {
				after = time.After
			}
			select {
			case <-ctx.Done():
			case <-after(backoff):
			}
			if backoff < 5*time.Second {
				backoff *= 2
			}
		}
	}
}

// watchList opens a watch-list and follows it until it ends; opened tells
// whether the controller took the watch.
func (w *watcher) watchList(ctx context.Context, listedOnce *bool) (opened bool, err error) {
	sendInitialEvents := true
	opts := metav1.ListOptions{
		FieldSelector:        fields.OneTermEqualSelector("nodeName", w.c.nodeName).String(),
		SendInitialEvents:    &sendInitialEvents,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	}
	wi, err := w.watch(ctx, opts)
	if err != nil {
		return false, fmt.Errorf("watch %s: %w", w.kind, err)
	}
	defer wi.Stop()
	w.c.markWatching(w.kind, true)
	defer w.c.markWatching(w.kind, false)
	var initial []runtime.Object
	synced := false
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return true, fmt.Errorf("watch %s closed", w.kind)
			}
			switch ev.Type {
			case watch.Bookmark:
				if !synced && initialEventsEnd(ev.Object) {
					synced = true
					if obs := w.c.opts.Observe; obs != nil {
						obs(Observation{Kind: w.kind, Listed: initial})
					}
					w.c.enqueue(w.replace(initial))
					initial = nil
					if !*listedOnce {
						*listedOnce = true
						w.c.markListed(w.kind)
					}
				}
				continue
			case watch.Error:
				return true, fmt.Errorf("watch %s: %v", w.kind, ev.Object)
			}
			if !synced {
				if ev.Type != watch.Added {
					return true, fmt.Errorf("watch %s: a %s event before the end of the initial state", w.kind, ev.Type)
				}
				initial = append(initial, ev.Object)
				continue
			}
			if obs := w.c.opts.Observe; obs != nil {
				obs(Observation{Kind: w.kind, Event: ev})
			}
			affected, err := w.apply(ev)
			if err != nil {
				klog.ErrorS(err, "Unexpected controlplane event", "resource", w.kind, "type", ev.Type)
				continue
			}
			w.c.enqueue(affected)
		}
	}
}

// initialEventsEnd tells whether a bookmark ends a watch-list's initial state.
func initialEventsEnd(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

// watcherKinds names the controlplane resources the agent watches.
var watcherKinds = []string{"networkpolicies", "addressgroups", "appliedtogroups"}

func (c *Controller) watchers() []*watcher {
	cp := c.client.ControlplaneV1beta2()
	return []*watcher{
		{
			c: c, kind: watcherKinds[0],
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cp.NetworkPolicies().Watch(ctx, o)
			},
			replace: c.cache.replacePolicies,
			apply:   c.cache.applyPolicy,
		},
		{
			c: c, kind: watcherKinds[1],
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cp.AddressGroups().Watch(ctx, o)
			},
			replace: func(objs []runtime.Object) sets.Set[string] { return c.cache.replaceGroups(true, objs) },
			apply:   func(ev watch.Event) (sets.Set[string], error) { return c.cache.applyGroup(true, ev) },
		},
		{
			c: c, kind: watcherKinds[2],
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cp.AppliedToGroups().Watch(ctx, o)
			},
			replace: func(objs []runtime.Object) sets.Set[string] { return c.cache.replaceGroups(false, objs) },
			apply:   func(ev watch.Event) (sets.Set[string], error) { return c.cache.applyGroup(false, ev) },
		},
	}
}
