package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"
)

// part is one step of the agent's start-up: a name, for logs and errors, and
// its setup.
type part struct {
	name  string
	setup setupFunc
}

// setupFunc sets a part up: it does what must be done before the next part is
// set up, records in deps what later parts use, and returns what keeps
// running, or nil when nothing does. ctx is the part's lifetime: it ends when
// the agent stops this part (or stops while the setup is under way), so a
// setup may hand it to what it starts, such as informers and callbacks.
type setupFunc func(ctx context.Context, d *deps) (component, error)

// component is what a part leaves running. run returns nil once ctx ends, or
// earlier when its work is done; an error stops the agent.
type component interface {
	run(ctx context.Context) error
}

// runFunc is a component that is one function.
type runFunc func(ctx context.Context) error

func (f runFunc) run(ctx context.Context) error { return f(ctx) }

// loop is a component whose Run cannot fail.
func loop(run func(ctx context.Context)) component {
	return runFunc(func(ctx context.Context) error {
		run(ctx)
		return nil
	})
}

// onStop is a component that only calls stop when the part stops.
func onStop(stop func()) component {
	return runFunc(func(ctx context.Context) error {
		<-ctx.Done()
		stop()
		return nil
	})
}

// stopTimeout bounds the agent's shutdown. kubelet's default grace period
// is 30 s; the CNI server alone may take 5 s to finish its requests.
const stopTimeout = 20 * time.Second

// runParts sets the parts up in order, starting each one's component before
// the next part is set up, and runs the components under an errgroup until
// ctx ends or a part fails (its setup or its component). Then it stops the
// parts in the reverse order: a part's ctx ends only once every part set up
// after it has returned, so each may rely on the ones before it to the end.
// It returns the first failure, named by its part, or an error naming the
// parts that did not stop within stopTimeout; nil when ctx ended.
func runParts(ctx context.Context, d *deps, parts []part, stopTimeout time.Duration) error {
	r := newRunner(ctx)
	defer r.stop()
	var setupErr error
	for _, p := range parts {
		if setupErr = r.start(ctx, p, d); setupErr != nil || r.stopping.Err() != nil {
			break
		}
	}
	if setupErr == nil {
		<-r.stopping.Done()
	}
	reason := "asked to stop"
	switch {
	case setupErr != nil:
		reason = "setup failed"
	case r.failed.Err() != nil:
		reason = "component failed"
	}
	klog.InfoS("Stopping the agent's components in the reverse order of their start", "reason", reason, "components", len(r.up))
	if stuck := r.stopAll(stopTimeout); len(stuck) > 0 {
		err := fmt.Errorf("agent components did not stop within %s: %s", stopTimeout, strings.Join(stuck, ", "))
		if cause := context.Cause(r.failed); r.failed.Err() != nil && !errors.Is(cause, context.Canceled) {
			err = errors.Join(cause, err)
		}
		return errors.Join(setupErr, err)
	}
	// A setup failure is the cause: the components' errors came after it.
	if err := r.g.Wait(); err != nil && setupErr == nil {
		return err
	}
	return setupErr
}

// runner runs the agent's components.
type runner struct {
	// base has ctx's values but never ends: each part's ctx derives from
	// it and ends only when the runner ends it.
	base context.Context
	g    *errgroup.Group
	// failed ends at the first component failure, stopping when ctx ends
	// or at that failure.
	failed, stopping context.Context
	stop             context.CancelFunc
	up               []*started
}

// started is a part that was set up: done closes when its component
// returned (at once when it has none).
type started struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
}

func newRunner(ctx context.Context) *runner {
	r := &runner{base: context.WithoutCancel(ctx)}
	r.g, r.failed = errgroup.WithContext(r.base)
	r.stopping, r.stop = context.WithCancel(ctx)
	context.AfterFunc(r.failed, r.stop)
	return r
}

// start sets p up and starts its component. It returns p's setup error,
// named by p, unless the setup failed because the agent was asked to stop
// (ctx ended).
func (r *runner) start(ctx context.Context, p part, d *deps) error {
	pctx, cancel := context.WithCancel(r.base)
	s := &started{name: p.name, cancel: cancel, done: make(chan struct{})}
	r.up = append(r.up, s)
	// A setup under way is cut short when the agent stops.
	detach := context.AfterFunc(r.stopping, cancel)
	klog.V(2).InfoS("Setting up an agent component", "component", p.name)
	c, err := p.setup(pctx, d)
	detach()
	if err != nil {
		close(s.done)
		if ctx.Err() != nil && pctx.Err() != nil {
			return nil
		}
		klog.ErrorS(err, "Cannot set up an agent component; stopping the agent", "component", p.name)
		return fmt.Errorf("%s: %w", p.name, err)
	}
	if c == nil {
		close(s.done)
		return nil
	}
	// Started even if the agent stopped during the setup (pctx has ended
	// then): what the component releases when it stops, it releases.
	r.g.Go(func() error {
		defer close(s.done)
		if err := c.run(pctx); err != nil {
			if pctx.Err() != nil {
				// Asked to stop, it returned why it could not finish
				// (an informer that never synced): not a failure.
				klog.InfoS("Agent component stopped with an error", "component", s.name, "err", err)
				return nil
			}
			klog.ErrorS(err, "Agent component failed; stopping the agent", "component", s.name)
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if pctx.Err() == nil {
			klog.V(2).InfoS("Agent component finished its work", "component", s.name)
		}
		return nil
	})
	return nil
}

// stopAll stops the started parts, the last first, each once the ones after
// it returned. Past timeout it stops the rest at once and returns the names
// of those that have not returned.
func (r *runner) stopAll(timeout time.Duration) (stuck []string) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i := len(r.up) - 1; i >= 0; i-- {
		s := r.up[i]
		s.cancel()
		select {
		case <-s.done:
			klog.V(2).InfoS("Agent component stopped", "component", s.name)
			continue
		case <-deadline.C:
		}
		for j := i; j >= 0; j-- {
			r.up[j].cancel()
			select {
			case <-r.up[j].done:
			default:
				stuck = append(stuck, r.up[j].name)
			}
		}
		return stuck
	}
	return nil
}
