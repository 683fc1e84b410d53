package storage

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// resource is what differs between the three stores: how objects are keyed,
// which Nodes they span, how a Node sees them, and how a change becomes a patch.
type resource interface {
	// groupResource names the resource in errors.
	groupResource() schema.GroupResource
	// key returns the store key of a controller object, or an error for a
	// value of the wrong type.
	key(obj any) (string, error)
	// inSpan reports whether the object spans the Node.
	inSpan(obj any, node string) bool
	// span returns the Nodes the object spans.
	span(obj any) sets.Set[string]
	// view is the controlplane object a Node ("" = everyone) sees.
	view(obj any, node string, rv uint64) runtime.Object
	// prepare precomputes, once per change, what modified() hands to watchers.
	prepare(prev, cur any, rv uint64) any
	// modified is the object of a MODIFIED event for a Node ("" = everyone),
	// or nil when the change does not concern it.
	modified(prepared any, node string) runtime.Object
	// empty is the object carried by BOOKMARK events.
	empty() runtime.Object
}

// Options tune a store; zero values pick the defaults.
type Options struct {
	// HistorySize is how many past changes are kept to resume watches.
	HistorySize int
	// WatcherBuffer is how many changes a watcher may lag behind before it is
	// closed (its client then lists again).
	WatcherBuffer int
	// BookmarkInterval is how often a watcher that asked for bookmarks gets one.
	BookmarkInterval time.Duration
}

const (
	defaultHistorySize   = 10000
	defaultWatcherBuffer = 10000
	// resultBuffer is how many encoded-to-be events a watcher queues for
	// the HTTP handler, which flushes the response only when its channel is
	// empty: with an unbuffered channel every event of a watch-list's
	// initial state was a flush of its own (a TLS record and a write each,
	// about 50 per agent and resource at 1,000 Nodes); queued, they go out
	// in a few writes.
	resultBuffer            = 128
	defaultBookmarkInterval = time.Minute
)

// event is one change, handed to every concerned watcher and kept in history.
type event struct {
	key string
	rv  uint64
	// prev and cur are the objects before and after (nil: absent). History
	// keeps a copy without them, so that it holds only deltas and spans, not
	// every version of large groups.
	prev, cur any
	// existed/exists and prevSpan/curSpan say what prev and cur were, also in
	// the history copy.
	existed, exists   bool
	prevSpan, curSpan sets.Set[string]
	prepared          any
}

// withObjects is the copy of the history event h handed to watchers, with the
// objects before and after the change.
func (s *store) withObjects(h *event, prev, cur any) *event {
	e := *h
	e.prev, e.cur = prev, cur
	return &e
}

// store is the in-memory, indexed, watchable store shared by the resources.
type store struct {
	res  resource
	opts Options

	mu       sync.RWMutex
	objs     *objects
	rv       uint64
	history  []*event // ring buffer of the last HistorySize events
	head     int      // index of the oldest event in history
	count    int      // number of events in history
	watchers map[int]*watcher
	// byNode and anyNode index the watchers so that a change is handed only
	// to the watchers of Nodes in its old or new span (and to watchers
	// without a nodeName): with many agents, a change on one Node wakes one
	// agent's watcher, not all of them.
	byNode  map[string]map[int]*watcher
	anyNode map[int]*watcher
	nextID  int
	// spanKeys indexes the objects by the Nodes they span, so that an
	// agent's list (and a watch from scratch) reads its span's objects
	// instead of testing every object's span: 1,000 agents listing a
	// store of 10,000 groups was 10 million span tests.
	spanKeys map[string]sets.Set[string]
}

func newStore(res resource, indexers Indexers, opts Options) *store {
	if opts.HistorySize <= 0 {
		opts.HistorySize = defaultHistorySize
	}
	if opts.WatcherBuffer <= 0 {
		opts.WatcherBuffer = defaultWatcherBuffer
	}
	if opts.BookmarkInterval <= 0 {
		opts.BookmarkInterval = defaultBookmarkInterval
	}
	s := &store{
		res:      res,
		opts:     opts,
		objs:     newObjects(indexers),
		history:  make([]*event, opts.HistorySize),
		watchers: map[int]*watcher{},
		byNode:   map[string]map[int]*watcher{},
		anyNode:  map[int]*watcher{},
		spanKeys: map[string]sets.Set[string]{},
	}
	// Versions start at the creation time in nanoseconds rather than at 0, so
	// a version held by a client of a previous controller process is older
	// than anything this store holds and gets 410 Gone (the client lists
	// again) instead of resuming at a version that meant something else.
	s.rv = uint64(time.Now().UnixNano())
	return s
}

