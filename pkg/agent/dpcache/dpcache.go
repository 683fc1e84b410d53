// Package dpcache keeps ovs-vswitchd's datapath flow cache (its megaflows) in
// step with the OpenFlow tables where that matters for correctness.
//
// OVS answers a flow-table change (a bundle commit, a barrier) as soon as the
// OpenFlow tables hold it; the cached datapath flows are re-translated
// afterwards by the revalidator threads, which the change wakes at once. Until
// a revalidator has re-translated a cached megaflow, packets that hit it — a
// new connection of a client whose earlier connection made the megaflow,
// say — are still forwarded as the old tables said. The window is one
// revalidation round (a few milliseconds here); with the revalidators held
// (`ovs-appctl revalidator/pause`) it lasts exactly as long as they are held.
// hack/repro/stale-megaflow.sh shows both with plain ovs-ofctl, and
// docs/design/agent-policy.md tells the story.
//
// A write that only allows more cannot leave a megaflow that forwards what
// is now forbidden, so it needs nothing. A write that narrows what is allowed
// calls Sync before its policy is reported realized: a purge (flush every
// cached datapath flow; the next packet of each flow is translated against
// the current tables) that started after the write, shared by the writes that
// come while one runs.
package dpcache

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Purger flushes the datapath flow cache of one ovs-vswitchd.
type Purger struct {
	purge func(ctx context.Context) error
	kick  chan struct{}

	mu        sync.Mutex
	cond      *sync.Cond
	requested uint64 // purges asked for
	done      uint64 // every request up to this one is served
	running   bool
}

// New returns a Purger whose purges call purge (e.g. AppctlPurge).
func New(purge func(ctx context.Context) error) *Purger {
	p := &Purger{purge: purge, kick: make(chan struct{}, 1)}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Sync returns once a purge that started after the call has finished. Calls
// that come while a purge runs share the next one, so a burst of writes costs
// at most two purges. On error the caller may retry; the next Sync purges
// again.
func (p *Purger) Sync(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requested++
	mine := p.requested
	for p.done < mine {
		if p.running {
			p.cond.Wait()
			continue
		}
		p.running = true
		upTo := p.requested
		p.mu.Unlock()
		err := p.purge(ctx)
		p.mu.Lock()
		p.running = false
		if err == nil {
			p.done = upTo
		}
		p.cond.Broadcast()
		if err != nil {
			return err
		}
	}
	return nil
}

// Changed asks Run for a purge and never blocks: for changes whose cached
// flows should go soon but that report nothing (a tunnel neighbour pinned,
// the flow-restore hold lifted).
func (p *Purger) Changed() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run serves Changed until ctx ends, letting a burst of changes land first.
func (p *Purger) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
		if err := p.Sync(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Could not purge the datapath flow cache")
		}
	}
}

// AppctlPurge purges with `ovs-appctl revalidator/purge` on the ovs-vswitchd
// whose run directory is runDir: the lab's instances name their control
// socket ovs-vswitchd.ctl there; a packaged OVS is found from its pidfile.
func AppctlPurge(runDir string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		target := filepath.Join(runDir, "ovs-vswitchd.ctl")
		if _, err := os.Stat(target); err != nil {
			target = "ovs-vswitchd"
		}
		// ovs-vswitchd's control socket was seen to reset a connection now
		// and then (a busy test machine): try again, a few times.
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return err
				case <-time.After(20 * time.Millisecond):
				}
			}
			cmd := exec.CommandContext(ctx, "ovs-appctl", "-t", target, "revalidator/purge")
			cmd.Env = append(os.Environ(), "OVS_RUNDIR="+runDir)
			out, cerr := cmd.CombinedOutput()
			if cerr == nil {
				return nil
			}
			err = &purgeError{err: cerr, out: string(out)}
		}
		return err
	}
}

type purgeError struct {
	err error
	out string
}

func (e *purgeError) Error() string {
	return "ovs-appctl revalidator/purge: " + e.err.Error() + ": " + e.out
}
func (e *purgeError) Unwrap() error { return e.err }
