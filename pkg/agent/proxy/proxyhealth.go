package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// kube-proxy's health server. Where AntreaProxy replaces kube-proxy
// (proxyAll), the agent serves kube-proxy's own health port (10256 by
// default), which cloud load balancers probe on every node for the
// Services of externalTrafficPolicy Cluster and which upstream e2e and
// operators curl. The contract is kube-proxy's (k8s.io/kubernetes
// pkg/proxy/healthcheck, proxy_health.go, v1.37): /healthz and /livez answer
// JSON {lastUpdated, currentTime, [nodeEligible,] healthy, status}, 200
// when healthy and 503 when not. The proxy is unhealthy when a change it
// was told of (a Service or EndpointSlice event) has waited longer than
// the timeout for the worker to drain its queue: the proxy is stuck.
// /healthz is also 503 when the node is not eligible for load-balanced
// traffic (deleted, or tainted ToBeDeletedByClusterAutoscaler); /livez
// leaves the node out. The same server answers every path kube-proxy's
// does not serve with 404.

// DefaultProxyHealthTimeout is how long a queued change may wait before
// the proxy is unhealthy: kube-proxy's, twice its default syncPeriod (30 s).
const DefaultProxyHealthTimeout = 60 * time.Second

// toBeDeletedTaint is the Cluster Autoscaler's taint of a node it is about
// to delete (kube-proxy's healthcheck.ToBeDeletedTaint).
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ProxyHealth is kube-proxy's health answer (healthcheck.ProxyHealth).
type ProxyHealth struct {
	// LastUpdated is when the proxy last drained its queue; a healthy
	// answer gives the current time, as kube-proxy does for compatibility.
	LastUpdated time.Time `json:"lastUpdated"`
	CurrentTime time.Time `json:"currentTime"`
	// NodeEligible is set on /healthz answers only.
	NodeEligible *bool `json:"nodeEligible,omitempty"`
	Healthy      bool  `json:"healthy"`
	// Status is per IP family (kube-proxy's form).
	Status map[corev1.IPFamily]ProxierHealth `json:"status,omitempty"`
}

// ProxierHealth is one IP family's part of ProxyHealth.
type ProxierHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// ProxyHealthServer tracks the proxy's progress and serves it on
// kube-proxy's health port. A nil *ProxyHealthServer tracks nothing.
type ProxyHealthServer struct {
	timeout time.Duration
	now     func() time.Time
	// node returns this node, nil when unknown (not eligible).
	node func() *corev1.Node

	mu sync.Mutex
	// lastUpdated is when the queue was last drained (zero: never).
	lastUpdated time.Time
	// oldestPending is when the oldest change not yet drained was
	// queued (zero: none); newestPending when the latest was.
	oldestPending, newestPending time.Time
	// queued counts QueuedUpdate calls: a drain that saw the count at n
	// (before it found the queue empty) covers the changes up to n only.
	queued uint64
}

// NewProxyHealthServer makes a health server that calls the proxy unhealthy
// when a change waits longer than timeout (<= 0: DefaultProxyHealthTimeout)
// and asks node for this node's eligibility. now is the clock (nil:
// time.Now).
func NewProxyHealthServer(timeout time.Duration, node func() *corev1.Node, now func() time.Time) *ProxyHealthServer {
	if timeout <= 0 {
		timeout = DefaultProxyHealthTimeout
	}
	if now == nil {
		now = time.Now
	}
	return &ProxyHealthServer{timeout: timeout, now: now, node: node}
}

// QueuedUpdate records that a change was added to the proxy's queue (call
// it after the add); the oldest one not yet drained starts the timeout.
func (h *ProxyHealthServer) QueuedUpdate() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if h.oldestPending.IsZero() {
		h.oldestPending = now
	}
	h.newestPending = now
	h.queued++
}

// queuedCount is the number of QueuedUpdate calls so far.
func (h *ProxyHealthServer) queuedCount() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queued
}

// drained records that the proxy found its queue empty after the first
// seen changes were queued: those are realized (or wait for a retry of
// their own). Changes queued since stay pending, from the latest one's time
// (their first's is not kept: a stuck proxy is found a little later).
func (h *ProxyHealthServer) drained(seen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUpdated = h.now()
	if h.queued == seen {
		h.oldestPending, h.newestPending = time.Time{}, time.Time{}
	} else {
		h.oldestPending = h.newestPending
	}
}

// reportDrained tells the health server, after the worker processed a key,
// whether the queue is empty.
func (p *Proxy) reportDrained() {
	if p.proxyHealth == nil {
		return
	}
	seen := p.proxyHealth.queuedCount()
	if p.queue.Len() == 0 {
		p.proxyHealth.drained(seen)
	}
}

// Health is the proxy's health now, without the node's eligibility: healthy
// while starting and while no change has waited longer than the timeout.
func (h *ProxyHealthServer) Health() ProxyHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	healthy := h.oldestPending.IsZero() || now.Sub(h.oldestPending) < h.timeout
	return ProxyHealth{
		LastUpdated: h.lastUpdated,
		CurrentTime: now,
		Healthy:     healthy,
		Status:      map[corev1.IPFamily]ProxierHealth{corev1.IPv4Protocol: {LastUpdated: h.lastUpdated, Healthy: healthy}},
	}
}

// NodeEligible says whether load balancers may send traffic to this node:
// it exists, is not being deleted and is not tainted for deletion.
func (h *ProxyHealthServer) NodeEligible() bool {
	n := h.node()
	if n == nil || n.DeletionTimestamp != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == toBeDeletedTaint {
			return false
		}
	}
	return true
}

// Handler serves /healthz and /livez.
func (h *ProxyHealthServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		health := h.Health()
		eligible := h.NodeEligible()
		health.NodeEligible = &eligible
		h.answer(w, health, health.Healthy && eligible)
	})
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		health := h.Health()
		h.answer(w, health, health.Healthy)
	})
	return mux
}

func (h *ProxyHealthServer) answer(w http.ResponseWriter, health ProxyHealth, ok bool) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if ok {
		// kube-proxy's compatibility rule: a healthy answer's lastUpdated
		// is recent (older releases gave the last sync loop's time).
		health.LastUpdated = health.CurrentTime
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	out, _ := json.Marshal(health)
	_, _ = w.Write(out)
}

// Serve serves the health endpoints on addr until ctx ends.
func (h *ProxyHealthServer) Serve(ctx context.Context, addr netip.AddrPort) error {
	l, err := net.Listen("tcp", addr.String())
	if err != nil {
		return fmt.Errorf("kube-proxy health server on %s: %w", addr, err)
	}
	return h.serve(ctx, l)
}

func (h *ProxyHealthServer) serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second}
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = srv.Close()
		case <-stopped:
		}
	}()
	defer close(stopped)
	klog.InfoS("Serving kube-proxy's health endpoints", "address", l.Addr().String())
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kube-proxy health server on %s: %w", l.Addr(), err)
	}
	return nil
}
