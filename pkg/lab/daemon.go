package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// daemon is a child process of the supervisor, running in a netns.
type daemon struct {
	proc Process
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
	// enter, bin and args start the daemon again (see restartable).
	enter []string
	bin   string
	args  []string
	// held is set when a control request stopped the daemon: it is not
	// restarted when it exits; restarted once StartComponent started its
	// successor.
	held, restarted bool
}

// restartable are the daemons the supervisor restarts when they exit, as a
// DaemonSet (antrea-agent), a Deployment (antrea-controller) or systemd (OVS)
// would on a real cluster (systemd for kubelet and containerd too): a crash or
// a kill is then a restart, which is what
// the agent's restart guarantees are about.
var restartable = map[string]bool{"antrea-agent": true, "antrea-controller": true, "ovsdb-server": true, "ovs-vswitchd": true,
	"kubelet": true, "containerd": true}

// restartDelay is how long the supervisor waits before restarting a daemon.
const restartDelay = time.Second

// startDaemon starts bin with args inside netns as a child of this process,
// with stdout and stderr appended to the component's log, and records it in
// the state.
func (s *supervisor) startDaemon(component, node, netns, bin string, args ...string) (*daemon, error) {
	// ip netns exec also remounts /sys for the netns, which tools that read
	// /sys/class/net expect.
	return s.startDaemonWith(component, node, netns, []string{"ip", "netns", "exec", netns}, bin, args...)
}

// startDaemonWith is startDaemon with the command that enters the netns
// (it must exec the daemon, so that the PID is the daemon's own).
func (s *supervisor) startDaemonWith(component, node, netns string, enter []string, bin string, args ...string) (*daemon, error) {
	logPath := s.opts.LogPath(component, node)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", component, err)
	}
	argv := append(append(append([]string(nil), enter...), bin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "PATH="+s.opts.BinDir+":"+s.opts.KubeBinDir+":"+os.Getenv("PATH"))
	// Own process group so a terminal's ^C reaches only the supervisor, which
	// stops everything in order; Pdeathsig so nothing outlives a killed supervisor.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s in netns %s: %w", component, netns, err)
	}
	d := &daemon{
		proc: Process{Component: component, Node: node, PID: cmd.Process.Pid,
			StartTime: processStartTime(cmd.Process.Pid), NetNS: netns, Log: logPath},
		cmd:   cmd,
		done:  make(chan struct{}),
		enter: enter,
		bin:   bin,
		args:  args,
	}
	go func() {
		d.err = cmd.Wait()
		logf.Close()
		close(d.done)
		s.daemonExited(d)
	}()
	s.mu.Lock()
	s.daemons = append(s.daemons, d)
	s.mu.Unlock()
	if err := s.store.update(func(st *State) { st.Processes = append(st.Processes, d.proc) }); err != nil {
		return d, err
	}
	klog.InfoS("Started daemon", "component", component, "node", node, "pid", d.proc.PID, "netns", netns, "log", logPath)
	return d, nil
}

// exited tells whether the daemon has exited.
func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, waits up to grace, then kills.
func (d *daemon) stop(grace time.Duration) {
	if d.exited() {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(grace):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// waitUntil polls ready every interval until it returns true, the daemon
// exits, or ctx ends.
func (d *daemon) waitUntil(ctx context.Context, what string, ready func(context.Context) bool) error {
	for {
		if ready(ctx) {
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("%s exited while waiting for %s (%v); see %s", d.proc.Component, what, d.err, d.proc.Log)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w; see %s", what, ctx.Err(), d.proc.Log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
