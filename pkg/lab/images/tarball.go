package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// LoadTarball adds to store every tagged image of the tar at path and
// returns their names (in store form). The tar is either what `docker save`
// or go-containerregistry's tarball.Write make (manifest.json with RepoTags)
// or an OCI image layout (index.json, names in the io.containerd.image.name
// or org.opencontainers.image.ref.name annotation), as `ctr images export`
// makes. Layers are copied as they are, hashed once on the way; a docker
// image gets an OCI manifest around its unchanged config.
func LoadTarball(store *Store, path string) ([]string, error) {
	files, err := smallFiles(path, "manifest.json", "index.json")
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var names []string
	switch {
	case files["manifest.json"] != nil:
		names, err = loadDockerTarball(store, path, files["manifest.json"])
	case files["index.json"] != nil:
		names, err = loadLayoutTarball(store, path, files["index.json"])
	default:
		err = errors.New("neither manifest.json nor index.json in it")
	}
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return names, nil
}

// smallFiles returns the content of the named regular files of a tar.
func smallFiles(tarPath string, names ...string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := walkTar(tarPath, func(hdr *tar.Header, r io.Reader) error {
		for _, n := range names {
			if cleanTarName(hdr.Name) == n && hdr.Typeflag == tar.TypeReg && hdr.Size <= maxManifestSize {
				b, err := io.ReadAll(r)
				if err != nil {
					return err
				}
				out[n] = b
			}
		}
		return nil
	})
	return out, err
}

func walkTar(tarPath string, f func(*tar.Header, io.Reader) error) error {
	file, err := os.Open(tarPath)
	if err != nil {
		return err
	}
	defer file.Close()
	tr := tar.NewReader(bufio.NewReaderSize(file, 1<<20))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(hdr, tr); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
	}
}

func cleanTarName(n string) string { return strings.TrimPrefix(path.Clean("/"+n), "/") }

// spooledBlob is a tar entry copied into the store.
type spooledBlob struct {
	digest v1.Hash
	size   int64
	// head is the entry's first bytes, to tell its compression.
	head []byte
	// config is the entry's content if it is an image config.
	config []byte
}

// spoolEntries copies the wanted regular entries of a tar into the store,
// following symlinked entries (old `docker save` links repeated layers).
func spoolEntries(store *Store, tarPath string, wanted map[string]bool, configs map[string]bool) (map[string]*spooledBlob, error) {
	got := map[string]*spooledBlob{}
	links := map[string]string{}
	err := walkTar(tarPath, func(hdr *tar.Header, r io.Reader) error {
		n := cleanTarName(hdr.Name)
		if !wanted[n] {
			return nil
		}
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			links[n] = cleanTarName(path.Join(path.Dir(n), hdr.Linkname))
			return nil
		case tar.TypeLink:
			links[n] = cleanTarName(hdr.Linkname)
			return nil
		case tar.TypeReg:
		default:
			return nil
		}
		b := &spooledBlob{}
		if configs[n] {
			data, err := io.ReadAll(io.LimitReader(r, maxManifestSize))
			if err != nil {
				return err
			}
			b.config = data
			r = bytes.NewReader(data)
		}
		var err error
		b.digest, b.size, err = store.spool(func(w io.Writer) error {
			hw := &headWriter{w: w}
			_, err := io.Copy(hw, r)
			b.head = hw.head
			return err
		})
		if err != nil {
			return err
		}
		got[n] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	for n, target := range links {
		for range 16 {
			if next, ok := links[target]; ok {
				target = next
			}
		}
		if b, ok := got[target]; ok {
			got[n] = b
		}
	}
	return got, nil
}

// headWriter keeps the first bytes written through it.
type headWriter struct {
	w    io.Writer
	head []byte
}

func (h *headWriter) Write(p []byte) (int, error) {
	if need := 8 - len(h.head); need > 0 {
		h.head = append(h.head, p[:min(need, len(p))]...)
	}
	return h.w.Write(p)
}

// layerMediaType tells an OCI layer media type from a layer's first bytes.
func layerMediaType(head []byte) types.MediaType {
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return types.OCILayer
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return types.OCILayerZStd
	}
	return types.OCIUncompressedLayer
}

