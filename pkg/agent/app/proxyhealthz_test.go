package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNoHealthzBindAddressServesNoHealthPort(t *testing.T) {
	f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	if hs, c := proxyHealthz(Options{NodeName: "n1"}, f); hs != nil || c != nil {
		t.Errorf("proxyHealthz without an address returned a server")
	}
}

// The agent serves kube-proxy's health port at the configured address,
// judging the node from its informer.
func TestTheAgentServesKubeProxysHealthPortAtItsAddress(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(free.Addr().String())
	free.Close()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	f := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(context.Background())
	hs, c := proxyHealthz(Options{NodeName: "n1", ProxyHealthzAddress: addr}, f)
	if hs == nil || c == nil {
		cancel()
		t.Fatal("proxyHealthz returned no server")
	}
	served := make(chan error, 1)
	go func() { served <- c.run(ctx) }()
	f.Start(ctx.Done())
	// The informers stop when ctx ends; Shutdown waits for them, and the
	// component returns.
	defer func() {
		cancel()
		f.Shutdown()
		if err := <-served; err != nil {
			t.Errorf("the health port's component returned %v after it was stopped", err)
		}
	}()

	url := fmt.Sprintf("http://%s/healthz", addr)
	var status int
	var body map[string]any
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		c := http.Client{Timeout: time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		status, body = resp.StatusCode, nil
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return false, nil
		}
		return status == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("%s should answer 200 once the node is known, last %d %v", url, status, body)
	}
	if body["nodeEligible"] != true || body["healthy"] != true {
		t.Errorf("%s answered %v, want a healthy, eligible node", url, body)
	}
}
