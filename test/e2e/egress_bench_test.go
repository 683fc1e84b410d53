package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	"antrea.io/antrea/pkg/lab"
	"antrea.io/antrea/test/labtest"
)

// outsideSink is a TCP server in the lab's outside host, in this process:
// it reads and discards what a connection sends and counts the connections
// by the source address it sees.
type outsideSink struct {
	ln   net.Listener
	mu   sync.Mutex
	seen map[netip.Addr]int
	open map[net.Conn]bool
	wg   sync.WaitGroup
}

func startOutsideSink(t *testing.T, port int) *outsideSink {
	t.Helper()
	outside, err := ns.GetNS("/var/run/netns/" + lab.OutsideNetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	s := &outsideSink{seen: map[netip.Addr]int{}, open: map[net.Conn]bool{}}
	if err := outside.Do(func(ns.NetNS) error {
		s.ln, err = net.Listen("tcp", net.JoinHostPort(lab.OutsideIP().String(), fmt.Sprint(port)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
				s.seen[ap.Addr().Unmap()]++
			}
			s.open[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_, _ = io.Copy(io.Discard, c)
				c.Close()
				s.mu.Lock()
				delete(s.open, c)
				s.mu.Unlock()
			}()
		}
	}()
	// A connection whose client's RST was lost (many are reset at once)
	// would otherwise hold the clean-up until TCP keepalive gives up.
	t.Cleanup(func() {
		s.ln.Close()
		s.mu.Lock()
		for c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// sources returns and resets the counts of connections by source address.
func (s *outsideSink) sources() map[netip.Addr]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.seen
	s.seen = map[netip.Addr]int{}
	return out
}

// TestEgressSNATCost measures what an Egress costs a Pod's traffic to a
// host outside the cluster, in one run on one lab: connections per second
// and one TCP stream from a Pod on the Node holding the Egress IP and from
// a Pod on the other Node (tunnelled to the holder), each without the
// Egress (masqueraded to its own Node's IP) and with it. It checks that
// every measured connection arrived from the address it should. A
// benchmark (about 40 s): hack/bench/egress.sh, ANTREA_BENCH_EGRESS=1.
func TestEgressSNATCost(t *testing.T) {
	if os.Getenv("ANTREA_BENCH_EGRESS") == "" {
		t.Skip("a benchmark (about 40 s): ANTREA_BENCH_EGRESS=1 (hack/bench/egress.sh)")
	}
	e := requireReal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	crd, err := versioned.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	const port, secs = 5201, 3 * time.Second
	sink := startOutsideSink(t, port)
	addr := net.JoinHostPort(lab.OutsideIP().String(), fmt.Sprint(port))

	// The pool's nodeSelector makes node-1 the holder.
	const holder, other = "node-1", "node-2"
	nsName, pods := createPods(t, e, ctx, func(name string) corev1.PodSpec {
		node := holder
		if name == "remote" {
			node = other
		}
		return corev1.PodSpec{NodeName: node, Containers: []corev1.Container{labtest.TestPodContainer("c", []int{80}, nil)}}
	}, "local", "remote")
	podNS := map[string]ns.NetNS{}
	for name, p := range pods {
		path, err := lab.NetNSPathOfPod(p)
		if err != nil {
			t.Fatal(err)
		}
		n, err := ns.GetNS(path)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		podNS[name] = n
	}
	nodeIP := map[string]netip.Addr{}
	nodes, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				nodeIP[n.Name] = netip.MustParseAddr(a.Address)
			}
		}
	}

	type figure struct{ cps, mbits float64 }
	measure := func(phase string, want func(pod string) netip.Addr) map[string]figure {
		out := map[string]figure{}
		for _, pod := range []string{"local", "remote"} {
			sink.sources()
			f := figure{cps: labtest.ConnectionsPerSecond(podNS[pod], addr, secs), mbits: labtest.StreamMbits(podNS[pod], addr, secs)}
			seen := sink.sources()
			for src, n := range seen {
				if src != want(pod) {
					t.Errorf("%s: %d connections of pod %s reached the outside host from %s, want %s (all: %v)", phase, n, pod, src, want(pod), seen)
				}
			}
			if len(seen) == 0 || f.cps == 0 || f.mbits == 0 {
				t.Errorf("%s: pod %s: nothing measured (%+v, sources %v)", phase, pod, f, seen)
			}
			out[pod] = f
		}
		return out
	}

	start := time.Now()
	t.Logf("pods ready; measuring without the Egress")
	without := measure("without Egress", func(pod string) netip.Addr { return nodeIP[pods[pod].Spec.NodeName] })

	first, last := lab.ExternalIPRange()
	poolName := "bench-" + nsName
	eg := &crdv1beta1.Egress{ObjectMeta: metav1.ObjectMeta{Name: "bench-" + nsName}, Spec: crdv1beta1.EgressSpec{
		AppliedTo: crdv1beta1.EgressAppliedTo{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsName}}},
		ExternalIPPool: poolName}}
	createExternalIPPool(t, ctx, crd, poolName, first.String(), last.String(), func() {
		_ = crd.CrdV1beta1().Egresses().Delete(context.Background(), eg.Name, metav1.DeleteOptions{})
	}, metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/hostname": holder}})
	if _, err := crd.CrdV1beta1().Egresses().Create(ctx, eg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var eip netip.Addr
	labtest.WaitFor(t, ctx, "the Egress IP held by "+holder+" and both pods leaving with it", func() error {
		got, err := crd.CrdV1beta1().Egresses().Get(ctx, eg.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.EgressNode != holder || got.Spec.EgressIP == "" || got.Status.EgressIP != got.Spec.EgressIP {
			return fmt.Errorf("spec.egressIP %q, status %+v", got.Spec.EgressIP, got.Status)
		}
		eip = netip.MustParseAddr(got.Spec.EgressIP)
		for _, pod := range []string{"local", "remote"} {
			sink.sources()
			if labtest.ConnectionsPerSecond(podNS[pod], addr, 100*time.Millisecond) == 0 {
				return fmt.Errorf("pod %s cannot connect", pod)
			}
			if seen := sink.sources(); len(seen) != 1 || seen[eip] == 0 {
				return fmt.Errorf("pod %s reached the outside host from %v", pod, seen)
			}
		}
		return nil
	})
	t.Logf("both pods leave with %s (%.1fs after the measurement began); measuring with the Egress", eip, time.Since(start).Seconds())
	with := measure("with Egress", func(string) netip.Addr { return eip })
	t.Logf("measured (%.1fs); the Egress and its pool are removed next", time.Since(start).Seconds())

	t.Logf("Egress SNAT cost, pod -> outside host %s, %v per figure, Egress IP %s on %s (2-core machine, userspace OVS):", addr, secs, eip, holder)
	t.Logf("%-58s %10s %10s %7s", "figure", "no Egress", "Egress", "ratio")
	for _, pod := range []string{"local", "remote"} {
		where := "pod on the holder (" + holder + ")"
		if pod == "remote" {
			where = "pod on " + other + " (tunnelled to the holder)"
		}
		w, x := without[pod], with[pod]
		t.Logf("%-58s %10.0f %10.0f %6.2fx", "connections/s, "+where, w.cps, x.cps, x.cps/w.cps)
		t.Logf("%-58s %10.0f %10.0f %6.2fx", "TCP stream Mbit/s, "+where, w.mbits, x.mbits, x.mbits/w.mbits)
	}
}
