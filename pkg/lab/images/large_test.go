package images

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// TestLargeRootFS measures storing and serving a real rootfs image. It runs
// only when LAB_IMAGES_ROOTFS names one (it is read, never written), e.g.
// LAB_IMAGES_ROOTFS=/root/.cache/antrea/rootfs-bookworm-<key> go test -run LargeRootFS -v.
func TestLargeRootFS(t *testing.T) {
	rootfs := os.Getenv("LAB_IMAGES_ROOTFS")
	if rootfs == "" {
		t.Skip("LAB_IMAGES_ROOTFS not set")
	}
	dir := t.TempDir()
	s, builds := newTestStore(t, dir)
	spec := Spec{
		Names:      []string{"registry.k8s.io/e2e-test-images/agnhost:2.66.1"},
		RootFS:     rootfs,
		Files:      []File{{Path: "/usr/local/bin/tool", Source: os.Args[0], Mode: 0o755}},
		Entrypoint: []string{"/usr/local/bin/tool"},
	}
	start := time.Now()
	if err := s.Ensure(spec, "k1"); err != nil {
		t.Fatal(err)
	}
	built := time.Since(start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	img, err := s.Image(spec.Names[0])
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	size, _ := layers[0].Size()
	t.Logf("built and stored a %d MB rootfs layer in %v (Go heap in use %d MB, from the OS %d MB)", size>>20, built, ms.HeapInuse>>20, ms.Sys>>20)

	start = time.Now()
	if err := s.Ensure(spec, "k1"); err != nil {
		t.Fatal(err)
	}
	t.Logf("Ensure with unchanged inputs took %v (%d build)", time.Since(start), *builds)

	start = time.Now()
	if err := s.Ensure(spec, "k2"); err != nil {
		t.Fatal(err)
	}
	t.Logf("a rebuild with a new key took %v, digest unchanged: %v", time.Since(start), func() bool {
		again, _ := s.Image(spec.Names[0])
		return digestOf(t, again) == digestOf(t, img)
	}())

	start = time.Now()
	s2, _ := newTestStore(t, dir)
	host := serve(t, s2)
	t.Logf("registry over the store started in %v", time.Since(start))

	start = time.Now()
	pulled, err := pull(t, host+"/e2e-test-images/agnhost:2.66.1")
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, pulled)
	t.Logf("pulled and checked every layer byte in %v", time.Since(start))
}
