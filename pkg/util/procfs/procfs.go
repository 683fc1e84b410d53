// Package procfs reads what the lab, the node simulator and their tests need
// of /proc: which processes there are, which network namespace each is in,
// and their command lines. It is the one place that scans /proc.
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// root is where procfs is mounted.
const root = "/proc"

// PIDs lists the processes there are now (the numeric entries of /proc).
func PIDs() ([]int, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// NetNSID names a network namespace: the device and inode of its nsfs file.
type NetNSID struct{ Dev, Ino uint64 }

// NetNSOf is the namespace of the nsfs file at path: a bind mount such as
// /run/netns/NAME, or /proc/PID/ns/net.
func NetNSOf(path string) (NetNSID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return NetNSID{}, err
	}
	return NetNSID{Dev: uint64(st.Dev), Ino: st.Ino}, nil
}

// PIDsInNetNS lists the processes whose network namespace is ns.
func PIDsInNetNS(ns NetNSID) ([]int, error) {
	pids, err := PIDs()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pid := range pids {
		if id, err := NetNSOf(fmt.Sprintf("%s/%d/ns/net", root, pid)); err == nil && id == ns {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Cmdline is a process's argv (/proc/PID/cmdline).
func Cmdline(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("%s/%d/cmdline", root, pid))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), nil
}
