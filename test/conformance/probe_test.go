package conformance

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"antrea.io/antrea/pkg/testpod"
)

const (
	// probeTimeout bounds one probe. Denied traffic is dropped, so every
	// denied cell costs this much; an allowed cell that loses its first
	// packet (neighbour resolution) is simply probed again.
	probeTimeout = 500 * time.Millisecond
	// probeParallelism bounds the probes in flight (each holds an OS thread
	// switched into the source pod's netns).
	probeParallelism = 64
	// realizeTimeout bounds how long a step may take to show the expected
	// matrix.
	realizeTimeout = 30 * time.Second
	// settleTime spaces probe rounds; realization is expected within tens
	// of milliseconds, so two matching passes this far apart are stable.
	settleTime = 500 * time.Millisecond
)

// observation is what one probe saw.
type observation struct {
	Verdict testpod.Verdict
	// Answer is the name the server answered with; it must be the
	// destination pod's, or the probe reached some other pod.
	Answer string
	Err    string
}

func (o observation) allowed() bool { return o.Verdict == testpod.Connected }

// prober runs probes from inside source pods: each probe's socket is made in
// the source pod's netns, which is what `antrea-lab exec` + `antrea-testpod
// connect` does, without a process per probe.
type prober struct {
	peers map[string]peer
}

func newProber(peers []peer) *prober {
	p := &prober{peers: map[string]peer{}}
	for _, x := range peers {
		p.peers[x.key()] = x
	}
	return p
}

