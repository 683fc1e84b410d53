// Package apiserver is the controller's aggregated API server: it serves
// controlplane.antrea.io/v1beta2 (addressgroups, appliedtogroups,
// networkpolicies and networkpolicies/status, and egressgroups from the
// in-memory stores, and
// nodestatssummaries, the agents' policy stats reports) and
// stats.antrea.io/v1alpha1 (the summed policy stats, the Nodes' latencies
// and the multicast groups the Pods joined), over
// TLS, with authentication and authorization delegated to kube-apiserver.
package apiserver

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	"antrea.io/antrea/pkg/apiserver/openapi"
	"antrea.io/antrea/pkg/apiserver/registry"
	"antrea.io/antrea/pkg/apiserver/storage"
	"antrea.io/antrea/pkg/controller/stats"
)

// ServiceDNSName is the name agents and the APIService reach the controller
// by; the serving certificate always carries it.
const ServiceDNSName = controlplane.ControllerServerName

// NewScheme returns a scheme holding the internal and v1beta2 controlplane
// types, the stats.antrea.io types (their own internal version) and the meta
// types every API server serves.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{controlplane.AddToScheme, v1beta2.AddToScheme,
		statsv1alpha1.AddToScheme, statsv1alpha1.AddToSchemeAsInternal} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the controlplane scheme: %w", err)
		}
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	return scheme, nil
}

// Options are the server's flags: secure serving and delegated authn/authz.
type Options struct {
	SecureServing  *genericoptions.SecureServingOptionsWithLoopback
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
}

// NewOptions returns the defaults: port 10349 on all addresses, a
// self-signed certificate in the cert dir if none is given, anonymous
// requests authenticated as system:anonymous and then refused by the
// delegated authorizer (only health checks are always allowed).
func NewOptions() *Options {
	o := &Options{
		SecureServing:  genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:  genericoptions.NewDelegatingAuthorizationOptions(),
	}
	o.SecureServing.BindPort = 10349
	o.SecureServing.ServerCert.CertDirectory = "/var/run/antrea/antrea-controller-tls"
	o.SecureServing.ServerCert.PairName = "antrea-controller"
	// kube-apiserver calls the admission webhooks without credentials (an
	// admission webhook authenticates the server by the caBundle, not the
	// other way round), so they answer anyone, as upstream's do.
	o.Authorization.AlwaysAllowPaths = append(o.Authorization.AlwaysAllowPaths, "/validate/*", "/mutate/*")
	return o
}

// Stores are the stores the server reads and the computation writes.
type Stores struct {
	AddressGroups   storage.Interface
	AppliedToGroups storage.Interface
	NetworkPolicies storage.Interface
	// Statuses receives agents' realization reports.
	Statuses *registry.StatusStore
	// Stats sums agents' policy stats reports (nil: stats.antrea.io and
	// nodestatssummaries are not served, the NetworkPolicyStats gate off).
	Stats *stats.Aggregator
	// NodeLatency keeps the agents' NodeLatencyStats (nil: not served).
	NodeLatency *registry.NodeLatencyStore
	// EgressGroups are the Pods of each Egress (nil: egressgroups is not
	// served, the Egress gate off).
	EgressGroups storage.Interface
}

// NewStores returns empty stores.
func NewStores() *Stores {
	s := &Stores{
		AddressGroups:   storage.NewAddressGroupStore(),
		AppliedToGroups: storage.NewAppliedToGroupStore(),
		NetworkPolicies: storage.NewNetworkPolicyStore(),
		Stats:           stats.NewAggregator(),
		NodeLatency:     registry.NewNodeLatencyStore(),
		EgressGroups:    storage.NewEgressGroupStore(),
	}
	s.Statuses = registry.NewStatusStore(s.NetworkPolicies)
	return s
}

// Server is a ready-to-run controlplane API server.
type Server struct {
	generic  *genericapiserver.GenericAPIServer
	certFile string
}

