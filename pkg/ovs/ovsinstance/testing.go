package ovsinstance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RequireRoot skips the test unless it runs as root with Open vSwitch installed.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and runs Open vSwitch")
	}
	if _, err := exec.LookPath("ovs-vswitchd"); err != nil {
		t.Skip("needs Open vSwitch (run hack/install.sh)")
	}
}

// NewNetNS creates a network namespace named prefix-<pid>-<n> (prefix names the
// test package so leftovers are traceable) and removes it when the test ends.
func NewNetNS(t testing.TB, prefix string) string {
	t.Helper()
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), i)
		if _, err := os.Stat("/var/run/netns/" + name); err == nil {
			continue
		}
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", name, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
		if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("lo up in %s: %v: %s", name, err, out)
		}
		return name
	}
}

// StartForTest starts an instance in a fresh netns (named with prefix) under
// t.TempDir and stops it, and removes the netns, when the test ends.
func StartForTest(t testing.TB, prefix string) *Instance {
	t.Helper()
	RequireRoot(t)
	ns := NewNetNS(t, prefix)
	dir, err := os.MkdirTemp("", "ovs-") // short: unix socket paths are limited to 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	in, err := Start(context.Background(), Config{Dir: dir, NetNS: ns})
	if err != nil {
		t.Fatalf("start OVS: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := os.ReadFile(filepath.Join(dir, "ovs-vswitchd.vlog"))
			lines := strings.Split(strings.TrimSpace(string(logs)), "\n")
			if len(lines) > 20 {
				lines = lines[len(lines)-20:]
			}
			t.Logf("last lines of ovs-vswitchd's log:\n%s", strings.Join(lines, "\n"))
		}
		in.Stop()
	})
	return in
}
