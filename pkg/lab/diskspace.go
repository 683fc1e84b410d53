package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Disk space a lab needs where its directory lives: the control plane's
// etcd and logs, and on each real node containerd's content and unpacked
// snapshots of the images its pods run (a 2-node lab after make test's e2e
// tests: 3.0 GiB, 1.4 GiB of it per node). A lab on a full disk does not fail
// at start: etcd stops writing and kube-apiserver answers every request with a
// timeout (seen in CI with 3 GiB free before a fresh clone's build), so up
// refuses early, naming what it found.
const (
	labBaseBytes    = 1 << 30
	labPerNodeBytes = 3 << 29 // 1.5 GiB
)

// freeBytes is the space an unprivileged writer may still use on the file
// system holding dir (its nearest existing ancestor).
func freeBytes(dir string) (uint64, error) {
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(dir, &st)
		if err == nil {
			return st.Bavail * uint64(st.Bsize), nil
		}
		if !os.IsNotExist(err) {
			return 0, fmt.Errorf("statfs %s: %w", dir, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return 0, fmt.Errorf("statfs %s: %w", dir, err)
		}
		dir = parent
	}
}

// neededBytes is the space a lab of opts needs (simulated nodes run no
// containers).
func neededBytes(opts Options) uint64 {
	real := opts.Nodes
	if opts.Kubelet == KubeletSim {
		real = 0
	}
	return labBaseBytes + uint64(real)*labPerNodeBytes
}

// checkFreeSpace refuses a lab that would not fit on the disk of its directory.
func checkFreeSpace(opts Options, free func(string) (uint64, error)) error {
	have, err := free(opts.Dir)
	if err != nil {
		return err
	}
	if need := neededBytes(opts); have < need {
		return fmt.Errorf("only %.1f GiB free on the file system of %s; a lab of %d node(s) needs about %.1f GiB (etcd, and each node's containerd unpacks its images): free some space (e.g. `go clean -cache`, old clones' _output) or give --dir elsewhere",
			gib(have), opts.Dir, opts.Nodes, gib(need))
	}
	return nil
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }
