// Package ovsinstance runs a private Open vSwitch instance (ovsdb-server and
// ovs-vswitchd with the userspace datapath) as children of the calling
// process, optionally inside a network namespace. The lab starts one per
// simulated node and integration tests start one per test, so several
// instances live side by side on one machine: each has its own database, run
// directory and sockets, selected through OVS_RUNDIR, OVS_DBDIR, OVS_LOGDIR
// and OVS_SYSCONFDIR (see ENVIRONMENT.md, "Open vSwitch 3.1").
//
// The daemons are never --detach'ed: PID 1 on these machines does not reap
// orphans, so a supervisor must own its daemons to stop them cleanly.
package ovsinstance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// SchemaPath is where Debian's openvswitch-common installs the Open_vSwitch schema.
const SchemaPath = "/usr/share/openvswitch/vswitch.ovsschema"

// Config says where an instance keeps its files and which netns it runs in.
type Config struct {
	// Dir holds the database, sockets, pid files and logs of the instance.
	Dir string
	// NetNS is the name of a network namespace under /var/run/netns in which
	// ovs-vswitchd runs (internal ports are created where it runs). Empty means
	// the caller's namespace.
	NetNS string
}

// Instance is one running ovsdb-server + ovs-vswitchd pair.
type Instance struct {
	cfg Config

	mu     sync.Mutex
	dbCmd  *exec.Cmd
	dbDone chan struct{}
	vsCmd  *exec.Cmd
	vsDone chan struct{}
}

// Start creates the database if needed and starts both daemons as children
// of this process. It returns once ovs-vswitchd answers on its control socket.
func Start(ctx context.Context, cfg Config) (*Instance, error) {
	in, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := in.CreateDB(); err != nil {
		return nil, err
	}
	if err := in.StartDB(ctx); err != nil {
		return nil, err
	}
	if err := in.StartVSwitchd(ctx); err != nil {
		in.Stop()
		return nil, err
	}
	if err := in.RecordVersion(); err != nil {
		in.Stop()
		return nil, err
	}
	return in, nil
}

// New returns an instance bound to cfg without starting anything: for a
// supervisor that runs the daemons itself (DBServerArgs, VSwitchdArgs, Env)
// and then uses the instance to run OVS commands against them.
func New(cfg Config) (*Instance, error) {
	if cfg.Dir == "" {
		return nil, errors.New("ovsinstance: Config.Dir is required")
	}
	abs, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = abs
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	return &Instance{cfg: cfg}, nil
}

// CreateDB creates the database file unless it exists.
func (in *Instance) CreateDB() error {
	if _, err := os.Stat(in.DBPath()); errors.Is(err, os.ErrNotExist) {
		if out, err := in.command("ovsdb-tool", "create", in.DBPath(), SchemaPath).CombinedOutput(); err != nil {
			return fmt.Errorf("ovsdb-tool create %s: %w: %s", in.DBPath(), err, out)
		}
	}
	return nil
}

// DBServerArgs are ovsdb-server's arguments for this instance.
func (in *Instance) DBServerArgs() []string {
	return []string{in.DBPath(),
		"--remote=punix:" + in.DBSocket(),
		"--remote=db:Open_vSwitch,Open_vSwitch,manager_options",
		"--pidfile=" + filepath.Join(in.cfg.Dir, "ovsdb-server.pid"),
		"--unixctl=" + filepath.Join(in.cfg.Dir, "ovsdb-server.ctl"),
		"--log-file=" + filepath.Join(in.cfg.Dir, "ovsdb-server.vlog")}
}

// VSwitchdArgs are ovs-vswitchd's arguments for this instance.
func (in *Instance) VSwitchdArgs() []string {
	return []string{in.DBEndpoint(),
		"--pidfile=" + filepath.Join(in.cfg.Dir, "ovs-vswitchd.pid"),
		"--unixctl=" + filepath.Join(in.cfg.Dir, "ovs-vswitchd.ctl"),
		"--log-file=" + filepath.Join(in.cfg.Dir, "ovs-vswitchd.vlog")}
}

