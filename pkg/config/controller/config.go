// Package controller is antrea-controller's config file,
// antrea-controller.conf, in upstream Antrea's format: the same keys with the
// same defaults, for the keys this Antrea implements, plus
// kubeAPIServerOverride (upstream's controller has none: it relies on
// kube-proxy for the in-cluster address). Load decodes strictly: an unknown
// key, a value of the wrong type or a bad value is an error naming the file
// and the key. Upstream keys this Antrea does not implement are accepted at
// upstream's default value only (see spec). docs/configuration.md describes
// every key; testdata/antrea-controller.conf is a commented example holding
// the defaults.
package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	cliflag "k8s.io/component-base/cli/flag"

	"antrea.io/antrea/pkg/config"
	"antrea.io/antrea/pkg/config/internal/strict"
)

// FileName is the file's name where the manifest mounts it (/etc/antrea).
const FileName = "antrea-controller.conf"

// Egress is the feature gate of the Egress and ExternalIPPool controllers,
// their admission and the egressgroups API (upstream: beta, on by default).
const Egress = "Egress"

// ServiceExternalIP is the feature gate of the LoadBalancer Service IP
// allocation from ExternalIPPools (upstream: alpha, off by default).
const ServiceExternalIP = "ServiceExternalIP"

// SupportBundleCollection is the feature gate of the SupportBundleCollection
// controller (upstream: alpha, off by default).
const SupportBundleCollection = "SupportBundleCollection"

// L7NetworkPolicy is upstream's gate of layer 7 rules (alpha, off by
// default): without it the controller's admission refuses l7Protocols; the
// agents' gate of the same name starts their layer 7 engine.
const L7NetworkPolicy = "L7NetworkPolicy"

// ControllerConfig is antrea-controller.conf. Field comments give
// upstream's meaning and default; the json tags are upstream's key names.
type ControllerConfig struct {
	// FeatureGates maps feature names to on/off. The controller implements
	// Egress, ServiceExternalIP and SupportBundleCollection; upstream's other gates are checked and
	// dropped.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// ClientConnection says how to reach kube-apiserver.
	ClientConnection config.ClientConnection `json:"clientConnection"`
	// APIPort is the port of the controlplane API server. Default 10349.
	APIPort int `json:"apiPort"`
	// EnablePrometheusMetrics adds Antrea's metrics (pkg/controller/metrics)
	// to /metrics of the API server, which serves its generic ones either
	// way. Default true.
	EnablePrometheusMetrics bool `json:"enablePrometheusMetrics"`
	// SelfSignedCert makes the controller generate its own serving
	// certificate (default true). When false, tls.crt, tls.key and ca.crt
	// are read from the cert dir (/var/run/antrea/antrea-controller-tls, where
	// upstream mounts the Secret antrea-controller-tls).
	SelfSignedCert bool `json:"selfSignedCert"`
	// TLSCipherSuites is a comma-separated list of Go cipher suite names;
	// empty means Go's defaults.
	TLSCipherSuites string `json:"tlsCipherSuites"`
	// TLSMinVersion is VersionTLS10 to VersionTLS13; empty means Go's default.
	TLSMinVersion string `json:"tlsMinVersion"`
	// KubeAPIServerOverride replaces kube-apiserver's address of the
	// kubeconfig or in-cluster config: a host, host:port or URL. Default "".
	// Not an upstream key of the controller (upstream's agent has it).
	KubeAPIServerOverride string `json:"kubeAPIServerOverride"`
	// ServiceExternalIP configures the LoadBalancer Service IPs (with the
	// ServiceExternalIP gate). Not an upstream key.
	ServiceExternalIP ServiceExternalIPConfig `json:"serviceExternalIP"`
}

// ServiceExternalIPConfig is the serviceExternalIP section.
type ServiceExternalIPConfig struct {
	// DefaultExternalIPPool names the ExternalIPPool that gives an IP to a
	// LoadBalancer Service without the service.antrea.io/external-ip-pool
	// annotation and without a loadBalancerClass (antrea-controller writes
	// the annotation on it). Default "": such Services get no IP, as
	// upstream.
	DefaultExternalIPPool string `json:"defaultExternalIPPool"`
}

// Defaults returns upstream's defaults.
func Defaults() *ControllerConfig {
	return &ControllerConfig{
		FeatureGates:            map[string]bool{Egress: true, ServiceExternalIP: false, SupportBundleCollection: false, L7NetworkPolicy: false},
		APIPort:                 10349,
		EnablePrometheusMetrics: true,
		SelfSignedCert:          true,
	}
}

// Load reads the file at path over the defaults, strictly, and validates it.
func Load(path string) (*ControllerConfig, error) {
	c := Defaults()
	if err := strict.Load(path, c, spec, c.validate); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse is Load for data read from file (named in errors).
func Parse(file string, data []byte) (*ControllerConfig, error) {
	c := Defaults()
	if err := strict.Parse(file, data, c, spec, c.validate); err != nil {
		return nil, err
	}
	return c, nil
}

// CipherSuites returns tlsCipherSuites as a list (nil when empty).
func (c *ControllerConfig) CipherSuites() []string {
	if strings.TrimSpace(c.TLSCipherSuites) == "" {
		return nil
	}
	var out []string
	for _, s := range strings.Split(c.TLSCipherSuites, ",") {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// Validate checks every value; each error names its key.
func (c *ControllerConfig) Validate() error {
	return errors.Join(c.validate()...)
}

func (c *ControllerConfig) validate() []error {
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	for _, name := range slices.Sorted(maps.Keys(c.FeatureGates)) {
		if name != Egress && name != ServiceExternalIP && name != SupportBundleCollection && name != L7NetworkPolicy {
			fail("featureGates", "%q is not a feature gate this Antrea implements", name)
		}
	}
	if c.APIPort < 1 || c.APIPort > 65535 {
		fail("apiPort", "%d is not a port (want 1 to 65535)", c.APIPort)
	}
	if suites := c.CipherSuites(); suites != nil {
		if _, err := cliflag.TLSCipherSuites(suites); err != nil {
			fail("tlsCipherSuites", "%v", err)
		}
	}
	if c.TLSMinVersion != "" {
		if _, err := cliflag.TLSVersion(c.TLSMinVersion); err != nil {
			fail("tlsMinVersion", "%v (want VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13)", err)
		}
	}
	if p := c.ServiceExternalIP.DefaultExternalIPPool; p != "" {
		if msgs := validation.IsDNS1123Subdomain(p); len(msgs) > 0 {
			fail("serviceExternalIP.defaultExternalIPPool", "%q is not an ExternalIPPool name: %s", p, strings.Join(msgs, "; "))
		}
	}
	if _, err := config.ParseAPIServerOverride(c.KubeAPIServerOverride); err != nil {
		fail("kubeAPIServerOverride", "%v", err)
	}
	return errs
}
