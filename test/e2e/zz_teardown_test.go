package e2e

// The tests of this file end the package's lab (a SIGKILLed supervisor, then
// down) or start labs of their own, so they must run after every test that
// uses the shared lab. Go runs a package's tests in the order of its files,
// then of their functions: this file's name keeps it last.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

func TestASecondUpIsRefusedWhileTheLabRuns(t *testing.T) {
	e := requireLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := e.Cmd(ctx, append([]string{"up"}, labtest.UpFlags(oneNode(e.Opts))...)...)
	if err == nil || !strings.Contains(out, "already running") {
		t.Fatalf("a second up should fail saying a lab is already running; got %v: %s", err, out)
	}
	st, err := lab.LoadState(e.Opts.StatePath())
	if err != nil || st == nil || st.Phase != lab.PhaseReady || !st.Supervisor.Alive() {
		t.Fatalf("the running lab should be untouched by the refused up: %+v, %v", st, err)
	}
}

func oneNode(o lab.Options) lab.Options {
	o.Nodes = 1
	return o
}

// TestDownCleansUpAfterTheSupervisorWasKilled runs last of the tests on the
// shared lab: it ends it.
func TestDownCleansUpAfterTheSupervisorWasKilled(t *testing.T) {
	e := requireLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Pods make pod netns, containers, shims and pod cgroups that down must
	// find too.
	testPods(t, e, ctx)
	fp := recordFootprint(t, e)
	if e.Real() {
		if len(fp.containers) == 0 || len(fp.shims) == 0 {
			t.Fatalf("expected containers in the lab's cgroups and containerd shims before the kill; got %d and %d",
				len(fp.containers), len(fp.shims))
		}
	} else if len(fp.netnsPIDs) == 0 {
		t.Fatal("expected processes in the lab's namespaces before the kill")
	}
	if err := e.KillSupervisor(); err != nil {
		t.Fatal(err)
	}
	out, err := e.Cmd(ctx, "down")
	if err != nil {
		t.Fatalf("antrea-lab down after SIGKILL: %v\n%s", err, out)
	}
	t.Logf("antrea-lab down:\n%s", out)
	assertNothingLeft(t, e, fp)
}

// TestUpThenDownLeavesNothing brings up a lab the way a user does (up
// returns, the supervisor keeps running) and checks an orderly down. It
// starts a second lab (about 40 s), so it runs under ANTREA_RELIABILITY
// (make reliability); in make test, the test above checks that down leaves
// nothing after the harder end, a supervisor killed with SIGKILL.
func TestUpThenDownLeavesNothing(t *testing.T) {
	e := requireLab(t)
	if os.Getenv("ANTREA_RELIABILITY") == "" {
		t.Skip("starts a second lab: runs under ANTREA_RELIABILITY=1 (make reliability)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), labtest.StartTimeout)
	defer cancel()
	// Normally the shared lab is gone (the test above ends it); not when this
	// test runs alone.
	if out, err := e.Cmd(ctx, "down"); err != nil {
		t.Fatalf("antrea-lab down of the shared lab: %v\n%s", err, out)
	}
	labtest.ReapZombies()
	e.before = takeSnapshot(e.Opts.Dir)
	out, err := e.Cmd(ctx, append([]string{"up"}, labtest.UpFlags(oneNode(e.Opts))...)...)
	if err != nil {
		t.Fatalf("antrea-lab up: %v\n%s", err, out)
	}
	if !strings.Contains(out, "node-1") || !strings.Contains(out, "Ready") {
		t.Errorf("up should end with the status of a Ready node:\n%s", out)
	}
	fp := recordFootprint(t, e)
	out, err = e.Cmd(ctx, "down")
	if err != nil {
		t.Fatalf("antrea-lab down: %v\n%s", err, out)
	}
	// The detached supervisor was reparented to us (subreaper); give it a
	// moment to exit after down saw it gone, then reap it.
	labtest.WaitFor(t, ctx, "the supervisor to exit", func() error {
		labtest.ReapZombies()
		if s := labtest.ProcState(fp.state.Supervisor.PID); s != 0 {
			return fmt.Errorf("state %c", s)
		}
		return nil
	})
	assertNothingLeft(t, e, fp)
}
