package namequeue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEveryEventQueuesTheNameAndAFailedSyncIsRetried(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Namespaces().Informer()
	var mu sync.Mutex
	synced := map[string]int{}
	failOnce := true
	q := New("Namespace", inf, func(_ context.Context, name string) error {
		mu.Lock()
		defer mu.Unlock()
		synced[name]++
		if name == "flaky" && failOnce {
			failOnce = false
			return errors.New("not yet")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	// Listed before the objects exist: a namespace created and deleted
	// before the informer's first list would never be seen at all.
	factory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; factory.Shutdown() }()
	for _, n := range []string{"a", "flaky"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.CoreV1().Namespaces().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// a: added then deleted (one sync or two, as the queue merges them);
	// flaky: failed once, then synced again after the rate limiter's delay.
	for i := 0; i < 200; i++ {
		mu.Lock()
		a, flaky := synced["a"], synced["flaky"]
		mu.Unlock()
		if a >= 1 && flaky >= 2 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Fatalf("synced %v: want a at least once and flaky twice (its first sync failed)", synced)
}

// TestASyncCanAskToSeeTheNameAgain: with NewRequeueing, a sync that returns
// a duration sees the name again after it, with no event.
func TestASyncCanAskToSeeTheNameAgain(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Namespaces().Informer()
	syncs := make(chan time.Time, 10)
	n := 0 // the worker's only
	q := NewRequeueing("Namespace", inf, func(_ context.Context, name string) (time.Duration, error) {
		syncs <- time.Now()
		if n++; n == 1 {
			return 50 * time.Millisecond, nil
		}
		return 0, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; factory.Shutdown() }()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "deadline"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := <-syncs
	select {
	case again := <-syncs:
		t.Logf("synced again %v after the first sync (asked: 50ms)", again.Sub(first))
	case <-time.After(10 * time.Second):
		t.Fatal("the name was never synced again")
	}
}
