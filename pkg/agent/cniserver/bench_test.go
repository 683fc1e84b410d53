package cniserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

// noFlows stands in for the flow installer when the benchmark measures the
// CNI path without flow programming.
type noFlows struct{}

func (noFlows) InstallPodFlows(string, []net.IP, net.HardwareAddr, uint32) error { return nil }
func (noFlows) UninstallPodFlows(string) error                                   { return nil }

// latencies summarises one phase.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// adder runs ADD and DEL of one CNI network for a pod netns.
type adder struct {
	name string
	cni  *libcni.CNIConfig
	list *libcni.NetworkConfigList
	// hostNS is where the plugin process must run (the reference bridge
	// plugin creates its bridge in its own netns); "" for the caller's.
	hostNS string
}

func (a *adder) do(ctx context.Context, add bool, rt *libcni.RuntimeConf) error {
	fn := func() error {
		if add {
			_, err := a.cni.AddNetworkList(ctx, a.list, rt)
			return err
		}
		return a.cni.DelNetworkList(ctx, a.list, rt)
	}
	if a.hostNS == "" {
		return fn()
	}
	// The plugin process is forked from this locked thread, so it starts in
	// hostNS.
	return ns.WithNetNSPath(a.hostNS, func(ns.NetNS) error { return fn() })
}

// phase runs n ADDs, `parallel` at a time, times each, then deletes them all.
func (a *adder) phase(t *testing.T, pods []*pod, parallel int) latencies {
	t.Helper()
	ctx := ctxT(t)
	lat := make(latencies, len(pods))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			start := time.Now()
			if err := a.do(ctx, true, p.rt); err != nil {
				t.Errorf("%s ADD %s: %v", a.name, p.name, err)
			}
			lat[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for _, p := range pods {
		if err := a.do(ctx, false, p.rt); err != nil {
			t.Errorf("%s DEL %s: %v", a.name, p.name, err)
		}
	}
	return lat
}

// TestCNIAddLatencyReport measures CNI ADD latency of antrea (libcni -> the
// antrea-cni binary -> CNIServer -> veth + OVS port + the agent pipeline's
// pod flows) next to the
// reference bridge + host-local plugins in the same run. It is a measurement,
// not a test: it asserts nothing about time and only runs when
// ANTREA_CNI_BENCH=1 (hack/bench/cni.sh).
func TestCNIAddLatencyReport(t *testing.T) {
	if os.Getenv("ANTREA_CNI_BENCH") == "" {
		t.Skip("set ANTREA_CNI_BENCH=1 (hack/bench/cni.sh) to measure")
	}
	ovsinstance.RequireRoot(t)
	refBin := os.Getenv("CNI_REFERENCE_BIN")
	if refBin == "" {
		t.Fatal("CNI_REFERENCE_BIN must name the directory of the reference bridge and host-local plugins")
	}
	const sequential, concurrentN, parallel = 100, 20, 20
	e := newEnvWith(t, true, withAgentPipeline)

	// The reference plugins get a node netns of their own for their bridge.
	refNS := "/var/run/netns/" + ovsinstance.NewNetNS(t, "cnitest")
	refConf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"refbench","plugins":[{"type":"bridge","bridge":"cnibench0","isGateway":true,
"ipam":{"type":"host-local","subnet":"10.124.1.0/24","dataDir":%q}}]}`, t.TempDir())
	refList, err := libcni.ConfListFromBytes([]byte(refConf))
	if err != nil {
		t.Fatal(err)
	}
	ref := &adder{name: "bridge+host-local", cni: newCNIConfig(refBin, t.TempDir()), list: refList, hostNS: refNS}
	antrea := &adder{name: "antrea (agent pipeline)", cni: e.cni, list: e.list}

	newPods := func(prefix string, n int) []*pod {
		out := make([]*pod, n)
		for i := range out {
			out[i] = e.newPod(fmt.Sprintf("%s-%03d", prefix, i))
		}
		return out
	}
	type row struct {
		plugin, phase string
		lat           latencies
	}
	var rows []row
	measure := func(a *adder) {
		rows = append(rows, row{a.name, fmt.Sprintf("%d sequential", sequential), a.phase(t, newPods("s", sequential), 1)})
		rows = append(rows, row{a.name, fmt.Sprintf("%d concurrent", concurrentN), a.phase(t, newPods("c", concurrentN), parallel)})
	}
	// Warm up both (page cache, first exec of each binary).
	_ = ref.phase(t, newPods("w", 3), 1)
	_ = antrea.phase(t, newPods("w", 3), 1)
	measure(ref)
	measure(antrea)
	// Same again with flow installation out of the picture, which isolates
	// the CNI path itself.
	e.stopSrv()
	e.installer = noFlows{}
	e.startServer(true)
	measure(&adder{name: "antrea (no flow install)", cni: e.cni, list: e.list})
	// The fixed cost of the shim: exec of antrea-cni, gRPC dial and a call
	// that does no work in the agent.
	status := make(latencies, sequential)
	for i := range status {
		start := time.Now()
		if err := e.cni.GetStatusNetworkList(ctxT(t), e.list); err != nil {
			t.Errorf("STATUS: %v", err)
		}
		status[i] = time.Since(start)
	}
	statusRow := row{"antrea STATUS (shim only)", fmt.Sprintf("%d sequential", sequential), status}

	if t.Failed() {
		return
	}
	fmt.Printf("\nCNI ADD latency on one node (%s)\n", filepath.Base(os.Args[0]))
	fmt.Printf("%-30s %-15s %9s %9s\n", "plugin", "phase", "p50", "p99")
	for _, r := range rows {
		fmt.Printf("%-30s %-15s %9s %9s\n", r.plugin, r.phase, r.lat.pct(0.50).Round(100*time.Microsecond), r.lat.pct(0.99).Round(100*time.Microsecond))
	}
	fmt.Printf("%-30s %-15s %9s %9s\n", statusRow.plugin, statusRow.phase,
		statusRow.lat.pct(0.50).Round(100*time.Microsecond), statusRow.lat.pct(0.99).Round(100*time.Microsecond))
	fmt.Println("\nratio antrea / bridge+host-local (p50, p99):")
	for _, r := range rows[2:] {
		for _, b := range rows[:2] {
			if b.phase == r.phase {
				fmt.Printf("%-30s %-15s %8.2fx %8.2fx\n", r.plugin, r.phase,
					float64(r.lat.pct(0.5))/float64(b.lat.pct(0.5)), float64(r.lat.pct(0.99))/float64(b.lat.pct(0.99)))
			}
		}
	}
}
