package networkpolicy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"antrea.io/antrea/pkg/apiserver/storage"
)

// flakyStore fails the first writes it gets, like a store under pressure.
type flakyStore struct {
	storage.Interface
	mu       sync.Mutex
	failures int
}

var errFlaky = errors.New("injected store failure")

func (s *flakyStore) fail() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures > 0 {
		s.failures--
		return true
	}
	return false
}

func (s *flakyStore) Create(obj any) error {
	if s.fail() {
		return errFlaky
	}
	return s.Interface.Create(obj)
}

func (s *flakyStore) Update(obj any) error {
	if s.fail() {
		return errFlaky
	}
	return s.Interface.Update(obj)
}

func TestFailedStoreWritesAreRetriedUntilTheStoresAreComplete(t *testing.T) {
	objs := append(cluster(),
		newPolicy("x", "np", networkingv1.NetworkPolicySpec{PodSelector: *matchLabels("app", "a"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("app", "b")}}}}}))
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	ags := &flakyStore{Interface: storage.NewAddressGroupStore(), failures: 2}
	atgs := &flakyStore{Interface: storage.NewAppliedToGroupStore(), failures: 2}
	nps := &flakyStore{Interface: storage.NewNetworkPolicyStore(), failures: 2}
	c := newTestController(t, client, factory, ags, atgs, nps)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	}()
	factory.Start(ctx.Done())
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Run(ctx, 1)
	}()
	e := &env{client: client, c: c, ags: ags, atgs: atgs, nps: nps, ctx: ctx}
	bKey := selKey(t, "x", matchLabels("app", "b"), nil)
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		err = func() error {
			p, ok := e.policy("x", "np")
			if !ok {
				return fmt.Errorf("policy not stored")
			}
			if p.Generation != 1 || !slices.Equal(p.SortedNodeNames(), []string{"n1"}) {
				return fmt.Errorf("policy generation %d span %v, want 1 and [n1]", p.Generation, p.SortedNodeNames())
			}
			ag, ok := e.addressGroup(bKey)
			if !ok {
				return fmt.Errorf("AddressGroup not stored")
			}
			if got := memberNames(ag.GroupMembers); !slices.Equal(got, []string{"x/b@10.0.0.2"}) {
				return fmt.Errorf("AddressGroup members %v", got)
			}
			if _, ok := e.appliedToGroup(selKey(t, "x", matchLabels("app", "a"), nil)); !ok {
				return fmt.Errorf("AppliedToGroup not stored")
			}
			return nil
		}()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("stores never completed after injected failures: %v", err)
	}
	for _, s := range []*flakyStore{ags, atgs, nps} {
		if s.fail() {
			t.Errorf("a store still had failures to inject: the retries did not go through it")
		}
	}
}