// EnvVars are the OVS_* variables that bind OVS programs to this instance.
func (in *Instance) EnvVars() []string {
	return []string{
		"OVS_RUNDIR=" + in.cfg.Dir,
		"OVS_DBDIR=" + in.cfg.Dir,
		"OVS_LOGDIR=" + in.cfg.Dir,
		"OVS_SYSCONFDIR=" + in.cfg.Dir,
	}
}

// RecordVersion writes ovs-vswitchd's version into the Open_vSwitch table, as
// ovs-ctl does on real nodes (the agent reads it from there).
func (in *Instance) RecordVersion() error {
	out, err := in.Run("ovs-vswitchd", "--version")
	if err != nil {
		return err
	}
	first := strings.SplitN(out, "\n", 2)[0]
	f := strings.Fields(first)
	if len(f) == 0 {
		return fmt.Errorf("ovs-vswitchd --version printed nothing")
	}
	_, err = in.Vsctl("set", "Open_vSwitch", ".", "ovs_version="+f[len(f)-1])
	return err
}

// syncConfig reports whether ovs-vswitchd has applied the database: every
// bridge in it has its OpenFlow management socket. (ovs-vsctl's own wait for
// cur_cfg does not cover a freshly restarted ovs-vswitchd: the counter
// survives in the database.)
func (in *Instance) syncConfig() error {
	out, err := in.Run("ovs-vsctl", "--db="+in.DBEndpoint(), "--timeout=5", "list-br")
	if err != nil {
		return err
	}
	for _, br := range strings.Fields(out) {
		// Dial rather than stat: a killed ovs-vswitchd leaves its socket file.
		c, err := net.DialTimeout("unix", in.BridgeMgmt(br), time.Second)
		if err != nil {
			return fmt.Errorf("bridge %s is not configured yet: %w", br, err)
		}
		c.Close()
	}
	return nil
}

