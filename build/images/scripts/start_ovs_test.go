// Package scripts tests the shell scripts of the antrea-agent image by
// running them: start_ovs with this machine's Open vSwitch as PID 1 of a fresh
// PID and network namespace (as in the antrea-ovs container), install_cni on
// temporary host directories.
package scripts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// schemaPath is where Debian's openvswitch-common installs the schema
// start_ovs uses by default.
const schemaPath = "/usr/share/openvswitch/vswitch.ovsschema"

// requireOVS skips the test unless it runs as root (namespaces) with Open
// vSwitch's programs installed.
func requireOVS(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("start_ovs tests need root: they run it in new PID and network namespaces")
	}
	for _, p := range []string{"ovsdb-server", "ovs-vswitchd", "ovsdb-tool", "ovs-vsctl", "ovs-appctl", "nsenter"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (apt-get install openvswitch-switch, or hack/install.sh apt): %v", p, err)
		}
	}
	if _, err := os.Stat(schemaPath); err != nil {
		t.Skipf("the Open vSwitch schema is missing: %v", err)
	}
}

// ovsDirs are the directories one start_ovs instance uses, all under a
// temporary directory, passed through the variables OVS's own programs read.
type ovsDirs struct{ run, log, etc string }

func newOVSDirs(t *testing.T) ovsDirs {
	d := t.TempDir()
	return ovsDirs{run: filepath.Join(d, "run"), log: filepath.Join(d, "log"), etc: filepath.Join(d, "etc")}
}

func (d ovsDirs) env() []string {
	return append(os.Environ(), "OVS_RUNDIR="+d.run, "OVS_DBDIR="+d.run, "OVS_LOGDIR="+d.log, "OVS_SYSCONFDIR="+d.etc)
}

func (d ovsDirs) db() string { return filepath.Join(d.run, "conf.db") }

// vsctl runs ovs-vsctl against the instance from the test's own namespaces:
// a unix socket is reachable by path from any network namespace.
func (d ovsDirs) vsctl(args ...string) (string, error) {
	return run(d.env(), "ovs-vsctl", append([]string{"--db=unix:" + filepath.Join(d.run, "db.sock"), "--timeout=5"}, args...)...)
}

// appctlVSwitchd asks ovs-vswitchd for its version the way the DaemonSet's
// liveness probe does: through the control socket named by its pid file.
func (d ovsDirs) appctlVSwitchd() error {
	pid, err := os.ReadFile(filepath.Join(d.run, "ovs-vswitchd.pid"))
	if err != nil {
		return err
	}
	ctl := filepath.Join(d.run, "ovs-vswitchd."+strings.TrimSpace(string(pid))+".ctl")
	_, err = run(d.env(), "ovs-appctl", "--timeout=2", "-t", ctl, "version")
	return err
}

func run(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// lockedBuffer collects the script's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startOVS is one run of start_ovs.
type startOVS struct {
	dirs ovsDirs
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error // the script's exit, once done is closed
}

// runStartOVS starts start_ovs as PID 1 of a new PID namespace and in a new
// network namespace, as a container runtime would, and waits until both
// daemons answer.
func runStartOVS(t *testing.T, dirs ovsDirs) *startOVS {
	t.Helper()
	s := startScript(t, dirs, "")
	s.waitReady(t)
	return s
}

// startScript starts start_ovs as PID 1 of a new PID namespace and in a new
// network namespace. With root set, it runs the image's copy of the script
// chrooted there with the image's default directories (dirs must name them
// as seen from the host); else the repository's copy, with dirs passed in
// OVS_* variables. Whatever happens, the test's cleanup kills the script by
// its PID, and the kernel then kills everything left in its PID namespace
// (the daemons); the network namespace goes with its last process.
func startScript(t *testing.T, dirs ovsDirs, root string) *startOVS {
	t.Helper()
	s := &startOVS{dirs: dirs, out: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command("./start_ovs")
	s.cmd.Env = dirs.env()
	s.cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNET,
		// If the test binary dies, so does the script and with it its namespace.
		Pdeathsig: syscall.SIGKILL,
	}
	if root != "" {
		s.cmd = exec.Command("/usr/local/bin/start_ovs")
		s.cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		s.cmd.Dir = "/"
		s.cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNET,
			Chroot:     root,
			Pdeathsig:  syscall.SIGKILL,
		}
	}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting start_ovs: %v", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("start_ovs output:\n%s", s.out.String())
		}
	})
	return s
}

