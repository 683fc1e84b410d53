package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// testRootFS makes a small rootfs with one entry of every kind Build handles
// and returns it with the tar listing its layer must have.
func testRootFS(t *testing.T) (dir string, want []string) {
	t.Helper()
	dir = t.TempDir()
	mkdir := func(p string, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	file := func(p, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, p), mode); err != nil {
			t.Fatal(err)
		}
	}
	mkdir("bin", 0o755)
	mkdir("etc", 0o755)
	mkdir("run", 0o755)
	mkdir("tmp", os.ModeSticky|0o777)
	mkdir("usr/bin", 0o755)
	file("bin/sh", "#!shell", 0o755)
	file("etc/passwd", "root:x:0:0::/root:/bin/sh\n", 0o644)
	file("usr/bin/su", "su", os.ModeSetuid|0o755)
	if err := os.Symlink("sh", filepath.Join(dir, "bin/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "bin/sh"), filepath.Join(dir, "bin/hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "run/fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "run/sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })

	uid := fmt.Sprintf("%d:%d", os.Geteuid(), os.Getegid())
	passwdOwner := uid
	if os.Geteuid() == 0 {
		if err := os.Lchown(filepath.Join(dir, "etc/passwd"), 1000, 2000); err != nil {
			t.Fatal(err)
		}
		passwdOwner = "1000:2000"
	}
	// Walk order is lexical, so bin/hard is the file and bin/sh the link to it.
	want = []string{
		"bin/ dir 0755 " + uid,
		"bin/hard file 0755 " + uid + " size=7",
		"bin/link symlink 0777 " + uid + " -> sh",
		"bin/sh hardlink 0755 " + uid + " -> bin/hard",
		"etc/ dir 0755 " + uid,
		"etc/passwd file 0644 " + passwdOwner + " size=26",
		"run/ dir 0755 " + uid,
		"tmp/ dir 1777 " + uid,
		"usr/ dir 0755 " + uid,
		"usr/bin/ dir 0755 " + uid,
		"usr/bin/su file 4755 " + uid + " size=2",
	}
	return dir, want
}

// listLayer reads a layer back through the v1.Layer API, one line per entry.
func listLayer(t *testing.T, l v1.Layer) []string {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out []string
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if !hdr.ModTime.Equal(epoch) {
			t.Errorf("%s: mtime %v, want the epoch", hdr.Name, hdr.ModTime)
		}
		kind := map[byte]string{tar.TypeDir: "dir", tar.TypeReg: "file", tar.TypeSymlink: "symlink", tar.TypeLink: "hardlink"}[hdr.Typeflag]
		line := fmt.Sprintf("%s %s %04o %d:%d", hdr.Name, kind, hdr.Mode, hdr.Uid, hdr.Gid)
		if hdr.Typeflag == tar.TypeReg {
			line += fmt.Sprintf(" size=%d", hdr.Size)
		}
		if hdr.Linkname != "" {
			line += " -> " + hdr.Linkname
		}
		out = append(out, line)
	}
}

func writeHostFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBuild(t *testing.T) {
	rootfs, rootfsWant := testRootFS(t)
	binary := writeHostFile(t, "\x7fELF agnhost", 0o700)
	motd := writeHostFile(t, "hello\n", 0o600)
	files := []File{
		{Path: "/usr/local/bin/agnhost", Source: binary, Mode: 0o755},
		{Path: "usr/local/bin/netexec", Link: "agnhost"},
		{Path: "/etc/motd", Source: motd},
	}
	tests := []struct {
		name   string
		spec   Spec
		layers [][]string
	}{
		{
			name: "a rootfs and files make two layers, the files layer without parent directories",
			spec: Spec{
				Names:        []string{"registry.k8s.io/e2e-test-images/agnhost:2.66.1"},
				RootFS:       rootfs,
				Files:        files,
				Entrypoint:   []string{"/usr/local/bin/agnhost"},
				Cmd:          []string{"pause"},
				ExposedPorts: []string{"8080", "53/udp"},
			},
			layers: [][]string{rootfsWant, {
				"etc/motd file 0600 0:0 size=6",
				"usr/local/bin/agnhost file 0755 0:0 size=12",
				"usr/local/bin/netexec symlink 0777 0:0 -> agnhost",
			}},
		},
		{
			name: "files alone make one layer with their parent directories",
			spec: Spec{Names: []string{"registry.k8s.io/pause:3.10.2"}, Files: files, Entrypoint: []string{"/usr/local/bin/agnhost"}},
			layers: [][]string{{
				"etc/ dir 0755 0:0",
				"etc/motd file 0600 0:0 size=6",
				"usr/ dir 0755 0:0",
				"usr/local/ dir 0755 0:0",
				"usr/local/bin/ dir 0755 0:0",
				"usr/local/bin/agnhost file 0755 0:0 size=12",
				"usr/local/bin/netexec symlink 0777 0:0 -> agnhost",
			}},
		},
		{
			name: "inline contents and directories take their modes, parents made once",
			spec: Spec{Names: []string{"docker.io/antrea/antrea-controller:latest"}, Files: []File{
				{Path: "/etc/group", Content: []byte("root:x:0:\n")},
				{Path: "/etc/empty", Content: []byte{}, Mode: 0o600},
				{Path: "/tmp", Dir: true, Mode: 0o1777},
				{Path: "/var/run/antrea", Dir: true},
				{Path: "/var", Dir: true, Mode: 0o700},
			}},
			layers: [][]string{{
				"etc/ dir 0755 0:0",
				"etc/empty file 0600 0:0 size=0",
				"etc/group file 0644 0:0 size=10",
				"tmp/ dir 1777 0:0",
				"var/ dir 0700 0:0",
				"var/run/ dir 0755 0:0",
				"var/run/antrea/ dir 0755 0:0",
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img, err := Build(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != len(tc.layers) {
				t.Fatalf("got %d layers, want %d", len(layers), len(tc.layers))
			}
			for i, l := range layers {
				if mt, _ := l.MediaType(); mt != LayerMediaType {
					t.Errorf("layer %d has media type %s, want %s", i, mt, LayerMediaType)
				}
				if got := listLayer(t, l); !slices.Equal(got, tc.layers[i]) {
					t.Errorf("layer %d lists\n  %s\nwant\n  %s", i, strings.Join(got, "\n  "), strings.Join(tc.layers[i], "\n  "))
				}
			}

			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Equal(epoch) {
				t.Errorf("config says %s/%s created %v, want linux/amd64 at the epoch", cf.OS, cf.Architecture, cf.Created.Time)
			}
			if !slices.Equal(cf.Config.Entrypoint, tc.spec.Entrypoint) || !slices.Equal(cf.Config.Cmd, tc.spec.Cmd) {
				t.Errorf("config has entrypoint %q cmd %q, want %q %q", cf.Config.Entrypoint, cf.Config.Cmd, tc.spec.Entrypoint, tc.spec.Cmd)
			}
			if !slices.Contains(cf.Config.Env, defaultPath) {
				t.Errorf("config env %q lacks the default PATH", cf.Config.Env)
			}
			for _, p := range tc.spec.ExposedPorts {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				if _, ok := cf.Config.ExposedPorts[p]; !ok {
					t.Errorf("config exposes %v, want %s among them", cf.Config.ExposedPorts, p)
				}
			}
			if mt, _ := img.MediaType(); mt != "application/vnd.oci.image.manifest.v1+json" {
				t.Errorf("manifest media type %s, want OCI", mt)
			}

			first, err := img.Digest()
			if err != nil {
				t.Fatal(err)
			}
			// Touch every input: mtimes must not reach the image.
			later := time.Now().Add(time.Hour)
			for _, p := range []string{rootfs, binary, motd, filepath.Join(rootfs, "etc/passwd")} {
				if err := os.Chtimes(p, later, later); err != nil {
					t.Fatal(err)
				}
			}
			again, err := Build(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			second, err := again.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if first != second {
				t.Errorf("rebuild from the same inputs has digest %s, first build %s", second, first)
			}
		})
	}
}

func TestBuildRefusesBadFiles(t *testing.T) {
	src := writeHostFile(t, "x", 0o644)
	tests := []struct {
		name  string
		files []File
	}{
		{"a path given twice", []File{{Path: "/a", Source: src}, {Path: "a", Source: src}}},
		{"a file with neither source nor link", []File{{Path: "/a"}}},
		{"a file with both a source and content", []File{{Path: "/a", Source: src, Content: []byte("x")}}},
		{"a directory with a link", []File{{Path: "/a", Dir: true, Link: "b"}}},
		{"a missing source", []File{{Path: "/a", Source: filepath.Join(t.TempDir(), "missing")}}},
		{"a directory as source", []File{{Path: "/a", Source: t.TempDir()}}},
		{"the root as path", []File{{Path: "/", Source: src}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Build(Spec{Names: []string{"x:1"}, Files: tc.files}); err == nil {
				t.Errorf("Build accepted %+v", tc.files)
			}
		})
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		in, canonical string
		repos         []string
	}{
		{"registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause:3.10.2", []string{"pause", "registry.k8s.io/pause"}},
		{"busybox", "docker.io/library/busybox:latest", []string{"library/busybox", "docker.io/library/busybox"}},
		{"index.docker.io/antrea/antrea-agent-ubuntu:v2", "docker.io/antrea/antrea-agent-ubuntu:v2", []string{"antrea/antrea-agent-ubuntu", "docker.io/antrea/antrea-agent-ubuntu"}},
		{"localhost:5000/a/b:c", "localhost:5000/a/b:c", []string{"a/b", "localhost:5000/a/b"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			c, err := canonicalName(tc.in)
			if err != nil || c != tc.canonical {
				t.Fatalf("canonicalName(%q) = %q, %v; want %q", tc.in, c, err, tc.canonical)
			}
			repos, _ := repositories(c)
			if !slices.Equal(repos, tc.repos) {
				t.Errorf("%s is served as %q, want %q", c, repos, tc.repos)
			}
		})
	}
	if _, err := canonicalName("registry.k8s.io/pause@sha256:" + strings.Repeat("0", 64)); err == nil {
		t.Error("a digest reference was accepted as a store name")
	}
	if repos, tag := repositories("pushed/app:v1"); !slices.Equal(repos, []string{"pushed/app"}) || tag != "v1" {
		t.Errorf("a pushed name without host is served as %q tag %q", repos, tag)
	}
}
