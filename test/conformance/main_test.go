package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"antrea.io/antrea/pkg/lab"
)

// env is the lab shared by every test of the package. It is package-level
// because TestMain cannot hand values to tests any other way.
var env *labEnv

// labEnv is a running lab and how this package reached it.
type labEnv struct {
	root    string
	binDir  string
	opts    lab.Options
	client  kubernetes.Interface
	runtime lab.NodeRuntime
	nodes   []string
	// supervisor is `antrea-lab up --foreground` when this package started the
	// lab (and must take it down), nil when it reuses one.
	supervisor *exec.Cmd
	waited     chan struct{}
	skip       string
}

// Environment knobs.
const (
	// envSelect chooses the cases: "all" runs every case, anything else
	// (or unset) the representative subset.
	envSelect = "ANTREA_CONFORMANCE"
	// envRuntime chooses the lab runtime when this package starts the lab
	// (default antrea, falling back to reference-cni when this build does not
	// offer it; then the policy cases fail, as they must).
	envRuntime = "ANTREA_CONFORMANCE_RUNTIME"
	// envReuse set to 1 makes the package use a lab that is already Ready
	// instead of waiting for it to go away; such a lab is left running.
	envReuse = "ANTREA_CONFORMANCE_REUSE_LAB"
	// envCase runs only the cases whose name contains this string.
	envCase = "ANTREA_CONFORMANCE_CASE"
)

func TestMain(m *testing.M) {
	env = &labEnv{}
	if reason := env.prerequisites(); reason != "" {
		env.skip = reason
		os.Exit(m.Run())
	}
	// Orphans of a crashed supervisor are reparented to us rather than to
	// PID 1, which does not reap on these machines.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: cannot become a subreaper: %v\n", err)
		os.Exit(1)
	}
	if err := env.start(); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: lab did not come up: %v\n", err)
		env.dumpLogs()
		env.stop()
		os.Exit(1)
	}
	code := m.Run()
	env.stop()
	os.Exit(code)
}

// prerequisites returns why the suite cannot run on this machine, or "".
func (e *labEnv) prerequisites() string {
	if os.Geteuid() != 0 {
		return "conformance tests need root (the lab creates network namespaces)"
	}
	wd, _ := os.Getwd()
	e.root = filepath.Clean(filepath.Join(wd, "..", ".."))
	e.binDir = os.Getenv("ANTREA_BIN")
	if e.binDir == "" {
		e.binDir = filepath.Join(e.root, "bin")
	}
	e.opts = lab.DefaultOptions()
	e.opts.BinDir = e.binDir
	e.opts.Dir = filepath.Join(e.root, "_output", "lab")
	e.opts.KubeBinDir = filepath.Join(e.root, "_output", "bin")
	e.opts.CNIBinDir = filepath.Join(e.root, "_output", "cni", "bin")
	e.opts.Nodes = 2
	e.opts.Runtime = lab.RuntimeAntrea
	if r := os.Getenv(envRuntime); r != "" {
		e.opts.Runtime = lab.NodeRuntime(r)
	}
	if err := e.opts.Validate(); err != nil && e.opts.Runtime == lab.RuntimeAntrea {
		fmt.Fprintf(os.Stderr, "conformance: WARNING: %v; falling back to %s, which does not enforce NetworkPolicy: expect failures\n",
			err, lab.RuntimeReferenceCNI)
		e.opts.Runtime = lab.RuntimeReferenceCNI
	}
	if err := e.opts.Validate(); err != nil {
		return err.Error()
	}
	need := []string{
		filepath.Join(e.binDir, "antrea-lab"), filepath.Join(e.binDir, "antrea-testpod"),
		filepath.Join(e.opts.KubeBinDir, "etcd"), filepath.Join(e.opts.KubeBinDir, "kube-apiserver"),
		filepath.Join(e.opts.KubeBinDir, "kube-controller-manager"), filepath.Join(e.opts.KubeBinDir, "kube-scheduler"),
	}
	if e.opts.Runtime == lab.RuntimeAntrea {
		need = append(need, filepath.Join(e.binDir, "antrea-agent"), filepath.Join(e.binDir, "antrea-controller"),
			filepath.Join(e.binDir, "antrea-cni"))
	}
	for _, f := range need {
		if _, err := os.Stat(f); err != nil {
			return fmt.Sprintf("%s is missing (run make build and hack/install.sh)", f)
		}
	}
	return ""
}

func (e *labEnv) labCmd(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.binDir, "antrea-lab"), e.withDirs(args)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (e *labEnv) withDirs(args []string) []string {
	return append([]string{"--dir=" + e.opts.Dir, "--bin-dir=" + e.binDir,
		"--kube-bin-dir=" + e.opts.KubeBinDir, "--cni-bin-dir=" + e.opts.CNIBinDir}, args...)
}