func (s *store) Create(obj any) error {
	key, err := s.res.key(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.objs.get(key); exists {
		return apierrors.NewAlreadyExists(s.res.groupResource(), key)
	}
	s.record(key, nil, obj)
	return nil
}

func (s *store) Update(obj any) error {
	key, err := s.res.key(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, exists := s.objs.get(key)
	if !exists {
		return apierrors.NewNotFound(s.res.groupResource(), key)
	}
	s.record(key, prev.obj, obj)
	return nil
}

func (s *store) Delete(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, exists := s.objs.get(key)
	if !exists {
		return apierrors.NewNotFound(s.res.groupResource(), key)
	}
	s.record(key, prev.obj, nil)
	return nil
}

// record stores a change (cur nil: a deletion), assigns it the next resource
// version, keeps it in history and hands it to every watcher. Called with mu
// held, so that watchers see changes in version order.
func (s *store) record(key string, prev, cur any) {
	s.rv++
	if cur == nil {
		s.objs.delete(key, prev)
	} else {
		s.objs.set(key, prev, cur, s.rv)
	}
	// The history's copy holds no objects; the watchers' copy, made only
	// when some watcher is open, also holds prev and cur.
	h := &event{key: key, rv: s.rv, existed: prev != nil, exists: cur != nil}
	if prev != nil {
		h.prevSpan = s.res.span(prev)
	}
	if cur != nil {
		h.curSpan = s.res.span(cur)
	}
	if prev != nil && cur != nil {
		h.prepared = s.res.prepare(prev, cur, s.rv)
	}
	s.indexSpan(key, h.prevSpan, h.curSpan)
	idx := (s.head + s.count) % len(s.history)
	s.history[idx] = h
	if s.count < len(s.history) {
		s.count++
	} else {
		s.head = (s.head + 1) % len(s.history)
	}
	if len(s.watchers) == 0 {
		return
	}
	e := s.withObjects(h, prev, cur)
	for id, w := range s.anyNode {
		s.dispatch(id, w, e)
	}
	// The watchers of the Nodes in either span, each once, without building
	// the union (spans of thousands of Nodes made it most of a write's cost):
	// walk whichever is smaller, the watched Nodes or the spans.
	inSpan := func(node string) bool { return e.prevSpan.Has(node) || e.curSpan.Has(node) }
	if len(s.byNode) <= len(e.prevSpan)+len(e.curSpan) {
		for node, ws := range s.byNode {
			if inSpan(node) {
				for id, w := range ws {
					s.dispatch(id, w, e)
				}
			}
		}
		return
	}
	for node := range e.prevSpan {
		for id, w := range s.byNode[node] {
			s.dispatch(id, w, e)
		}
	}
	for node := range e.curSpan {
		if !e.prevSpan.Has(node) {
			for id, w := range s.byNode[node] {
				s.dispatch(id, w, e)
			}
		}
	}
}

// indexSpan moves key from the Nodes of its old span to those of its new
// one in spanKeys; called with mu held.
func (s *store) indexSpan(key string, prev, cur sets.Set[string]) {
	// The controller builds a new span only when it changes, so a member
	// change of a group spanning every Node hands in the very same set:
	// nothing moves, and walking thousands of Nodes per write is skipped.
	if len(prev) == len(cur) && (len(prev) == 0 || reflect.ValueOf(prev).UnsafePointer() == reflect.ValueOf(cur).UnsafePointer()) {
		return
	}
	for node := range prev {
		if !cur.Has(node) {
			if keys := s.spanKeys[node]; keys != nil {
				keys.Delete(key)
				if keys.Len() == 0 {
					delete(s.spanKeys, node)
				}
			}
		}
	}
	for node := range cur {
		if !prev.Has(node) {
			if s.spanKeys[node] == nil {
				s.spanKeys[node] = sets.New[string]()
			}
			s.spanKeys[node].Insert(key)
		}
	}
}

// eachInView calls f with each object a selector sees (one key, a Node's
// span, or all); called with mu held.
func (s *store) eachInView(sel *Selectors, f func(e entry)) {
	node, hasNode := sel.NodeName()
	if key := sel.key(); key != "" {
		if e, ok := s.objs.get(key); ok && (!hasNode || s.res.inSpan(e.obj, node)) {
			f(e)
		}
		return
	}
	if hasNode {
		for k := range s.spanKeys[node] {
			if e, ok := s.objs.get(k); ok {
				f(e)
			}
		}
		return
	}
	for _, e := range s.objs.items {
		f(e)
	}
}

// dispatch hands a change to a watcher without blocking the writer.
func (s *store) dispatch(id int, w *watcher, e *event) {
	select {
	case w.input <- e:
	default:
		// A watcher this far behind would hold back the writer; close it
		// and let its client list again.
		klog.InfoS("Closing a watcher that fell behind", "resource", s.res.groupResource(), "watcher", id, "buffer", s.opts.WatcherBuffer)
		s.unregister(id)
	}
}

// register adds a watcher; called with mu held.
func (s *store) register(w *watcher) int {
	id := s.nextID
	s.nextID++
	s.watchers[id] = w
	if w.hasNode {
		if s.byNode[w.node] == nil {
			s.byNode[w.node] = map[int]*watcher{}
		}
		s.byNode[w.node][id] = w
	} else {
		s.anyNode[id] = w
	}
	return id
}

// unregister removes a watcher and closes its input; called with mu held.
func (s *store) unregister(id int) {
	w, ok := s.watchers[id]
	if !ok {
		return
	}
	delete(s.watchers, id)
	delete(s.anyNode, id)
	if m := s.byNode[w.node]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(s.byNode, w.node)
		}
	}
	w.closeInput()
}

