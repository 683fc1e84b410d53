package networkpolicy

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// statusReporter tells the controller which generation of each policy this
// node realized (NetworkPolicyStatus), from its own queue, so a slow or
// unreachable API server never holds up the reconciler.
type statusReporter struct {
	nodeName string
	client   versioned.Interface
	queue    workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// realized is the last generation realized per policy, reported the one
	// last reported.
	realized, reported map[string]int64
}

func newStatusReporter(nodeName string, client versioned.Interface) *statusReporter {
	return &statusReporter{
		nodeName: nodeName,
		client:   client,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "networkpolicy-status"}),
		realized: map[string]int64{},
		reported: map[string]int64{},
	}
}

// setRealized records that generation gen of a policy is realized (0: the
// policy is gone) and schedules its report when it is new.
func (s *statusReporter) setRealized(name string, gen int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen == 0 {
		delete(s.realized, name)
		delete(s.reported, name)
		return
	}
	s.realized[name] = gen
	if s.reported[name] != gen {
		s.queue.Add(name)
	}
}

func (s *statusReporter) run(ctx context.Context) {
	go func() { <-ctx.Done(); s.queue.ShutDown() }()
	for {
		name, quit := s.queue.Get()
		if quit {
			return
		}
		if err := s.report(ctx, name); err != nil {
			klog.ErrorS(err, "Failed to report NetworkPolicy realization; retrying", "policy", name)
			s.queue.AddRateLimited(name)
		} else {
			s.queue.Forget(name)
		}
		s.queue.Done(name)
	}
}

// report sends one policy's realized generation, unless already reported.
func (s *statusReporter) report(ctx context.Context, name string) error {
	s.mu.Lock()
	gen, ok := s.realized[name]
	done := s.reported[name] == gen
	s.mu.Unlock()
	if !ok || done {
		return nil
	}
	st := &cpv1beta2.NetworkPolicyStatus{Nodes: []cpv1beta2.NetworkPolicyNodeStatus{{NodeName: s.nodeName, Generation: gen}}}
	st.Name = name
	if _, err := s.client.ControlplaneV1beta2().NetworkPolicies().UpdateStatus(ctx, name, st, metav1.CreateOptions{}); err != nil {
		return err
	}
	s.mu.Lock()
	if _, ok := s.realized[name]; ok {
		s.reported[name] = gen
	}
	s.mu.Unlock()
	return nil
}
