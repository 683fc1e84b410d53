package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
)

// Annotations on the descriptors of a store's index.json. The first two are
// what containerd's own export writes, so `ctr images import` of a tar of the
// store directory names the images too.
const (
	// AnnotationImageName holds the image's full name.
	AnnotationImageName = "io.containerd.image.name"
	// annotationRefName holds its tag (OCI image-layout's ref.name).
	annotationRefName = "org.opencontainers.image.ref.name"
	// annotationInputs and annotationSpec record what Ensure built the image from.
	annotationInputs = "lab.antrea.io/inputs"
	annotationSpec   = "lab.antrea.io/spec"
)

// builderVersion is part of every Ensure fingerprint: bump it when Build
// changes what it writes, so that stores built by an older Build rebuild.
const builderVersion = "1"

// Store is a directory holding images as an OCI image layout
// (https://github.com/opencontainers/image-spec/blob/main/image-layout.md):
// blobs/sha256/<hex> content-addressed, index.json naming one descriptor per
// image name. Several processes may use one store: index.json is replaced
// atomically under a file lock.
type Store struct {
	root   string
	layout layout.Path
	// build is Build spooling straight into the store; tests count calls.
	build func(Spec) (v1.Image, error)
}

// NewStore opens the store rooted at dir, making an empty one if dir holds none.
func NewStore(dir string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	s := &Store{root: dir, layout: layout.Path(dir)}
	s.build = func(spec Spec) (v1.Image, error) { return build(spec, s.spoolLayer) }
	err := s.withLock(func() error {
		if _, err := os.Stat(s.indexPath()); err == nil {
			return nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		_, err := layout.Write(dir, empty.Index)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", dir, err)
	}
	return s, nil
}

// Dir is the directory the store is rooted at.
func (s *Store) Dir() string { return s.root }

func (s *Store) indexPath() string { return filepath.Join(s.root, "index.json") }

func (s *Store) blobPath(h v1.Hash) string {
	return filepath.Join(s.root, "blobs", h.Algorithm, h.Hex)
}

// Put stores img under names (full references; a missing registry host
// means docker.io, a missing tag latest), replacing what those names held.
func (s *Store) Put(names []string, img v1.Image) error {
	return s.put(names, img, nil)
}

func (s *Store) put(names []string, img v1.Image, annotations map[string]string) error {
	canonical, err := canonicalNames(names)
	if err != nil {
		return err
	}
	if err := s.layout.WriteImage(img); err != nil {
		return fmt.Errorf("writing image %s: %w", canonical[0], err)
	}
	desc, err := partial.Descriptor(img)
	if err != nil {
		return err
	}
	return s.tag(canonical, v1.Descriptor{MediaType: desc.MediaType, Size: desc.Size, Digest: desc.Digest}, annotations)
}

func canonicalNames(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, errors.New("an image needs at least one name")
	}
	var out []string
	for _, n := range names {
		c, err := canonicalName(n)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// tag points each of names (store names, already in their final form) at
// the manifest desc describes, whose blob must be in the store.
func (s *Store) tag(names []string, desc v1.Descriptor, annotations map[string]string) error {
	return s.updateIndex(func(idx *v1.IndexManifest) {
		idx.Manifests = slices.DeleteFunc(idx.Manifests, func(d v1.Descriptor) bool {
			return slices.Contains(names, d.Annotations[AnnotationImageName])
		})
		for _, n := range names {
			d := desc
			_, _, tag := splitName(n)
			d.Annotations = map[string]string{AnnotationImageName: n, annotationRefName: tag}
			for k, v := range annotations {
				d.Annotations[k] = v
			}
			idx.Manifests = append(idx.Manifests, d)
		}
	})
}

// untag removes names from the index; their blobs stay until Prune.
func (s *Store) untag(names []string) error {
	return s.updateIndex(func(idx *v1.IndexManifest) {
		idx.Manifests = slices.DeleteFunc(idx.Manifests, func(d v1.Descriptor) bool {
			return slices.Contains(names, d.Annotations[AnnotationImageName])
		})
	})
}

// Remove forgets the images stored under names; their blobs stay until Prune
// (another name may share them).
func (s *Store) Remove(names ...string) error {
	canon, err := canonicalNames(names)
	if err != nil {
		return err
	}
	return s.untag(canon)
}

// Images maps every image name in the store to its manifest digest.
func (s *Store) Images() (map[string]v1.Hash, error) {
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	out := map[string]v1.Hash{}
	for _, d := range idx.Manifests {
		if n := d.Annotations[AnnotationImageName]; n != "" {
			out[n] = d.Digest
		}
	}
	return out, nil
}

// Image returns the image stored under name.
func (s *Store) Image(name string) (v1.Image, error) {
	imgs, err := s.Images()
	if err != nil {
		return nil, err
	}
	h, ok := imgs[name]
	if !ok {
		if c, err := canonicalName(name); err == nil {
			h, ok = imgs[c]
		}
	}
	if !ok {
		return nil, fmt.Errorf("image %s: not in store %s", name, s.root)
	}
	return s.layout.Image(h)
}

// Ensure makes sure the store holds the image spec describes under all of
// spec.Names, building it only if the last build under those names had
// other inputs: inputsKey (the caller's fingerprint of the files Build
// reads, e.g. a hash of a binary and the rootfs's cache key) or another Spec.
// Build is deterministic, so a rebuild from unchanged files gives the same
// digest.
func (s *Store) Ensure(spec Spec, inputsKey string) error {
	names, err := canonicalNames(spec.Names)
	if err != nil {
		return err
	}
	fp, err := specFingerprint(spec)
	if err != nil {
		return err
	}
	idx, err := s.readIndex()
	if err != nil {
		return err
	}
	if s.upToDate(idx, names, inputsKey, fp) {
		return nil
	}
	img, err := s.build(spec)
	if err != nil {
		return fmt.Errorf("building image %s: %w", names[0], err)
	}
	return s.put(names, img, map[string]string{annotationInputs: inputsKey, annotationSpec: fp})
}

func (s *Store) upToDate(idx *v1.IndexManifest, names []string, inputsKey, fp string) bool {
	for _, n := range names {
		i := slices.IndexFunc(idx.Manifests, func(d v1.Descriptor) bool { return d.Annotations[AnnotationImageName] == n })
		if i < 0 {
			return false
		}
		d := idx.Manifests[i]
		if d.Annotations[annotationInputs] != inputsKey || d.Annotations[annotationSpec] != fp {
			return false
		}
		if _, err := os.Stat(s.blobPath(d.Digest)); err != nil {
			return false
		}
	}
	return true
}

func specFingerprint(spec Spec) (string, error) {
	b, err := json.Marshal(struct {
		Builder string `json:"builder"`
		Spec    Spec   `json:"spec"`
	}{builderVersion, spec})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Prune deletes every blob no image name reaches, and leftovers of
// interrupted writes, that are older than minAge. A blob a build or a push
// in flight wrote is unreachable until its manifest is tagged, and every
// write renames a fresh file into place, so with a minAge longer than any
// build (EnsureImages uses an hour) Prune may run beside other writers;
// with 0 it must run alone.
func (s *Store) Prune(minAge time.Duration) (freed int64, err error) {
	idx, err := s.readIndex()
	if err != nil {
		return 0, err
	}
	keep := map[string]bool{}
	for _, d := range idx.Manifests {
		s.reach(d, keep)
	}
	blobs := filepath.Join(s.root, "blobs", "sha256")
	for _, dir := range []string{blobs, filepath.Join(s.root, "tmp")} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return freed, err
		}
		for _, e := range entries {
			if dir == blobs && keep[e.Name()] {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			if time.Since(fi.ModTime()) < minAge {
				continue
			}
			freed += fi.Size()
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return freed, err
			}
		}
	}
	return freed, nil
}

// reach marks the blob of d and every blob it references.
func (s *Store) reach(d v1.Descriptor, keep map[string]bool) {
	if d.Digest.Algorithm != "sha256" || keep[d.Digest.Hex] {
		return
	}
	keep[d.Digest.Hex] = true
	switch {
	case d.MediaType.IsImage():
		b, err := os.ReadFile(s.blobPath(d.Digest))
		if err != nil {
			return
		}
		m, err := v1.ParseManifest(bytes.NewReader(b))
		if err != nil {
			return
		}
		s.reach(m.Config, keep)
		for _, l := range m.Layers {
			s.reach(l, keep)
		}
	case d.MediaType.IsIndex():
		b, err := os.ReadFile(s.blobPath(d.Digest))
		if err != nil {
			return
		}
		im, err := v1.ParseIndexManifest(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, c := range im.Manifests {
			s.reach(c, keep)
		}
	}
}

// readIndex reads index.json; it is replaced by rename, so no lock is needed.
func (s *Store) readIndex() (*v1.IndexManifest, error) {
	f, err := os.Open(s.indexPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	idx, err := v1.ParseIndexManifest(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.indexPath(), err)
	}
	return idx, nil
}

// updateIndex runs change on index.json under the store's lock and writes
// the result back atomically if it differs.
func (s *Store) updateIndex(change func(*v1.IndexManifest)) error {
	return s.withLock(func() error {
		idx, err := s.readIndex()
		if err != nil {
			return err
		}
		old, err := json.Marshal(idx)
		if err != nil {
			return err
		}
		change(idx)
		now, err := json.Marshal(idx)
		if err != nil {
			return err
		}
		if bytes.Equal(old, now) {
			return nil
		}
		b, err := json.MarshalIndent(idx, "", "  ")
		if err != nil {
			return err
		}
		return s.writeFileAtomic(s.indexPath(), b)
	})
}

// withLock runs f holding an exclusive flock on the store's lock file. flock
// locks belong to open file descriptions, so this excludes goroutines of one
// process as well as other processes.
func (s *Store) withLock(f func() error) error {
	lf, err := os.OpenFile(filepath.Join(s.root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking image store %s: %w", s.root, err)
	}
	return f()
}

func (s *Store) writeFileAtomic(dst string, data []byte) error {
	f, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "write-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), dst)
}

// spool writes through write into a temporary file, hashing it on the way,
// and moves it to its blob path.
func (s *Store) spool(write func(io.Writer) error) (v1.Hash, int64, error) {
	f, err := os.CreateTemp(filepath.Join(s.root, "tmp"), "blob-*")
	if err != nil {
		return v1.Hash{}, 0, err
	}
	defer os.Remove(f.Name())
	digest, size, err := spoolTo(f, write)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return v1.Hash{}, 0, err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return v1.Hash{}, 0, err
	}
	if err := os.Rename(f.Name(), s.blobPath(digest)); err != nil {
		return v1.Hash{}, 0, err
	}
	return digest, size, nil
}

// spoolLayer is the spoolFunc of builds into the store: the layer is born
// at its blob path, so writing the image later finds it there.
func (s *Store) spoolLayer(write func(io.Writer) error) (v1.Layer, error) {
	digest, size, err := s.spool(write)
	if err != nil {
		return nil, err
	}
	p := s.blobPath(digest)
	return &blobLayer{digest: digest, size: size, mt: LayerMediaType, open: func() (io.ReadCloser, error) { return os.Open(p) }}, nil
}

// writeBlob stores data as a blob and returns its digest.
func (s *Store) writeBlob(data []byte) (v1.Hash, error) {
	h, _, err := s.spool(func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	return h, err
}
