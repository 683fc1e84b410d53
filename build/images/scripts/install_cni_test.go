package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// cniFixture is an install-cni container in miniature: the image's sources
// and the node's directories (the hostPath volumes), all temporary.
type cniFixture struct {
	host                      string // HOST_ROOT
	antreaCNI, loopback, conf string // the image's files
}

func newCNIFixture(t *testing.T) cniFixture {
	t.Helper()
	img := t.TempDir()
	f := cniFixture{
		host:      t.TempDir(),
		antreaCNI: filepath.Join(img, "antrea-cni"),
		loopback:  filepath.Join(img, "loopback"),
		conf:      filepath.Join(img, "antrea-cni.conflist"),
	}
	for p, content := range map[string]string{
		f.antreaCNI: "antrea-cni from the image",
		f.loopback:  "loopback from the image",
		f.conf:      `{"cniVersion":"1.0.0","name":"antrea","plugins":[{"type":"antrea","ipam":{"type":"host-local"}}]}`,
	} {
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f cniFixture) binDir() string  { return filepath.Join(f.host, "opt/cni/bin") }
func (f cniFixture) confDir() string { return filepath.Join(f.host, "etc/cni/net.d") }

func (f cniFixture) run(t *testing.T) (string, error) {
	t.Helper()
	cmd := exec.Command("./install_cni")
	cmd.Env = append(os.Environ(), "HOST_ROOT="+f.host, "ANTREA_CNI="+f.antreaCNI, "CNI_LOOPBACK="+f.loopback, "CNI_CONFLIST="+f.conf)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// requireFile fails unless path holds content with mode.
func requireFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != content {
		t.Errorf("%s holds %q, want %q", path, b, content)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != mode {
		t.Errorf("%s has mode %v, want %v", path, fi.Mode().Perm(), mode)
	}
}

// requireNoTemporaries fails if a temporary file was left in a directory.
func requireNoTemporaries(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("temporary file %s left in %s", e.Name(), d)
			}
		}
	}
}

func TestInstallCNIOnAnEmptyNode(t *testing.T) {
	f := newCNIFixture(t)
	if out, err := f.run(t); err != nil {
		t.Fatalf("install_cni: %v: %s", err, out)
	}
	requireFile(t, filepath.Join(f.binDir(), "antrea"), "antrea-cni from the image", 0o755)
	requireFile(t, filepath.Join(f.binDir(), "loopback"), "loopback from the image", 0o755)
	conf, _ := os.ReadFile(f.conf)
	requireFile(t, filepath.Join(f.confDir(), "10-antrea.conflist"), string(conf), 0o644)
	requireNoTemporaries(t, f.binDir(), f.confDir())
}

func TestInstallCNIReplacesAntreaKeepsTheNodesLoopback(t *testing.T) {
	f := newCNIFixture(t)
	for p, content := range map[string]string{
		filepath.Join(f.binDir(), "loopback"):            "the node's loopback",
		filepath.Join(f.confDir(), "10-antrea.conflist"): "an older conflist",
		filepath.Join(f.confDir(), "99-other.conflist"):  "another network's conflist",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The old plugin is running (a copy of sleep): writing into it would fail
	// with ETXTBSY, replacing it must not.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep to stand for a running plugin")
	}
	old := filepath.Join(f.binDir(), "antrea")
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, b, 0o755); err != nil {
		t.Fatal(err)
	}
	running := exec.Command(old, "30")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = running.Process.Signal(syscall.SIGKILL)
		_ = running.Wait()
	})

	if out, err := f.run(t); err != nil {
		t.Fatalf("install_cni: %v: %s", err, out)
	}
	requireFile(t, old, "antrea-cni from the image", 0o755)
	requireFile(t, filepath.Join(f.binDir(), "loopback"), "the node's loopback", 0o755)
	conf, _ := os.ReadFile(f.conf)
	requireFile(t, filepath.Join(f.confDir(), "10-antrea.conflist"), string(conf), 0o644)
	requireFile(t, filepath.Join(f.confDir(), "99-other.conflist"), "another network's conflist", 0o755)
	requireNoTemporaries(t, f.binDir(), f.confDir())
}

func TestInstallCNIFailsWithoutItsSourcesAndLeavesNoTemporary(t *testing.T) {
	f := newCNIFixture(t)
	if err := os.Remove(f.conf); err != nil {
		t.Fatal(err)
	}
	out, err := f.run(t)
	if err == nil {
		t.Fatalf("install_cni succeeded without %s: %s", f.conf, out)
	}
	if _, err := os.Stat(filepath.Join(f.confDir(), "10-antrea.conflist")); !os.IsNotExist(err) {
		t.Errorf("a conflist was installed from nothing: %v", err)
	}
	requireNoTemporaries(t, f.binDir(), f.confDir())
}
