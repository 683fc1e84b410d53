package images

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// defaultHostsNamespace is containerd's fallback hosts directory, used for
// every registry host without a directory of its own.
const defaultHostsNamespace = "_default"

// MirroredHosts are the registry hosts a lab node's containerd sends to the
// lab registry: where the images of Kubernetes' e2e tests, Antrea and the
// usual third-party test images come from. WriteHostsDir covers every other
// host through _default as well.
func MirroredHosts() []string {
	return []string{"docker.io", "registry.k8s.io", "quay.io", "ghcr.io"}
}

// HostsTOML returns containerd's hosts.toml for registryHost (a directory
// name of config_path: a host[:port], or _default) sending pulls and tag
// resolution to mirror, a host:port served over plain HTTP (or a URL).
// containerd 2.x reads it when the CRI images plugin's registry.config_path
// points at the directory holding <registryHost>/hosts.toml; the format is
// https://github.com/containerd/containerd/blob/main/docs/hosts.md.
// The mirror is asked for /v2/<path>/manifests/<tag>?ns=<registryHost>,
// which is what NewRegistry serves.
func HostsTOML(registryHost, mirror string) string {
	if !strings.Contains(mirror, "://") {
		mirror = "http://" + mirror
	}
	var b strings.Builder
	switch registryHost {
	case defaultHostsNamespace:
		// No server: containerd falls back to the image's own host.
	case dockerHub:
		// Docker Hub's API is not served at docker.io itself.
		fmt.Fprintf(&b, "server = %q\n\n", "https://registry-1.docker.io")
	default:
		fmt.Fprintf(&b, "server = %q\n\n", "https://"+registryHost)
	}
	fmt.Fprintf(&b, "[host.%q]\n", mirror)
	b.WriteString("  capabilities = [\"pull\", \"resolve\"]\n")
	return b.String()
}

// WriteHostsDir writes <dir>/<host>/hosts.toml for every MirroredHosts host
// and for _default, all pointing at mirror; dir is then containerd's
// registry config_path.
func WriteHostsDir(dir, mirror string) error {
	for _, h := range append(MirroredHosts(), defaultHostsNamespace) {
		d := filepath.Join(dir, h)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(HostsTOML(h, mirror)), 0o644); err != nil {
			return err
		}
	}
	return nil
}