func loadDockerTarball(store *Store, tarPath string, manifestJSON []byte) ([]string, error) {
	var m tarball.Manifest
	if err := json.Unmarshal(manifestJSON, &m); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	wanted, configs := map[string]bool{}, map[string]bool{}
	for _, d := range m {
		wanted[cleanTarName(d.Config)], configs[cleanTarName(d.Config)] = true, true
		for _, l := range d.Layers {
			wanted[cleanTarName(l)] = true
		}
	}
	blobs, err := spoolEntries(store, tarPath, wanted, configs)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range m {
		if len(d.RepoTags) == 0 {
			continue // saved by ID: nothing to name it
		}
		manifest, err := dockerImageManifest(d, blobs)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", d.RepoTags[0], err)
		}
		digest, err := store.writeBlob(manifest)
		if err != nil {
			return nil, err
		}
		canonical, err := canonicalNames(d.RepoTags)
		if err != nil {
			return nil, err
		}
		desc := v1.Descriptor{MediaType: types.OCIManifestSchema1, Size: int64(len(manifest)), Digest: digest}
		if err := store.tag(canonical, desc, nil); err != nil {
			return nil, err
		}
		names = append(names, canonical...)
	}
	return names, nil
}

// dockerImageManifest writes the OCI manifest of one image of a docker
// tarball whose entries are in blobs.
func dockerImageManifest(d tarball.Descriptor, blobs map[string]*spooledBlob) ([]byte, error) {
	cfg := blobs[cleanTarName(d.Config)]
	if cfg == nil || cfg.config == nil {
		return nil, fmt.Errorf("config %s missing", d.Config)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(cfg.config))
	if err != nil {
		return nil, err
	}
	if len(cf.RootFS.DiffIDs) != len(d.Layers) {
		return nil, fmt.Errorf("config lists %d layers, manifest.json %d", len(cf.RootFS.DiffIDs), len(d.Layers))
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config:        v1.Descriptor{MediaType: types.OCIConfigJSON, Size: cfg.size, Digest: cfg.digest},
	}
	for i, l := range d.Layers {
		b := blobs[cleanTarName(l)]
		if b == nil {
			return nil, fmt.Errorf("layer %s missing", l)
		}
		mt := layerMediaType(b.head)
		if mt == types.OCIUncompressedLayer && b.digest != cf.RootFS.DiffIDs[i] {
			return nil, fmt.Errorf("layer %s has digest %s, its config says %s", l, b.digest, cf.RootFS.DiffIDs[i])
		}
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: mt, Size: b.size, Digest: b.digest})
	}
	return json.Marshal(m)
}

func loadLayoutTarball(store *Store, tarPath string, indexJSON []byte) ([]string, error) {
	idx, err := v1.ParseIndexManifest(bytes.NewReader(indexJSON))
	if err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	if err := spoolLayoutBlobs(store, tarPath); err != nil {
		return nil, err
	}
	var names []string
	for _, d := range idx.Manifests {
		n := d.Annotations[AnnotationImageName]
		if ref := d.Annotations[annotationRefName]; n == "" && strings.ContainsAny(ref, "/:") {
			n = ref
		}
		if n == "" {
			continue
		}
		if _, err := os.Stat(store.blobPath(d.Digest)); err != nil {
			return nil, fmt.Errorf("image %s: manifest %s missing", n, d.Digest)
		}
		canonical, err := canonicalName(n)
		if err != nil {
			return nil, err
		}
		if d.MediaType == "" {
			body, err := os.ReadFile(store.blobPath(d.Digest))
			if err != nil {
				return nil, err
			}
			d.MediaType = manifestMediaType(body)
		}
		desc := v1.Descriptor{MediaType: d.MediaType, Size: d.Size, Digest: d.Digest}
		if err := store.tag([]string{canonical}, desc, nil); err != nil {
			return nil, err
		}
		names = append(names, canonical)
	}
	return names, nil
}

// spoolLayoutBlobs copies the blobs/sha256 entries of an OCI layout tar into
// the store, checking that each one's content matches its name.
func spoolLayoutBlobs(store *Store, tarPath string) error {
	return walkTar(tarPath, func(hdr *tar.Header, r io.Reader) error {
		hexDigest, ok := strings.CutPrefix(cleanTarName(hdr.Name), "blobs/sha256/")
		if !ok || hdr.Typeflag != tar.TypeReg {
			return nil
		}
		want, err := v1.NewHash("sha256:" + hexDigest)
		if err != nil {
			return err
		}
		digest, _, err := store.spool(func(w io.Writer) error {
			_, err := io.Copy(w, r)
			return err
		})
		if err != nil {
			return err
		}
		if digest != want {
			return fmt.Errorf("content has digest %s", digest)
		}
		return nil
	})
}
