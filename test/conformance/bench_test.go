package conformance

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"antrea.io/antrea/test/labtest"
)

// flipWatcher tells when TCP connections from a pod to a destination start
// (or stop) succeeding: it starts a connection attempt every attemptEvery,
// each bounded by attemptTimeout, and records the start time of the first
// attempt with the awaited outcome. A dropped SYN is never retransmitted
// within the timeout, so an attempt succeeds only if it started after the
// datapath allowed it: the resolution is attemptEvery.
type flipWatcher struct {
	src, dst peer
	port     int
}

const (
	attemptEvery   = 5 * time.Millisecond
	attemptTimeout = 250 * time.Millisecond
)

// waitFor returns when the first attempt started at or after start with
// outcome allowed was seen, and that attempt's start time.
func (w flipWatcher) waitFor(ctx context.Context, allowed bool) (time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan time.Time, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(attemptEvery)
	defer tick.Stop()
	for {
		select {
		case t := <-found:
			return t, nil
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s -> %s:%d never became allowed=%t: %w", w.src.key(), w.dst.key(), w.port, allowed, ctx.Err())
		case <-tick.C:
		}
		wg.Add(1)
		go func(start time.Time) {
			defer wg.Done()
			o := connectFrom(ctx, w.src, w.dst, w.port, attemptTimeout)
			if ctx.Err() == nil && o.allowed() == allowed {
				select {
				case found <- start:
				default:
				}
			}
		}(time.Now())
	}
}

