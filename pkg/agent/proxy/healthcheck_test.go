package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	agenttypes "antrea.io/antrea/pkg/agent/types"
)

// freePort returns a TCP port free on 127.0.0.1 now.
func freePort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

type healthAnswer struct {
	status int
	weight string
	body   string
}

func askHealth(port int32) (healthAnswer, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	if err != nil {
		return healthAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return healthAnswer{resp.StatusCode, resp.Header.Get("X-Load-Balancing-Endpoint-Weight"), string(b)}, err
}

// waitHealth waits until the health check answers with the status and
// body.
func waitHealth(t *testing.T, port int32, status int, body string) healthAnswer {
	t.Helper()
	var a healthAnswer
	var err error
	if werr := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		a, err = askHealth(port)
		return err == nil && a.status == status && a.body == body, nil
	}); werr != nil {
		t.Fatalf("health check on %d should answer %d with\n%s\ngot %+v (%v)", port, status, body, a, err)
	}
	return a
}

// kubeProxyBody is the body kube-proxy's health check writes
// (pkg/proxy/healthcheck/service_health.go, v1.37: its template, dedented).
func kubeProxyBody(ns, name string, count int, healthy bool) string {
	return fmt.Sprintf("{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}", ns, name, count, healthy)
}

// TestHealthCheckNodePort: a LoadBalancer with externalTrafficPolicy Local
// has its healthCheckNodePort served, as kube-proxy serves it: 200 with
// the number of distinct local ready endpoint addresses, 503 with 0 when
// this node has none (remote, not ready and terminating endpoints do not
// count); the port closes when the Service no longer needs it.
func TestHealthCheckNodePort(t *testing.T) {
	port := freePort(t)
	lb := withSpec(service("lb", "10.96.0.30", svcPort("http", corev1.ProtocolTCP, 80, 8080), svcPort("https", corev1.ProtocolTCP, 443, 8443)), func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = port
		s.Spec.Ports[0].NodePort, s.Spec.Ports[1].NodePort = 30080, 30443
	})
	ports := slicePorts(epPort("http", corev1.ProtocolTCP, 8080), epPort("https", corev1.ProtocolTCP, 8443))
	client, _ := startProxyWith(t, Config{NodeName: "node-1", HealthCheckAddresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, false,
		lb, slice("lb-1", "lb", ports,
			ep{ip: "10.10.2.3", node: "node-2"},
			ep{ip: "10.10.1.9", node: "node-1", ready: ptr(false), serving: ptr(true), terminating: ptr(true)}))

	// Only a remote endpoint and a local terminating one: 503, 0.
	a := waitHealth(t, port, http.StatusServiceUnavailable, kubeProxyBody("default", "lb", 0, true))
	if a.weight != "0" {
		t.Fatalf("without local ready endpoints: got %+v", a)
	}
	var decoded struct {
		Service             struct{ Namespace, Name string }
		LocalEndpoints      int
		ServiceProxyHealthy bool
	}
	if err := json.Unmarshal([]byte(a.body), &decoded); err != nil || decoded.Service.Name != "lb" || decoded.LocalEndpoints != 0 || !decoded.ServiceProxyHealthy {
		t.Fatalf("the body should be kube-proxy's JSON, decoded %+v (%v)", decoded, err)
	}

	// Two local ready endpoints, serving both ports: 200, 2.
	updateSlice(t, client, "lb-1", func(s *discoveryv1.EndpointSlice) {
		s.Endpoints = append(s.Endpoints,
			discoveryv1.Endpoint{Addresses: []string{"10.10.1.3"}, NodeName: ptr("node-1")},
			discoveryv1.Endpoint{Addresses: []string{"10.10.1.4"}, NodeName: ptr("node-1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	})
	a = waitHealth(t, port, http.StatusOK, kubeProxyBody("default", "lb", 2, true))
	if a.weight != "2" {
		t.Fatalf("with two local ready endpoints: got %+v", a)
	}

	// externalTrafficPolicy Cluster: no health check.
	updateService(t, client, "lb", func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	})
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		_, err := askHealth(port)
		return err != nil, nil
	}); err != nil {
		t.Fatal("the health check port should close once the Service is externalTrafficPolicy Cluster")
	}
}

// TestHealthCheckBeforeTheProxyInstalledItsServices: until the Services
// known at start are installed, the answer is 503, serviceProxyHealthy false.
func TestHealthCheckBeforeTheProxyInstalledItsServices(t *testing.T) {
	var healthy atomic.Bool
	h := newHealthServer([]netip.Addr{netip.MustParseAddr("127.0.0.1")}, healthy.Load)
	defer h.closeAll()
	port := freePort(t)
	if err := h.set("default/lb", healthCheck{port: uint16(port), endpoints: 1}); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, port, http.StatusServiceUnavailable, kubeProxyBody("default", "lb", 1, false))
	healthy.Store(true)
	waitHealth(t, port, http.StatusOK, kubeProxyBody("default", "lb", 1, true))
	// The port taken: set fails, naming the Service.
	h2 := newHealthServer([]netip.Addr{netip.MustParseAddr("127.0.0.1")}, func() bool { return true })
	if err := h2.set("default/other", healthCheck{port: uint16(port), endpoints: 1}); err == nil {
		h2.closeAll()
		t.Fatal("a second listener on the same port should fail")
	}
}

// TestTheHealthCheckOfAnIPv6OnlyNodeCountsItsIPv6EndpointsAndAnswersOnIPv6:
// the local endpoints counted are those of the node's families (an
// IPv6-only node's IPv6 ones; an IPv4 node's IPv4 ones, as before; a
// dual-stack pod once on a dual-stack node), and a
// health check served on every address answers on the node's IPv6
// addresses too (here ::1).
func TestTheHealthCheckOfAnIPv6OnlyNodeCountsItsIPv6EndpointsAndAnswersOnIPv6(t *testing.T) {
	svc, slices := dualStackWeb()
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = freePort(t)
	if got := healthCheckOf(svc, slices[1:], "node-1", []agenttypes.IPFamily{agenttypes.IPv6}); got.endpoints != 1 {
		t.Errorf("an IPv6-only node's health check counts %d local endpoints, want its IPv6 one", got.endpoints)
	}
	if got := healthCheckOf(svc, slices, "node-1", []agenttypes.IPFamily{agenttypes.IPv4}); got.endpoints != 1 {
		t.Errorf("an IPv4 node's health check counts %d local endpoints, want its IPv4 one", got.endpoints)
	}
	// A dual-stack node: the pod's two addresses count once.
	if got := healthCheckOf(svc, slices, "node-1", []agenttypes.IPFamily{agenttypes.IPv4, agenttypes.IPv6}); got.endpoints != 1 {
		t.Errorf("a dual-stack node's health check counts %d local endpoints, want 1 (one pod, an address of each family)", got.endpoints)
	}
	h := newHealthServer(nil, func() bool { return true })
	defer h.closeAll()
	port := uint16(svc.Spec.HealthCheckNodePort)
	if err := h.set("default/web", healthCheck{port: port, endpoints: 1}); err != nil {
		t.Fatal(err)
	}
	c := http.Client{Timeout: time.Second}
	var resp *http.Response
	var err error
	for range 50 {
		if resp, err = c.Get(fmt.Sprintf("http://[::1]:%d/healthz", port)); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the health check served on every address does not answer on [::1]: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("[::1]: status %d, want 200", resp.StatusCode)
	}
}
