package images

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"k8s.io/klog/v2"
)

// maxManifestSize bounds a pushed manifest (the registry holds it in memory).
const maxManifestSize = 4 << 20

// NewRegistry returns a handler serving the OCI distribution API
// (https://github.com/opencontainers/distribution-spec/blob/main/spec.md)
// over store, to be mounted at the site root.
//
// Every image name is served under its repository path without the host
// (registry.k8s.io/pause:3.10.2 as /v2/pause/manifests/3.10.2: what a
// containerd mirror asks for) and with it (/v2/registry.k8s.io/pause/...).
// When two hosts hold the same path, containerd's ?ns=<host> query
// parameter picks the right one. Blobs are read from the store's files as
// they are (nothing is re-hashed, so start-up reads only index.json and the
// manifests); pushed blobs and manifests are written to the store, tagged
// pushes become store names (repo:tag as pushed), and images the store gains
// later (from this or another process) are served from the next request on.
func NewRegistry(store *Store) (http.Handler, error) {
	r := &registryHandler{
		store: store,
		inner: registry.New(
			registry.WithBlobHandler(blobHandler{store}),
			registry.Logger(log.New(klogWriter{}, "", 0)),
		),
		served: map[string]v1.Hash{},
		repos:  map[string]bool{},
	}
	if err := r.sync(); err != nil {
		return nil, err
	}
	return r, nil
}

// registryHandler keeps go-containerregistry's registry, whose manifests
// live in memory, equal to the store's index.json, and writes what clients
// push back to the store.
type registryHandler struct {
	store *Store
	inner http.Handler

	mu sync.Mutex
	// version identifies the index.json last synced.
	version indexVersion
	// served maps repo:tag to the manifest registered for it in inner.
	served map[string]v1.Hash
	// repos holds every repository served.
	repos map[string]bool
}

type indexVersion struct {
	ino, size uint64
	mtime     int64
}

func (r *registryHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if err := r.sync(); err != nil {
		klog.ErrorS(err, "Lab registry could not reread its store", "store", r.store.Dir())
	}
	repo, kind, ref, ok := parseV2Path(req.URL.Path)
	if !ok {
		r.inner.ServeHTTP(w, req)
		return
	}
	if ns := req.URL.Query().Get("ns"); ns != "" && kind != "blobs" {
		if hostRepo := normalizeHost(ns) + "/" + repo; r.hasRepo(hostRepo) {
			req = req.Clone(req.Context())
			req.URL.Path = "/v2/" + hostRepo + "/" + kind + "/" + ref
			req.URL.RawPath = ""
			repo = hostRepo
		}
	}
	if kind == "manifests" && req.Method == http.MethodPut {
		r.putManifest(w, req, repo, ref)
		return
	}
	if kind == "manifests" && req.Method == http.MethodDelete && !isDigest(ref) {
		r.deleteTag(w, req, repo, ref)
		return
	}
	r.inner.ServeHTTP(w, req)
}

// parseV2Path splits /v2/<repo>/<kind>/<ref> for kind manifests, tags and
// blobs (ref may have several elements: blobs/uploads/<id>).
func parseV2Path(p string) (repo, kind, ref string, ok bool) {
	rest, found := strings.CutPrefix(p, "/v2/")
	if !found {
		return "", "", "", false
	}
	elems := strings.Split(rest, "/")
	for i := len(elems) - 2; i >= 1; i-- {
		switch elems[i] {
		case "manifests", "tags", "blobs":
			return strings.Join(elems[:i], "/"), elems[i], strings.Join(elems[i+1:], "/"), true
		}
	}
	return "", "", "", false
}

func isDigest(ref string) bool { return strings.Contains(ref, ":") }

func (r *registryHandler) hasRepo(repo string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.repos[repo]
}

