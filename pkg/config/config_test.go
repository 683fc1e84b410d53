package config

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseAPIServerOverride(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{name: "empty means no override", in: "", want: ""},
		{name: "a URL is kept", in: "https://10.0.0.1:6443", want: "https://10.0.0.1:6443"},
		{name: "host:port means https", in: "10.0.0.1:6443", want: "https://10.0.0.1:6443"},
		{name: "a bare host means https", in: "api.example", want: "https://api.example"},
		{name: "an IPv6 host:port is accepted", in: "[fd00::1]:6443", want: "https://[fd00::1]:6443"},
		{name: "a path prefix is kept", in: "https://lb/k8s", want: "https://lb/k8s"},
		{name: "another scheme is refused", in: "tcp://x:1", err: `scheme "tcp" is not supported`},
		{name: "no host is refused", in: "https://:6443", err: "has no host"},
		{name: "a bad port is refused", in: "x:99999", err: "bad port"},
		{name: "a query is refused", in: "https://x/?a=b", err: "want scheme://host[:port][/path] only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ParseAPIServerOverride(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if u != nil {
				got = u.String()
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://original:6443
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: secret-token
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

func TestKubeRESTConfigOverrideReplacesOnlyTheHost(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := KubeRESTConfig(kc, "", "test")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://original:6443" || cfg.UserAgent != "test" {
		t.Errorf("without override: host %q, user agent %q", cfg.Host, cfg.UserAgent)
	}
	cfg, err = KubeRESTConfig(kc, "10.1.2.3:6443", "test")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://10.1.2.3:6443" {
		t.Errorf("with override: host %q, want https://10.1.2.3:6443", cfg.Host)
	}
	if cfg.BearerToken != "secret-token" {
		t.Errorf("with override: the credentials were lost (token %q)", cfg.BearerToken)
	}
	if _, err := KubeRESTConfig(kc, "ftp://x", "test"); err == nil || !strings.Contains(err.Error(), "kubeAPIServerOverride") {
		t.Errorf("a bad override: got %v, want an error naming kubeAPIServerOverride", err)
	}
}

func TestHostOverrideSendsRequestsToTheOverride(t *testing.T) {
	var gotPath, gotHost string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotHost = r.URL.Path, r.Host
	}))
	defer srv.Close()
	wrap, err := HostOverride(srv.URL + "/prefix")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: wrap(http.DefaultTransport)}
	resp, err := client.Get("http://10.96.0.1:443/api/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if gotPath != "/prefix/api/v1/nodes" || gotHost != strings.TrimPrefix(srv.URL, "http://") {
		t.Errorf("request reached path %q host %q", gotPath, gotHost)
	}
	if wrap, err := HostOverride(""); wrap != nil || err != nil {
		t.Errorf("an empty override gave a wrapper (%v)", err)
	}
}
