package images

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// newTestStore opens a store in a temporary directory and counts its builds.
func newTestStore(t *testing.T, dir string) (*Store, *int) {
	t.Helper()
	s, err := NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	builds := 0
	real := s.build
	s.build = func(spec Spec) (v1.Image, error) {
		builds++
		return real(spec)
	}
	return s, &builds
}

// smallImage builds a one-file image whose content is content.
func smallImage(t *testing.T, content string) v1.Image {
	t.Helper()
	img, err := Build(Spec{Files: []File{{Path: "/data", Source: writeHostFile(t, content, 0o644)}}, Cmd: []string{"/data"}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	rootfs, _ := testRootFS(t)
	binary := writeHostFile(t, "agnhost v1", 0o755)
	spec := Spec{
		Names:      []string{"registry.k8s.io/e2e-test-images/agnhost:2.66.1", "registry.k8s.io/e2e-test-images/agnhost:2.55"},
		RootFS:     rootfs,
		Files:      []File{{Path: "/agnhost", Source: binary}},
		Entrypoint: []string{"/agnhost"},
	}
	changedSpec := spec
	changedSpec.Cmd = []string{"netexec"}

	s, builds := newTestStore(t, dir)
	var firstDigest v1.Hash
	steps := []struct {
		name string
		// reopen opens the store anew before the step, as a new lab run would.
		reopen     bool
		spec       Spec
		inputsKey  string
		wantBuilds int
		// wantIndexWritten says whether index.json must be rewritten.
		wantIndexWritten bool
		// sameDigest says whether the digest must equal the first build's.
		sameDigest bool
	}{
		{name: "the first Ensure builds", spec: spec, inputsKey: "a", wantBuilds: 1, wantIndexWritten: true, sameDigest: true},
		{name: "an unchanged key skips the build", spec: spec, inputsKey: "a", wantBuilds: 1, sameDigest: true},
		{name: "a reopened store still skips it", reopen: true, spec: spec, inputsKey: "a", wantBuilds: 0, sameDigest: true},
		{name: "a new key rebuilds, to the same digest from the same files", spec: spec, inputsKey: "b", wantBuilds: 1, wantIndexWritten: true, sameDigest: true},
		{name: "a changed spec rebuilds under the same key", spec: changedSpec, inputsKey: "b", wantBuilds: 2, wantIndexWritten: true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.reopen {
				s, builds = newTestStore(t, dir)
			}
			before, err := os.Stat(filepath.Join(dir, "index.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Ensure(st.spec, st.inputsKey); err != nil {
				t.Fatal(err)
			}
			if *builds != st.wantBuilds {
				t.Errorf("%d builds, want %d", *builds, st.wantBuilds)
			}
			after, err := os.Stat(filepath.Join(dir, "index.json"))
			if err != nil {
				t.Fatal(err)
			}
			if written := !os.SameFile(before, after) || !before.ModTime().Equal(after.ModTime()); written != st.wantIndexWritten {
				t.Errorf("index.json rewritten: %v, want %v", written, st.wantIndexWritten)
			}
			imgs, err := s.Images()
			if err != nil {
				t.Fatal(err)
			}
			if len(imgs) != 2 {
				t.Fatalf("store holds %v, want the two names", imgs)
			}
			d := imgs["registry.k8s.io/e2e-test-images/agnhost:2.66.1"]
			if d != imgs["registry.k8s.io/e2e-test-images/agnhost:2.55"] {
				t.Errorf("the two names hold different digests: %v", imgs)
			}
			if firstDigest == (v1.Hash{}) {
				firstDigest = d
			}
			if (d == firstDigest) != st.sameDigest {
				t.Errorf("digest %s, first build's %s, want same: %v", d, firstDigest, st.sameDigest)
			}
			img, err := s.Image("registry.k8s.io/e2e-test-images/agnhost:2.55")
			if err != nil {
				t.Fatal(err)
			}
			checkImage(t, img)
		})
	}
}

func TestPutAndPrune(t *testing.T) {
	s, _ := newTestStore(t, t.TempDir())
	a, b := smallImage(t, "a"), smallImage(t, "b")
	if err := s.Put([]string{"quay.io/x/y:1", "busybox"}, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Put([]string{"quay.io/x/y:1"}, b); err != nil {
		t.Fatal(err)
	}
	imgs, err := s.Images()
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if imgs["quay.io/x/y:1"] != db || imgs["docker.io/library/busybox:latest"] != da || len(imgs) != 2 {
		t.Fatalf("store holds %v, want quay.io/x/y:1=%s docker.io/library/busybox:latest=%s", imgs, db, da)
	}
	// Remove takes the name as users write it ("busybox").
	if err := s.Remove("busybox"); err != nil {
		t.Fatal(err)
	}
	if imgs, _ := s.Images(); len(imgs) != 1 || imgs["quay.io/x/y:1"] != db {
		t.Fatalf("after Remove(busybox) the store holds %v, want only quay.io/x/y:1", imgs)
	}
	// A blob younger than minAge may belong to a build in flight: kept.
	if freed, err := s.Prune(time.Hour); err != nil || freed != 0 {
		t.Fatalf("Prune(1h) right after the writes freed %d bytes (%v), want 0: every blob is younger", freed, err)
	}
	if _, err := os.Stat(s.blobPath(da)); err != nil {
		t.Fatalf("Prune(1h) removed the young manifest of the unnamed image: %v", err)
	}
	freed, err := s.Prune(0)
	if err != nil {
		t.Fatal(err)
	}
	if freed == 0 {
		t.Error("Prune freed nothing, though image a lost its last name")
	}
	if _, err := os.Stat(s.blobPath(da)); !os.IsNotExist(err) {
		t.Errorf("manifest of the unnamed image is still there: %v", err)
	}
	img, err := s.Image("quay.io/x/y:1")
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, img)
}

// checkImage validates img with go-containerregistry's validator and reads
// every layer in full: its bytes must hash to its digest and size, and (for
// compressed layers too) its uncompressed bytes to its DiffID. validate's
// own layer check assumes gzip, so it runs in Fast mode.
func checkImage(t *testing.T, img v1.Image) {
	t.Helper()
	if err := validate.Image(img, validate.Fast); err != nil {
		t.Errorf("image is not valid: %v", err)
		return
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range layers {
		digest, _ := l.Digest()
		diffID, _ := l.DiffID()
		size, _ := l.Size()
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		got, n, err := v1.SHA256(rc)
		rc.Close()
		if err != nil || got != digest || n != size {
			t.Errorf("layer %d: content hashes to %s (%d bytes, %v), want %s (%d bytes)", i, got, n, err, digest, size)
		}
		rc, err = l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		got, _, err = v1.SHA256(rc)
		rc.Close()
		if err != nil || got != diffID {
			t.Errorf("layer %d: uncompressed content hashes to %s (%v), want DiffID %s", i, got, err, diffID)
		}
	}
}
