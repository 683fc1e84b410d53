package ui

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/antctl/query"
	"antrea.io/antrea/pkg/config"
)

// Options are antrea-ui's flags.
type Options struct {
	Kubeconfig      string
	Listen          string
	TLSCertFile     string
	TLSKeyFile      string
	SecretNamespace string
	SecretName      string
	SessionTTL      time.Duration
	SecureCookie    bool
	// TokenLogin offers the Kubernetes bearer-token login.
	TokenLogin bool
	// FlowAggregatorURL is the Flow Aggregator's API (empty: its Service).
	FlowAggregatorURL string
}

// DefaultListen is the port of the antrea-ui Service's target.
const DefaultListen = ":8080"

// AddFlags registers the options.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the API server (empty: in-cluster, the antrea-ui service account)")
	fs.StringVar(&o.Listen, "listen", DefaultListen, "Address to serve the UI on")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "Serve HTTPS with this certificate (PEM); empty: HTTP (behind kubectl port-forward or a TLS proxy)")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "Key of --tls-cert-file")
	fs.StringVar(&o.SecretNamespace, "secret-namespace", query.AntreaNamespace, "Namespace of the admin password Secret")
	fs.StringVar(&o.SecretName, "secret-name", DefaultSecretName, "Name of the admin password Secret (created with a random initial password when absent)")
	fs.DurationVar(&o.SessionTTL, "session-ttl", DefaultSessionTTL, "How long a login lasts")
	fs.BoolVar(&o.TokenLogin, "token-login", true, "Offer a login with a Kubernetes bearer token, the session then acting with the token's own rights (kube-apiserver reviews it: TokenReview)")
	fs.StringVar(&o.FlowAggregatorURL, "flow-aggregator-url", "", "The Flow Aggregator's API, e.g. http://127.0.0.1:10348 (empty: the ClusterIP of Service flow-aggregator/flow-aggregator, port api)")
	fs.BoolVar(&o.SecureCookie, "secure-cookie", false, "Mark the session cookie Secure (set it behind a proxy that terminates TLS; implied by --tls-cert-file)")
}

// Validate checks the options.
func (o *Options) Validate() error {
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return fmt.Errorf("--tls-cert-file and --tls-key-file go together")
	}
	if o.SessionTTL < time.Minute {
		return fmt.Errorf("--session-ttl %s: at least 1m", o.SessionTTL)
	}
	return nil
}

// Run serves the UI until ctx ends.
func Run(ctx context.Context, o *Options) error {
	cfg, err := config.KubeRESTConfig(o.Kubeconfig, "", "antrea-ui")
	if err != nil {
		return err
	}
	clients, err := query.NewClients(cfg)
	if err != nil {
		return err
	}
	c := Config{Clients: clients, RESTConfig: cfg, TokenLogin: o.TokenLogin, SecretNamespace: o.SecretNamespace,
		SecretName: o.SecretName, SessionTTL: o.SessionTTL, SecureCookie: o.SecureCookie || o.TLSCertFile != ""}
	if o.FlowAggregatorURL != "" {
		c.FlowGetter = urlFlowGetter(o.FlowAggregatorURL)
	}
	s := New(c)
	if err := s.Start(ctx); err != nil {
		return err
	}
	klog.InfoS("Admin password Secret ready", "secret", o.SecretNamespace+"/"+o.SecretName)
	return s.ListenAndServe(ctx, o.Listen, o.TLSCertFile, o.TLSKeyFile)
}