// probe runs the given cells in parallel (bounded) and returns what each saw.
func (p *prober) probe(ctx context.Context, cs []cell) map[cell]observation {
	out := make(map[cell]observation, len(cs))
	var mu sync.Mutex
	sem := make(chan struct{}, probeParallelism)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o := p.probeOne(ctx, c, probeTimeout)
			mu.Lock()
			out[c] = o
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (p *prober) probeOne(ctx context.Context, c cell, timeout time.Duration) observation {
	src, dst := p.peers[c.From], p.peers[c.To]
	netns, err := ns.GetNS(src.NetNS)
	if err != nil {
		return observation{Verdict: "error", Err: fmt.Sprintf("open netns of %s: %v", c.From, err)}
	}
	defer netns.Close()
	var res testpod.Result
	err = netns.Do(func(ns.NetNS) error {
		var err error
		res, err = testpod.Connect(ctx, testpod.ConnectConfig{
			Protocol: strings.ToLower(string(c.PP.Protocol)),
			To:       net.JoinHostPort(dst.IP, strconv.Itoa(c.PP.Port)),
			Timeout:  timeout,
		})
		return err
	})
	if err != nil {
		return observation{Verdict: "error", Err: err.Error()}
	}
	o := observation{Verdict: res.Verdict, Answer: res.Name}
	if res.Err != nil {
		o.Err = res.Err.Error()
	}
	if o.Verdict == testpod.Connected && res.Name != dst.Name {
		// Someone else answered on the destination's IP: a stale address.
		o.Verdict = "wrong-pod"
	}
	return o
}

// probeUntil probes the whole matrix until two full passes in a row, at
// least settleTime apart, equal the expectation, or until realizeTimeout.
// It runs only after the step's policies are reported realized on every
// Node of their spans (waitStepRealized): matching passes alone cannot tell
// a realized change from an old state that happens to agree with the new
// expectation. Group membership (pod and namespace labels) has no
// realization report, so one matching pass is still not enough. Between
// full passes only mismatching cells are probed again.
func (p *prober) probeUntil(ctx context.Context, all []cell, want map[cell]bool) (map[cell]observation, int) {
	deadline := time.Now().Add(realizeTimeout)
	obs := p.probe(ctx, all)
	full, matchingFull, rounds := true, 0, 1
	for {
		bad := mismatches(all, obs, want)
		if len(bad) == 0 && full {
			matchingFull++
		} else if len(bad) > 0 {
			matchingFull = 0
		}
		if matchingFull >= 2 || time.Now().After(deadline) || ctx.Err() != nil {
			return obs, rounds
		}
		rounds++
		select {
		case <-ctx.Done():
		case <-time.After(settleTime):
		}
		if len(bad) == 0 {
			obs, full = p.probe(ctx, all), true
			continue
		}
		for c, o := range p.probe(ctx, bad) {
			obs[c] = o
		}
		full = false
	}
}

func mismatches(all []cell, obs map[cell]observation, want map[cell]bool) []cell {
	var bad []cell
	for _, c := range all {
		if obs[c].allowed() != want[c] {
			bad = append(bad, c)
		}
	}
	return bad
}

// renderMatrices prints, per port and protocol, a cyclonus-like table: rows
// are sources, columns destinations, "." allowed, "X" denied as observed;
// a wrong cell shows "X!" or ".!" (observed, differs from the oracle).
func renderMatrices(peers []peer, obs map[cell]observation, want map[cell]bool) string {
	var b strings.Builder
	fmt.Fprintln(&b, `observed ("." allowed, "X" denied, "!" differs from the oracle, "-" not probed)`)
	for _, pp := range probedPorts {
		fmt.Fprintf(&b, "\n%s\n", pp)
		tw := tabwriter.NewWriter(&b, 0, 2, 1, ' ', 0)
		header := []string{"from\\to"}
		for _, to := range peers {
			header = append(header, to.key())
		}
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, from := range peers {
			row := []string{from.key()}
			for _, to := range peers {
				c := cell{From: from.key(), To: to.key(), PP: pp}
				o, ok := obs[c]
				if !ok {
					row = append(row, "-")
					continue
				}
				s := "X"
				if o.allowed() {
					s = "."
				}
				if o.allowed() != want[c] {
					s += "!"
				}
				row = append(row, s)
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()
	}
	return b.String()
}

// describeMismatches lists each wrong cell with its probe's details.
func describeMismatches(bad []cell, obs map[cell]observation, want map[cell]bool) string {
	var lines []string
	for _, c := range bad {
		o := obs[c]
		lines = append(lines, fmt.Sprintf("  %s -> %s %s: oracle allowed=%t, observed %s %s %s",
			c.From, c.To, c.PP, want[c], o.Verdict, o.Answer, o.Err))
	}
	sort.Strings(lines)
	if len(lines) > 40 {
		lines = append(lines[:40], fmt.Sprintf("  ... and %d more", len(lines)-40))
	}
	return strings.Join(lines, "\n")
}

// flowsOfInvolvedPods dumps, for every node hosting a pod of a wrong cell,
// the br-int interfaces and the flows that name an involved pod's IP or take
// part in a conjunction (the policy rules), as `ovs-ofctl` prints them.
func (e *labEnv) flowsOfInvolvedPods(ctx context.Context, peers []peer, bad []cell) string {
	involved := map[string]bool{}
	for _, c := range bad {
		involved[c.From], involved[c.To] = true, true
	}
	nodes := map[string]bool{}
	var ips []string
	var b strings.Builder
	for _, p := range peers {
		if involved[p.key()] {
			nodes[p.Node] = true
			ips = append(ips, p.IP)
			fmt.Fprintf(&b, "pod %s: ip %s node %s netns %s\n", p.key(), p.IP, p.Node, p.NetNS)
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range nodes {
			if !yield(n) {
				return
			}
		}
	})
	for _, node := range names {
		sock := e.BridgeSocket(node)
		fmt.Fprintf(&b, "\n=== node %s: ovs-ofctl -O OpenFlow15 dump-flows %s (filtered)\n", node, sock)
		if _, err := os.Stat(sock); err != nil {
			fmt.Fprintf(&b, "no OVS on this node (%v): the lab's runtime is %s\n", err, e.Opts.Runtime)
			continue
		}
		dbSock := filepath.Join(filepath.Dir(sock), "db.sock")
		ifaces, _ := exec.CommandContext(ctx, "ovs-vsctl", "--db=unix:"+dbSock, "--columns=name,ofport,external_ids",
			"--format=table", "list", "Interface").CombinedOutput()
		b.Write(ifaces)
		out, err := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", "unix:"+sock).CombinedOutput()
		if err != nil {
			fmt.Fprintf(&b, "dump-flows failed: %v: %s\n", err, out)
			continue
		}
		n := 0
		for _, line := range strings.Split(string(out), "\n") {
			// Policy rules are conjunctions; isolation is a drop on a
			// pod's port (in_port for egress, reg1 for ingress).
			keep := strings.Contains(line, "conj") ||
				(strings.Contains(line, "actions=drop") && (strings.Contains(line, "in_port=") || strings.Contains(line, "reg1=")))
			for _, ip := range ips {
				keep = keep || strings.Contains(line, ip+",") || strings.Contains(line, ip+" ") || strings.HasSuffix(line, ip)
			}
			if keep && n < 300 {
				fmt.Fprintln(&b, line)
				n++
			}
		}
		if n >= 300 {
			fmt.Fprintln(&b, "... (truncated at 300 flows)")
		}
		// The datapath's cached megaflows for the involved pods: a stale one
		// (actions of an older flow table) explains a wrong cell whose
		// OpenFlow flows look right.
		// The lab's own instances (node simulator) name the control socket
		// ovs-vswitchd.ctl; the agent image's OVS ovs-vswitchd.PID.ctl.
		ctl := filepath.Join(filepath.Dir(sock), "ovs-vswitchd.ctl")
		if found, _ := filepath.Glob(filepath.Join(filepath.Dir(sock), "ovs-vswitchd.*.ctl")); len(found) == 1 {
			ctl = found[0]
		}
		dp, err := exec.CommandContext(ctx, "ovs-appctl", "-t", ctl, "dpctl/dump-flows").CombinedOutput()
		if err != nil {
			fmt.Fprintf(&b, "dpctl/dump-flows failed: %v: %s\n", err, dp)
			continue
		}
		fmt.Fprintf(&b, "--- ovs-appctl -t %s dpctl/dump-flows (filtered)\n", ctl)
		n = 0
		for _, line := range strings.Split(string(dp), "\n") {
			for _, ip := range ips {
				if strings.Contains(line, "="+ip+",") || strings.Contains(line, "="+ip+"/") || strings.Contains(line, "="+ip+")") {
					if n < 100 {
						fmt.Fprintln(&b, line)
					}
					n++
					break
				}
			}
		}
	}
	return b.String()
}