func (s *store) Get(key string) (any, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.objs.get(key)
	return e.obj, ok, nil
}

func (s *store) GetByIndex(indexName, indexKey string) ([]any, error) {
	// The write lock: the first read of an index builds it.
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objs.byIndex(indexName, indexKey)
}

func (s *store) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.objs.list()
}

func (s *store) ResourceVersion() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rv
}

func (s *store) GetWatchersNum() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.watchers)
}

func (s *store) ListObjects(sel *Selectors) ([]runtime.Object, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	node, _ := sel.NodeName()
	var objs []runtime.Object
	s.eachInView(sel, func(e entry) { objs = append(objs, s.res.view(e.obj, node, e.rv)) })
	return objs, s.rv
}

func (s *store) GetObject(key string, sel *Selectors) (runtime.Object, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, exists := s.objs.get(key)
	if !exists {
		return nil, false
	}
	node, hasNode := sel.NodeName()
	if hasNode && !s.res.inSpan(e.obj, node) {
		return nil, false
	}
	return s.res.view(e.obj, node, e.rv), true
}

func (s *store) Watch(ctx context.Context, opts WatchOptions) (watch.Interface, error) {
	var fromRV uint64
	if opts.ResourceVersion != "" && !opts.SendInitialEvents {
		v, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: %v", opts.ResourceVersion, err))
		}
		fromRV = v
	}
	node, hasNode := opts.Selectors.NodeName()
	w := &watcher{
		res:       s.res,
		node:      node,
		hasNode:   hasNode,
		key:       opts.Selectors.key(),
		bookmarks: opts.AllowBookmarks,
		listEnd:   opts.SendInitialEvents,
		interval:  s.opts.BookmarkInterval,
		input:     make(chan *event, s.opts.WatcherBuffer),
		result:    make(chan watch.Event, resultBuffer),
		done:      make(chan struct{}),
	}

	s.mu.Lock()
	if fromRV == 0 {
		s.eachInView(opts.Selectors, func(e entry) {
			w.initial = append(w.initial, watch.Event{Type: watch.Added, Object: s.res.view(e.obj, node, e.rv)})
		})
		w.lastRV = s.rv
	} else {
		// Resuming needs every event after fromRV: it must not be older than the
		// oldest one held, nor newer than the store (a client of a previous process).
		oldest := s.rv - uint64(s.count) // the version just before the oldest held event
		if fromRV < oldest || fromRV > s.rv {
			s.mu.Unlock()
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %d is too old or unknown (held: %d..%d)", fromRV, oldest, s.rv))
		}
		for i := 0; i < s.count; i++ {
			e := s.history[(s.head+i)%len(s.history)]
			if e.rv <= fromRV {
				continue
			}
			// History holds no full objects: an object entering this
			// watcher's view in the window cannot be replayed, so the client
			// lists again.
			if w.entersView(e) {
				s.mu.Unlock()
				return nil, apierrors.NewResourceExpired(fmt.Sprintf("%s %s changed too much after resourceVersion %d to resume", s.res.groupResource(), e.key, fromRV))
			}
			w.replay = append(w.replay, e)
		}
		w.lastRV = fromRV
	}
	id := s.register(w)
	s.mu.Unlock()

	w.stop = func() {
		s.mu.Lock()
		s.unregister(id)
		s.mu.Unlock()
	}
	w.currentRV = s.ResourceVersion
	go w.run(ctx)
	return w, nil
}
