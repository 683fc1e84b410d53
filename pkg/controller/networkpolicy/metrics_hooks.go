package networkpolicy

import (
	"time"

	"k8s.io/client-go/util/workqueue"

	"antrea.io/antrea/pkg/controller/metrics"
)

// observeSync records in the controller's metrics (pkg/controller/metrics)
// one sync from queue q that started at start.
func (c *Controller) observeSync(q workqueue.TypedRateLimitingInterface[string], start time.Time) {
	var kind string
	switch q {
	case c.policyQueue, c.nativeQueue:
		kind = metrics.NetworkPolicy
	case c.addressGroupQueue:
		kind = metrics.AddressGroup
	case c.appliedToGroupQueue:
		kind = metrics.AppliedToGroup
	default:
		return
	}
	metrics.ObserveSync(kind, time.Since(start))
}

// QueueLengths are the lengths of the computation's queues by kind (the
// metrics' names): K8s and Antrea-native policies together.
func (c *Controller) QueueLengths() map[string]int {
	return map[string]int{
		metrics.NetworkPolicy:  c.policyQueue.Len() + c.nativeQueue.Len(),
		metrics.AddressGroup:   c.addressGroupQueue.Len(),
		metrics.AppliedToGroup: c.appliedToGroupQueue.Len(),
	}
}