// waitReady waits until both daemons answer.
func (s *startOVS) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, dbErr := s.dirs.vsctl("show")
		vsErr := s.dirs.appctlVSwitchd()
		if dbErr == nil && vsErr == nil {
			return
		}
		select {
		case <-s.done:
			t.Fatalf("start_ovs exited during start (%v); output:\n%s", s.err, s.out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("OVS did not answer within 20s: ovsdb-server: %v; ovs-vswitchd: %v", dbErr, vsErr)
		}
	}
}

// wait waits for the script to exit and returns its exit code.
func (s *startOVS) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("start_ovs did not exit within 30s; output:\n%s", s.out.String())
	}
	var exit *exec.ExitError
	switch {
	case s.err == nil:
		return 0
	case errors.As(s.err, &exit):
		return exit.ExitCode()
	default:
		t.Fatalf("waiting for start_ovs: %v", s.err)
		return -1
	}
}

// children maps the command name of each child of pid to its PID (host
// PID namespace), read from /proc.
func children(t *testing.T, pid int) map[string]int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, ppid, _, err := procStat(child)
		if err == nil && ppid == pid {
			out[comm] = child
		}
	}
	return out
}

// procStat returns a process's command name, parent PID and state letter.
func procStat(pid int) (comm string, ppid int, state string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, "", err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 2 {
		return "", 0, "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	ppid, err = strconv.Atoi(f[1])
	return s[open+1 : end], ppid, f[0], err
}

// daemons returns the host PIDs of the script's two daemons.
func (s *startOVS) daemons(t *testing.T) (ovsdbServer, ovsVSwitchd int) {
	t.Helper()
	c := children(t, s.cmd.Process.Pid)
	if c["ovsdb-server"] == 0 || c["ovs-vswitchd"] == 0 {
		t.Fatalf("start_ovs's children are %v, want ovsdb-server and ovs-vswitchd among them", c)
	}
	return c["ovsdb-server"], c["ovs-vswitchd"]
}

// requireInOrder fails unless out holds each of lines, in that order.
func requireInOrder(t *testing.T, out string, lines ...string) {
	t.Helper()
	rest := out
	for _, l := range lines {
		i := strings.Index(rest, l)
		if i < 0 {
			t.Fatalf("start_ovs's output lacks %q (after the lines before it); output:\n%s", l, out)
		}
		rest = rest[i+len(l):]
	}
}

func TestStartOVSRunsBothDaemonsAndStopsThemOnSIGTERM(t *testing.T) {
	requireOVS(t)
	dirs := newOVSDirs(t)

	s := runStartOVS(t, dirs)
	if out, err := dirs.vsctl("show"); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("ovs-vsctl show:\n%s", out)
	}
	// A bridge in the datapath ovs-vswitchd really makes (in the script's
	// network namespace), and the row start_ovs records, which the agent reads.
	if _, err := dirs.vsctl("add-br", "br-test", "--", "set", "bridge", "br-test", "datapath_type=netdev"); err != nil {
		t.Fatal(err)
	}
	version, err := dirs.vsctl("get", "Open_vSwitch", ".", "ovs_version")
	if err != nil || strings.Trim(version, `"`) == "" {
		t.Errorf("ovs_version is %q (%v), want the version of ovs-vswitchd", version, err)
	}
	// Held back until the agent has installed its flows (it removes the key).
	if wait, err := dirs.vsctl("get", "Open_vSwitch", ".", "other_config:flow-restore-wait"); err != nil || wait != `"true"` {
		t.Errorf("other_config:flow-restore-wait is %s (%v), want \"true\"", wait, err)
	}
	if _, err := dirs.vsctl("remove", "Open_vSwitch", ".", "other_config", "flow-restore-wait"); err != nil {
		t.Fatal(err)
	}
	systemID, err := dirs.vsctl("get", "Open_vSwitch", ".", "external_ids:system-id")
	if err != nil {
		t.Errorf("no system-id recorded: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dirs.log, "ovs-vswitchd.log")); err != nil {
		t.Errorf("ovs-vswitchd logs to no file in OVS_LOGDIR: %v", err)
	}
	dbPID, vsPID := s.daemons(t)
	t.Logf("start_ovs pid %d, ovsdb-server %d, ovs-vswitchd %d", s.cmd.Process.Pid, dbPID, vsPID)

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(t); code != 0 {
		t.Fatalf("start_ovs exited %d after SIGTERM, want 0; output:\n%s", code, s.out.String())
	}
	// The script waits for each daemon before it exits, and says so: the
	// daemons exited on their own (the kernel kills what PID 1 leaves behind
	// only after this).
	requireInOrder(t, s.out.String(), "got SIGTERM", "ovs-vswitchd exited (status 0)", "ovsdb-server exited (status 0)")
	for name, pid := range map[string]int{"ovsdb-server": dbPID, "ovs-vswitchd": vsPID} {
		if _, _, state, err := procStat(pid); err == nil {
			t.Errorf("%s (pid %d) is still there (state %s)", name, pid, state)
		}
	}

	// The database is kept: a restarted container finds its bridge and its
	// identity again.
	s = runStartOVS(t, dirs)
	if brs, err := dirs.vsctl("list-br"); err != nil || brs != "br-test" {
		t.Errorf("after a restart the bridges are %q (%v), want br-test", brs, err)
	}
	if again, err := dirs.vsctl("get", "Open_vSwitch", ".", "external_ids:system-id"); err != nil || again != systemID {
		t.Errorf("after a restart the system-id is %s (%v), want %s", again, err, systemID)
	}
	if wait, err := dirs.vsctl("get", "Open_vSwitch", ".", "other_config:flow-restore-wait"); err != nil || wait != `"true"` {
		t.Errorf("after a restart other_config:flow-restore-wait is %s (%v), want \"true\" again", wait, err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(t); code != 0 {
		t.Fatalf("start_ovs exited %d after SIGINT, want 0", code)
	}
}

func TestStartOVSExitsNonZeroWhenADaemonDies(t *testing.T) {
	requireOVS(t)
	for _, tc := range []struct {
		kill, other string
	}{
		{kill: "ovs-vswitchd", other: "ovsdb-server"},
		{kill: "ovsdb-server", other: "ovs-vswitchd"},
	} {
		t.Run("killing "+tc.kill+" stops "+tc.other, func(t *testing.T) {
			s := runStartOVS(t, newOVSDirs(t))
			dbPID, vsPID := s.daemons(t)
			victim, survivor := vsPID, dbPID
			if tc.kill == "ovsdb-server" {
				victim, survivor = dbPID, vsPID
			}
			if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			code := s.wait(t)
			if code == 0 {
				t.Fatalf("start_ovs exited 0 after %s died, want non-zero; output:\n%s", tc.kill, s.out.String())
			}
			t.Logf("start_ovs exited %d", code)
			requireInOrder(t, s.out.String(), tc.kill+" exited (status 137): stopping "+tc.other, tc.other+" exited")
			if _, _, state, err := procStat(survivor); err == nil {
				t.Errorf("%s (pid %d) is still there (state %s)", tc.other, survivor, state)
			}
		})
	}
}

// As PID 1, start_ovs inherits every orphan of its PID namespace (e.g. what
// a liveness probe's shell leaves behind) and must reap it.
func TestStartOVSReapsOrphans(t *testing.T) {
	requireOVS(t)
	s := runStartOVS(t, newOVSDirs(t))
	pid := s.cmd.Process.Pid
	// The shell exits at once; its sleep is then reparented to the
	// namespace's init, start_ovs. (Its output goes elsewhere, or run would
	// wait for it to close the pipe.)
	if _, err := run(nil, "nsenter", "--target", strconv.Itoa(pid), "--pid", "--", "/bin/sh", "-c", "sleep 1 >/dev/null 2>&1 & exit 0"); err != nil {
		t.Fatal(err)
	}
	orphan := children(t, pid)["sleep"]
	if orphan == 0 {
		t.Fatalf("no orphaned sleep among start_ovs's children %v", children(t, pid))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, ppid, state, err := procStat(orphan)
		if err != nil || ppid != pid {
			break // reaped (or the PID reused by another process)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the orphan (pid %d) is still there in state %s 4s after it ended", orphan, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(t); code != 0 {
		t.Fatalf("start_ovs exited %d after SIGTERM, want 0", code)
	}
}

// A database made by another OVS version: converted when the image's schema
// is newer (an upgrade), kept when it is older (a downgrade).
func TestStartOVSConvertsOnlyAnOlderDatabase(t *testing.T) {
	requireOVS(t)
	current, err := run(nil, "ovsdb-tool", "schema-version", schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dbVersion, want string
		backup                bool
	}{
		{name: "an older database is converted, with a backup", dbVersion: "8.0.0", want: current, backup: true},
		{name: "a newer database is kept", dbVersion: "99.0.0", want: "99.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs := newOVSDirs(t)
			if err := os.MkdirAll(dirs.run, 0o755); err != nil {
				t.Fatal(err)
			}
			schema := schemaWithVersion(t, tc.dbVersion)
			if _, err := run(nil, "ovsdb-tool", "create", dirs.db(), schema); err != nil {
				t.Fatal(err)
			}
			s := runStartOVS(t, dirs)
			if got, err := run(nil, "ovsdb-tool", "db-version", dirs.db()); err != nil || got != tc.want {
				t.Errorf("the database's schema version is %q (%v), want %s", got, err, tc.want)
			}
			_, err := os.Stat(dirs.db() + ".backup-" + tc.dbVersion)
			if tc.backup != (err == nil) {
				t.Errorf("backup of the database: %v, want one: %v", err, tc.backup)
			}
			if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := s.wait(t); code != 0 {
				t.Fatalf("start_ovs exited %d after SIGTERM, want 0", code)
			}
		})
	}
}

// schemaWithVersion writes the installed schema with another version number.
func schemaWithVersion(t *testing.T, version string) string {
	t.Helper()
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	schema["version"] = version
	delete(schema, "cksum")
	out, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "vswitch.ovsschema")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A daemon that fails at once (here ovs-vswitchd, whose pid file path is a
// directory) ends the script too, however early it dies.
func TestStartOVSExitsNonZeroWhenOVSVSwitchdCannotStart(t *testing.T) {
	requireOVS(t)
	dirs := newOVSDirs(t)
	if err := os.MkdirAll(filepath.Join(dirs.run, "ovs-vswitchd.pid"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := startScript(t, dirs, "")
	if code := s.wait(t); code == 0 {
		t.Fatalf("start_ovs exited 0, want non-zero; output:\n%s", s.out.String())
	}
	requireInOrder(t, s.out.String(), "pidfile check failed", "ovs-vswitchd exited (status 1): stopping ovsdb-server", "ovsdb-server exited (status 0)")
}

// The script in the antrea-agent image's rootfs, with the image's Open
// vSwitch and the contract's default directories: what the antrea-ovs
// container runs. The rootfs (hack/install.sh agent-rootfs) is copied, never
// written.
func TestStartOVSInTheAgentRootFS(t *testing.T) {
	requireOVS(t)
	rootfs, err := filepath.EvalSymlinks("../../../_output/rootfs-antrea-agent")
	if err != nil {
		t.Skipf("no agent rootfs (make it with hack/install.sh agent-rootfs): %v", err)
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command("cp", "-a", rootfs, root).CombinedOutput(); err != nil {
		t.Fatalf("copying %s: %v: %s", rootfs, err, out)
	}
	script, err := os.ReadFile("start_ovs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/local/bin/start_ovs"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	// /var/run is a link to /run in Debian: resolve it on the host's side.
	dirs := ovsDirs{
		run: filepath.Join(root, "run/openvswitch"),
		log: filepath.Join(root, "var/log/openvswitch"),
		etc: filepath.Join(root, "etc/openvswitch"),
	}
	s := startScript(t, dirs, root)
	s.waitReady(t)
	if out, err := dirs.vsctl("show"); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("ovs-vsctl show:\n%s", out)
	}
	if _, err := dirs.vsctl("add-br", "br-test", "--", "set", "bridge", "br-test", "datapath_type=netdev"); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.wait(t); code != 0 {
		t.Fatalf("start_ovs exited %d after SIGTERM, want 0", code)
	}
	requireInOrder(t, s.out.String(), "creating /var/run/openvswitch/conf.db", "got SIGTERM", "ovs-vswitchd exited (status 0)", "ovsdb-server exited (status 0)")
}