// start reuses a Ready lab when asked to, waits for someone else's lab to go
// away (it is theirs to stop), removes an abandoned one, then starts its own.
func (e *labEnv) start() error {
	reuse := os.Getenv(envReuse) == "1"
	deadline := time.Now().Add(20 * time.Minute)
	for {
		st, err := lab.LoadState(e.opts.StatePath())
		if err != nil {
			return err
		}
		if st == nil {
			// Another test package (e2e) may bring labs up and down in a
			// row: the machine is free only when no `antrea-lab up` has run
			// for a while.
			if pids := labUpProcesses(); len(pids) > 0 {
				if time.Now().After(deadline) {
					return fmt.Errorf("antrea-lab up processes %v kept running for 20 minutes", pids)
				}
				fmt.Printf("conformance: antrea-lab up is running (pids %v); waiting for it to end\n", pids)
				time.Sleep(10 * time.Second)
				continue
			}
			time.Sleep(3 * time.Second)
			if st, _ := lab.LoadState(e.opts.StatePath()); st == nil && len(labUpProcesses()) == 0 {
				break
			}
			continue
		}
		alive := st.Supervisor.Alive()
		if reuse && alive && st.Phase == lab.PhaseReady {
			e.runtime = st.Options.Runtime
			fmt.Printf("conformance: reusing the running lab (runtime %s, %d nodes); it stays up\n", e.runtime, st.Options.Nodes)
			return e.connect()
		}
		if !alive {
			fmt.Printf("conformance: removing an abandoned lab (supervisor pid %d is gone)\n", st.Supervisor.PID)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			out, err := e.labCmd(ctx, "down")
			cancel()
			if err != nil {
				return fmt.Errorf("antrea-lab down: %v: %s", err, out)
			}
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another lab (supervisor pid %d, phase %s) stayed up for 20 minutes; set %s=1 to use it",
				st.Supervisor.PID, st.Phase, envReuse)
		}
		fmt.Printf("conformance: another lab is up (supervisor pid %d, phase %s); waiting for it to go away\n", st.Supervisor.PID, st.Phase)
		time.Sleep(30 * time.Second)
	}
	e.runtime = e.opts.Runtime
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("antrea-lab-conformance-%d.log", os.Getpid()))
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	start := time.Now()
	e.supervisor = exec.Command(filepath.Join(e.binDir, "antrea-lab"), e.withDirs([]string{"up", "--foreground",
		fmt.Sprintf("--nodes=%d", e.opts.Nodes), "--runtime=" + string(e.opts.Runtime)})...)
	e.supervisor.Stdout, e.supervisor.Stderr = logf, logf
	e.supervisor.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.supervisor.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start antrea-lab up: %w", err)
	}
	e.waited = make(chan struct{})
	go func() {
		_ = e.supervisor.Wait()
		logf.Close()
		close(e.waited)
	}()
	upDeadline := time.Now().Add(5 * time.Minute)
	for {
		st, err := lab.LoadState(e.opts.StatePath())
		if err == nil && st != nil && st.Supervisor.PID == e.supervisor.Process.Pid {
			if st.Phase == lab.PhaseReady {
				break
			}
			if st.Phase == lab.PhaseFailed {
				return fmt.Errorf("lab failed: %s (supervisor log %s)", st.Message, logPath)
			}
		}
		select {
		case <-e.waited:
			return fmt.Errorf("antrea-lab up --foreground exited early (log %s)", logPath)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(upDeadline) {
			return fmt.Errorf("lab not Ready after 5 minutes (log %s)", logPath)
		}
	}
	// The log is only needed when bring-up fails.
	os.Remove(logPath)
	fmt.Printf("conformance: lab (runtime %s, %d nodes) Ready %.1fs after antrea-lab up\n",
		e.runtime, e.opts.Nodes, time.Since(start).Seconds())
	return e.connect()
}

func (e *labEnv) connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", e.opts.KubeconfigPath())
	if err != nil {
		return fmt.Errorf("read lab kubeconfig: %w", err)
	}
	// Probes run in parallel with API calls; the default 5 QPS would make
	// resets between cases needlessly slow.
	cfg.QPS, cfg.Burst = 50, 100
	e.client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	st, err := lab.LoadState(e.opts.StatePath())
	if err != nil || st == nil {
		return fmt.Errorf("read lab state: %v", err)
	}
	for _, n := range st.Nodes {
		e.nodes = append(e.nodes, n.Name)
	}
	if len(e.nodes) == 0 {
		return fmt.Errorf("the lab state lists no node")
	}
	return nil
}

// stop takes down a lab this package started; a reused lab stays up.
func (e *labEnv) stop() {
	if e.supervisor == nil || e.supervisor.Process == nil {
		return
	}
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
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if out, err := e.labCmd(ctx, "down"); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: antrea-lab down: %v: %s\n", err, out)
	}
	reapZombies()
}

func (e *labEnv) dumpLogs() {
	entries, _ := os.ReadDir(e.opts.LogDir())
	for _, ent := range entries {
		if ent.IsDir() {
			continue
		}
		data, _ := os.ReadFile(filepath.Join(e.opts.LogDir(), ent.Name()))
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(os.Stderr, "----- %s (tail)\n%s\n", ent.Name(), data)
	}
}

// ovsMgmtSocket is the OpenFlow management socket of a node's br-int (the
// lab's NodeOVSDir layout: nodes/<node>/ovs).
func (e *labEnv) ovsMgmtSocket(node string) string {
	return filepath.Join(e.opts.Dir, "nodes", node, "ovs", "br-int.mgmt")
}

// requireLab skips a test when the lab cannot run here.
func requireLab(t testing.TB) *labEnv {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	return env
}

// reapZombies waits for exited children: as a subreaper this process
// inherits the daemons of a supervisor that died.
func reapZombies() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// labUpProcesses lists the PIDs of `antrea-lab up` commands running on the
// machine (read from /proc; nothing is signalled).
func labUpProcesses() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) > 1 && filepath.Base(args[0]) == "antrea-lab" && slices.Contains(args[1:], "up") {
			out = append(out, pid)
		}
	}
	return out
}

// selectAll reports whether every case should run.
func selectAll() bool { return strings.EqualFold(os.Getenv(envSelect), "all") }
