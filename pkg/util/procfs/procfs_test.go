package procfs

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestPIDsListThisProcessAndAChild(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep here:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pids, err := PIDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{os.Getpid(), cmd.Process.Pid} {
		if !slices.Contains(pids, want) {
			t.Errorf("PIDs() lacks %d", want)
		}
	}
	argv, err := Cmdline(cmd.Process.Pid)
	if err != nil || !slices.Equal(argv, []string{"sleep", "30"}) {
		t.Errorf("Cmdline of the child: %q, %v; want [sleep 30]", argv, err)
	}
}

// A child shares this process's netns unless told otherwise: both are in it.
func TestPIDsInNetNSFindsTheProcessesOfANamespace(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep here:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ns, err := NetNSOf(fmt.Sprintf("/proc/%d/ns/net", os.Getpid()))
	if err != nil {
		t.Skip("no /proc/self/ns/net:", err)
	}
	pids, err := PIDsInNetNS(ns)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, os.Getpid()) || !slices.Contains(pids, cmd.Process.Pid) {
		t.Errorf("PIDsInNetNS(%+v) = %v, want this process and %d", ns, pids, cmd.Process.Pid)
	}
	if other, err := PIDsInNetNS(NetNSID{Dev: ns.Dev, Ino: ns.Ino + 1<<40}); err != nil || len(other) != 0 {
		t.Errorf("a namespace that does not exist holds %v (%v)", other, err)
	}
}
