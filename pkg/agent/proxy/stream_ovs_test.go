package proxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	"antrea.io/antrea/pkg/ovs/openflow"
)

// countingOF passes bundles on to the switch's client and counts them;
// while hold is open (not closed) they wait.
type countingOF struct {
	*openflow.Client
	bundles atomic.Int64
	hold    atomic.Pointer[chan struct{}]
}

func (c *countingOF) Bundle(ctx context.Context, msgs ...openflow.Message) error {
	if h := c.hold.Load(); h != nil {
		<-*h
	}
	c.bundles.Add(1)
	return c.Client.Bundle(ctx, msgs...)
}

// packetIns is the agent's packet-in dispatcher on a test switch, running
// until the test ends.
func packetIns(t testing.TB, of agentof.PacketIO) *agentof.PacketInDispatcher {
	d := agentof.NewPacketInDispatcher(of)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go d.Run(ctx)
	return d
}

// newCountingOVSNode is newOVSNode with its OpenFlow client's bundles counted.
func newCountingOVSNode(t *testing.T) (*ovsNode, *countingOF) {
	t.Helper()
	br := bridgetest.New(t)
	of := &countingOF{Client: br.OF}
	flows, err := agentof.NewClient(of, 1)
	if err != nil {
		t.Fatal(err)
	}
	br.SetReplay(func(ctx context.Context, conn *openflow.Conn) error { return flows.Replay(ctx, conn) })
	_, cidr, _ := net.ParseCIDR(bridgetest.PodCIDR)
	if err := flows.Initialize(context.Background(), &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort,
		GatewayIP: net.ParseIP(bridgetest.GatewayIP), GatewayMAC: br.GatewayMAC, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	n := &ovsNode{Bridge: br, client: fake.NewClientset(), flows: flows}
	n.start(t, Config{Packets: packetIns(t, br.OF)})
	return n, of
}

// streamService is Service i of a stream: a ClusterIP and a slice of two
// endpoints, as hack/bench/services makes them.
func streamService(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	name := fmt.Sprintf("s%d", i)
	svc := service(name, fmt.Sprintf("10.%d.%d.%d", 100+i>>16, i>>8&0xff, i&0xff), svcPort("", corev1.ProtocolTCP, 80, 8080))
	return svc, slice(name+"-1", name, slicePorts(epPort("", corev1.ProtocolTCP, 8080)),
		ep{ip: fmt.Sprintf("10.10.%d.%d", 1+i%2, 10+i%200), node: "node-2"}, ep{ip: fmt.Sprintf("10.10.3.%d", 10+i%200), node: "node-3"})
}

// installedCount is how many Services OVS accepted (the proxy's record
// changes only once OVS accepted the bundle).
func (p *Proxy) installedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.installed)
}

// TestAStreamOfServicesOnRealOVS creates Services and their slices (8
// clients) while the switch holds the proxy's bundles, as a switch slower
// than the API server does under a stream (the fake API server alone is
// slower than the proxy), then lets go and measures how long until OVS
// holds them all, in how many bundles, and then how long one more Service
// takes (slice created to its flows accepted by OVS). It checks that the
// backlog is installed in fewer bundles than Services.
// PROXY_STREAM_SERVICES (say "2000,10000") sets the sizes; the default is
// one small stream.
func TestAStreamOfServicesOnRealOVS(t *testing.T) {
	sizes := []int{500}
	if s := os.Getenv("PROXY_STREAM_SERVICES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, size := range sizes {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			n, of := newCountingOVSNode(t)
			if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return n.proxy.installedAtStart(), nil
			}); err != nil {
				t.Fatal("the proxy did not start")
			}
			hold := make(chan struct{})
			of.hold.Store(&hold)
			before := of.bundles.Load()
			start := time.Now()
			var wg sync.WaitGroup
			const clients = 8
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func(c int) {
					defer wg.Done()
					for i := c; i < size; i += clients {
						svc, sl := streamService(i)
						create(t, n.client, svc)
						create(t, n.client, sl)
					}
				}(c)
			}
			wg.Wait()
			created := time.Since(start)
			time.Sleep(time.Second) // the informers deliver the last events
			lastCreated := time.Now()
			close(hold)
			of.hold.Store(nil)
			if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
				return n.proxy.installedCount() == size, nil
			}); err != nil {
				t.Fatalf("OVS holds %d of %d Services", n.proxy.installedCount(), size)
			}
			after := time.Since(lastCreated)
			bundles := of.bundles.Load() - before
			groups := len(n.DumpGroups(t))
			if groups != size {
				t.Fatalf("OVS holds %d groups for %d Services", groups, size)
			}
			// One more Service at N: slice created to flows in OVS.
			svc, sl := streamService(size)
			create(t, n.client, svc)
			time.Sleep(200 * time.Millisecond)
			t0 := time.Now()
			create(t, n.client, sl)
			if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				n.proxy.mu.Lock()
				defer n.proxy.mu.Unlock()
				return countEndpoints(n.proxy.installed["default/"+svc.Name]) == 2, nil
			}); err != nil {
				t.Fatal("the Service after the stream was not installed")
			}
			one := time.Since(t0)
			t.Logf("%d Services created in %v; OVS held them all %v after the switch let go, in %d bundles; one more Service at %d: %v (slice created to flows in OVS)",
				size, created.Round(time.Millisecond), after.Round(time.Millisecond), bundles, size, one.Round(100*time.Microsecond))
			if size >= 100 && bundles >= int64(size) {
				t.Errorf("%d Services took %d bundles: a stream should take fewer bundles than Services", size, bundles)
			}
		})
	}
}

// TestABurstOfServicesIsInstalledInFewerBundles holds the fake installer's
// first call while a burst of Services is created, so they queue: the
// proxy installs them in batches. When batches fail, no Service is left
// half-installed (the fake applies all or nothing, as the client does) and
// each is installed alone.
func TestABurstOfServicesIsInstalledInFewerBundles(t *testing.T) {
	for _, failBatches := range []bool{false, true} {
		t.Run(fmt.Sprintf("failBatches=%v", failBatches), func(t *testing.T) {
			client, flows := startProxy(t)
			eventually(t, flows, "the proxy should start", func([]string, map[string]agentof.ServiceState) bool {
				flows.mu.Lock()
				defer flows.mu.Unlock()
				return flows.recovers == 1
			})
			flows.mu.Lock() // holds the worker's next install
			flows.failBatches = failBatches
			const size = 300
			for i := 0; i < size; i++ {
				svc, sl := streamService(i)
				create(t, client, svc)
				create(t, client, sl)
			}
			time.Sleep(300 * time.Millisecond)
			flows.mu.Unlock()
			eventually(t, flows, "every Service should be installed with its endpoints", func(_ []string, st map[string]agentof.ServiceState) bool {
				if len(st) != size {
					return false
				}
				for _, s := range st {
					if countEndpoints(s) != 2 {
						return false
					}
				}
				return true
			})
			calls, _ := flows.snapshot()
			flows.mu.Lock()
			batches, refused := flows.batches, flows.refused
			flows.mu.Unlock()
			t.Logf("%d Services: %d installs, %d batches in, %d refused", size, len(calls), batches, refused)
			if !failBatches && batches >= size {
				t.Fatalf("%d Services took %d bundles", size, batches)
			}
			if failBatches && refused == 0 {
				t.Fatal("the burst should have been tried in batches")
			}
		})
	}
}
