package lab

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"antrea.io/antrea/pkg/lab/images"
)

// fakeCheckout lays out, under a temporary directory, what the lab's images
// are built from (bin/, build/images/scripts, _output/'s binaries and
// rootfses), with small fake binaries and rootfses and the repository's own
// scripts, and returns options pointing at it.
func fakeCheckout(t *testing.T) Options {
	t.Helper()
	root := t.TempDir()
	write := func(rel, content string, mode os.FileMode) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{"antctl", "antrea-agent", "antrea-cni", "antrea-controller", "antrea-pause", "antrea-testpod", "flow-aggregator", "antrea-ui"} {
		write("bin/"+b, "\x7fELF "+b, 0o755)
	}
	for _, s := range []string{"start_ovs", "install_cni"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "build", "images", "scripts", s))
		if err != nil {
			t.Fatal(err)
		}
		write("build/images/scripts/"+s, string(b), 0o755)
	}
	write("_output/bin/agnhost", "\x7fELF agnhost", 0o755)
	write("_output/bin/kube-proxy", "\x7fELF kube-proxy", 0o755)
	write("_output/bin/coredns", "\x7fELF coredns", 0o755)
	write("_output/bin/regression-issue-74839", "\x7fELF regression-issue-74839", 0o755)
	write("_output/bin/agnhost-localhost.crt", "crt", 0o644)
	write("_output/bin/agnhost-localhost.key", "key", 0o600)
	write("_output/cni/bin/loopback", "\x7fELF loopback", 0o755)
	for _, fs := range []string{"agnhost", "antrea-agent", "busybox", "nginx"} {
		write("cache/rootfs-"+fs+"/bin/bash", "\x7fELF bash", 0o755)
		write("cache/rootfs-"+fs+"/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n", 0o644)
		if err := os.Symlink(filepath.Join(root, "cache/rootfs-"+fs), filepath.Join(root, "_output/rootfs-"+fs)); err != nil {
			t.Fatal(err)
		}
	}
	write("cache/rootfs-antrea-agent/usr/sbin/ovs-vswitchd", "\x7fELF ovs-vswitchd", 0o755)
	return Options{
		BinDir:     filepath.Join(root, "bin"),
		KubeBinDir: filepath.Join(root, "_output", "bin"),
		CNIBinDir:  filepath.Join(root, "_output", "cni", "bin"),
		ImageDir:   filepath.Join(root, "images"),
	}
}

