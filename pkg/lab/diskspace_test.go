package lab

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestUpRefusesALabThatWouldNotFitOnItsDisk(t *testing.T) {
	opts := Options{Dir: "/somewhere/lab", Nodes: 2, Kubelet: KubeletReal}
	free := func(have uint64) func(string) (uint64, error) {
		return func(dir string) (uint64, error) {
			if dir != opts.Dir {
				t.Errorf("asked the free space of %s, want the lab's directory %s", dir, opts.Dir)
			}
			return have, nil
		}
	}
	err := checkFreeSpace(opts, free(3<<30))
	if err == nil || !strings.Contains(err.Error(), "only 3.0 GiB free on the file system of /somewhere/lab") ||
		!strings.Contains(err.Error(), "needs about 4.0 GiB") {
		t.Errorf("2 real nodes with 3 GiB free: %v, want a refusal naming 3.0 GiB free and 4.0 GiB needed", err)
	}
	if err := checkFreeSpace(opts, free(5<<30)); err != nil {
		t.Errorf("2 real nodes with 5 GiB free: %v, want no refusal", err)
	}
	sim := Options{Dir: opts.Dir, Nodes: 2, Kubelet: KubeletSim}
	if err := checkFreeSpace(sim, free(2<<30)); err != nil {
		t.Errorf("simulated nodes run no containers; with 2 GiB free: %v, want no refusal", err)
	}
}

// The free space of a directory not made yet is that of its nearest
// existing ancestor's file system, as coreutils' stat -f says of it
// (available blocks times the block size).
func TestFreeBytesOfADirectoryNotMadeYet(t *testing.T) {
	dir := t.TempDir()
	got, err := freeBytes(filepath.Join(dir, "lab", "nodes"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("stat", "-f", "-c", "%a %S", dir).Output()
	if err != nil {
		t.Fatalf("stat -f %s: %v", dir, err)
	}
	var blocks, size uint64
	if _, err := fmt.Sscanf(string(out), "%d %d", &blocks, &size); err != nil {
		t.Fatalf("stat -f printed %q: %v", out, err)
	}
	want := blocks * size
	// Other writers on the machine move the figure between the two calls.
	if diff := int64(got) - int64(want); got == 0 || diff > 512<<20 || diff < -512<<20 {
		t.Errorf("free space of a missing subdirectory of %s = %d bytes, stat -f says %d", dir, got, want)
	}
}
