package ui

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// webDir is the frontend's source.
const webDir = "../../web/ui"

// sourcesDigest is build.mjs's digest of its inputs: the sorted paths, each
// followed by NUL, its bytes and NUL.
func sourcesDigest(t *testing.T) string {
	t.Helper()
	inputs := []string{"build.mjs", "package.json", "package-lock.json", "tsconfig.json"}
	src, err := os.ReadDir(filepath.Join(webDir, "src"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range src {
		inputs = append(inputs, "src/"+e.Name())
	}
	sort.Strings(inputs)
	h := sha256.New()
	for _, f := range inputs {
		b, err := os.ReadFile(filepath.Join(webDir, f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(f + "\x00"))
		h.Write(b)
		h.Write([]byte("\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// The committed bundle was built from the committed sources: a source
// changed without `make ui` fails here, with or without Node.js.
func TestCommittedBundleMatchesSources(t *testing.T) {
	got, err := assets.ReadFile("assets/SOURCES.sha256")
	if err != nil {
		t.Fatal(err)
	}
	if want := sourcesDigest(t); strings.TrimSpace(string(got)) != want {
		t.Fatalf("pkg/ui/assets is stale: web/ui changed since it was built (digest %s, sources %s): run make ui and commit pkg/ui/assets",
			strings.TrimSpace(string(got)), want)
	}
}

// Where esbuild is installed (make ui), rebuilding gives the committed
// bytes: the bundle is what the sources and the locked esbuild make.
func TestRebuildingTheBundleGivesTheCommittedBytes(t *testing.T) {
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", ".bin", "esbuild")); err != nil {
		t.Skip("esbuild not installed in web/ui/node_modules (make ui installs it): the digest test still checks the bundle")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	out := t.TempDir()
	cmd := exec.Command(node, "build.mjs")
	cmd.Dir = webDir
	cmd.Env = append(os.Environ(), "UI_OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node build.mjs: %v\n%s", err, b)
	}
	for _, f := range []string{"index.html", "main.js", "style.css", "SOURCES.sha256"} {
		built, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := assets.ReadFile("assets/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(built, committed) {
			t.Errorf("assets/%s differs from a fresh build: run make ui and commit pkg/ui/assets", f)
		}
	}
}
