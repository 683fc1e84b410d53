package images

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHostsTOML(t *testing.T) {
	tests := []struct {
		name, host, mirror, want string
	}{
		{
			name: "a registry host falls back to itself after the mirror",
			host: "registry.k8s.io", mirror: "10.10.0.1:5000",
			want: "server = \"https://registry.k8s.io\"\n\n[host.\"http://10.10.0.1:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
		},
		{
			name: "docker.io falls back to Docker Hub's API host",
			host: "docker.io", mirror: "10.10.0.1:5000",
			want: "server = \"https://registry-1.docker.io\"\n\n[host.\"http://10.10.0.1:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
		},
		{
			name: "_default names no server and a mirror URL is kept",
			host: "_default", mirror: "https://mirror.example:443",
			want: "[host.\"https://mirror.example:443\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := HostsTOML(tc.host, tc.mirror); got != tc.want {
				t.Errorf("HostsTOML(%q, %q) =\n%s\nwant\n%s", tc.host, tc.mirror, got, tc.want)
			}
		})
	}
}

func TestWriteHostsDir(t *testing.T) {
	dir := t.TempDir()
	if err := WriteHostsDir(dir, "10.10.0.1:5000"); err != nil {
		t.Fatal(err)
	}
	for _, h := range append(MirroredHosts(), "_default") {
		b, err := os.ReadFile(filepath.Join(dir, h, "hosts.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != HostsTOML(h, "10.10.0.1:5000") {
			t.Errorf("%s/hosts.toml holds\n%s", h, b)
		}
	}
}