// New builds the server. kubeconfig is used for delegated authn/authz when
// the options name no other; informers are the controller's Kubernetes
// informers (may be nil).
func New(o *Options, kubeconfig string, stores *Stores, kubeInformers informers.SharedInformerFactory) (*Server, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)

	names, ips := []string{ServiceDNSName, "antrea.kube-system", "antrea", "localhost"}, []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	if err := writeSelfSignedECDSA(o.SecureServing, ServiceDNSName, names, ips); err != nil {
		return nil, fmt.Errorf("creating a self-signed serving certificate: %w", err)
	}
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts(ServiceDNSName, names, ips); err != nil {
		return nil, fmt.Errorf("creating a self-signed serving certificate: %w", err)
	}
	if o.Authentication.RemoteKubeConfigFile == "" {
		o.Authentication.RemoteKubeConfigFile = kubeconfig
	}
	if o.Authorization.RemoteKubeConfigFile == "" {
		o.Authorization.RemoteKubeConfigFile = kubeconfig
	}

	cfg := genericapiserver.NewRecommendedConfig(codecs)
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	cfg.SharedInformerFactory = kubeInformers
	// OpenAPI models are required to install a group (server-side apply type
	// information) and let kubectl explain the types.
	namer := openapinamer.NewDefinitionNamer(scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title = "Antrea controlplane"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title = "Antrea controlplane"
	if err := o.SecureServing.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("configuring secure serving: %w", err)
	}
	if err := o.Authentication.ApplyTo(&cfg.Authentication, cfg.SecureServing, cfg.OpenAPIConfig); err != nil {
		return nil, fmt.Errorf("configuring delegated authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("configuring delegated authorization: %w", err)
	}
	if cfg.Authorization.Authorizer != nil {
		cfg.Authorization.Authorizer = newWithoutSelectors(cfg.Authorization.Authorizer)
	}

	generic, err := cfg.Complete().New("antrea-controller", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("creating the generic API server: %w", err)
	}
	// On shutdown the HTTP server waits for open connections to end, up to
	// ShutdownTimeout (by default the 60-s request timeout). Every agent holds
	// its policy watches open, so antrea-controller outlived the kubelet's
	// 30-s grace period and was killed. The agents re-list from the next
	// controller anyway: give them a moment, not a minute.
	generic.ShutdownTimeout = shutdownTimeout
	group := genericapiserver.NewDefaultAPIGroupInfo(controlplane.GroupName, scheme, runtime.NewParameterCodec(scheme), codecs)
	group.VersionedResourcesStorageMap[v1beta2.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"addressgroups":          registry.NewAddressGroupREST(stores.AddressGroups),
		"appliedtogroups":        registry.NewAppliedToGroupREST(stores.AppliedToGroups),
		"networkpolicies":        registry.NewNetworkPolicyREST(stores.NetworkPolicies, stores.Statuses),
		"networkpolicies/status": registry.NewStatusREST(stores.Statuses),
	}
	if stores.EgressGroups != nil {
		group.VersionedResourcesStorageMap[v1beta2.SchemeGroupVersion.Version]["egressgroups"] = registry.NewEgressGroupREST(stores.EgressGroups)
	}
	if stores.Stats != nil {
		group.VersionedResourcesStorageMap[v1beta2.SchemeGroupVersion.Version]["nodestatssummaries"] = registry.NewNodeStatsSummaryREST(stores.Stats)
	}
	if err := generic.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("installing %s: %w", controlplane.GroupName, err)
	}
	if stores.Stats != nil || stores.NodeLatency != nil {
		sg := genericapiserver.NewDefaultAPIGroupInfo(statsv1alpha1.GroupName, scheme, runtime.NewParameterCodec(scheme), codecs)
		m := map[string]rest.Storage{}
		if stores.Stats != nil {
			m["networkpolicystats"] = registry.NewNetworkPolicyStatsREST(stores.Stats)
			m["antreanetworkpolicystats"] = registry.NewAntreaNetworkPolicyStatsREST(stores.Stats)
			m["antreaclusternetworkpolicystats"] = registry.NewAntreaClusterNetworkPolicyStatsREST(stores.Stats)
			m["multicastgroups"] = registry.NewMulticastGroupREST(stores.Stats)
		}
		if stores.NodeLatency != nil {
			m["nodelatencystats"] = stores.NodeLatency
		}
		sg.VersionedResourcesStorageMap[statsv1alpha1.SchemeGroupVersion.Version] = m
		if err := generic.InstallAPIGroup(&sg); err != nil {
			return nil, fmt.Errorf("installing %s: %w", statsv1alpha1.GroupName, err)
		}
	}
	return &Server{generic: generic, certFile: o.SecureServing.ServerCert.CertKey.CertFile}, nil
}

// shutdownTimeout bounds how long Run waits for open requests (watches) when
// its context ends.
const shutdownTimeout = 2 * time.Second

// Handle serves h at path, outside the API groups (the admission webhooks).
// Call it before Run.
func (s *Server) Handle(path string, h http.Handler) {
	s.generic.Handler.NonGoRestfulMux.Handle(path, h)
}

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	klog.InfoS("Starting the controlplane API server")
	prepared := s.generic.PrepareRun()
	if err := prepared.RunWithContext(ctx); err != nil {
		return fmt.Errorf("running the controlplane API server: %w", err)
	}
	return nil
}

// CABundle returns the PEM certificate that verifies the serving
// certificate: the last certificate of the chain in the cert file, which for
// a self-signed pair is its CA. The APIService's caBundle is set to it.
func (s *Server) CABundle() ([]byte, error) {
	data, err := os.ReadFile(s.certFile)
	if err != nil {
		return nil, fmt.Errorf("reading serving certificate %s: %w", s.certFile, err)
	}
	var last *pem.Block
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			last = b
		}
	}
	if last == nil {
		return nil, fmt.Errorf("no certificate in %s", s.certFile)
	}
	return pem.EncodeToMemory(last), nil
}
