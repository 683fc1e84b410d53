package datapath

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Issue 17 item 2: ovs-vswitchd or ovsdb-server dies under NetworkPolicy.
// Either takes the node's antrea-ovs container down (start_ovs stops the
// other daemon and exits); kubelet starts it again, ovs-vswitchd comes up
// with flow-restore-wait (and br-int in secure fail mode: no flow, no
// forwarding) and the agent replays its flows, groups and meters before
// clearing flow-restore-wait.

// ovsState is what a node's br-int holds.
type ovsState struct{ flows, groups, meters int }

func (e *env) ovsState(node string) ovsState {
	return ovsState{e.flowCount(node), e.groupCount(node), e.meterCount(node)}
}

// meterCount is the number of OpenFlow meters on a node's br-int (-1 while
// unreachable).
func (e *env) meterCount(node string) int { return e.ofctlCount(node, "dump-meters", "meter=") }

// ovsRestartUnderPolicy kills component (ovs-vswitchd or ovsdb-server) on
// both nodes while NetworkPolicy lets only a1 reach b1 on TCP 80 and a
// ClusterIP (vip) leads to b1. It measures, from the kill, when each node's
// br-int holds again every flow, group and meter it held before, and when
// a1 reaches b1 again; it fails if a2's probe of b1 (one attempt every
// 10 ms for the whole restart) ever connects, if the state does not come
// back, or if b1 is not reachable afterwards directly and through the
// ClusterIP.
//
// window bounds the probe and the wait: the restart must complete inside it.
func (e *env) ovsRestartUnderPolicy(t *testing.T, ctx context.Context, component, vip string, window time.Duration) {
	t.Helper()
	e.ensureB1OnlyFromA1(t, ctx)
	nodes := []string{"node-1", "node-2"}
	before := map[string]ovsState{}
	for _, n := range nodes {
		before[n] = e.ovsState(n)
		if before[n].flows == 0 || before[n].groups < 0 || before[n].meters < 0 {
			t.Fatalf("%s's br-int before the restart: %+v", n, before[n])
		}
	}
	forbidden := e.background(ctx, "a2", "antrea-testpod", "connect", "--to", e.ip("b1")+":80",
		"--timeout", "200ms", "--every", "10ms", "--for", window.String())
	time.Sleep(time.Second)
	start := time.Now()
	for _, n := range nodes {
		e.kill(t, component, n)
	}
	back := map[string]time.Duration{}
	var reached time.Duration
	wctx, cancel := context.WithTimeout(ctx, window-2*time.Second)
	defer cancel()
	for (len(back) < len(nodes) || reached == 0) && wctx.Err() == nil {
		for _, n := range nodes {
			if _, ok := back[n]; !ok && e.ovsState(n) == before[n] {
				back[n] = time.Since(start)
			}
		}
		if reached == 0 {
			pctx, pcancel := context.WithTimeout(wctx, 2*time.Second)
			if e.probe(pctx, "a1", "tcp", e.ip("b1")) == nil {
				reached = time.Since(start)
			}
			pcancel()
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, n := range nodes {
		if _, ok := back[n]; !ok {
			t.Errorf("%s's br-int after %s restarted: %+v, before: %+v", n, component, e.ovsState(n), before[n])
		}
	}
	if reached == 0 {
		t.Errorf("a1 did not reach b1 within %s of the %s kill", window, component)
	}
	t.Logf("%s killed on both nodes: every flow, group and meter back after %s on node-1 (%+v), %s on node-2 (%+v); a1 reaches b1 again after %s",
		component, back["node-1"].Round(10*time.Millisecond), before["node-1"], back["node-2"].Round(10*time.Millisecond),
		before["node-2"], reached.Round(10*time.Millisecond))
	e.waitRestarted(t, ctx, component)
	out, err := forbidden.wait()
	if err != nil {
		t.Fatalf("forbidden probe a2->b1: %v: %s", err, out)
	}
	t.Logf("while %s restarted: forbidden a2->b1: %s", component, strings.TrimSpace(out))
	if !strings.Contains(out, "connected=0 ") || strings.Contains(out, "attempts=0 ") {
		t.Errorf("a forbidden connection went through while %s restarted (policy bypassed): %s", component, out)
	}
	for _, c := range []struct{ what, to string }{{"b1", e.ip("b1")}, {"b1's ClusterIP", vip}} {
		if err := e.probeEventually(ctx, "a1", "tcp", c.to); err != nil {
			t.Errorf("after %s restarted, a1 -> %s: %v", component, c.what, err)
		}
	}
	if err := e.probe(ctx, "a2", "tcp", e.ip("b1")); err == nil {
		t.Errorf("after %s restarted, a2 reaches b1 against the policy", component)
	}
	if err := e.probeEventually(ctx, "b1", "tcp", e.ip("a2")); err != nil {
		t.Errorf("after %s restarted, b1 -> a2: %v", component, err)
	}
}