// putManifest passes a pushed manifest to inner and, once inner took it,
// stores it: its blob always, its tag as a store name.
func (r *registryHandler) putManifest(w http.ResponseWriter, req *http.Request, repo, ref string) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxManifestSize+1))
	if err != nil {
		writeRegistryError(w, http.StatusBadRequest, "MANIFEST_INVALID", err.Error())
		return
	}
	if len(body) > maxManifestSize {
		writeRegistryError(w, http.StatusRequestEntityTooLarge, "SIZE_INVALID", "manifest too large")
		return
	}
	mt := types.MediaType(req.Header.Get("Content-Type"))
	if mt == "" {
		mt = manifestMediaType(body)
		req.Header.Set("Content-Type", string(mt))
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	rec := newRecorder()
	r.inner.ServeHTTP(rec, req)
	if rec.status == http.StatusCreated {
		if err := r.persist(repo, ref, body, mt); err != nil {
			klog.ErrorS(err, "Lab registry could not store a pushed manifest", "repository", repo, "reference", ref)
			writeRegistryError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
			return
		}
	}
	rec.copyTo(w)
}

func (r *registryHandler) persist(repo, ref string, body []byte, mt types.MediaType) error {
	digest, err := r.store.writeBlob(body)
	if err != nil {
		return err
	}
	if isDigest(ref) {
		return nil
	}
	n := pushedName(repo, ref)
	return r.store.tag([]string{n}, v1.Descriptor{MediaType: mt, Size: int64(len(body)), Digest: digest}, nil)
}

// pushedName is the store name of a push to repo:tag: as pushed, Docker
// Hub's host spelled docker.io.
func pushedName(repo, tag string) string {
	host, path, _ := splitName(repo + ":" + tag)
	if host == "" {
		return path + ":" + tag
	}
	return host + "/" + path + ":" + tag
}

