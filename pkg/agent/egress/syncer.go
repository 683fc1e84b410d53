package egress

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Syncer drives a controller of external IPs (Egress IPs, LoadBalancer
// IPs) that writes its whole state on each sync: it coalesces the events
// that ask for a sync (its informers' events, Trigger, the membership's
// changes, which also ask for the held IPs to be announced again) and adds
// a periodic resync, which puts back what something else took away (an
// address gone with ovs-vswitchd's tap).
type Syncer struct {
	trigger    chan struct{}
	reannounce atomic.Bool
}

// NewSyncer makes a Syncer that syncs on every event of informers.
func NewSyncer(informers []cache.SharedIndexInformer) *Syncer {
	s := &Syncer{trigger: make(chan struct{}, 1)}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.Trigger() },
		UpdateFunc: func(any, any) { s.Trigger() },
		DeleteFunc: func(any) { s.Trigger() },
	}
	for _, inf := range informers {
		_, _ = inf.AddEventHandler(h)
	}
	return s
}

// Trigger asks for a sync (coalesced).
func (s *Syncer) Trigger() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// MembershipChanged is a listener of the Cluster: a sync that also
// announces every held IP again.
func (s *Syncer) MembershipChanged() {
	s.reannounce.Store(true)
	s.Trigger()
}

// TakeReannounce says whether the held IPs are to be announced again, and
// clears it.
func (s *Syncer) TakeReannounce() bool { return s.reannounce.Swap(false) }

// Run calls sync on each trigger and every resync until ctx ends; a failed
// sync is retried a second later.
func (s *Syncer) Run(ctx context.Context, what string, resync time.Duration, sync func(context.Context) error) {
	t := time.NewTicker(resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.trigger:
		case <-t.C:
		}
		if err := sync(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Sync failed; retrying", "controller", what)
			time.AfterFunc(time.Second, s.Trigger)
		}
	}
}