// WaitReady waits until ovs-vswitchd (and so ovsdb-server) of this instance
// answers and has applied its configuration, or ctx ends.
func (in *Instance) WaitReady(ctx context.Context) error {
	for {
		if _, err := in.Appctl("version"); err == nil && in.syncConfig() == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("OVS in %s is not ready: %w", in.cfg.Dir, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Dir is the instance's directory.
func (in *Instance) Dir() string { return in.cfg.Dir }

// NetNS is the network namespace ovs-vswitchd runs in ("" for the caller's).
func (in *Instance) NetNS() string { return in.cfg.NetNS }

// DBPath is the database file.
func (in *Instance) DBPath() string { return filepath.Join(in.cfg.Dir, "conf.db") }

// DBSocket is the unix socket path of ovsdb-server.
func (in *Instance) DBSocket() string { return filepath.Join(in.cfg.Dir, "db.sock") }

// DBEndpoint is the OVSDB endpoint in the "unix:PATH" form libovsdb and ovs-vsctl take.
func (in *Instance) DBEndpoint() string { return "unix:" + in.DBSocket() }

// BridgeMgmt is the OpenFlow management socket of a bridge of this instance.
func (in *Instance) BridgeMgmt(bridge string) string {
	return filepath.Join(in.cfg.Dir, bridge+".mgmt")
}

// Env is the environment that points OVS commands at this instance.
func (in *Instance) Env() []string {
	return append(os.Environ(), in.EnvVars()...)
}

// command builds a command bound to this instance, run inside its netns.
func (in *Instance) command(name string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if in.cfg.NetNS != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", in.cfg.NetNS, name}, args...)...)
	} else {
		cmd = exec.Command(name, args...)
	}
	cmd.Env = in.Env()
	return cmd
}

// Run runs an OVS command (ovs-vsctl, ovs-ofctl, ovs-appctl, ...) against this
// instance and returns its trimmed standard output.
func (in *Instance) Run(name string, args ...string) (string, error) {
	cmd := in.command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// Vsctl runs ovs-vsctl against this instance.
func (in *Instance) Vsctl(args ...string) (string, error) {
	return in.Run("ovs-vsctl", append([]string{"--db=" + in.DBEndpoint(), "--timeout=10"}, args...)...)
}

// Ofctl runs ovs-ofctl against a bridge of this instance; the bridge argument
// is replaced by its management socket path.
func (in *Instance) Ofctl(cmd, bridge string, args ...string) (string, error) {
	return in.Run("ovs-ofctl", append([]string{"-O", "OpenFlow15", cmd, in.BridgeMgmt(bridge)}, args...)...)
}

// Appctl runs ovs-appctl against ovs-vswitchd of this instance.
func (in *Instance) Appctl(args ...string) (string, error) {
	return in.Run("ovs-appctl", append([]string{"-t", filepath.Join(in.cfg.Dir, "ovs-vswitchd.ctl")}, args...)...)
}

func (in *Instance) startDaemon(ctx context.Context, name string, args ...string) (*exec.Cmd, chan struct{}, error) {
	logPath := filepath.Join(in.cfg.Dir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := in.command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: a terminal's ^C reaches the supervisor, which stops us in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	klog.V(2).InfoS("Started OVS daemon", "daemon", name, "pid", cmd.Process.Pid, "dir", in.cfg.Dir, "netns", in.cfg.NetNS)
	return cmd, done, nil
}

// StartDB starts ovsdb-server and waits until it accepts connections.
func (in *Instance) StartDB(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	_ = os.Remove(in.DBSocket())
	cmd, done, err := in.startDaemon(ctx, "ovsdb-server", in.DBServerArgs()...)
	if err != nil {
		return err
	}
	in.dbCmd, in.dbDone = cmd, done
	if err := waitFor(ctx, done, func() bool {
		_, err := in.Run("ovs-vsctl", "--db="+in.DBEndpoint(), "--timeout=1", "--no-wait", "init")
		return err == nil
	}); err != nil {
		return fmt.Errorf("ovsdb-server in %s: %w (see %s)", in.cfg.Dir, err, filepath.Join(in.cfg.Dir, "ovsdb-server.log"))
	}
	return nil
}

// StartVSwitchd starts ovs-vswitchd and waits until it answers on its control socket.
func (in *Instance) StartVSwitchd(ctx context.Context) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	cmd, done, err := in.startDaemon(ctx, "ovs-vswitchd", in.VSwitchdArgs()...)
	if err != nil {
		return err
	}
	in.vsCmd, in.vsDone = cmd, done
	if err := waitFor(ctx, done, func() bool {
		_, err := in.Appctl("version")
		return err == nil && in.syncConfig() == nil
	}); err != nil {
		return fmt.Errorf("ovs-vswitchd in %s: %w (see %s)", in.cfg.Dir, err, filepath.Join(in.cfg.Dir, "ovs-vswitchd.log"))
	}
	return nil
}

func waitFor(ctx context.Context, died chan struct{}, ready func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		if ready() {
			return nil
		}
		select {
		case <-died:
			return errors.New("daemon exited during start")
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func stop(cmd *exec.Cmd, done chan struct{}) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// StopVSwitchd stops ovs-vswitchd (flows are lost, as on a real restart).
func (in *Instance) StopVSwitchd() {
	in.mu.Lock()
	defer in.mu.Unlock()
	stop(in.vsCmd, in.vsDone)
}

// StopDB stops ovsdb-server.
func (in *Instance) StopDB() {
	in.mu.Lock()
	defer in.mu.Unlock()
	stop(in.dbCmd, in.dbDone)
}

// RestartVSwitchd stops and starts ovs-vswitchd.
func (in *Instance) RestartVSwitchd(ctx context.Context) error {
	in.StopVSwitchd()
	return in.StartVSwitchd(ctx)
}

// RestartDB stops and starts ovsdb-server.
func (in *Instance) RestartDB(ctx context.Context) error {
	in.StopDB()
	return in.StartDB(ctx)
}

// PIDs returns the process IDs of the running daemons.
func (in *Instance) PIDs() []int {
	in.mu.Lock()
	defer in.mu.Unlock()
	var pids []int
	for _, c := range []*exec.Cmd{in.dbCmd, in.vsCmd} {
		if c != nil && c.Process != nil {
			pids = append(pids, c.Process.Pid)
		}
	}
	return pids
}

// Stop stops both daemons, ovs-vswitchd first.
func (in *Instance) Stop() {
	in.StopVSwitchd()
	in.StopDB()
}
