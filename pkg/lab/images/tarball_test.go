package images

import (
	"archive/tar"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// tarDir writes the tree under dir as a tar file and returns its path.
func tarDir(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "layout.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoadTarball(t *testing.T) {
	built := smallImage(t, "built here")
	gzipped, err := random.Image(4096, 2)
	if err != nil {
		t.Fatal(err)
	}

	dockerTar := filepath.Join(t.TempDir(), "images.tar")
	refs := map[name.Reference]v1.Image{}
	for ref, img := range map[string]v1.Image{
		"registry.k8s.io/e2e-test-images/agnhost:2.66.1": built,
		"antrea/antrea-agent-ubuntu:latest":              gzipped,
	} {
		r, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		refs[r] = img
	}
	if err := tarball.MultiRefWriteToFile(dockerTar, refs); err != nil {
		t.Fatal(err)
	}

	layoutDir := t.TempDir()
	lp, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(built, layout.WithAnnotations(map[string]string{AnnotationImageName: "ghcr.io/antrea-io/tool:v1"})); err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(gzipped, layout.WithAnnotations(map[string]string{annotationRefName: "quay.io/x/y:2"})); err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(gzipped, layout.WithAnnotations(map[string]string{annotationRefName: "just-a-tag"})); err != nil {
		t.Fatal(err)
	}
	layoutTar := tarDir(t, layoutDir)

	tests := []struct {
		name string
		tar  string
		// want maps each name LoadTarball must return to the image saved.
		want map[string]v1.Image
		// sameManifest says whether the stored manifest is the saved one
		// (an OCI layout) or a new OCI manifest around its config (docker).
		sameManifest bool
	}{
		{
			name: "a docker tarball gives every tagged image, configs and layers unchanged",
			tar:  dockerTar,
			want: map[string]v1.Image{
				"registry.k8s.io/e2e-test-images/agnhost:2.66.1": built,
				"docker.io/antrea/antrea-agent-ubuntu:latest":    gzipped,
			},
		},
		{
			name: "an OCI layout tar gives every image named by annotation",
			tar:  layoutTar,
			want: map[string]v1.Image{
				"ghcr.io/antrea-io/tool:v1": built,
				"quay.io/x/y:2":             gzipped,
			},
			sameManifest: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestStore(t, t.TempDir())
			names, err := LoadTarball(s, tc.tar)
			if err != nil {
				t.Fatal(err)
			}
			var wantNames []string
			for n := range tc.want {
				wantNames = append(wantNames, n)
			}
			slices.Sort(names)
			slices.Sort(wantNames)
			if !slices.Equal(names, wantNames) {
				t.Fatalf("LoadTarball gave %q, want %q", names, wantNames)
			}
			for n, saved := range tc.want {
				img, err := s.Image(n)
				if err != nil {
					t.Fatal(err)
				}
				checkImage(t, img)
				gotCfg, _ := img.ConfigName()
				wantCfg, _ := saved.ConfigName()
				if gotCfg != wantCfg {
					t.Errorf("%s: config %s, saved %s", n, gotCfg, wantCfg)
				}
				gotLayers, _ := img.Layers()
				wantLayers, _ := saved.Layers()
				if len(gotLayers) != len(wantLayers) {
					t.Fatalf("%s: %d layers, saved %d", n, len(gotLayers), len(wantLayers))
				}
				for i := range gotLayers {
					gd, _ := gotLayers[i].Digest()
					wd, _ := wantLayers[i].Digest()
					if gd != wd {
						t.Errorf("%s: layer %d is %s, saved %s", n, i, gd, wd)
					}
				}
				if tc.sameManifest && digestOf(t, img) != digestOf(t, saved) {
					t.Errorf("%s: manifest %s, saved %s", n, digestOf(t, img), digestOf(t, saved))
				}
			}
		})
	}
}