// connectFrom makes one TCP probe from inside src's netns.
func connectFrom(ctx context.Context, src, dst peer, port int, timeout time.Duration) observation {
	p := &prober{peers: map[string]peer{src.key(): src, dst.key(): dst}}
	return p.probeOne(ctx, cell{From: src.key(), To: dst.key(), PP: portProtocol{Port: port, Protocol: tcp}}, timeout)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkPolicyRealization measures, per NetworkPolicy, the time from the
// API call that creates it to new connections it allows succeeding from
// pods on every node (and, after deleting it, to them failing again).
// Namespace x is isolated for ingress; each policy allows x's pods from
// namespace y on TCP 80; the probes go from y/a to x/a and x/b, which live
// on different nodes, so each node's agent must have realized the policy.
//
//	ANTREA_CONFORMANCE_CASE=none go test -run '^$' -bench PolicyRealization -benchtime 60x ./test/conformance/
func BenchmarkPolicyRealization(b *testing.B) {
	requireLab(b)
	c := setupB(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	pods := peersByKey(ctx, b, c)
	client := c.e.Client.NetworkingV1().NetworkPolicies("x")
	if _, err := client.Create(ctx, policy("x", "deny-ingress", metav1.LabelSelector{}, ingressOnly, nil, nil), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	watchers := []flipWatcher{{pods["y/a"], pods["x/a"], 80}, {pods["y/a"], pods["x/b"], 80}}
	if watchers[0].dst.Node == watchers[1].dst.Node {
		b.Fatalf("x/a and x/b should be on different nodes, both are on %s", watchers[0].dst.Node)
	}
	// The watchers run together: each node's flip is timed on its own
	// clock, and the policy counts as realized at the later one.
	waitAll := func(allowed bool) (time.Time, error) {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		times := make([]time.Time, len(watchers))
		errs := make([]error, len(watchers))
		var wg sync.WaitGroup
		for i, w := range watchers {
			wg.Go(func() { times[i], errs[i] = w.waitFor(wctx, allowed) })
		}
		wg.Wait()
		var last time.Time
		for i := range watchers {
			if errs[i] != nil {
				return last, errs[i]
			}
			if times[i].After(last) {
				last = times[i]
			}
		}
		return last, nil
	}
	if _, err := waitAll(false); err != nil {
		b.Fatalf("the deny-all policy was not realized: %v", err)
	}
	var add, del []time.Duration
	i := 0
	for b.Loop() {
		i++
		np := policy("x", fmt.Sprintf("allow-y-%d", i), metav1.LabelSelector{}, ingressOnly, []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: selPtr("ns", "y")}},
			Ports: []networkingv1.NetworkPolicyPort{port(tcp, intstr.FromInt32(80))}}}, nil)
		start := time.Now()
		if _, err := client.Create(ctx, np, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		t, err := waitAll(true)
		if err != nil {
			b.Fatal(err)
		}
		add = append(add, t.Sub(start))
		start = time.Now()
		if err := client.Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		t, err = waitAll(false)
		if err != nil {
			b.Fatal(err)
		}
		del = append(del, t.Sub(start))
	}
	slices.Sort(add)
	slices.Sort(del)
	b.ReportMetric(ms(percentile(add, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(add, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(del, 0.5)), "delete-p50-ms")
	b.ReportMetric(ms(percentile(del, 0.99)), "delete-p99-ms")
	b.Logf("%d policies: create->allowed on every node p50 %.1f ms p99 %.1f ms max %.1f ms; delete->denied p50 %.1f ms p99 %.1f ms (resolution %s)",
		len(add), ms(percentile(add, 0.5)), ms(percentile(add, 0.99)), ms(add[len(add)-1]),
		ms(percentile(del, 0.5)), ms(percentile(del, 0.99)), attemptEvery)
}

// BenchmarkThroughputWithUnrelatedRules measures pod-to-pod TCP throughput
// (y/b -> x/a, same node) with no policy, then with 10,000 ingress rules
// (100 policies x 100 rules, each from its own /32 on its own port) applied
// to x/c, z/a and z/c, pods on the same node that the measured traffic never
// reaches: the rules sit in the IngressRule table the traffic goes through.
// The rules are spread over three pods because all rules applied to one pod
// share its destination-clause flow, and OpenFlow cannot carry more than
// about 4,090 conjunction actions on one flow (see the suite's report).
//
//	go test -run '^$' -bench ThroughputWithUnrelatedRules -benchtime 1x ./test/conformance/
func BenchmarkThroughputWithUnrelatedRules(b *testing.B) {
	requireLab(b)
	c := setupB(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	pods := peersByKey(ctx, b, c)
	src, dst := pods["y/b"], pods["x/a"]
	targets := []peer{pods["x/c"], pods["z/a"], pods["z/c"]}
	for _, t := range targets {
		if t.Node != dst.Node || src.Node != dst.Node {
			b.Fatalf("y/b, x/a and %s should share a node: %s %s %s", t.key(), src.Node, dst.Node, t.Node)
		}
	}
	const policies, rulesPer = 100, 100
	measure := func(what string) float64 {
		bps, err := throughput(ctx, src, dst, 3*time.Second)
		if err != nil {
			b.Fatalf("throughput %s: %v", what, err)
		}
		return bps
	}
	// waitFlows waits until the node's flow count satisfies ok and has not
	// changed for a second, so the agent is done before we measure.
	waitFlows := func(what string, ok func(int) bool) int {
		var last, stable int
		stableFor := int(time.Second / labtest.PollInterval)
		err := labtest.Poll(ctx, what, func() error {
			n := nodeFlowCount(ctx, b, c.e, dst.Node)
			if n == last && ok(n) {
				stable++
			} else {
				stable = 0
			}
			last = n
			if stable < stableFor {
				return fmt.Errorf("%d flows, unchanged for %d polls", n, stable)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return last
	}
	for b.Loop() {
		flowsBefore := waitFlows("flows settled", func(int) bool { return true })
		// A, B, A: no rules, 10,000 rules, no rules again, so drift of the
		// machine shows as a difference between the two baselines.
		before := measure("with no rules")
		start := time.Now()
		for p := range policies {
			var rules []networkingv1.NetworkPolicyIngressRule
			for r := range rulesPer {
				rules = append(rules, networkingv1.NetworkPolicyIngressRule{
					From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: fmt.Sprintf("192.168.%d.%d/32", p, r)}}},
					Ports: []networkingv1.NetworkPolicyPort{port(tcp, intstr.FromInt(1000+p*rulesPer+r))},
				})
			}
			t := targets[p%len(targets)]
			np := policy(t.Namespace, fmt.Sprintf("unrelated-%d", p), podSel("pod", t.Name), ingressOnly, rules, nil)
			if _, err := c.e.Client.NetworkingV1().NetworkPolicies(t.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		// Realized when the node holds every rule's conj_id flow.
		if err := labtest.Poll(ctx, "10,000 rules in br-int", func() error {
			if n := nodeConjIDFlows(ctx, b, c.e, dst.Node); n < policies*rulesPer {
				return fmt.Errorf("%d conj_id flows", n)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		installed := time.Since(start)
		flows := waitFlows("flows settled", func(int) bool { return true })
		loaded := measure("with 10,000 rules")
		for _, ns := range []string{"x", "z"} {
			if err := c.e.Client.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		rctx, rcancel := context.WithTimeout(ctx, time.Minute)
		if err := labtest.Poll(rctx, "rules removed", func() error {
			if n := nodeFlowCount(rctx, b, c.e, dst.Node); n > flowsBefore {
				return fmt.Errorf("%d flows, %d before the rules", n, flowsBefore)
			}
			return nil
		}); err != nil {
			rcancel()
			b.Fatalf("%v: flows left on %s:\n%s", err, dst.Node, policyFlows(ctx, c.e, dst.Node))
		}
		rcancel()
		after := measure("with the rules removed")
		base := (before + after) / 2
		b.ReportMetric(base/1e6, "Mbit/s-no-rules")
		b.ReportMetric(loaded/1e6, "Mbit/s-10k-rules")
		b.ReportMetric(loaded/base, "ratio")
		b.Logf("TCP %s -> %s: %.0f Mbit/s with no rules, %.0f Mbit/s with 10,000 unrelated rules, %.0f Mbit/s after removing them (ratio %.2f); %s flows %d -> %d, rules realized %.1fs after the first create",
			src.key(), dst.key(), before/1e6, loaded/1e6, after/1e6, loaded/base, dst.Node, flowsBefore, flows, installed.Seconds())
	}
}

// setupB is setup for benchmarks.
func setupB(b *testing.B) *cluster {
	b.Helper()
	e := requireLab(b)
	if sharedCluster == nil {
		sharedCluster = newCluster(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := sharedCluster.reset(ctx); err != nil {
		b.Fatalf("reset the model: %v", err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_ = sharedCluster.reset(ctx)
	})
	return sharedCluster
}

func peersByKey(ctx context.Context, tb testing.TB, c *cluster) map[string]peer {
	tb.Helper()
	peers, err := c.peers(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]peer{}
	for _, p := range peers {
		out[p.key()] = p
	}
	return out
}

// nodeFlowCount is the number of flows in a node's br-int.
func nodeFlowCount(ctx context.Context, tb testing.TB, e *labEnv, node string) int {
	tb.Helper()
	out, err := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "dump-aggregate", "unix:"+e.BridgeSocket(node)).CombinedOutput()
	if err != nil {
		tb.Fatalf("dump-aggregate on %s: %v: %s", node, err, out)
	}
	i := strings.Index(string(out), "flow_count=")
	if i < 0 {
		tb.Fatalf("dump-aggregate on %s printed no flow_count: %s", node, out)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out[i+len("flow_count="):])))
	if err != nil {
		tb.Fatalf("parse dump-aggregate %q: %v", out, err)
	}
	return n
}

// nodeConjIDFlows counts a node's conj_id flows: one per installed rule.
func nodeConjIDFlows(ctx context.Context, tb testing.TB, e *labEnv, node string) int {
	tb.Helper()
	out, err := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", "unix:"+e.BridgeSocket(node)).Output()
	if err != nil {
		tb.Fatalf("dump-flows on %s: %v", node, err)
	}
	return strings.Count(string(out), "conj_id=")
}

// policyFlows returns a node's flows that take part in conjunctions.
func policyFlows(ctx context.Context, e *labEnv, node string) string {
	out, _ := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", "unix:"+e.BridgeSocket(node)).Output()
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "conj") {
			if len(l) > 300 {
				l = l[:300] + "..."
			}
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// benchPort is the throughput sink's port in the destination pod.
const benchPort = 5201

// throughput sends bulk TCP from src to dst for d and returns bits/s as
// counted by the receiver. Both sockets are made inside the pods' netns.
func throughput(ctx context.Context, src, dst peer, d time.Duration) (float64, error) {
	var ln net.Listener
	err := inNetNS(dst.NetNS, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(dst.IP, strconv.Itoa(benchPort)))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("listen in %s: %w", dst.key(), err)
	}
	defer ln.Close()
	type result struct {
		n   int64
		dur time.Duration
		err error
	}
	got := make(chan result, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer conn.Close()
		start := time.Now()
		n, err := io.Copy(io.Discard, conn)
		got <- result{n, time.Since(start), err}
	}()
	var conn net.Conn
	err = inNetNS(src.NetNS, func() error {
		var err error
		dialer := net.Dialer{Timeout: 5 * time.Second}
		conn, err = dialer.DialContext(ctx, "tcp", net.JoinHostPort(dst.IP, strconv.Itoa(benchPort)))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("connect %s -> %s: %w", src.key(), dst.key(), err)
	}
	buf := make([]byte, 128<<10)
	_ = conn.SetWriteDeadline(time.Now().Add(d))
	for {
		if _, err := conn.Write(buf); err != nil {
			break // the deadline ends the bounded run
		}
	}
	conn.Close()
	select {
	case r := <-got:
		if r.err != nil {
			return 0, r.err
		}
		return float64(r.n*8) / r.dur.Seconds(), nil
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("the receiver in %s did not finish", dst.key())
	}
}

// inNetNS runs fn on a thread inside the netns at path (a peer's NetNS).
func inNetNS(path string, fn func() error) error {
	netns, err := ns.GetNS(path)
	if err != nil {
		return err
	}
	defer netns.Close()
	return netns.Do(func(ns.NetNS) error { return fn() })
}
