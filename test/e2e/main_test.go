// Package e2e tests antrea-lab end to end: a real control plane and real
// simulated nodes in network namespaces, driven through the antrea-lab
// binary as a user would. One 2-node lab is shared by the package (TestMain);
// the last test kills its supervisor with SIGKILL and checks that `down`
// still removes everything.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"antrea.io/antrea/pkg/lab"
)

// env is what every test of the package shares: the lab TestMain started.
// It is package-level because TestMain cannot hand values to tests otherwise.
var env *labEnv

type labEnv struct {
	root       string
	binDir     string
	opts       lab.Options
	client     kubernetes.Interface
	supervisor *exec.Cmd // `antrea-lab up --foreground`, our child
	waited     chan struct{}
	before     snapshot
	skip       string
	upDuration time.Duration
}

func TestMain(m *testing.M) {
	env = &labEnv{}
	if reason := env.prerequisites(); reason != "" {
		env.skip = reason
		os.Exit(m.Run())
	}
	// Orphans of a killed supervisor are reparented to us rather than to PID 1
	// (which does not reap on these machines), so the test can reap them and
	// see a process table without lab zombies.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cannot become a subreaper: %v\n", err)
		os.Exit(1)
	}
	if err := env.start(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: lab did not come up: %v\n", err)
		env.dumpLogs()
		env.stop()
		os.Exit(1)
	}
	code := m.Run()
	env.stop()
	os.Exit(code)
}

// prerequisites returns why the e2e tests cannot run here, or "".
func (e *labEnv) prerequisites() string {
	if os.Geteuid() != 0 {
		return "e2e tests need root (they create network namespaces)"
	}
	wd, _ := os.Getwd()
	e.root = filepath.Join(wd, "..", "..")
	e.binDir = os.Getenv("ANTREA_BIN")
	if e.binDir == "" {
		e.binDir = filepath.Join(e.root, "bin")
	}
	e.opts = lab.DefaultOptions()
	e.opts.BinDir = e.binDir
	e.opts.Dir = filepath.Join(e.root, "_output", "lab")
	e.opts.KubeBinDir = filepath.Join(e.root, "_output", "bin")
	e.opts.CNIBinDir = filepath.Join(e.root, "_output", "cni", "bin")
	if err := e.opts.Validate(); err != nil {
		return err.Error()
	}
	for _, f := range []string{
		filepath.Join(e.binDir, "antrea-lab"), filepath.Join(e.binDir, "antrea-testpod"),
		filepath.Join(e.opts.KubeBinDir, "etcd"), filepath.Join(e.opts.KubeBinDir, "kube-apiserver"),
		filepath.Join(e.opts.KubeBinDir, "kube-controller-manager"), filepath.Join(e.opts.KubeBinDir, "kube-scheduler"),
		filepath.Join(e.opts.CNIBinDir, "bridge"), filepath.Join(e.opts.CNIBinDir, "host-local"),
	} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Sprintf("%s is missing (run make build and hack/install.sh)", f)
		}
	}
	return ""
}

// labCmd runs antrea-lab with args and returns its combined output.
func (e *labEnv) labCmd(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.binDir, "antrea-lab"), e.withDirs(args)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (e *labEnv) withDirs(args []string) []string {
	// Before the subcommand's own arguments: exec's command follows "--".
	return append([]string{"--dir=" + e.opts.Dir, "--bin-dir=" + e.binDir,
		"--kube-bin-dir=" + e.opts.KubeBinDir, "--cni-bin-dir=" + e.opts.CNIBinDir}, args...)
}

func (e *labEnv) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A lab left running (e.g. by make demo) holds the fixed namespaces.
	if out, err := e.labCmd(ctx, "down"); err != nil {
		return fmt.Errorf("antrea-lab down before the tests: %v: %s", err, out)
	}
	e.before = takeSnapshot(e.opts.Dir)
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("antrea-lab-e2e-%d.log", os.Getpid()))
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	start := time.Now()
	e.supervisor = exec.Command(filepath.Join(e.binDir, "antrea-lab"), e.withDirs([]string{"up", "--foreground", "--nodes=2"})...)
	e.supervisor.Stdout, e.supervisor.Stderr = logf, logf
	e.supervisor.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.supervisor.Start(); err != nil {
		logf.Close()
		return err
	}
	e.waited = make(chan struct{})
	go func() {
		_ = e.supervisor.Wait()
		logf.Close()
		os.Remove(logPath)
		close(e.waited)
	}()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		st, err := lab.LoadState(e.opts.StatePath())
		if err == nil && st != nil && st.Supervisor.PID == e.supervisor.Process.Pid {
			if st.Phase == lab.PhaseReady {
				break
			}
			if st.Phase == lab.PhaseFailed {
				return fmt.Errorf("lab failed: %s", st.Message)
			}
		}
		select {
		case <-e.waited:
			return fmt.Errorf("antrea-lab up --foreground exited early (log was %s)", logPath)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab not Ready after 4 minutes (log %s)", logPath)
		}
	}
	e.upDuration = time.Since(start)
	fmt.Printf("e2e: lab with 2 nodes Ready %.1fs after antrea-lab up\n", e.upDuration.Seconds())
	cfg, err := clientcmd.BuildConfigFromFlags("", e.opts.KubeconfigPath())
	if err != nil {
		return err
	}
	e.client, err = kubernetes.NewForConfig(cfg)
	return err
}

// stop ends a supervisor still running (a failed run) and removes the lab.
func (e *labEnv) stop() {
	if e.supervisor != nil && e.supervisor.Process != nil {
		select {
		case <-e.waited:
		default:
			_ = e.supervisor.Process.Signal(syscall.SIGTERM)
			select {
			case <-e.waited:
			case <-time.After(90 * time.Second):
				_ = e.supervisor.Process.Kill()
				<-e.waited
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, _ = e.labCmd(ctx, "down")
	reapZombieChildren()
}

func (e *labEnv) dumpLogs() {
	entries, _ := os.ReadDir(e.opts.LogDir())
	for _, ent := range entries {
		if ent.IsDir() {
			continue
		}
		data, _ := os.ReadFile(filepath.Join(e.opts.LogDir(), ent.Name()))
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(os.Stderr, "----- %s (tail)\n%s\n", ent.Name(), data)
	}
}

// requireLab skips a test when the lab cannot run here.
func requireLab(t *testing.T) *labEnv {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	return env
}

// reapZombieChildren waits for every exited child of this process: as a
// subreaper it inherits the daemons of a killed supervisor.
func reapZombieChildren() {
	self := os.Getpid()
	for _, pid := range childPIDs(self) {
		if procState(pid) == 'Z' {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

func childPIDs(parent int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, ent := range entries {
		var pid int
		if _, err := fmt.Sscanf(ent.Name(), "%d", &pid); err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		f := strings.Fields(string(data[i+1:]))
		if len(f) > 1 && f[1] == fmt.Sprint(parent) {
			out = append(out, pid)
		}
	}
	return out
}

func procState(pid int) byte {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return 0
	}
	return data[i+2]
}
