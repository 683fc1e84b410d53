// Package namequeue is the sample-controller loop of the controllers of
// cluster-scoped CRDs (the agent's Traceflow, PacketCapture and
// SupportBundleCollection, antrea-controller's SupportBundleCollection):
// every add, update and delete an informer sees queues the object's name;
// one worker calls sync(name) for each, and a name whose sync fails is
// retried with client-go's default rate limit (NewRequeueing: a sync may
// also ask to see the name again after a while). sync reads the informer's
// cache, so it sees the latest object (or none) whatever event queued the
// name.
package namequeue

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Queue queues the names of an informer's objects for sync.
type Queue struct {
	kind  string
	sync  func(ctx context.Context, name string) (time.Duration, error)
	queue workqueue.TypedRateLimitingInterface[string]
}

// New makes the queue of the objects of informer, which are of kind (in
// logs); Run calls sync for each queued name.
func New(kind string, informer cache.SharedInformer, sync func(ctx context.Context, name string) error) *Queue {
	return NewRequeueing(kind, informer, func(ctx context.Context, name string) (time.Duration, error) {
		return 0, sync(ctx, name)
	})
}

// NewRequeueing is New for a sync that may ask to see the name again after
// a while (a deadline of the object): a positive duration queues it again
// then, besides the events.
func NewRequeueing(kind string, informer cache.SharedInformer, sync func(ctx context.Context, name string) (time.Duration, error)) *Queue {
	q := &Queue{kind: kind, sync: sync,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: kind})}
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			q.queue.Add(d.Key)
		} else if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			q.queue.Add(key)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		// Only an informer already stopped refuses a handler: the agent is
		// shutting down.
		klog.ErrorS(err, "Cannot watch the objects", "kind", kind)
	}
	return q
}

// Run syncs the queued names, one at a time, until ctx ends (or ShutDown).
func (q *Queue) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		q.queue.ShutDown()
	}()
	for q.next(ctx) {
	}
}

// ShutDown stops Run once its current sync returns.
func (q *Queue) ShutDown() { q.queue.ShutDown() }

func (q *Queue) next(ctx context.Context) bool {
	name, quit := q.queue.Get()
	if quit {
		return false
	}
	defer q.queue.Done(name)
	after, err := q.sync(ctx, name)
	if err != nil {
		klog.ErrorS(err, "Sync failed; retrying", "kind", q.kind, "name", name)
		q.queue.AddRateLimited(name)
		return true
	}
	q.queue.Forget(name)
	if after > 0 {
		q.queue.AddAfter(name, after)
	}
	return true
}
