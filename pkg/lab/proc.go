package lab

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/util/procfs"
)

// procStat is what the lab needs from /proc/PID/stat.
type procStat struct {
	state     byte
	ppid      int
	startTime uint64
}

func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name may hold spaces and parentheses; fields start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ppid, _ := strconv.Atoi(f[1])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procStat{state: f[0][0], ppid: ppid, startTime: start}, nil
}

// processStartTime returns the start time of pid in clock ticks since boot.
func processStartTime(pid int) uint64 {
	st, err := readProcStat(pid)
	if err != nil {
		return 0
	}
	return st.startTime
}

// Alive tells whether the recorded process still runs. A zombie counts as
// dead: PID 1 on these machines does not reap orphans, so an exited daemon
// whose parent died stays <defunct> and kill -0 would still succeed.
func (p Process) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	st, err := readProcStat(p.PID)
	if err != nil {
		return false
	}
	if p.StartTime != 0 && st.startTime != p.StartTime {
		return false // the PID was reused by another process
	}
	return st.state != 'Z' && st.state != 'X'
}

// RSSBytes is the resident set size of the process, 0 if it is gone.
func (p Process) RSSBytes() uint64 {
	if !p.Alive() {
		return 0
	}
	return rssBytes(p.PID)
}

func rssBytes(pid int) uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// terminate sends SIGTERM to a recorded process, waits up to grace for it to
// exit and then kills it. It only signals the PID when its start time matches
// the record, so a reused PID is never hit.
func (p Process) terminate(grace time.Duration) {
	if !p.Alive() {
		return
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !p.Alive() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p.Alive() {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// pidsInNetNS lists the live processes whose network namespace is the named
// one; `down` uses it to find pod processes that the lab did not start itself.
func pidsInNetNS(netns string) []Process {
	ns, err := procfs.NetNSOf(netnsPath(netns))
	if err != nil {
		return nil
	}
	pids, _ := procfs.PIDsInNetNS(ns)
	var out []Process
	for _, pid := range pids {
		p := Process{Component: "netns-member", PID: pid, StartTime: processStartTime(pid), NetNS: netns}
		if p.Alive() {
			out = append(out, p)
		}
	}
	return out
}

// becomeSubreaper makes orphaned descendants (pod processes whose node
// simulator exited) children of this process instead of PID 1, which does not
// reap on these machines; reapOrphans then collects them.
func becomeSubreaper() {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		klog.ErrorS(err, "Could not become a child subreaper; orphaned pod processes may stay <defunct>")
	}
}

// reapOrphans waits for every exited child of this process. Call it only when
// no exec.Cmd of this process is running, so no other Wait is pending.
func reapOrphans() { reapOrphansExcept(nil) }

// reapOrphansExcept waits for every exited child of this process but the
// given PIDs (children whose exec.Cmd waits for them). Real nodes make
// orphans all the time: each containerd shim daemonizes, so this subreaper
// inherits it and must collect it when its pod is gone.
func reapOrphansExcept(keep map[int]bool) {
	self := os.Getpid()
	pids, _ := procfs.PIDs()
	for _, pid := range pids {
		st, err := readProcStat(pid)
		if err != nil || st.ppid != self || st.state != 'Z' || keep[pid] {
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// CloseInheritedFDsOnExec marks every file descriptor above stderr that this
// process inherited close-on-exec, so that the lab's daemons do not hold what
// the caller had open: a lock taken with flock(1) around `antrea-lab up`, say,
// would otherwise be held for as long as the lab runs.
func CloseInheritedFDsOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		unix.CloseOnExec(fd)
	}
}

// NodeProcesses returns the live processes of a node whose command name
// (/proc/PID/comm) is comm, such as antrea-agent or ovs-vswitchd: daemons of
// the supervisor on simulated nodes, containers' processes on real nodes
// (Antrea from its manifest), found through the node's netns either way.
func NodeProcesses(opts Options, node, comm string) ([]Process, error) {
	st, err := LoadState(opts.statePath())
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("no lab is running (%s)", opts.statePath())
	}
	for _, n := range st.Nodes {
		if n.Name != node {
			continue
		}
		var out []Process
		for _, p := range pidsInNetNS(n.NetNS) {
			name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.PID))
			if err == nil && strings.TrimSpace(string(name)) == comm {
				p.Component, p.Node = comm, node
				out = append(out, p)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("the lab has no node %q", node)
}
