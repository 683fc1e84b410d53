// Package apiserver is antrea-agent's own API: HTTPS on apiPort (10350 by
// default), the node-local state antctl shows from a laptop (pod interfaces,
// OpenFlow flows, feature gates, the agent's info) and the agent's
// Prometheus metrics. It is a k8s.io/apiserver generic server without API
// groups, as upstream's agent API: every request is authenticated by
// kube-apiserver (a bearer token through TokenReview, or a client
// certificate of the cluster's client CA) and authorized by it (a
// SubjectAccessReview of the non-resource URL and verb), so the RBAC of
// build/charts/antrea (ClusterRole antctl, nonResourceURLs) says who may
// read what. Requests without credentials are system:anonymous and refused
// with 403, except the health checks (/healthz, /livez, /readyz); a token
// kube-apiserver does not accept is refused with 401.
//
// Endpoints (GET, JSON unless noted):
//
//	/podinterfaces[?namespace=NS[&name=POD]]   pod interfaces of the node (apis.PodInterface)
//	/ovsflows[?table=N]                        flows of br-int with counters (apis.Flow)
//	/featuregates                              the agent's feature gates (apis.FeatureGate)
//	/agentinfo                                 the agent's AntreaAgentInfo
//	/metrics                                   Prometheus text format
//	/healthz, /livez, /readyz                  health checks, anyone
//	/debug/pprof/                              Go profiles
//
// Other features register more paths with Server.Handle before Run.
package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/transport"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/apiserver/apis"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// DefaultPort is the agent API's port (agent conf apiPort).
const DefaultPort = 10350

// Options are the server's listener, certificate and delegated authn/authz.
type Options struct {
	SecureServing  *genericoptions.SecureServingOptionsWithLoopback
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions
}

// NewOptions returns the defaults: port on all addresses, a self-signed
// certificate generated in memory at start (no cert file given), anonymous
// requests refused by the authorizer except the health checks.
func NewOptions(port int) *Options {
	o := &Options{
		SecureServing:  genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication: genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:  genericoptions.NewDelegatingAuthorizationOptions(),
	}
	o.SecureServing.BindPort = port
	o.SecureServing.ServerCert.CertDirectory = ""
	o.SecureServing.ServerCert.PairName = "antrea-agent"
	return o
}

// WithKubeAPIServer sends the delegated authentication and authorization
// reviews through kubeconfig ("" for in-cluster) with wrap (the
// kubeAPIServerOverride rewriter; may be nil).
func (o *Options) WithKubeAPIServer(kubeconfig string, wrap transport.WrapperFunc) {
	if o.Authentication.RemoteKubeConfigFile == "" {
		o.Authentication.RemoteKubeConfigFile = kubeconfig
	}
	if o.Authorization.RemoteKubeConfigFile == "" {
		o.Authorization.RemoteKubeConfigFile = kubeconfig
	}
	if wrap != nil {
		o.Authentication.WithCustomRoundTripper(wrap)
		o.Authorization.WithCustomRoundTripper(wrap)
	}
}

// Querier is the agent state the endpoints read.
type Querier struct {
	// NodeName names the node in the serving certificate and errors.
	NodeName string
	// NodeIP, if set, is put in the self-signed certificate.
	NodeIP net.IP
	// Interfaces is the agent's interface store.
	Interfaces interfacestore.InterfaceStore
	// DumpFlows reads the bridge's flows of one table (openflow.TableAll:
	// every table) with their counters.
	DumpFlows func(ctx context.Context, table uint8) ([]openflow.FlowStats, error)
	// FeatureGates are the agent's effective gates.
	FeatureGates map[string]bool
	// AgentInfo returns the agent's AntreaAgentInfo (any JSON-marshalable
	// value); nil: /agentinfo answers 503.
	AgentInfo func(ctx context.Context) (any, error)
}

// Server is a ready-to-run agent API server.
type Server struct {
	generic *genericapiserver.GenericAPIServer
	q       *Querier
}

