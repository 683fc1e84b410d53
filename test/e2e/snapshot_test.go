package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// snapshot is what of a lab can be seen on the machine: its network
// namespaces, its cgroups, its mounts in the host's mount namespace, its
// processes (anything whose command line names the lab directory or an
// antrea-lab binary, and anything in a lab cgroup) and its directory.
type snapshot struct {
	netns     []string
	cgroups   []string
	mounts    []string
	processes []string
	labDir    bool
}

func takeSnapshot(labDir string) snapshot {
	s := snapshot{cgroups: labtest.LabCgroups(), mounts: labtest.LabMounts(labDir)}
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), lab.NetNSPrefix) {
			s.netns = append(s.netns, e.Name())
		}
	}
	inCgroup := map[int]bool{}
	for _, pid := range labtest.LabCgroupPIDs() {
		inCgroup[pid] = true
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		var pid int
		if _, err := fmt.Sscanf(p.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		argv := labtest.Cmdline(pid)
		if len(argv) == 0 && !inCgroup[pid] {
			continue
		}
		if len(argv) > 0 && isShortLivedCLI(argv) {
			continue
		}
		cmdline := strings.Join(argv, " ")
		// The lab's processes: in its cgroups, started from its directory,
		// or antrea-lab itself (not every command naming the package
		// antrea.io/antrea/cmd/antrea-lab, as go test and linters do).
		if inCgroup[pid] || strings.Contains(cmdline, labDir) || filepath.Base(argv[0]) == "antrea-lab" {
			s.processes = append(s.processes, fmt.Sprintf("%d(%c) %s", pid, labtest.ProcState(pid), cmdline))
		}
	}
	if _, err := os.Stat(labDir); err == nil {
		s.labDir = true
	}
	slices.Sort(s.netns)
	slices.Sort(s.processes)
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
	state *lab.State
	netns []string
	// netnsPIDs are the processes in the lab's named netns: daemons, pods
	// of simulated nodes, containerd shims of real nodes.
	netnsPIDs []process
	// containers are the processes in the lab's cgroups (real nodes).
	containers []process
	// shims are the containerd shims of real nodes' pods.
	shims []process
}

// process is a PID with its start time, so that a later reuse of the PID is
// not taken for it.
type process struct {
	pid   int
	start uint64
	what  string
}

func newProcess(pid int) process {
	return process{pid: pid, start: labtest.ProcStartTime(pid), what: strings.Join(labtest.Cmdline(pid), " ")}
}

func recordFootprint(t *testing.T, e *labEnv) labFootprint {
	t.Helper()
	st, err := lab.LoadState(e.Opts.StatePath())
	if err != nil || st == nil {
		t.Fatalf("read the lab state: %v (state %v)", err, st)
	}
	fp := labFootprint{state: st, netns: takeSnapshot(e.Opts.Dir).netns}
	for _, n := range fp.netns {
		for _, pid := range labtest.PIDsInNetNS(filepath.Join("/var/run/netns", n)) {
			p := newProcess(pid)
			fp.netnsPIDs = append(fp.netnsPIDs, p)
			if len(p.what) > 0 && filepath.Base(strings.Fields(p.what)[0]) == "containerd-shim-runc-v2" {
				fp.shims = append(fp.shims, p)
			}
		}
	}
	for _, pid := range labtest.LabCgroupPIDs() {
		fp.containers = append(fp.containers, newProcess(pid))
	}
	return fp
}

// assertNothingLeft checks that the lab's namespaces, cgroups, mounts,
// processes, veths and files are gone, and that the machine looks as it did
// before the lab.
func assertNothingLeft(t *testing.T, e *labEnv, fp labFootprint) {
	t.Helper()
	labtest.ReapZombies()
	after := takeSnapshot(e.Opts.Dir)
	if len(after.netns) != 0 {
		t.Errorf("lab network namespaces left after down: %v", after.netns)
	}
	if len(after.cgroups) != 0 {
		t.Errorf("lab cgroups left after down: %v", after.cgroups)
	}
	if after.labDir {
		t.Errorf("lab directory %s left after down", e.Opts.Dir)
	}
	for _, c := range []struct {
		what          string
		before, after []string
	}{
		{"processes", e.before.processes, after.processes},
		{"cgroups", e.before.cgroups, after.cgroups},
		{"mounts of the host mount namespace", e.before.mounts, after.mounts},
	} {
		if !slices.Equal(c.before, c.after) {
			t.Errorf("lab %s differ from before the lab:\nbefore:\n%s\nafter:\n%s",
				c.what, strings.Join(c.before, "\n"), strings.Join(c.after, "\n"))
		}
	}
	for _, p := range append([]lab.Process{fp.state.Supervisor}, fp.state.Processes...) {
		if labtest.Exists(p.PID, p.StartTime) {
			t.Errorf("%s (pid %d) still exists (state %c) after down", p.Component, p.PID, labtest.ProcState(p.PID))
		}
	}
	for _, group := range []struct {
		what  string
		procs []process
	}{
		{"in a lab netns", fp.netnsPIDs}, {"in a lab cgroup (a container)", fp.containers}, {"a containerd shim", fp.shims},
	} {
		for _, p := range group.procs {
			if labtest.Exists(p.pid, p.start) {
				t.Errorf("process %d %q that was %s still exists (state %c) after down", p.pid, p.what, group.what, labtest.ProcState(p.pid))
			}
		}
	}
	for _, n := range append(fp.netns, fp.state.NetNS...) {
		if _, err := os.Stat(filepath.Join("/var/run/netns", n)); err == nil {
			t.Errorf("netns %s still exists after down", n)
		}
	}
	for _, c := range fp.state.Cgroups {
		if _, err := os.Stat(c); err == nil {
			t.Errorf("cgroup %s still exists after down", c)
		}
	}
	for _, m := range fp.state.MountPoints {
		if _, err := os.Stat(m); err == nil {
			t.Errorf("mount point %s that the lab made still exists after down", m)
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
