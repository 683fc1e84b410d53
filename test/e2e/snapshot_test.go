package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"antrea.io/antrea/pkg/lab"
)

// snapshot is what of the lab can be seen on the machine: its network
// namespaces, its processes (anything whose command line names the lab
// directory or an antrea-lab binary) and its directory.
type snapshot struct {
	netns     []string
	processes []string
	labDir    bool
}

func takeSnapshot(labDir string) snapshot {
	var s snapshot
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), lab.NetNSPrefix) {
			s.netns = append(s.netns, e.Name())
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if isShortLivedCLI(argv) {
			continue
		}
		cmdline := strings.Join(argv, " ")
		if strings.Contains(cmdline, labDir) || strings.Contains(cmdline, "antrea-lab ") {
			s.processes = append(s.processes, fmt.Sprintf("%d(%c) %s", pid, procState(pid), cmdline))
		}
	}
	if _, err := os.Stat(labDir); err == nil {
		s.labDir = true
	}
	sort.Strings(s.netns)
	sort.Strings(s.processes)
	return s
}

// isShortLivedCLI tells the commands people and tests run against a lab
// (down, status, exec, logs), which name the lab directory in their flags but
// are not part of the lab, from its daemons.
func isShortLivedCLI(argv []string) bool {
	if filepath.Base(argv[0]) != "antrea-lab" {
		return false
	}
	for _, a := range argv[1:] {
		switch a {
		case "down", "status", "exec", "logs":
			return true
		}
	}
	return false
}

// labFootprint is what a running lab made, read from its state file and the
// kernel, so that the test can check each item is gone after `down`.
type labFootprint struct {
	state   *lab.State
	podPIDs []int
	netns   []string
}

func recordFootprint(t *testing.T, e *labEnv) labFootprint {
	t.Helper()
	st, err := lab.LoadState(e.opts.StatePath())
	if err != nil || st == nil {
		t.Fatalf("read the lab state: %v (state %v)", err, st)
	}
	fp := labFootprint{state: st, netns: takeSnapshot(e.opts.Dir).netns}
	for _, n := range fp.netns {
		fp.podPIDs = append(fp.podPIDs, pidsInNetNS(n)...)
	}
	return fp
}

// pidsInNetNS lists the processes whose netns is the named one.
func pidsInNetNS(name string) []int {
	var target syscall.Stat_t
	if err := syscall.Stat(filepath.Join("/var/run/netns", name), &target); err != nil {
		return nil
	}
	procs, _ := os.ReadDir("/proc")
	var out []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err == nil && st.Ino == target.Ino && st.Dev == target.Dev {
			out = append(out, pid)
		}
	}
	return out
}

// assertNothingLeft checks that the lab's namespaces, processes, veths and
// files are gone, and that the machine looks as it did before the lab.
func assertNothingLeft(t *testing.T, e *labEnv, fp labFootprint) {
	t.Helper()
	reapZombieChildren()
	after := takeSnapshot(e.opts.Dir)
	if len(after.netns) != 0 {
		t.Errorf("lab network namespaces left after down: %v", after.netns)
	}
	if after.labDir {
		t.Errorf("lab directory %s left after down", e.opts.Dir)
	}
	if strings.Join(after.processes, "\n") != strings.Join(e.before.processes, "\n") {
		t.Errorf("lab processes differ from before the lab:\nbefore:\n%s\nafter:\n%s",
			strings.Join(e.before.processes, "\n"), strings.Join(after.processes, "\n"))
	}
	procs := append([]lab.Process{fp.state.Supervisor}, fp.state.Processes...)
	for _, p := range procs {
		if procState(p.PID) != 0 && processStartTime(p.PID) == p.StartTime {
			t.Errorf("%s (pid %d) still exists (state %c) after down", p.Component, p.PID, procState(p.PID))
		}
	}
	for _, pid := range fp.podPIDs {
		if s := procState(pid); s != 0 {
			t.Errorf("process %d that lived in a lab netns still exists (state %c) after down", pid, s)
		}
	}
	for _, n := range append(fp.netns, fp.state.NetNS...) {
		if _, err := os.Stat(filepath.Join("/var/run/netns", n)); err == nil {
			t.Errorf("netns %s still exists after down", n)
		}
	}
	for _, v := range fp.state.Veths {
		if _, err := os.Stat(filepath.Join("/sys/class/net", v.Name)); err == nil {
			t.Errorf("veth %s is in the root netns after down", v.Name)
		}
	}
	for _, f := range append(fp.state.Files, fp.state.Kubeconfig) {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("file %s still exists after down", f)
		}
	}
}

func processStartTime(pid int) uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}
