// Package tier keeps the static Tiers of crd.antrea.io in the cluster:
// emergency 50, securityops 100, networkops 150, platform 200, application
// 250 and baseline 253 (crdv1beta1.StaticTiers). antrea-controller creates
// them at start, restores one that changed or disappeared (the admission
// webhook refuses users both; this covers a cluster where it was not
// running), and never touches custom Tiers.
package tier

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions/crd/v1beta1"
)

// Keeper ensures the static Tiers exist with their specs.
type Keeper struct {
	client versioned.Interface
	// changed is signalled when the informer sees a static Tier change or go.
	changed chan struct{}
}

// NewKeeper returns a Keeper; informer (may be nil) tells it when a static
// Tier is updated or deleted.
func NewKeeper(client versioned.Interface, informer crdinformers.TierInformer) (*Keeper, error) {
	k := &Keeper{client: client, changed: make(chan struct{}, 1)}
	if informer == nil {
		return k, nil
	}
	signal := func(obj any) {
		if t, ok := obj.(*crdv1beta1.Tier); ok && crdv1beta1.IsStaticTier(t.Name) {
			select {
			case k.changed <- struct{}{}:
			default:
			}
		}
	}
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { signal(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			signal(obj)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching Tiers: %w", err)
	}
	return k, nil
}

// Run ensures the static Tiers until ctx ends: at once (retrying with
// backoff while kube-apiserver or the admission webhook is not ready), then
// whenever one changes, and every few minutes.
func (k *Keeper) Run(ctx context.Context) {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Cap: 30 * time.Second, Steps: 1 << 30}
	for {
		err := k.Ensure(ctx)
		wait := 5 * time.Minute
		if err != nil {
			wait = backoff.Step()
			klog.InfoS("Could not ensure the static Tiers; retrying", "err", err, "retryIn", wait)
		} else {
			backoff.Duration, backoff.Steps = 500*time.Millisecond, 1<<30
		}
		select {
		case <-ctx.Done():
			return
		case <-k.changed:
		case <-time.After(wait):
		}
	}
}

// Ensure creates each missing static Tier and restores the spec of one that
// differs. It is idempotent: with every Tier as it should be it only reads.
func (k *Keeper) Ensure(ctx context.Context) error {
	tiers := k.client.CrdV1beta1().Tiers()
	for _, st := range crdv1beta1.StaticTiers {
		t, err := tiers.Get(ctx, st.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			t = &crdv1beta1.Tier{ObjectMeta: metav1.ObjectMeta{Name: st.Name, Labels: map[string]string{"app": "antrea"}}, Spec: st.Spec}
			if _, err := tiers.Create(ctx, t, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating static Tier %s: %w", st.Name, err)
			}
			klog.InfoS("Created static Tier", "tier", st.Name, "priority", st.Spec.Priority)
		case err != nil:
			return fmt.Errorf("getting static Tier %s: %w", st.Name, err)
		case t.Spec != st.Spec:
			t = t.DeepCopy()
			t.Spec = st.Spec
			if _, err := tiers.Update(ctx, t, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("restoring static Tier %s: %w", st.Name, err)
			}
			klog.InfoS("Restored static Tier", "tier", st.Name, "priority", st.Spec.Priority)
		}
	}
	return nil
}
