// Package config holds what antrea-agent's and antrea-controller's config
// files (pkg/config/agent, pkg/config/controller) share: the
// clientConnection section and the kubeAPIServerOverride key, and the
// Kubernetes client configuration they produce. The files follow upstream
// Antrea's format; docs/configuration.md lists every key.
package config

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
)

// ClientConnection is upstream's clientConnection section (the part of
// k8s.io/component-base's ClientConnectionConfiguration we implement).
type ClientConnection struct {
	// Kubeconfig is the file to reach kube-apiserver with; empty means the
	// in-cluster config (the Pod's ServiceAccount token and CA).
	Kubeconfig string `json:"kubeconfig"`
}

// ParseAPIServerOverride turns a kubeAPIServerOverride value into a URL.
// Upstream accepts a host, a host:port pair or a URL; a value without a
// scheme means https, as client-go reads it. "" returns nil.
func ParseAPIServerOverride(s string) (*url.URL, error) {
	if s == "" {
		return nil, nil
	}
	raw := s
	if !strings.Contains(s, "://") {
		raw = "https://" + s
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q is not a host, host:port or URL: %w", s, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("%q: scheme %q is not supported (want https or http)", s, u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%q has no host", s)
	}
	if p := u.Port(); p != "" {
		if _, err := net.LookupPort("tcp", p); err != nil {
			return nil, fmt.Errorf("%q: bad port %q", s, p)
		}
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: want scheme://host[:port][/path] only", s)
	}
	return u, nil
}

// KubeRESTConfig returns the client configuration for kube-apiserver: from
// kubeconfig, or in-cluster when it is empty. A non-empty override
// (kubeAPIServerOverride) replaces the server address and keeps the
// credentials and CA, as upstream does: it lets Antrea reach kube-apiserver
// where the kubernetes Service's ClusterIP does not work yet (no kube-proxy).
func KubeRESTConfig(kubeconfig, override, userAgent string) (*rest.Config, error) {
	u, err := ParseAPIServerOverride(override)
	if err != nil {
		return nil, fmt.Errorf("kubeAPIServerOverride: %w", err)
	}
	var cfg *rest.Config
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		if kubeconfig == "" {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	if u != nil {
		cfg.Host = u.String()
	}
	cfg.UserAgent = userAgent
	return cfg, nil
}

// HostOverride returns a transport wrapper that sends every request to the
// kubeAPIServerOverride address instead of the one it was built for, for
// clients whose configuration is built out of our reach (the delegated
// authentication and authorization of k8s.io/apiserver, which read the
// in-cluster config themselves). It returns nil when override is "".
func HostOverride(override string) (transport.WrapperFunc, error) {
	u, err := ParseAPIServerOverride(override)
	if err != nil || u == nil {
		return nil, err
	}
	return func(rt http.RoundTripper) http.RoundTripper {
		return &hostRewriter{next: rt, to: u}
	}, nil
}

type hostRewriter struct {
	next http.RoundTripper
	to   *url.URL
}

func (h *hostRewriter) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme = h.to.Scheme
	r.URL.Host = h.to.Host
	if p := strings.TrimSuffix(h.to.Path, "/"); p != "" && !strings.HasPrefix(r.URL.Path, p+"/") {
		r.URL.Path = p + r.URL.Path
	}
	r.Host = "" // the Host header follows the URL
	return h.next.RoundTrip(r)
}