// digests builds the lab's images where needed and returns every stored
// image's digest.
func digests(t *testing.T, opts Options) map[string]v1.Hash {
	t.Helper()
	if err := EnsureImages(opts); err != nil {
		t.Fatal(err)
	}
	store, err := images.NewStore(opts.ImageDir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := store.Images()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// storedImage returns an image of the store at opts.ImageDir.
func storedImage(t *testing.T, opts Options, name string) v1.Image {
	t.Helper()
	store, err := images.NewStore(opts.ImageDir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := store.Image(name)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layerEntry is one entry of a layer's tar.
type layerEntry struct {
	hdr     *tar.Header
	content []byte // of regular files up to 1 MB
}

// readLayer returns a layer's entries by name.
func readLayer(t *testing.T, l v1.Layer) (names []string, entries map[string]layerEntry) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries = map[string]layerEntry{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, entries
		}
		if err != nil {
			t.Fatal(err)
		}
		e := layerEntry{hdr: hdr}
		if hdr.Typeflag == tar.TypeReg && hdr.Size <= 1<<20 {
			if e.content, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
		names = append(names, hdr.Name)
		entries[hdr.Name] = e
	}
}

// listing is a layer as "name mode" lines, in tar order.
func listing(t *testing.T, l v1.Layer) []string {
	t.Helper()
	names, entries := readLayer(t, l)
	var out []string
	for _, n := range names {
		out = append(out, fmt.Sprintf("%s %04o", n, entries[n].hdr.Mode))
	}
	return out
}

func layers(t *testing.T, img v1.Image) []v1.Layer {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func TestAntreaImagesHoldWhatTheManifestRuns(t *testing.T) {
	opts := fakeCheckout(t)
	digests(t, opts)

	agent := storedImage(t, opts, AgentImage)
	ls := layers(t, agent)
	if len(ls) != 2 {
		t.Fatalf("the agent image has %d layers, want the rootfs and our files", len(ls))
	}
	if names, _ := readLayer(t, ls[0]); !slices.Contains(names, "usr/sbin/ovs-vswitchd") {
		t.Errorf("the agent's base layer %q is not its rootfs", names)
	}
	wantFiles := []string{
		"opt/cni/ 0755",
		"opt/cni/bin/ 0755",
		"opt/cni/bin/loopback 0755",
		"usr/local/bin/antctl 0755",
		"usr/local/bin/antrea-agent 0755",
		"usr/local/bin/antrea-cni 0755",
		"usr/local/bin/install_cni 0755",
		"usr/local/bin/start_ovs 0755",
	}
	if got := listing(t, ls[1]); !slices.Equal(got, wantFiles) {
		t.Errorf("the agent's files layer lists\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantFiles, "\n  "))
	}
	_, files := readLayer(t, ls[1])
	for path, src := range map[string]string{
		"usr/local/bin/antrea-agent": filepath.Join(opts.BinDir, "antrea-agent"),
		"usr/local/bin/antctl":       filepath.Join(opts.BinDir, "antctl"),
		"usr/local/bin/start_ovs":    filepath.Join(opts.imageScriptsDir(), "start_ovs"),
		"opt/cni/bin/loopback":       filepath.Join(opts.CNIBinDir, "loopback"),
	} {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(files[path].content, want) {
			t.Errorf("the agent image's /%s is not a copy of %s", path, src)
		}
	}
	cf, err := agent.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Cmd, []string{"antrea-agent"}) || len(cf.Config.Entrypoint) != 0 {
		t.Errorf("the agent image runs entrypoint %q cmd %q, want cmd [antrea-agent] (the manifest's command replaces it)", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	requirePath(t, cf)

	controller := storedImage(t, opts, ControllerImage)
	ls = layers(t, controller)
	if len(ls) != 1 {
		t.Fatalf("the controller image has %d layers, want 1", len(ls))
	}
	wantFiles = []string{
		"etc/ 0755",
		"etc/group 0644",
		"etc/passwd 0644",
		"root/ 0700",
		"tmp/ 1777",
		"usr/ 0755",
		"usr/local/ 0755",
		"usr/local/bin/ 0755",
		"usr/local/bin/antrea-controller 0755",
		"var/ 0755",
		"var/run/ 0755",
		"var/run/antrea/ 0755",
	}
	if got := listing(t, ls[0]); !slices.Equal(got, wantFiles) {
		t.Errorf("the controller image lists\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantFiles, "\n  "))
	}
	_, files = readLayer(t, ls[0])
	for path, prefixes := range map[string][]string{
		"etc/passwd": {"root:x:0:0:", "nobody:x:65534:65534:"},
		"etc/group":  {"root:x:0:", "nogroup:x:65534:"},
	} {
		lines := strings.Split(string(files[path].content), "\n")
		for _, p := range prefixes {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, p) }) {
				t.Errorf("the controller image's /%s lacks a line %s...: %q", path, p, files[path].content)
			}
		}
	}
	cf, err = controller.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"antrea-controller"}) {
		t.Errorf("the controller image's entrypoint is %q, want [antrea-controller]", cf.Config.Entrypoint)
	}
	requirePath(t, cf)

	var out bytes.Buffer
	if err := ListImages(opts, &out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{AgentImage, ControllerImage} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("antrea-lab images does not list %s:\n%s", name, out.String())
		}
	}
	if !strings.Contains(out.String(), "SIZE") || !strings.Contains(out.String(), " kB") {
		t.Errorf("antrea-lab images does not give sizes:\n%s", out.String())
	}
	t.Logf("antrea-lab images:\n%s", out.String())
}

// requirePath fails unless the config's PATH finds /usr/local/bin: the
// manifest names commands without a directory.
func requirePath(t *testing.T, cf *v1.ConfigFile) {
	t.Helper()
	for _, e := range cf.Config.Env {
		if p, ok := strings.CutPrefix(e, "PATH="); ok && slices.Contains(strings.Split(p, ":"), "/usr/local/bin") {
			return
		}
	}
	t.Errorf("the image's env %q has no PATH with /usr/local/bin", cf.Config.Env)
}

func TestAntreaImagesAreReproducible(t *testing.T) {
	opts := fakeCheckout(t)
	first := digests(t, opts)
	for _, name := range []string{AgentImage, ControllerImage} {
		if first[name].Hex == "" {
			t.Fatalf("%s was not built: %v", name, first)
		}
	}

	// Another store, the same inputs, their files touched: the same digests.
	later := time.Now().Add(time.Hour)
	for _, p := range []string{filepath.Join(opts.BinDir, "antrea-agent"), filepath.Join(opts.BinDir, "antrea-controller"), opts.imageScriptsDir()} {
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	again := opts
	again.ImageDir = filepath.Join(t.TempDir(), "images")
	if second := digests(t, again); !equalDigests(first, second) {
		t.Fatalf("a rebuild from the same inputs gave other digests:\n%v\nfirst:\n%v", second, first)
	}

	for _, tc := range []struct {
		name    string
		change  string // a file of the checkout, rewritten
		changed []string
	}{
		{name: "a new agent binary changes the agent image only", change: filepath.Join(opts.BinDir, "antrea-agent"), changed: []string{AgentImage}},
		{name: "a new antctl changes the agent image only", change: filepath.Join(opts.BinDir, "antctl"), changed: []string{AgentImage}},
		{name: "a new start_ovs changes the agent image only", change: filepath.Join(opts.imageScriptsDir(), "start_ovs"), changed: []string{AgentImage}},
		{name: "a new controller binary changes the controller image only", change: filepath.Join(opts.BinDir, "antrea-controller"), changed: []string{ControllerImage}},
		{name: "a new flow-aggregator binary changes its image only", change: filepath.Join(opts.BinDir, "flow-aggregator"), changed: []string{FlowAggregatorImage}},
		{name: "a new antrea-ui binary changes its image only", change: filepath.Join(opts.BinDir, "antrea-ui"), changed: []string{UIImage}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := digests(t, opts)
			f, err := os.OpenFile(tc.change, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("\n# changed\n"); err != nil {
				t.Fatal(err)
			}
			f.Close()
			after := digests(t, opts)
			for name, d := range before {
				if changed := after[name] != d; changed != slices.Contains(tc.changed, name) {
					t.Errorf("%s: digest %s, before %s; want it changed: %v", name, after[name], d, !changed)
				}
			}
		})
	}
}

func equalDigests(a, b map[string]v1.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestAgentImageFromTheRealRootFS builds the antrea-agent image from the
// rootfs hack/install.sh made and the binaries of bin/ (ANTREA_BIN, else this
// checkout's), twice into fresh stores, and reports its size and build times.
func TestAgentImageFromTheRealRootFS(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		BinDir:     filepath.Join(repo, "bin"),
		KubeBinDir: filepath.Join(repo, "_output", "bin"),
		CNIBinDir:  filepath.Join(repo, "_output", "cni", "bin"),
	}
	if b := os.Getenv("ANTREA_BIN"); b != "" {
		opts.BinDir = b
	}
	specs, err := opts.antreaImageSpecs()
	if err != nil {
		t.Skipf("no agent rootfs: %v", err)
	}
	for _, spec := range specs {
		for _, f := range spec.Files {
			if _, err := os.Stat(f.Source); f.Source != "" && err != nil {
				t.Skipf("an input of %s is missing (make build; hack/install.sh cni): %v", spec.Names[0], err)
			}
		}
	}
	scripts := filepath.Join(repo, "build", "images", "scripts")
	for i := range specs {
		for j, f := range specs[i].Files {
			// The scripts are this checkout's, whichever bin/ is used.
			if filepath.Dir(f.Source) == opts.imageScriptsDir() {
				specs[i].Files[j].Source = filepath.Join(scripts, filepath.Base(f.Source))
			}
		}
	}

	var first map[string]v1.Hash
	for round := 1; round <= 2; round++ {
		store, err := images.NewStore(filepath.Join(t.TempDir(), "images"))
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range specs {
			start := time.Now()
			if err := store.Ensure(spec, "k"); err != nil {
				t.Fatal(err)
			}
			built := time.Since(start)
			start = time.Now()
			if err := store.Ensure(spec, "k"); err != nil {
				t.Fatal(err)
			}
			size, err := imageSize(store, spec.Names[0])
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("round %d: %s: %.1f MB, built in %v, then found up to date in %v", round, spec.Names[0], float64(size)/1e6, built.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		}
		d, err := store.Images()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: digests %v", round, d)
		if first == nil {
			first = d
			img, err := store.Image(AgentImage)
			if err != nil {
				t.Fatal(err)
			}
			names, _ := readLayer(t, layers(t, img)[0])
			for _, want := range []string{"usr/sbin/ovs-vswitchd", "usr/sbin/ovsdb-server", "usr/bin/ovs-vsctl", "usr/bin/ovs-appctl",
				"usr/bin/ovsdb-tool", "usr/share/openvswitch/vswitch.ovsschema", "usr/sbin/ipset", "usr/sbin/conntrack", "usr/bin/bash"} {
				if !slices.Contains(names, want) {
					t.Errorf("the agent image's rootfs lacks %s", want)
				}
			}
		} else if !equalDigests(first, d) {
			t.Errorf("a second build from the same inputs gave %v, the first %v", d, first)
		}
	}
}
