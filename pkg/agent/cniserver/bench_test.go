package cniserver

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

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

// batch runs the ADDs of pods, all at once, and returns each one's latency.
func (a *adder) batch(t *testing.T, pods []*pod) latencies {
	t.Helper()
	ctx := ctxT(t)
	lat := make(latencies, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			if err := a.do(ctx, true, p.rt); err != nil {
				t.Errorf("%s ADD %s: %v", a.name, p.name, err)
			}
			lat[i] = time.Since(start)
		}()
	}
	wg.Wait()
	return lat
}

// delAll deletes the pods' attachments.
func (a *adder) delAll(t *testing.T, pods []*pod) {
	t.Helper()
	for _, p := range pods {
		if err := a.do(ctxT(t), false, p.rt); err != nil {
			t.Errorf("%s DEL %s: %v", a.name, p.name, err)
		}
	}
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
	const sequential, concurrentN, rounds = 100, 20, 3
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
	// A dual-stack node of its own (its OVS, two pod CIDRs): each ADD
	// allocates and configures an IPv6 address beside the IPv4 one.
	e6 := newEnvWith(t, true, withDualStackPipeline)
	dual := &adder{name: "dual-stack antrea", cni: e6.cni, list: e6.list}

	newPods := func(prefix string, n int) []*pod {
		out := make([]*pod, n)
		for i := range out {
			out[i] = e.newPod(fmt.Sprintf("%s-%03d", prefix, i))
		}
		return out
	}
	adders := []*adder{ref, antrea, dual}
	seq := make([]latencies, len(adders))
	conc := make([]latencies, len(adders))
	// Warm up both (page cache, first exec of each binary).
	for _, a := range adders {
		w := newPods("w"+a.name[:1], 3)
		for _, p := range w {
			a.batch(t, []*pod{p})
		}
		a.delAll(t, w)
	}
	// The plugins take turns, pod by pod and batch by batch, so that both
	// see the same load from whatever else runs on the machine.
	pods := make([][]*pod, len(adders))
	for i, a := range adders {
		pods[i] = newPods("s"+a.name[:1], sequential)
	}
	for n := 0; n < sequential; n++ {
		for i, a := range adders {
			seq[i] = append(seq[i], a.batch(t, pods[i][n:n+1])...)
		}
	}
	for i, a := range adders {
		a.delAll(t, pods[i])
	}
	for round := 0; round < rounds; round++ {
		for i, a := range adders {
			batch := newPods(fmt.Sprintf("c%d%s", round, a.name[:1]), concurrentN)
			conc[i] = append(conc[i], a.batch(t, batch)...)
			a.delAll(t, batch)
		}
	}
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

	if t.Failed() {
		return
	}
	fmt.Printf("\nCNI ADD latency on one node, plugins taking turns (%d sequential ADDs; %d rounds of %d concurrent ADDs)\n",
		sequential, rounds, concurrentN)
	fmt.Printf("%-26s %-14s %9s %9s %9s %9s\n", "plugin", "phase", "p50", "p99", "p50 ratio", "p99 ratio")
	show := func(name, phase string, l, base latencies) {
		ratio := func(p float64) string {
			if base == nil {
				return ""
			}
			return fmt.Sprintf("%.2fx", float64(l.pct(p))/float64(base.pct(p)))
		}
		fmt.Printf("%-26s %-14s %9s %9s %9s %9s\n", name, phase,
			l.pct(0.50).Round(100*time.Microsecond), l.pct(0.99).Round(100*time.Microsecond), ratio(0.5), ratio(0.99))
	}
	// Ratios are to the reference plugins (adders[0]).
	for _, phase := range []struct {
		name string
		lat  []latencies
	}{{"sequential", seq}, {"concurrent", conc}} {
		for i, a := range adders {
			var base latencies
			if i > 0 {
				base = phase.lat[0]
			}
			show(a.name, phase.name, phase.lat[i], base)
		}
	}
	show("antrea STATUS (shim only)", "sequential", status, nil)
}
