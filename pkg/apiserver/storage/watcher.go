package storage

import (
	"context"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// watcher turns the store's changes into the events one selector sees.
type watcher struct {
	res       resource
	node      string
	hasNode   bool
	key       string
	bookmarks bool
	listEnd   bool // annotate the bookmark after the initial events (watch-list)
	interval  time.Duration

	initial []watch.Event // ADDED events of a fresh watch
	replay  []*event      // held changes of a resumed watch
	lastRV  uint64        // version of the last change this watcher has gone through

	input  chan *event
	result chan watch.Event
	done   chan struct{}

	stop      func()        // unregisters from the store
	currentRV func() uint64 // the store's latest version
	stopOnce  sync.Once
	closeOnce sync.Once
}

var _ watch.Interface = &watcher{}

// ResultChan is the stream of events.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the watch; the result channel is closed soon after.
func (w *watcher) Stop() {
	w.stopOnce.Do(func() {
		w.stop()
		close(w.done)
	})
}

// closeInput is called by the store, with its lock held, when the watcher is
// unregistered.
func (w *watcher) closeInput() {
	w.closeOnce.Do(func() { close(w.input) })
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.result)
	defer w.stop()
	send := func(ev watch.Event) bool {
		select {
		case w.result <- ev:
			return true
		case <-w.done:
			return false
		case <-ctx.Done():
			return false
		}
	}
	for _, ev := range w.initial {
		if !send(ev) {
			return
		}
	}
	w.initial = nil
	for _, e := range w.replay {
		if ev, ok := w.process(e); ok && !send(ev) {
			return
		}
	}
	w.replay = nil
	var tick <-chan time.Time
	if w.listEnd {
		ev := w.bookmark()
		ev.Object.(metav1.Object).SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		if !send(ev) {
			return
		}
	}
	if w.bookmarks {
		// A bookmark right after the initial state tells the client which
		// version it has reached even if nothing it sees changes for a while.
		if !w.listEnd && !send(w.bookmark()) {
			return
		}
		t := time.NewTicker(w.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case e, ok := <-w.input:
			if !ok {
				return
			}
			if ev, ok := w.process(e); ok && !send(ev) {
				return
			}
		case <-tick:
			if !w.catchUp(send) || !send(w.bookmark()) {
				return
			}
		case <-w.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// process turns a change into this watcher's event, if it concerns it.
func (w *watcher) process(e *event) (watch.Event, bool) {
	w.lastRV = e.rv
	if w.key != "" && e.key != w.key {
		return watch.Event{}, false
	}
	was, is := w.sees(e)
	switch {
	case !was && is:
		return watch.Event{Type: watch.Added, Object: w.res.view(e.cur, w.node, e.rv)}, true
	case was && !is:
		if e.prev == nil {
			// A replayed deletion: history keeps no object, the name is enough.
			obj := w.res.empty()
			m := obj.(metav1.Object)
			m.SetName(e.key)
			m.SetResourceVersion(strconv.FormatUint(e.rv, 10))
			return watch.Event{Type: watch.Deleted, Object: obj}, true
		}
		return watch.Event{Type: watch.Deleted, Object: w.res.view(e.prev, w.node, e.rv)}, true
	case was && is:
		if obj := w.res.modified(e.prepared, w.node); obj != nil {
			return watch.Event{Type: watch.Modified, Object: obj}, true
		}
	}
	return watch.Event{}, false
}

// catchUp moves lastRV to the store's latest version. The store hands this
// watcher only the changes of its Node, so the others would never move
// lastRV; every change up to the version read here is already in the input
// (the store queues a change before its version becomes visible), so
// processing the queued input first keeps "everything up to lastRV was
// sent" true. It returns false when the watch ended.
func (w *watcher) catchUp(send func(watch.Event) bool) bool {
	latest := w.currentRV()
	for {
		select {
		case e, ok := <-w.input:
			if !ok {
				return false
			}
			if ev, ok := w.process(e); ok && !send(ev) {
				return false
			}
		default:
			if latest > w.lastRV {
				w.lastRV = latest
			}
			return true
		}
	}
}

// sees reports whether the object was and is in this watcher's view.
func (w *watcher) sees(e *event) (was, is bool) {
	was = e.existed && (!w.hasNode || e.prevSpan.Has(w.node))
	is = e.exists && (!w.hasNode || e.curSpan.Has(w.node))
	return was, is
}

// entersView reports whether a change brings an object into this watcher's
// view, which needs the full object.
func (w *watcher) entersView(e *event) bool {
	if w.key != "" && e.key != w.key {
		return false
	}
	was, is := w.sees(e)
	return !was && is
}

func (w *watcher) bookmark() watch.Event {
	obj := w.res.empty()
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(strconv.FormatUint(w.lastRV, 10))
	}
	return watch.Event{Type: watch.Bookmark, Object: obj}
}
