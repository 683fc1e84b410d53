package networkpolicy

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// watcher lists and watches one resource with nodeName=<this node>, applying
// events to the cache and enqueueing the policies they affect. After an error
// it lists again and replaces its part of the cache, which marks as changed
// only what differs.
type watcher struct {
	c       *Controller
	kind    string
	list    func(ctx context.Context, opts metav1.ListOptions) ([]runtime.Object, string, error)
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
		watched, err := w.listAndWatch(ctx, &listedOnce)
		if watched {
			// The list and the watch worked: the back-off starts over, so
			// that a watch the server ended (a timeout, a restart) is followed
			// by a prompt list, however many ended before it.
			backoff = 100 * time.Millisecond
		}
		if err != nil && ctx.Err() == nil {
			klog.InfoS("Watch of controlplane resource ended; listing again", "resource", w.kind, "err", err, "in", backoff)
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

// listAndWatch lists, then watches until the watch ends; watched tells
// whether the watch was opened.
func (w *watcher) listAndWatch(ctx context.Context, listedOnce *bool) (watched bool, err error) {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("nodeName", w.c.nodeName).String()}
	objs, rv, err := w.list(ctx, opts)
	if err != nil {
		return false, fmt.Errorf("list %s: %w", w.kind, err)
	}
	if obs := w.c.opts.Observe; obs != nil {
		obs(Observation{Kind: w.kind, Listed: objs})
	}
	w.c.enqueue(w.replace(objs))
	if !*listedOnce {
		*listedOnce = true
		w.c.markListed(w.kind)
	}
	opts.ResourceVersion = rv
	opts.AllowWatchBookmarks = true
	wi, err := w.watch(ctx, opts)
	if err != nil {
		return false, fmt.Errorf("watch %s: %w", w.kind, err)
	}
	defer wi.Stop()
	w.c.markWatching(w.kind, true)
	defer w.c.markWatching(w.kind, false)
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
				continue
			case watch.Error:
				return true, fmt.Errorf("watch %s: %v", w.kind, ev.Object)
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

// watcherKinds names the controlplane resources the agent watches.
var watcherKinds = []string{"networkpolicies", "addressgroups", "appliedtogroups"}

func (c *Controller) watchers() []*watcher {
	cp := c.client.ControlplaneV1beta2()
	return []*watcher{
		{
			c: c, kind: watcherKinds[0],
			list: func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
				l, err := cp.NetworkPolicies().List(ctx, o)
				if err != nil {
					return nil, "", err
				}
				return objects(l.Items), l.ResourceVersion, nil
			},
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cp.NetworkPolicies().Watch(ctx, o)
			},
			replace: c.cache.replacePolicies,
			apply:   c.cache.applyPolicy,
		},
		{
			c: c, kind: watcherKinds[1],
			list: func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
				l, err := cp.AddressGroups().List(ctx, o)
				if err != nil {
					return nil, "", err
				}
				return objects(l.Items), l.ResourceVersion, nil
			},
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cp.AddressGroups().Watch(ctx, o)
			},
			replace: func(objs []runtime.Object) sets.Set[string] { return c.cache.replaceGroups(true, objs) },
			apply:   func(ev watch.Event) (sets.Set[string], error) { return c.cache.applyGroup(true, ev) },
		},
		{
			c: c, kind: watcherKinds[2],
			list: func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
				l, err := cp.AppliedToGroups().List(ctx, o)
				if err != nil {
					return nil, "", err
				}
				return objects(l.Items), l.ResourceVersion, nil
			},
			watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cp.AppliedToGroups().Watch(ctx, o)
			},
			replace: func(objs []runtime.Object) sets.Set[string] { return c.cache.replaceGroups(false, objs) },
			apply:   func(ev watch.Event) (sets.Set[string], error) { return c.cache.applyGroup(false, ev) },
		},
	}
}

// objects returns pointers to a list's items as runtime.Objects.
func objects[T any, PT interface {
	*T
	runtime.Object
}](items []T) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}
