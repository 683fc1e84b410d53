package nodesim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// procInfo reads a process's state letter and start time (clock ticks since
// boot) from /proc/PID/stat (proc(5), fields 3 and 22).
func procInfo(pid int) (state byte, startTicks uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces; fields resume after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("process %d: malformed stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("process %d: short stat", pid)
	}
	startTicks, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: start time: %w", pid, err)
	}
	return f[0][0], startTicks, nil
}

// alive says whether the recorded process still runs. A zombie counts as
// dead: when the simulator restarts, its former children are reparented to a
// PID 1 that may never reap them.
func alive(pid int, startTicks uint64) bool {
	if pid <= 0 {
		return false
	}
	st, ticks, err := procInfo(pid)
	return err == nil && st != 'Z' && st != 'X' && ticks == startTicks
}

// processSpec is one process to start inside a pod netns.
type processSpec struct {
	Path    string
	Args    []string
	Env     []string
	Dir     string
	LogPath string
}

// startInNetNS starts the process in the netns at path: the process is forked
// from a thread that has entered the netns, so it is born there. It gets its
// own session so that it outlives the simulator (pods survive a restart) and
// so that stopping its process group also stops what it spawned. exited is
// called with the PID and exit code once the process ends.
func startInNetNS(netns string, spec processSpec, exited func(pid, code int)) (pid int, startTicks uint64, err error) {
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, 0, fmt.Errorf("log file %s: %w", spec.LogPath, err)
	}
	defer logf.Close()
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	// Files, not pipes: the process keeps writing its log after we are gone.
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	start := func(ns.NetNS) error { return cmd.Start() }
	if netns == "" {
		// hostNetwork: the simulator's own netns, the node's.
		err = start(nil)
	} else {
		err = ns.WithNetNSPath(netns, start)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("start %s in %s: %w", spec.Path, netns, err)
	}
	pid = cmd.Process.Pid
	_, startTicks, err = procInfo(pid)
	if err != nil {
		// It died at once and may already be reaped; the Wait below reports it.
		startTicks = 0
	}
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			code = -1
		}
		exited(cmd.Process.Pid, code)
	}()
	return pid, startTicks, nil
}

// stopProcess stops the recorded process and its process group: SIGTERM,
// then SIGKILL after grace. It never signals a PID that now belongs to
// another process.
func stopProcess(ctx context.Context, pid int, startTicks uint64, grace time.Duration) error {
	if !alive(pid, startTicks) {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitDead(ctx, pid, startTicks, grace) {
		return nil
	}
	if !alive(pid, startTicks) {
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitDead(ctx, pid, startTicks, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("process %d did not stop after SIGKILL", pid)
}

func waitDead(ctx context.Context, pid int, startTicks uint64, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for alive(pid, startTicks) {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}
