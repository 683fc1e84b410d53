package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	agenttypes "antrea.io/antrea/pkg/agent/types"
)

// Health checks of externalTrafficPolicy Local. A LoadBalancer Service with
// externalTrafficPolicy Local has a healthCheckNodePort: the cloud load
// balancer asks every node on it whether the node has local endpoints of
// the Service and sends traffic only to the nodes that answer 200 (the
// others drop it). As kube-proxy does (pkg/proxy/healthcheck), the proxy
// serves HTTP on that port on the node's addresses, answering any path
// with 200 and the count of local ready endpoints (distinct addresses),
// or 503 when there is none, or while the proxy has not yet installed the
// Services known at start; the body is kube-proxy's JSON, the header
// X-Load-Balancing-Endpoint-Weight carries the count.

// healthCheck is what a Service asks of the health check server: its port
// (0: none) and its local ready endpoints.
type healthCheck struct {
	port      uint16
	endpoints int
}

// healthCheckOf is a Service's health check: a LoadBalancer with
// externalTrafficPolicy Local and a healthCheckNodePort
// (k8s.io/cloud-provider's NeedsHealthCheck), counting its ready local
// endpoints over all its ports, once per address, in the node's family
// that has the most (an IPv4 node's IPv4 ones; a dual-stack node's pods,
// which have an address of each family, once; an IPv6-only node's IPv6
// ones).
func healthCheckOf(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, nodeName string, families []agenttypes.IPFamily) healthCheck {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal ||
		svc.Spec.HealthCheckNodePort <= 0 || svc.Spec.HealthCheckNodePort > 65535 {
		return healthCheck{}
	}
	most := 0
	for _, f := range families {
		local := map[netip.Addr]bool{}
		for _, sp := range svc.Spec.Ports {
			for _, c := range portCandidates(sp, slices, nodeName, f) {
				if c.ready && c.ep.Local {
					local[c.ep.IP] = true
				}
			}
		}
		most = max(most, len(local))
	}
	return healthCheck{port: uint16(svc.Spec.HealthCheckNodePort), endpoints: most}
}

// healthServer serves the health checks of every Service that has one.
type healthServer struct {
	// addrs are the addresses served on; none: every address of the
	// node (0.0.0.0, kube-proxy's default).
	addrs   []netip.Addr
	healthy func() bool // the proxy has installed the Services known at start

	mu       sync.Mutex
	services map[string]*hcInstance // by Service key
}

// hcInstance is the health check of one Service.
type hcInstance struct {
	key       string
	port      uint16
	servers   []*http.Server
	endpoints int
}

func newHealthServer(addrs []netip.Addr, healthy func() bool) *healthServer {
	return &healthServer{addrs: addrs, healthy: healthy, services: map[string]*hcInstance{}}
}

// set makes the server hold a Service's health check (port 0: none): it
// opens the port on every address when new or moved, closes it when gone,
// and otherwise only updates the count it answers with.
func (h *healthServer) set(key string, hc healthCheck) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	in := h.services[key]
	if in != nil && in.port != hc.port {
		in.close()
		delete(h.services, key)
		klog.InfoS("Closed health check", "service", key, "port", in.port)
		in = nil
	}
	if hc.port == 0 {
		return nil
	}
	if in == nil {
		in = &hcInstance{key: key, port: hc.port}
		if err := in.open(h); err != nil {
			return err
		}
		h.services[key] = in
		klog.InfoS("Serving health check", "service", key, "port", hc.port)
	}
	in.endpoints = hc.endpoints
	return nil
}

// closeAll stops every health check.
func (h *healthServer) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, in := range h.services {
		in.close()
		delete(h.services, k)
	}
}

func (in *hcInstance) open(h *healthServer) error {
	addrs := h.addrs
	if len(addrs) == 0 {
		addrs = []netip.Addr{netip.IPv4Unspecified()}
	}
	for _, a := range addrs {
		// "tcp": Go listens on a wildcard address with a dual-stack
		// socket where the kernel has one, so an IPv6-only node's
		// addresses are served too (kube-proxy listens so).
		l, err := net.Listen("tcp", netip.AddrPortFrom(a, in.port).String())
		if err != nil {
			in.close()
			return fmt.Errorf("health check of service %s: %w", in.key, err)
		}
		srv := &http.Server{Handler: hcHandler{key: in.key, h: h}, ReadHeaderTimeout: 10 * time.Second}
		in.servers = append(in.servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "Health check stopped", "service", in.key, "address", l.Addr())
			}
		}()
	}
	return nil
}

func (in *hcInstance) close() {
	for _, s := range in.servers {
		_ = s.Close()
	}
	in.servers = nil
}

type hcHandler struct {
	key string
	h   *healthServer
}

func (hh hcHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	hh.h.mu.Lock()
	in := hh.h.services[hh.key]
	count := 0
	if in != nil {
		count = in.endpoints
	}
	hh.h.mu.Unlock()
	healthy := hh.h.healthy()
	ns, name, _ := cache.SplitMetaNamespaceKey(hh.key)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
	if count > 0 && healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
		ns, name, count, healthy)
}

// stop closes the health checks when ctx ends.
func (h *healthServer) stopWith(ctx context.Context) {
	<-ctx.Done()
	h.closeAll()
}
