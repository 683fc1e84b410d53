package images

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// dockerHub is how the store and containerd (its hosts directory and the ns
// query parameter) name Docker Hub; go-containerregistry says index.docker.io.
const dockerHub = "docker.io"

// canonicalName returns the full form of an image name given to the store:
// registry host, repository and tag ("busybox" becomes
// docker.io/library/busybox:latest). Digest references are refused: a store
// name is a tag.
func canonicalName(s string) (string, error) {
	t, err := name.NewTag(s)
	if err != nil {
		return "", fmt.Errorf("image name %q: %w", s, err)
	}
	host := t.RegistryStr()
	if host == name.DefaultRegistry {
		host = dockerHub
	}
	return host + "/" + t.RepositoryStr() + ":" + t.TagStr(), nil
}

// normalizeHost maps the several names of Docker Hub to docker.io.
func normalizeHost(h string) string {
	switch h {
	case name.DefaultRegistry, "registry-1.docker.io":
		return dockerHub
	}
	return h
}

// splitName splits a store name into registry host ("" if the name has
// none, as for an image pushed to the lab registry as repo:tag), repository
// path and tag. It follows the Docker rule: the first component is a host if
// it has a dot or a colon or is localhost.
func splitName(s string) (host, repo, tag string) {
	repo, tag = s, "latest"
	if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		repo, tag = s[:i], s[i+1:]
	}
	if first, rest, ok := strings.Cut(repo, "/"); ok && isHost(first) {
		return normalizeHost(first), rest, tag
	}
	return "", repo, tag
}

func isHost(component string) bool {
	return strings.ContainsAny(component, ".:") || component == "localhost"
}

// repositories returns the repositories of the lab registry a store name is
// served under: its path without the host (what a containerd mirror asks
// for) and, for a name with a host, host/path too.
func repositories(storeName string) (repos []string, tag string) {
	host, repo, tag := splitName(storeName)
	if host == "" {
		return []string{repo}, tag
	}
	return []string{repo, host + "/" + repo}, tag
}