// deleteTag removes from the store every name served as repo:tag.
func (r *registryHandler) deleteTag(w http.ResponseWriter, req *http.Request, repo, tag string) {
	imgs, err := r.store.Images()
	if err != nil {
		writeRegistryError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	var names []string
	for n := range imgs {
		repos, t := repositories(n)
		if t == tag && slices.Contains(repos, repo) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		r.inner.ServeHTTP(w, req)
		return
	}
	if err := r.store.untag(names); err != nil {
		writeRegistryError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	if err := r.sync(); err != nil {
		writeRegistryError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// sync registers in inner what index.json names and unregisters what it no
// longer names, if index.json changed since the last sync.
func (r *registryHandler) sync() error {
	fi, err := os.Stat(r.store.indexPath())
	if err != nil {
		return err
	}
	v := indexVersion{size: uint64(fi.Size()), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		v.ino = st.Ino
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v == r.version {
		return nil
	}
	idx, err := r.store.readIndex()
	if err != nil {
		return err
	}

	// Names sorted, so that of two hosts with the same path the first one
	// (and a name pushed without host before all) owns the bare path.
	byName := map[string]v1.Descriptor{}
	for _, d := range idx.Manifests {
		if n := d.Annotations[AnnotationImageName]; n != "" {
			byName[n] = d
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		hi, _, _ := splitName(names[i])
		hj, _, _ := splitName(names[j])
		if (hi == "") != (hj == "") {
			return hi == ""
		}
		return names[i] < names[j]
	})
	want := map[string]v1.Descriptor{}
	repos := map[string]bool{}
	for _, n := range names {
		rs, tag := repositories(n)
		for _, repo := range rs {
			if _, taken := want[repo+":"+tag]; !taken {
				want[repo+":"+tag] = byName[n]
				repos[repo] = true
			}
		}
	}

	for key, d := range want {
		if r.served[key] == d.Digest {
			continue
		}
		repo, tag := splitKey(key)
		if err := r.register(repo, tag, d, 0); err != nil {
			klog.ErrorS(err, "Lab registry cannot serve an image of its store", "repository", repo, "tag", tag)
			delete(want, key)
			continue
		}
	}
	for key := range r.served {
		if _, ok := want[key]; ok {
			continue
		}
		repo, tag := splitKey(key)
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodDelete, "/v2/"+repo+"/manifests/"+tag, nil)
		r.inner.ServeHTTP(newRecorder(), req)
	}
	r.served = map[string]v1.Hash{}
	for key, d := range want {
		r.served[key] = d.Digest
	}
	r.repos = repos
	r.version = v
	return nil
}

func splitKey(key string) (repo, tag string) {
	i := strings.LastIndex(key, ":")
	return key[:i], key[i+1:]
}

// register puts the manifest d into inner as repo:ref, after the manifests
// it lists if it is an index (inner refuses an index whose children it lacks).
func (r *registryHandler) register(repo, ref string, d v1.Descriptor, depth int) error {
	if depth > 4 {
		return errors.New("image index nested too deep")
	}
	body, err := os.ReadFile(r.store.blobPath(d.Digest))
	if err != nil {
		return err
	}
	mt := d.MediaType
	if mt == "" {
		mt = manifestMediaType(body)
	}
	if mt.IsIndex() {
		im, err := v1.ParseIndexManifest(bytes.NewReader(body))
		if err != nil {
			return err
		}
		for _, c := range im.Manifests {
			if !c.MediaType.IsImage() && !c.MediaType.IsIndex() {
				continue
			}
			if _, err := os.Stat(r.store.blobPath(c.Digest)); errors.Is(err, fs.ErrNotExist) {
				continue // a platform the store does not hold
			}
			if err := r.register(repo, c.Digest.String(), c, depth+1); err != nil {
				return err
			}
		}
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, "/v2/"+repo+"/manifests/"+ref, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", string(mt))
	rec := newRecorder()
	r.inner.ServeHTTP(rec, req)
	if rec.status != http.StatusCreated {
		return fmt.Errorf("registering manifest %s: %d %s", d.Digest, rec.status, rec.body.String())
	}
	return nil
}

// manifestMediaType reads the mediaType field a manifest carries.
func manifestMediaType(body []byte) types.MediaType {
	var m struct {
		MediaType types.MediaType `json:"mediaType"`
	}
	_ = json.Unmarshal(body, &m)
	return m.MediaType
}

// blobHandler serves the store's blob files to go-containerregistry's
// registry and writes pushed blobs there. The store is content-addressed and
// every blob was hashed when written, so nothing is hashed when it is read.
type blobHandler struct{ store *Store }

var (
	_ registry.BlobStatHandler = blobHandler{}
	_ registry.BlobPutHandler  = blobHandler{}
)

func (b blobHandler) path(h v1.Hash) (string, error) {
	if _, err := hex.DecodeString(h.Hex); err != nil || h.Algorithm != "sha256" || len(h.Hex) != 64 {
		return "", registry.ErrNotFound
	}
	return b.store.blobPath(h), nil
}

func (b blobHandler) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	p, err := b.path(h)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, registry.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (b blobHandler) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	p, err := b.path(h)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, registry.ErrNotFound
	}
	return f, err
}

// Put stores a pushed blob; rc fails its last read if the content does not
// match h, and then nothing is stored.
func (b blobHandler) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	if _, err := b.path(h); err != nil {
		return fmt.Errorf("unsupported digest %s", h)
	}
	got, _, err := b.store.spool(func(w io.Writer) error {
		_, err := io.Copy(w, rc)
		return err
	})
	if err != nil {
		return err
	}
	if got != h {
		return fmt.Errorf("blob pushed as %s has digest %s", h, got)
	}
	return nil
}

// recorder is an in-memory http.ResponseWriter for requests whose response
// is inspected (or dropped) before it reaches a client.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) copyTo(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	if r.status == 0 {
		r.status = http.StatusOK
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}

// writeRegistryError writes an error in the distribution spec's format.
func writeRegistryError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"errors": []map[string]string{{"code": code, "message": msg}},
	})
}

// klogWriter sends go-containerregistry's request log to klog at V(4).
type klogWriter struct{}

func (klogWriter) Write(p []byte) (int, error) {
	klog.V(4).InfoS("Lab registry", "request", strings.TrimSpace(string(p)))
	return len(p), nil
}
