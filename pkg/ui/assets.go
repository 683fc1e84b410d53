package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"path"
	"time"
)

// The frontend, built from web/ui by `make ui` (esbuild) and committed, so
// that go build needs no Node.js. SOURCES.sha256 is the digest of the
// sources it was built from; TestCommittedBundleMatchesSources fails when
// the sources changed since.
//
//go:embed assets/index.html assets/main.js assets/style.css assets/SOURCES.sha256
var assets embed.FS

// asset is one embedded file with its ETag.
type asset struct {
	body []byte
	etag string
	mime string
}

var assetTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

func loadAsset(name string) *asset {
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return &asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, mime: assetTypes[path.Ext(name)]}
}

// served are the files the server hands out (SOURCES.sha256 is not one).
var served = func() map[string]*asset {
	m := map[string]*asset{}
	for _, n := range []string{"index.html", "main.js", "style.css"} {
		if a := loadAsset(n); a != nil {
			m[n] = a
		}
	}
	return m
}()

// serve writes a with revalidation: the browser keeps it and asks with
// If-None-Match, so a warm load costs a 304 per file.
func serve(w http.ResponseWriter, r *http.Request, a *asset) {
	w.Header().Set("Content-Type", a.mime)
	w.Header().Set("ETag", a.etag)
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	serve(w, r, served["index.html"])
}

func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := served[r.PathValue("file")]
	if !ok || r.PathValue("file") == "index.html" {
		http.NotFound(w, r)
		return
	}
	serve(w, r, a)
}