// New builds the server.
func New(o *Options, q *Querier) (*Server, error) {
	var ips []net.IP
	if q.NodeIP != nil {
		ips = append(ips, q.NodeIP)
	}
	ips = append(ips, net.ParseIP("127.0.0.1"), net.IPv6loopback)
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts(q.NodeName, []string{q.NodeName, "localhost"}, ips); err != nil {
		return nil, fmt.Errorf("agent API: creating a self-signed serving certificate: %w", err)
	}
	// The scheme holds only the meta types (errors are metav1.Status).
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	scheme.AddUnversionedTypes(schema.GroupVersion{Group: "", Version: "v1"}, &metav1.Status{})
	codecs := serializer.NewCodecFactory(scheme)
	cfg := genericapiserver.NewConfig(codecs)
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	cfg.SkipOpenAPIInstallation = true
	if err := o.SecureServing.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("agent API: configuring secure serving: %w", err)
	}
	if err := o.Authentication.ApplyTo(&cfg.Authentication, cfg.SecureServing, nil); err != nil {
		return nil, fmt.Errorf("agent API: configuring delegated authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("agent API: configuring delegated authorization: %w", err)
	}
	generic, err := cfg.Complete(nil).New("antrea-agent-api", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("agent API: %w", err)
	}
	s := &Server{generic: generic, q: q}
	s.Handle("/podinterfaces", http.HandlerFunc(s.podInterfaces))
	s.Handle("/ovsflows", http.HandlerFunc(s.ovsFlows))
	s.Handle("/featuregates", http.HandlerFunc(s.featureGates))
	s.Handle("/agentinfo", http.HandlerFunc(s.agentInfo))
	return s, nil
}

// Handle serves h at path (behind authentication and authorization); a
// path ending in "/" serves every path under it. Call it before Run.
func (s *Server) Handle(path string, h http.Handler) {
	if strings.HasSuffix(path, "/") {
		s.generic.Handler.NonGoRestfulMux.HandlePrefix(path, h)
		return
	}
	s.generic.Handler.NonGoRestfulMux.Handle(path, h)
}

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	klog.InfoS("Starting the agent API server", "node", s.q.NodeName)
	if err := s.generic.PrepareRun().RunWithContext(ctx); err != nil {
		return fmt.Errorf("running the agent API server: %w", err)
	}
	return nil
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		klog.ErrorS(err, "Cannot write an agent API answer")
	}
}

func get(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet {
		http.Error(w, "only GET is served", http.StatusMethodNotAllowed)
		return false
	}
	return true
}

func (s *Server) podInterfaces(w http.ResponseWriter, r *http.Request) {
	if !get(w, r) {
		return
	}
	ns, name := r.URL.Query().Get("namespace"), r.URL.Query().Get("name")
	if name != "" && ns == "" {
		http.Error(w, "name needs namespace", http.StatusBadRequest)
		return
	}
	var ifs []*interfacestore.InterfaceConfig
	if name != "" {
		ifs = s.q.Interfaces.GetContainerInterfacesByPod(name, ns)
	} else {
		for _, i := range s.q.Interfaces.GetInterfacesByType(interfacestore.ContainerInterface) {
			if ns == "" || i.PodNamespace == ns {
				ifs = append(ifs, i)
			}
		}
	}
	out := make([]apis.PodInterface, 0, len(ifs))
	for _, i := range ifs {
		out = append(out, apis.NewPodInterface(i))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PodNamespace != out[j].PodNamespace {
			return out[i].PodNamespace < out[j].PodNamespace
		}
		return out[i].InterfaceName < out[j].InterfaceName
	})
	writeJSON(w, out)
}

func (s *Server) ovsFlows(w http.ResponseWriter, r *http.Request) {
	if !get(w, r) {
		return
	}
	table := uint8(openflow.TableAll)
	if t := r.URL.Query().Get("table"); t != "" {
		n, err := strconv.ParseUint(t, 10, 8)
		if err != nil || n == uint64(openflow.TableAll) {
			http.Error(w, fmt.Sprintf("table %q: want a table number (0 to 254)", t), http.StatusBadRequest)
			return
		}
		table = uint8(n)
	}
	flows, err := s.q.DumpFlows(r.Context(), table)
	if err != nil {
		http.Error(w, fmt.Sprintf("dump-flows on node %s: %v", s.q.NodeName, err), http.StatusInternalServerError)
		return
	}
	out := make([]apis.Flow, 0, len(flows))
	for i := range flows {
		out = append(out, apis.NewFlow(&flows[i]))
	}
	writeJSON(w, out)
}

func (s *Server) featureGates(w http.ResponseWriter, r *http.Request) {
	if !get(w, r) {
		return
	}
	names := make([]string, 0, len(s.q.FeatureGates))
	for n := range s.q.FeatureGates {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]apis.FeatureGate, 0, len(names))
	for _, n := range names {
		status := "Disabled"
		if s.q.FeatureGates[n] {
			status = "Enabled"
		}
		out = append(out, apis.FeatureGate{Component: "antrea-agent", Name: n, Status: status})
	}
	writeJSON(w, out)
}

func (s *Server) agentInfo(w http.ResponseWriter, r *http.Request) {
	if !get(w, r) {
		return
	}
	if s.q.AgentInfo == nil {
		http.Error(w, "agent info is not available", http.StatusServiceUnavailable)
		return
	}
	info, err := s.q.AgentInfo(r.Context())
	if err != nil {
		http.Error(w, fmt.Sprintf("agent info of node %s: %v", s.q.NodeName, err), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, info)
}
