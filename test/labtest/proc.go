package labtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/pkg/util/procfs"
)

// What the tests read from /proc and /sys/fs/cgroup to see what a lab left
// on the machine. Nothing here signals a process.

func allPIDs() []int {
	pids, _ := procfs.PIDs()
	return pids
}

// procStatFields are the fields of /proc/PID/stat after the command name
// (which may hold spaces and parentheses), so f[0] is the state.
func procStatFields(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(data[i+1:]))
}

// ProcState is a process's state letter (R, S, Z, ...), 0 when it is gone.
func ProcState(pid int) byte {
	f := procStatFields(pid)
	if len(f) == 0 {
		return 0
	}
	return f[0][0]
}

// ProcStartTime is when a process started, in clock ticks since boot (0 when
// it is gone): with the PID it names one process, not a later reuse.
func ProcStartTime(pid int) uint64 {
	f := procStatFields(pid)
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// Exists tells whether the process pid that started at start still exists
// (a zombie counts: it has not been reaped).
func Exists(pid int, start uint64) bool {
	return ProcState(pid) != 0 && (start == 0 || ProcStartTime(pid) == start)
}

// ChildPIDs lists the children of parent.
func ChildPIDs(parent int) []int {
	var out []int
	for _, pid := range allPIDs() {
		if f := procStatFields(pid); len(f) > 1 && f[1] == strconv.Itoa(parent) {
			out = append(out, pid)
		}
	}
	return out
}

// ReapZombies waits for every child of this process that has exited: as a
// subreaper it inherits the daemons and container shims of a supervisor that
// died. Only zombies are waited for, so a child an exec.Cmd still waits for
// keeps its exit status.
func ReapZombies() {
	for _, pid := range ChildPIDs(os.Getpid()) {
		if ProcState(pid) == 'Z' {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// nsID identifies a namespace: the device and inode of its nsfs file.
type nsID struct{ dev, ino uint64 }

func (n nsID) String() string { return fmt.Sprintf("net:[%d]", n.ino) }

func statNS(path string) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsID{}, err
	}
	return nsID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// NetNSID names the network namespace at path (a /var/run/netns entry or a
// /proc/PID/ns/net link), as "net:[INODE]", the way the kernel prints it.
func NetNSID(path string) (string, error) {
	id, err := statNS(path)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// PIDsInNetNS lists the processes whose network namespace is the one at path.
func PIDsInNetNS(path string) []int {
	target, err := statNS(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, pid := range allPIDs() {
		if id, err := statNS(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && id == target {
			out = append(out, pid)
		}
	}
	return out
}

// NetNSUsers lists what keeps the network namespace named id ("net:[INODE]",
// from NetNSID) alive: processes in it, open file descriptors of it, and
// nsfs mounts of it in any mount namespace (containerd pins a pod's netns
// with a bind mount in its node's mount namespace). None means the kernel
// has freed it.
func NetNSUsers(id string) []string {
	var out []string
	seenMountNS := map[string]bool{}
	for _, pid := range allPIDs() {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && link == id {
			out = append(out, fmt.Sprintf("process %d %q is in it", pid, strings.Join(Cmdline(pid), " ")))
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && link == id {
				out = append(out, fmt.Sprintf("process %d %q holds it open (fd %s)", pid, strings.Join(Cmdline(pid), " "), fd.Name()))
			}
		}
		mntNS, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
		if err != nil || seenMountNS[mntNS] {
			continue
		}
		seenMountNS[mntNS] = true
		for _, m := range nsfsMounts(pid) {
			if m.root == id {
				out = append(out, fmt.Sprintf("it is mounted on %s in %s (seen from process %d)", m.point, mntNS, pid))
			}
		}
	}
	return out
}

type mount struct{ root, point string }

// nsfsMounts lists the nsfs mounts in pid's mount namespace; for those the
// mountinfo root field names the namespace ("net:[INODE]").
func nsfsMounts(pid int) []mount {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) || fields[sep+1] != "nsfs" {
			continue
		}
		out = append(out, mount{root: fields[3], point: fields[4]})
	}
	return out
}

// LabMounts lists the mounts of this process's (the host's) mount namespace
// that belong to a lab: named antrea-lab or under labDir. Real nodes mount
// in their own namespaces; none should show here.
func LabMounts(labDir string) []string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, lab.NetNSPrefix) || (labDir != "" && strings.Contains(line, labDir)) {
			out = append(out, line)
		}
	}
	return out
}

// LabCgroups lists the lab's cgroups in every hierarchy.
func LabCgroups() []string {
	dirs := lab.LabCgroups()
	slices.Sort(dirs)
	return dirs
}

// CgroupPIDs lists the processes in cgroup dir and below it.
func CgroupPIDs(dir string) []int { return lab.CgroupPIDs(dir) }

// LabCgroupPIDs lists every process in the lab's cgroups (the containers of
// real nodes), each once.
func LabCgroupPIDs() []int {
	var out []int
	for _, dir := range LabCgroups() {
		for _, pid := range CgroupPIDs(dir) {
			if !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
	}
	slices.Sort(out)
	return out
}

// PodCgroups lists the cgroups of the pod with this UID on the lab's real nodes.
func PodCgroups(uid string) []string { return lab.PodCgroups(uid) }
