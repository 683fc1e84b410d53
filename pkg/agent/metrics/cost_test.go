package metrics_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	"antrea.io/antrea/pkg/agent/apiserver/agentapitest"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/metrics"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// TestScrapeCost (ANTREA_MEASURE=1) measures what a Prometheus scrape of the
// agent API's /metrics costs the serving process: a real br-int with the
// agent's pipeline and 20 pods, the agent API behind a real kube-apiserver,
// and curl (another process) scraping with a bound ServiceAccount token.
// The figure is the process's CPU time (getrusage) over 100 scrapes,
// divided by 100, minus the idle rate measured over 10 s before; and the
// live Go heap (after a GC) and RSS before and after. Logged, not asserted.
func TestScrapeCost(t *testing.T) {
	if os.Getenv("ANTREA_MEASURE") == "" {
		t.Skip("set ANTREA_MEASURE=1 to measure")
	}
	br := bridgetest.New(t)
	flows, err := agentof.NewClient(metrics.Bridge{Client: br.OF}, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, cidr, _ := net.ParseCIDR(bridgetest.PodCIDR)
	if err := flows.Initialize(context.Background(), &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort,
		GatewayIP: net.ParseIP(bridgetest.GatewayIP), GatewayMAC: br.GatewayMAC, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	store := interfacestore.NewInterfaceStore()
	for i := 0; i < 20; i++ {
		p := br.AddPod(t, fmt.Sprintf("c%d", i), fmt.Sprintf("10.10.1.%d/24", 10+i))
		if err := flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		store.AddInterface(interfacestore.NewContainerInterface(p.HostIF, "c", p.Name, "demo", "eth0", p.MAC, []net.IP{p.IP}, 0))
	}
	metrics.Register(metrics.Sources{LocalPods: store.GetContainerInterfaceNum,
		TableStats: func(ctx context.Context) ([]binding.TableStats, error) {
			conn, err := br.OF.Conn(ctx)
			if err != nil {
				return nil, err
			}
			return conn.TableStats(ctx)
		}})
	api := agentapitest.Start(t, &agentapi.Querier{NodeName: "node-1", Interfaces: store}, nil)
	token := agentapitest.Token(t, api.Ctx, api.Kube, "prometheus", "antrea-metrics-reader")
	body := agentapitest.GetOK(t, api.Ctx, api.URL, token, "/metrics")
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	rss := func() string {
		b, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
			}
		}
		return "?"
	}
	const n = 100
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapBefore, rssBefore := ms.HeapAlloc, rss()
	idle0 := cpu()
	start := time.Now()
	time.Sleep(10 * time.Second)
	idle := cpu() - idle0
	idlePerSec := float64(idle) / time.Since(start).Seconds()
	args := []string{"-sk", "-o", "/dev/null", "-H", "Authorization: Bearer " + token}
	for i := 0; i < n; i++ {
		args = append(args, api.URL+"/metrics")
	}
	c0, s0 := cpu(), time.Now()
	if out, err := exec.Command("curl", args...).CombinedOutput(); err != nil {
		t.Fatalf("curl: %v %s", err, out)
	}
	busy, took := cpu()-c0, time.Since(s0)
	perScrape := (float64(busy) - idlePerSec*took.Seconds()) / n / float64(time.Millisecond)
	rssAfter := rss()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("/metrics: %d bytes, %d series lines; %d scrapes in %v: %.2f ms CPU per scrape in the serving process (idle background %.1f ms/s subtracted); live heap after GC %d -> %d kB, RSS %s -> %s",
		len(body), strings.Count(string(body), "\n"), n, took.Round(time.Millisecond), perScrape, idlePerSec/float64(time.Millisecond),
		heapBefore/1024, ms.HeapAlloc/1024, rssBefore, rssAfter)
}
