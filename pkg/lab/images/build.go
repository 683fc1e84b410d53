package images

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/klog/v2"
)

// LayerMediaType is the media type of every layer this package builds:
// uncompressed tar. containerd 2.x unpacks it directly (core/images
// DiffCompression maps it to no compression), so nothing is gzipped when an
// image is built and nothing is gunzipped when a node unpacks it, and the
// layer's digest is its DiffID: one SHA-256 pass over the tar while it is
// written is all the hashing a build does. On these 2-core machines that
// matters more than disk: gzip would save ~2/3 of a 300 MB rootfs per copy
// but cost seconds of CPU on every rebuild and on every node's pull, and the
// registry is on loopback.
const LayerMediaType = types.OCIUncompressedLayer

// epoch is the time written everywhere a time goes (tar mtimes, config and
// history creation), so that rebuilds are reproducible.
var epoch = time.Unix(0, 0).UTC()

// defaultPath is the PATH an image gets when Spec.Env sets none; containerd
// does not add one, and runc then fails to find a relative entrypoint.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Spec describes one image to build.
type Spec struct {
	// Names are the full references the image is stored and served under,
	// e.g. registry.k8s.io/e2e-test-images/agnhost:2.66.1.
	Names []string `json:"names"`
	// RootFS, if set, is a host directory packed as the base layer with its
	// modes, owners, symlinks and hardlinks; sockets and devices are skipped.
	RootFS string `json:"rootfs,omitempty"`
	// Files are packed as a second layer on top of RootFS.
	Files []File `json:"files,omitempty"`
	// Entrypoint, Cmd, Env, WorkingDir and ExposedPorts go to the image
	// config. ExposedPorts are "8080/tcp" or "8080" (tcp).
	Entrypoint   []string `json:"entrypoint,omitempty"`
	Cmd          []string `json:"cmd,omitempty"`
	Env          []string `json:"env,omitempty"`
	WorkingDir   string   `json:"workingDir,omitempty"`
	ExposedPorts []string `json:"exposedPorts,omitempty"`
}

// File is one entry of an image's files layer: a copy of Source, a file
// holding Content, a symlink to Link or a directory (exactly one of them).
type File struct {
	// Path is where the file is in the image, e.g. /usr/local/bin/agnhost.
	Path string `json:"path"`
	// Source is the host file copied there (symlinks followed).
	Source string `json:"source,omitempty"`
	// Content, if not nil, is the file's content (e.g. a small /etc/passwd).
	Content []byte `json:"content,omitempty"`
	// Mode is the entry's permission bits as tar stores them (0o1777 for a
	// sticky /tmp); 0 takes Source's, else 0644 for Content, 0755 for Dir.
	Mode int64 `json:"mode,omitempty"`
	// Link, if set, makes the entry a symlink to Link.
	Link string `json:"link,omitempty"`
	// Dir makes the entry an empty directory.
	Dir bool `json:"dir,omitempty"`
}

// kinds counts how many of Source, Content, Link and Dir f sets.
func (f *File) kinds() int {
	n := 0
	for _, set := range []bool{f.Source != "", f.Content != nil, f.Link != "", f.Dir} {
		if set {
			n++
		}
	}
	return n
}

// modeOr is f.Mode, or def when it is 0.
func (f *File) modeOr(def int64) int64 {
	if f.Mode == 0 {
		return def
	}
	return f.Mode
}

// Build builds the image spec describes. Its layers are spooled once to
// unlinked temporary files (hashed while they are written, never held in
// memory); the space is freed when the image is no longer referenced.
func Build(spec Spec) (v1.Image, error) {
	return build(spec, spoolAnonymous)
}

// spoolFunc runs write on a file, hashing what it writes, and returns that
// file as a layer.
type spoolFunc func(write func(io.Writer) error) (v1.Layer, error)

func build(spec Spec, spool spoolFunc) (v1.Image, error) {
	var adds []mutate.Addendum
	if spec.RootFS != "" {
		l, err := spool(func(w io.Writer) error { return writeRootFS(w, spec.RootFS) })
		if err != nil {
			return nil, fmt.Errorf("packing rootfs %s: %w", spec.RootFS, err)
		}
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "rootfs"}})
	}
	if len(spec.Files) > 0 {
		l, err := spool(func(w io.Writer) error { return writeFiles(w, spec.Files, spec.RootFS == "") })
		if err != nil {
			return nil, fmt.Errorf("packing files: %w", err)
		}
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "files"}})
	}

	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = "amd64"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = spec.Entrypoint
	cf.Config.Cmd = spec.Cmd
	cf.Config.WorkingDir = spec.WorkingDir
	cf.Config.Env = spec.Env
	if !slices.ContainsFunc(spec.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		cf.Config.Env = append([]string{defaultPath}, spec.Env...)
	}
	if len(spec.ExposedPorts) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range spec.ExposedPorts {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	return mutate.ConfigFile(img, cf)
}

// spoolTo writes through write into f, returning the SHA-256 and size of
// what was written.
func spoolTo(f *os.File, write func(io.Writer) error) (v1.Hash, int64, error) {
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(f, h)}
	if err := write(cw); err != nil {
		return v1.Hash{}, 0, err
	}
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}, cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// spoolAnonymous spools into a temporary file that is unlinked at once: the
// layer keeps the open file, and the file's finalizer closes it (freeing the
// space) once the layer is garbage.
func spoolAnonymous(write func(io.Writer) error) (v1.Layer, error) {
	f, err := os.CreateTemp("", "antrea-lab-layer-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	digest, size, err := spoolTo(f, write)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &blobLayer{
		digest: digest,
		size:   size,
		mt:     LayerMediaType,
		open: func() (io.ReadCloser, error) {
			return io.NopCloser(io.NewSectionReader(f, 0, size)), nil
		},
	}, nil
}

