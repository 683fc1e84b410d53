package app

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"antrea.io/antrea/pkg/apiserver"
	"antrea.io/antrea/pkg/config"
	controllerconfig "antrea.io/antrea/pkg/config/controller"
)

// Options are antrea-controller's settings: the config file (--config,
// upstream's antrea-controller.conf, pkg/config/controller) with the flags
// given on the command line on top.
type Options struct {
	// ConfigFile is the antrea-controller.conf to read; "" means the defaults.
	ConfigFile string
	// Kubeconfig is the file to reach kube-apiserver; empty means in-cluster.
	Kubeconfig string
	// KubeAPIServerOverride replaces kube-apiserver's address (host,
	// host:port or URL) for every client, the delegated authentication and
	// authorization included; "" keeps the kubeconfig's or in-cluster one.
	KubeAPIServerOverride string
	// Workers is the number of computation workers.
	Workers int
	// SyncAPIServiceCA makes the controller write its serving CA into the
	// APIService's caBundle, so kube-apiserver can verify it.
	SyncAPIServiceCA bool
	// SelfSignedCert generates the serving certificate when none is given.
	// When false, the certificate, key and CA are tls.crt, tls.key and ca.crt
	// of the cert dir (upstream's Secret antrea-controller-tls mounted there).
	SelfSignedCert bool
	// APIServer holds the serving and delegated authn/authz options.
	APIServer *apiserver.Options
	// EnablePrometheusMetrics (enablePrometheusMetrics) adds Antrea's
	// metrics (pkg/controller/metrics) to the server's /metrics.
	EnablePrometheusMetrics bool
	// EnableEgress (featureGates.Egress) runs the Egress and ExternalIPPool
	// controllers and serves egressgroups.
	EnableEgress bool
	// EnableServiceExternalIP (featureGates.ServiceExternalIP) runs the
	// ExternalIPPool controller and the allocation of LoadBalancer Service
	// IPs from the pools.
	EnableServiceExternalIP bool
	// DefaultExternalIPPool (serviceExternalIP.defaultExternalIPPool) is
	// the pool of LoadBalancer Services without the pool annotation.
	DefaultExternalIPPool string
	// EnableSupportBundleCollection (featureGates.SupportBundleCollection)
	// runs the SupportBundleCollection controller.
	EnableSupportBundleCollection bool
	// EnableL7NetworkPolicy (featureGates.L7NetworkPolicy) lets admission
	// accept rules with l7Protocols.
	EnableL7NetworkPolicy bool

	// caFile is the CA of a provided certificate (SelfSignedCert false).
	caFile string
}

// NewOptions returns the defaults (those of the default config file).
func NewOptions() *Options {
	o := &Options{Workers: 4, SyncAPIServiceCA: true, APIServer: apiserver.NewOptions()}
	o.applyConfig(controllerconfig.Defaults(), nil)
	return o
}

// AddFlags registers the flags: --config, --kubeconfig, --workers,
// --sync-apiservice-ca and the API server's (--bind-address, --secure-port,
// --cert-dir, --tls-cert-file, --authentication-kubeconfig, ...).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "The controller's config file (antrea-controller.conf); flags given explicitly override its keys")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig to reach kube-apiserver; empty for in-cluster config [clientConnection.kubeconfig]")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Number of NetworkPolicy computation workers")
	fs.BoolVar(&o.SyncAPIServiceCA, "sync-apiservice-ca", o.SyncAPIServiceCA, "Write the serving CA into the caBundle of APIService "+APIServiceName)
	o.APIServer.SecureServing.AddFlags(fs)
	o.APIServer.Authentication.AddFlags(fs)
	o.APIServer.Authorization.AddFlags(fs)
}

// Complete reads the config file, if one was given, and applies its keys
// except where a flag of fs was given explicitly: the flag wins.
func (o *Options) Complete(fs *pflag.FlagSet) error {
	if o.ConfigFile == "" {
		return nil
	}
	cfg, err := controllerconfig.Load(o.ConfigFile)
	if err != nil {
		return err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { explicit[f.Name] = true })
	o.applyConfig(cfg, explicit)
	return nil
}

// applyConfig sets every option the file holds, except those whose flag
// (named next to each) is in explicit.
func (o *Options) applyConfig(c *controllerconfig.ControllerConfig, explicit map[string]bool) {
	set := func(flag string, apply func()) {
		if flag == "" || !explicit[flag] {
			apply()
		}
	}
	serving := o.APIServer.SecureServing
	set("kubeconfig", func() { o.Kubeconfig = c.ClientConnection.Kubeconfig })
	set("", func() { o.KubeAPIServerOverride = c.KubeAPIServerOverride })
	set("secure-port", func() { serving.BindPort = c.APIPort })
	set("", func() { o.SelfSignedCert = c.SelfSignedCert })
	set("", func() { o.EnablePrometheusMetrics = c.EnablePrometheusMetrics })
	set("", func() { o.EnableEgress = c.FeatureGates[controllerconfig.Egress] })
	set("", func() { o.EnableServiceExternalIP = c.FeatureGates[controllerconfig.ServiceExternalIP] })
	set("", func() { o.DefaultExternalIPPool = c.ServiceExternalIP.DefaultExternalIPPool })
	set("", func() { o.EnableSupportBundleCollection = c.FeatureGates[controllerconfig.SupportBundleCollection] })
	set("", func() { o.EnableL7NetworkPolicy = c.FeatureGates[controllerconfig.L7NetworkPolicy] })
	set("tls-cipher-suites", func() { serving.CipherSuites = c.CipherSuites() })
	set("tls-min-version", func() { serving.MinTLSVersion = c.TLSMinVersion })
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.APIServer.SecureServing.Validate()...)
	errs = append(errs, o.APIServer.Authentication.Validate()...)
	errs = append(errs, o.APIServer.Authorization.Validate()...)
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	if _, err := config.ParseAPIServerOverride(o.KubeAPIServerOverride); err != nil {
		errs = append(errs, fmt.Errorf("kubeAPIServerOverride: %w", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid options: %v", errs)
	}
	return nil
}

// completeServing points the server at a provided certificate when
// SelfSignedCert is off (unless --tls-cert-file names one: the APIService
// then gets the last certificate of its chain), and sends the
// delegated authentication and authorization to kubeAPIServerOverride.
func (o *Options) completeServing() error {
	serving := o.APIServer.SecureServing
	if !o.SelfSignedCert && serving.ServerCert.CertKey.CertFile == "" {
		dir := serving.ServerCert.CertDirectory
		serving.ServerCert.CertKey.CertFile = filepath.Join(dir, "tls.crt")
		serving.ServerCert.CertKey.KeyFile = filepath.Join(dir, "tls.key")
		o.caFile = filepath.Join(dir, "ca.crt")
	}
	wrap, err := config.HostOverride(o.KubeAPIServerOverride)
	if err != nil {
		return fmt.Errorf("kubeAPIServerOverride: %w", err)
	}
	if wrap != nil {
		o.APIServer.Authentication.WithCustomRoundTripper(wrap)
		o.APIServer.Authorization.WithCustomRoundTripper(wrap)
	}
	return nil
}

// caBundle is the CA written into the APIService: ca.crt of a provided
// certificate, or the CA of the self-signed one.
func (o *Options) caBundle(server *apiserver.Server) ([]byte, error) {
	if o.caFile == "" {
		return server.CABundle()
	}
	ca, err := os.ReadFile(o.caFile)
	if err != nil {
		return nil, fmt.Errorf("selfSignedCert is false: reading the CA: %w", err)
	}
	return ca, nil
}
