package app

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"
)

// datapathPurger flushes ovs-vswitchd's cached datapath flows after policy
// changes that narrow what is allowed (never after a write that only allows
// more, nor when a sync wrote nothing), coalescing those that come close
// together. On the userspace datapath of OVS 3.1 a cached megaflow was seen to keep forwarding a
// connection a new policy forbids, for as long as traffic kept it alive,
// although the OpenFlow tables (and ofproto/trace) said drop; purging makes
// every flow's next packet be translated against the current tables. The
// cost is one upcall per active flow after a policy change.
type datapathPurger struct {
	runDir string
	kick   chan struct{}
}

func newDatapathPurger(runDir string) *datapathPurger {
	return &datapathPurger{runDir: runDir, kick: make(chan struct{}, 1)}
}

// Changed asks for a purge; it never blocks.
func (p *datapathPurger) Changed() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *datapathPurger) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		// Let a burst of rule changes land first.
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
		p.purge(ctx)
	}
}

func (p *datapathPurger) purge(ctx context.Context) {
	// The lab's instances name the control socket ovs-vswitchd.ctl; a
	// packaged OVS finds it from the pidfile in its run dir.
	target := filepath.Join(p.runDir, "ovs-vswitchd.ctl")
	if _, err := os.Stat(target); err != nil {
		target = "ovs-vswitchd"
	}
	cmd := exec.CommandContext(ctx, "ovs-appctl", "-t", target, "revalidator/purge")
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+p.runDir)
	if out, err := cmd.CombinedOutput(); err != nil && ctx.Err() == nil {
		klog.ErrorS(err, "Could not purge the datapath flow cache", "output", string(out))
	}
}