// blobLayer is an uncompressed layer whose bytes are one file and whose
// digest was computed as the file was written.
type blobLayer struct {
	digest v1.Hash
	size   int64
	mt     types.MediaType
	open   func() (io.ReadCloser, error)
}

var _ v1.Layer = (*blobLayer)(nil)

func (l *blobLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l *blobLayer) DiffID() (v1.Hash, error)             { return l.digest, nil }
func (l *blobLayer) Size() (int64, error)                 { return l.size, nil }
func (l *blobLayer) MediaType() (types.MediaType, error)  { return l.mt, nil }
func (l *blobLayer) Compressed() (io.ReadCloser, error)   { return l.open() }
func (l *blobLayer) Uncompressed() (io.ReadCloser, error) { return l.open() }

// writeRootFS writes the tree under root as a tar stream: entries in lexical
// order, names relative to root, mtimes fixed, owners numeric.
func writeRootFS(w io.Writer, root string) error {
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	type inode struct{ dev, ino uint64 }
	links := map[inode]string{}
	skipped := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: name, Mode: tarMode(fi.Mode()), ModTime: epoch}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		}
		switch {
		case fi.Mode().IsDir():
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = target
		case fi.Mode().IsRegular():
			if ok && st.Nlink > 1 {
				key := inode{uint64(st.Dev), st.Ino}
				if first, seen := links[key]; seen {
					hdr.Typeflag = tar.TypeLink
					hdr.Linkname = first
					return tw.WriteHeader(hdr)
				}
				links[key] = name
			}
			hdr.Typeflag = tar.TypeReg
			hdr.Size = fi.Size()
			if capability := fileCapability(p); capability != "" {
				hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": capability}
			}
			return writeFileEntry(tw, hdr, p)
		default:
			// Sockets, devices and fifos: containerd's runtime makes /dev.
			skipped++
			return nil
		}
		return tw.WriteHeader(hdr)
	})
	if err != nil {
		return err
	}
	if skipped > 0 {
		klog.V(2).InfoS("Skipped special files while packing a rootfs", "rootfs", root, "count", skipped)
	}
	return tw.Close()
}

// tarMode is the permission and set-id/sticky bits of m as tar stores them.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// fileCapability returns p's security.capability xattr (file capabilities,
// e.g. ping's cap_net_raw), or "" if it has none.
func fileCapability(p string) string {
	buf := make([]byte, 256)
	n, err := syscall.Getxattr(p, "security.capability", buf)
	if err != nil || n <= 0 {
		return ""
	}
	return string(buf[:n])
}

// writeFileEntry writes hdr and then the content of the host file src,
// failing if the file's size changed since hdr.Size was taken.
func writeFileEntry(tw *tar.Writer, hdr *tar.Header, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if n != hdr.Size {
		return fmt.Errorf("%s changed size while packed (%d, then %d bytes)", src, hdr.Size, n)
	}
	return nil
}

// writeFiles writes files as a tar stream sorted by path. With parents, the
// directories above each file are written too (mode 0755); without, they are
// left to the base layer (an entry here would override its modes) and to
// containerd, which creates missing parents when it unpacks.
func writeFiles(w io.Writer, files []File, parents bool) error {
	type entry struct {
		name string
		file *File
	}
	var entries []entry
	seen := map[string]bool{}
	for i := range files {
		f := &files[i]
		name := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if name == "" {
			return fmt.Errorf("file %q: path names no file", f.Path)
		}
		if seen[name] {
			return fmt.Errorf("file %q: path given twice", f.Path)
		}
		if k := f.kinds(); k != 1 {
			return fmt.Errorf("file %q: sets %d of Source, Content, Link and Dir, want exactly one", f.Path, k)
		}
		seen[name] = true
		entries = append(entries, entry{name: name, file: f})
	}
	if parents {
		for _, e := range slices.Clone(entries) {
			for dir := path.Dir(e.name); dir != "."; dir = path.Dir(dir) {
				if seen[dir] {
					continue
				}
				seen[dir] = true
				entries = append(entries, entry{name: dir})
			}
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })

	tw := tar.NewWriter(w)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, ModTime: epoch}
		f := e.file
		switch {
		case f == nil:
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, e.name+"/", 0o755
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case f.Dir:
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, e.name+"/", f.modeOr(0o755)
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case f.Content != nil:
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, int64(len(f.Content)), f.modeOr(0o644)
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := tw.Write(f.Content); err != nil {
				return err
			}
		default:
			fi, err := os.Stat(f.Source)
			if err != nil {
				return fmt.Errorf("file %q: %w", f.Path, err)
			}
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("file %q: source %s is not a regular file", f.Path, f.Source)
			}
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, fi.Size(), f.Mode
			if hdr.Mode == 0 {
				hdr.Mode = tarMode(fi.Mode())
			}
			if err := writeFileEntry(tw, hdr, f.Source); err != nil {
				return fmt.Errorf("file %q: %w", f.Path, err)
			}
		}
	}
	return tw.Close()
}
