package lab

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A daemon stopped through the control socket stays stopped (even one the
// supervisor restarts when it crashes) until a start request starts it again
// with the same command line; a crash of the new one is again restarted.
func TestControlSocketStopsADaemonUntilItIsStartedAgain(t *testing.T) {
	opts := Options{Dir: t.TempDir()}
	s := &supervisor{opts: opts, store: &stateStore{path: filepath.Join(opts.Dir, "state.json")}, logf: t.Logf}
	if err := os.MkdirAll(opts.logDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.serveControl(); err != nil {
		t.Fatal(err)
	}
	defer s.teardownDaemonsForTest()
	d, err := s.startDaemonWith("antrea-agent", "node-1", "", nil, "sleep", "600")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	out, err := StopComponent(ctx, opts, "antrea-agent", "node-1", false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, strconv.Itoa(d.proc.PID)) || d.proc.Alive() {
		t.Fatalf("stop said %q; pid %d alive: %t", out, d.proc.PID, d.proc.Alive())
	}
	time.Sleep(restartDelay + 500*time.Millisecond)
	if live := s.liveDaemons("antrea-agent", "node-1"); len(live) != 0 {
		t.Fatalf("the stopped daemon was restarted: pid %d", live[0].proc.PID)
	}
	if _, err := StopComponent(ctx, opts, "antrea-agent", "node-1", false); err == nil {
		t.Error("a second stop of a stopped daemon succeeded")
	}

	out, err = StartComponent(ctx, opts, "antrea-agent", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	live := s.liveDaemons("antrea-agent", "node-1")
	if len(live) != 1 || !live[0].proc.Alive() || !strings.Contains(out, strconv.Itoa(live[0].proc.PID)) {
		t.Fatalf("start said %q; live daemons %d", out, len(live))
	}
	if got := strings.Join(live[0].cmd.Args, " "); got != "sleep 600" {
		t.Errorf("restarted as %q, want the same command line", got)
	}
	if _, err := StartComponent(ctx, opts, "antrea-agent", "node-1"); err == nil {
		t.Error("a second start succeeded")
	}

	// A crash of the new process is a restart again, as before the stop.
	live[0].stop(0)
	deadline := time.Now().Add(restartDelay + 5*time.Second)
	for len(s.liveDaemons("antrea-agent", "node-1")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the started daemon was not restarted after it crashed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// teardownDaemonsForTest stops every daemon and the control socket.
func (s *supervisor) teardownDaemonsForTest() {
	s.mu.Lock()
	s.stopping = true
	ds := append([]*daemon(nil), s.daemons...)
	s.mu.Unlock()
	for _, d := range ds {
		d.stop(time.Second)
	}
	if s.control != nil {
		_ = s.control.Close()
	}
}
