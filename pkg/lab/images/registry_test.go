package images

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// nsTransport adds containerd's ns query parameter to every request, as
// containerd does when it pulls through a mirror.
type nsTransport struct{ ns string }

func (n nsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	q := req.URL.Query()
	q.Set("ns", n.ns)
	req.URL.RawQuery = q.Encode()
	return http.DefaultTransport.RoundTrip(req)
}

// serve starts a registry over store and returns its host:port.
func serve(t *testing.T, s *Store) string {
	t.Helper()
	h, err := NewRegistry(s)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func pull(t *testing.T, ref string, opts ...remote.Option) (v1.Image, error) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	return remote.Image(r, opts...)
}

func digestOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRegistryServesStore(t *testing.T) {
	s, _ := newTestStore(t, t.TempDir())
	agnhost, k8sPause, quayPause := smallImage(t, "agnhost"), smallImage(t, "k8s pause"), smallImage(t, "quay pause")
	for names, img := range map[string]v1.Image{
		"registry.k8s.io/e2e-test-images/agnhost:2.66.1": agnhost,
		"registry.k8s.io/pause:3.10.2":                   k8sPause,
		"quay.io/pause:3.10.2":                           quayPause,
	} {
		if err := s.Put([]string{names}, img); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	host := serve(t, s)
	t.Logf("registry started in %v", time.Since(start))

	tests := []struct {
		name string
		ref  string
		ns   string
		want v1.Image
		// wantCode is the registry error code expected instead of an image.
		wantCode transport.ErrorCode
	}{
		{name: "a mirror path without host serves the image", ref: "e2e-test-images/agnhost:2.66.1", want: agnhost},
		{name: "the path with its host serves it too", ref: "registry.k8s.io/e2e-test-images/agnhost:2.66.1", want: agnhost},
		{name: "ns picks registry.k8s.io's of two images with one path", ref: "pause:3.10.2", ns: "registry.k8s.io", want: k8sPause},
		{name: "ns picks quay.io's of them", ref: "pause:3.10.2", ns: "quay.io", want: quayPause},
		{name: "without ns the first host in name order owns the path", ref: "pause:3.10.2", want: quayPause},
		{name: "an unknown ns falls back to the path", ref: "e2e-test-images/agnhost:2.66.1", ns: "ghcr.io", want: agnhost},
		{name: "an unknown tag is MANIFEST_UNKNOWN", ref: "e2e-test-images/agnhost:0.0", wantCode: transport.ManifestUnknownErrorCode},
		{name: "an unknown repository is NAME_UNKNOWN", ref: "no/such:1", wantCode: transport.NameUnknownErrorCode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opts []remote.Option
			if tc.ns != "" {
				opts = append(opts, remote.WithTransport(nsTransport{tc.ns}))
			}
			img, err := pull(t, host+"/"+tc.ref, opts...)
			if tc.wantCode != "" {
				var terr *transport.Error
				if !errors.As(err, &terr) || terr.StatusCode != http.StatusNotFound || len(terr.Errors) == 0 || terr.Errors[0].Code != tc.wantCode {
					t.Fatalf("pull gave %v, want 404 %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := digestOf(t, img), digestOf(t, tc.want); got != want {
				t.Errorf("pulled %s, want %s", got, want)
			}
			checkImage(t, img)
		})
	}
}

func TestRegistryPush(t *testing.T) {
	dir := t.TempDir()
	s, _ := newTestStore(t, dir)
	host := serve(t, s)

	tests := []struct {
		name      string
		push      string
		pull      []string
		storeName string
	}{
		{name: "a push without host is stored as pushed", push: "pushed/app:v1", pull: []string{"pushed/app:v1"}, storeName: "pushed/app:v1"},
		{
			name: "a push with a host is served with and without it", push: "registry.k8s.io/kind/loaded:v2",
			pull: []string{"kind/loaded:v2", "registry.k8s.io/kind/loaded:v2"}, storeName: "registry.k8s.io/kind/loaded:v2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img := smallImage(t, tc.push)
			ref, err := name.ParseReference(host + "/" + tc.push)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Write(ref, img); err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.pull {
				got, err := pull(t, host+"/"+p)
				if err != nil {
					t.Fatal(err)
				}
				if digestOf(t, got) != digestOf(t, img) {
					t.Errorf("%s: pulled %s, pushed %s", p, digestOf(t, got), digestOf(t, img))
				}
			}
			imgs, err := s.Images()
			if err != nil {
				t.Fatal(err)
			}
			if imgs[tc.storeName] != digestOf(t, img) {
				t.Errorf("store holds %v, want %s=%s", imgs, tc.storeName, digestOf(t, img))
			}

			// A new registry over the same directory serves the push too.
			s2, _ := newTestStore(t, dir)
			got, err := pull(t, serve(t, s2)+"/"+tc.pull[0])
			if err != nil {
				t.Fatalf("a restarted registry does not serve the push: %v", err)
			}
			checkImage(t, got)
		})
	}

	t.Run("an image put into the store after start is served", func(t *testing.T) {
		img := smallImage(t, "late")
		if err := s.Put([]string{"ghcr.io/late/image:1"}, img); err != nil {
			t.Fatal(err)
		}
		got, err := pull(t, host+"/late/image:1")
		if err != nil {
			t.Fatal(err)
		}
		if digestOf(t, got) != digestOf(t, img) {
			t.Errorf("pulled %s, put %s", digestOf(t, got), digestOf(t, img))
		}
	})

	t.Run("a deleted tag is gone from registry and store", func(t *testing.T) {
		ref, err := name.ParseReference(host + "/kind/loaded:v2")
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Delete(ref); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"kind/loaded:v2", "registry.k8s.io/kind/loaded:v2"} {
			var terr *transport.Error
			if _, err := pull(t, host+"/"+p); !errors.As(err, &terr) || terr.StatusCode != http.StatusNotFound {
				t.Errorf("%s after delete: %v, want 404", p, err)
			}
		}
		imgs, err := s.Images()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := imgs["registry.k8s.io/kind/loaded:v2"]; ok {
			t.Errorf("store still holds the deleted name: %v", imgs)
		}
	})
}
