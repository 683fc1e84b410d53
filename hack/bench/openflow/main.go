// Command openflow measures the project's OpenFlow binding against
// ovs-ofctl on a private Open vSwitch instance (netdev bridge in its own
// network namespace) and prints each figure with its reference and their
// ratio, all measured in one run:
//
//	(a) 100,000 distinct flows into an empty table: binding (one bundle,
//	    encoding included) vs `ovs-ofctl --bundle add-flows FILE`, and the
//	    floor: pre-encoded flow mods written, then the barrier reply (and
//	    the floor of a bundle: a pre-encoded bundle, then its commit);
//	(b) per-pod batches of 5 flows: p50/p99 of the binding's bundle vs one
//	    `ovs-ofctl --bundle add-flows` call per batch;
//	(c) bytes and allocations per flow encoded.
//
// It needs root and Open vSwitch; hack/bench/openflow.sh runs it.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"antrea.io/antrea/pkg/ovs/openflow"
	"antrea.io/antrea/pkg/ovs/ovsinstance"
)

const bridge = "br0"

func main() {
	nFlows := flag.Int("flows", 100000, "flows of the bulk install")
	rounds := flag.Int("rounds", 3, "rounds of the bulk install (the median is reported)")
	batches := flag.Int("batches", 1000, "per-pod batches through the binding")
	ofctlBatches := flag.Int("ofctl-batches", 200, "per-pod batches through ovs-ofctl (each spawns a process)")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 10*time.Minute)
	defer cancelT()
	if err := run(ctx, *nFlows, *rounds, *batches, *ofctlBatches); err != nil {
		fmt.Fprintln(os.Stderr, "openflow bench:", err)
		os.Exit(1)
	}
}

type bench struct {
	in   *ovsinstance.Instance
	mgmt string
	conn *openflow.Conn
}

func run(ctx context.Context, nFlows, rounds, batches, ofctlBatches int) error {
	ns := fmt.Sprintf("ofconn-bench-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add %s: %w: %s", ns, err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	dir, err := os.MkdirTemp("", "ovs-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	in, err := ovsinstance.Start(ctx, ovsinstance.Config{Dir: dir, NetNS: ns})
	if err != nil {
		return err
	}
	defer in.Stop()
	if _, err := in.Vsctl("add-br", bridge, "--", "set", "bridge", bridge, "datapath_type=netdev",
		"protocols=OpenFlow13,OpenFlow15", "fail_mode=secure"); err != nil {
		return err
	}
	b := &bench{in: in, mgmt: in.BridgeMgmt(bridge)}
	if b.conn, err = openflow.Dial(ctx, b.mgmt, openflow.Options{}); err != nil {
		return err
	}
	defer b.conn.Close()
	fmt.Printf("OpenFlow binding benchmark (ovs-vswitchd %s, netdev bridge, OpenFlow 1.5, GOMAXPROCS=%d)\n\n", ovsVersion(), runtime.GOMAXPROCS(0))

	flows := bulkFlows(nFlows)
	var ours, ofctl, floor, bundleFloor, apply []time.Duration
	for r := 0; r < rounds; r++ {
		d, err := b.timeBinding(ctx, flows)
		if err != nil {
			return err
		}
		ours = append(ours, d)
		if d, err = b.timeOfctl(ctx, flows); err != nil {
			return err
		}
		ofctl = append(ofctl, d)
		if d, err = b.timeFloor(ctx, flows); err != nil {
			return err
		}
		floor = append(floor, d)
		if d, err = b.timeBundleFloor(ctx, flows); err != nil {
			return err
		}
		bundleFloor = append(bundleFloor, d)
		if d, err = b.timeApply(ctx, flows); err != nil {
			return err
		}
		apply = append(apply, d)
	}
	fmt.Printf("(a) install %d distinct flows into an empty table, median of %d rounds\n", nFlows, rounds)
	row("binding, one bundle (encoding included)", median(ours), "", 0)
	row("ovs-ofctl --bundle add-flows FILE", median(ofctl), "", 0)
	row("floor: pre-encoded flow mods + barrier", median(floor), "", 0)
	row("floor of a bundle: pre-encoded bundle", median(bundleFloor), "", 0)
	fmt.Printf("    speed-up over ovs-ofctl:   %.2fx (aim >= 2x)\n", ratio(median(ofctl), median(ours)))
	fmt.Printf("    binding / floor:           %.2fx (aim <= 1.25x)\n", ratio(median(ours), median(floor)))
	fmt.Printf("    binding / bundle floor:    %.2fx\n", ratio(median(ours), median(bundleFloor)))
	row("binding, Apply: flow mods + barrier (not atomic)", median(apply), "", 0)
	fmt.Printf("    Apply / floor:             %.2fx\n\n", ratio(median(apply), median(floor)))

	lat, err := b.podBatches(ctx, batches, false)
	if err != nil {
		return err
	}
	latOfctl, err := b.podBatches(ctx, ofctlBatches, true)
	if err != nil {
		return err
	}
	fmt.Printf("(b) per-pod batch of 5 flows (binding: %d batches, ovs-ofctl: %d batches, one process each)\n", batches, ofctlBatches)
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	o50, o99 := percentile(latOfctl, 50), percentile(latOfctl, 99)
	fmt.Printf("    %-40s p50 %10v   p99 %10v\n", "binding bundle", p50, p99)
	fmt.Printf("    %-40s p50 %10v   p99 %10v\n", "ovs-ofctl --bundle add-flows", o50, o99)
	fmt.Printf("    speed-up p50: %.1fx   p99: %.1fx (aim >= 20x)\n\n", ratio(o50, p50), ratio(o99, p99))

	bytesPer, allocsPer := encodeCost(flows)
	fmt.Printf("(c) encoding a flow mod into a bundle add message: %.1f B/flow, %.2f allocs/flow\n", bytesPer, allocsPer)
	return nil
}

func row(name string, d time.Duration, _ string, _ float64) {
	fmt.Printf("    %-50s %10v\n", name, d.Round(time.Millisecond))
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(i-1, len(s)-1))].Round(time.Microsecond)
}

func ovsVersion() string {
	out, _ := exec.Command("ovs-vswitchd", "--version").Output()
	f := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
	if len(f) == 0 {
		return "?"
	}
	return f[len(f)-1]
}

// bulkFlows are the flows: table=0,priority=100,ip,nw_src=10.x.y.z,tcp,tp_dst=80 actions=resubmit(,1).
func bulkFlows(n int) []*openflow.Flow {
	flows := make([]*openflow.Flow, n)
	for i := range flows {
		f := &openflow.Flow{Table: 0, Priority: 100, Actions: []openflow.Action{openflow.ResubmitToTable(1)}}
		f.Match.IPSrc(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})).IPProto(6).TCPDst(80)
		flows[i] = f
	}
	return flows
}

// clear empties the bridge and checks it is empty, so each round starts equal.
func (b *bench) clear(ctx context.Context) error {
	if err := b.conn.Bundle(ctx, openflow.DeleteFlows(openflow.TableAll, 0, 0)); err != nil {
		return err
	}
	return b.expect(ctx, 0)
}

// expect checks that table 0 holds n flows: a measurement that did not
// install every flow does not count.
func (b *bench) expect(ctx context.Context, n int) error {
	ts, err := b.conn.TableStats(ctx)
	if err != nil {
		return err
	}
	if len(ts) == 0 || int(ts[0].ActiveCount) != n {
		return fmt.Errorf("table 0 holds %v flows, want %d", ts[0].ActiveCount, n)
	}
	return nil
}

func (b *bench) timeBinding(ctx context.Context, flows []*openflow.Flow) (time.Duration, error) {
	if err := b.clear(ctx); err != nil {
		return 0, err
	}
	runtime.GC()
	start := time.Now()
	msgs := make([]openflow.Message, len(flows))
	for i, f := range flows {
		msgs[i] = openflow.AddFlow(f)
	}
	if err := b.conn.Bundle(ctx, msgs...); err != nil {
		return 0, err
	}
	d := time.Since(start)
	return d, b.expect(ctx, len(flows))
}

// timeApply installs the flows through Conn.Apply: plain flow mods and a
// barrier, encoding included; the same work as the floor, minus atomicity.
func (b *bench) timeApply(ctx context.Context, flows []*openflow.Flow) (time.Duration, error) {
	if err := b.clear(ctx); err != nil {
		return 0, err
	}
	runtime.GC()
	start := time.Now()
	msgs := make([]openflow.Message, len(flows))
	for i, f := range flows {
		msgs[i] = openflow.AddFlow(f)
	}
	if err := b.conn.Apply(ctx, msgs...); err != nil {
		return 0, err
	}
	d := time.Since(start)
	return d, b.expect(ctx, len(flows))
}

func (b *bench) timeOfctl(ctx context.Context, flows []*openflow.Flow) (time.Duration, error) {
	if err := b.clear(ctx); err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	for _, f := range flows {
		buf.WriteString(f.String())
		buf.WriteByte('\n')
	}
	file := filepath.Join(b.in.Dir(), "flows.txt")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		return 0, err
	}
	defer os.Remove(file)
	start := time.Now()
	if out, err := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "--bundle", "add-flows", b.mgmt, file).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("ovs-ofctl add-flows: %w: %s", err, out)
	}
	d := time.Since(start)
	return d, b.expect(ctx, len(flows))
}

func (b *bench) timeFloor(ctx context.Context, flows []*openflow.Flow) (time.Duration, error) {
	if err := b.clear(ctx); err != nil {
		return 0, err
	}
	var enc []byte
	for i, f := range flows {
		var err error
		if enc, err = openflow.AppendMessage(enc, openflow.AddFlow(f), b.conn.Version(), uint32(0x10000000+i)); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := b.conn.SendRaw(ctx, enc); err != nil {
		return 0, err
	}
	if err := b.conn.Barrier(ctx); err != nil {
		return 0, err
	}
	d := time.Since(start)
	return d, b.expect(ctx, len(flows))
}

// timeBundleFloor writes a pre-encoded OpenFlow 1.5 bundle (open, every
// flow mod as a bundle add message, commit) and waits for the commit reply
// (through a barrier): what the switch needs to apply the flows atomically.
func (b *bench) timeBundleFloor(ctx context.Context, flows []*openflow.Flow) (time.Duration, error) {
	if err := b.clear(ctx); err != nil {
		return 0, err
	}
	const id = 0xbe4c
	flags := openflow.BundleAtomic | openflow.BundleOrdered
	ctrl := func(enc []byte, typ uint16, xid uint32) []byte {
		body := binary.BigEndian.AppendUint32(nil, id)
		body = binary.BigEndian.AppendUint16(body, typ)
		body = binary.BigEndian.AppendUint16(body, flags)
		enc, _ = openflow.AppendMessage(enc, &openflow.RawMessage{Type: openflow.TypeBundleControl, Body: body}, openflow.Version15, xid)
		return enc
	}
	enc := ctrl(nil, 0, 0x20000000) // OFPBCT_OPEN_REQUEST
	for i, f := range flows {
		xid := uint32(0x20000001 + i)
		inner, err := openflow.Marshal(openflow.AddFlow(f), openflow.Version15, xid)
		if err != nil {
			return 0, err
		}
		body := binary.BigEndian.AppendUint32(nil, id)
		body = binary.BigEndian.AppendUint16(body, 0)
		body = binary.BigEndian.AppendUint16(body, flags)
		if enc, err = openflow.AppendMessage(enc, &openflow.RawMessage{Type: openflow.TypeBundleAddMessage, Body: append(body, inner...)}, openflow.Version15, xid); err != nil {
			return 0, err
		}
	}
	enc = ctrl(enc, 4, 0x1fffffff) // OFPBCT_COMMIT_REQUEST
	start := time.Now()
	if err := b.conn.SendRaw(ctx, enc); err != nil {
		return 0, err
	}
	if err := b.conn.Barrier(ctx); err != nil {
		return 0, err
	}
	d := time.Since(start)
	return d, b.expect(ctx, len(flows))
}

// podFlows are five flows of one pod, in the spirit of the agent's
// classifier, spoof guard and forwarding flows.
func podFlows(i int) []*openflow.Flow {
	port := uint32(10 + i)
	ip := netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)})
	mac := []byte{0x02, 0, 0, 0, byte(i >> 8), byte(i)}
	f1 := &openflow.Flow{Table: 0, Priority: 190, Actions: []openflow.Action{openflow.ResubmitToTable(1)}}
	f1.Match.InPort(port)
	f2 := &openflow.Flow{Table: 1, Priority: 200, Actions: []openflow.Action{openflow.ResubmitToTable(2)}}
	f2.Match.InPort(port).IPSrc(ip)
	f3 := &openflow.Flow{Table: 1, Priority: 200, Actions: []openflow.Action{openflow.ResubmitToTable(2)}}
	f3.Match.InPort(port).EthType(openflow.EthTypeARP).ARPSpa(ip)
	f4 := &openflow.Flow{Table: 2, Priority: 200, Actions: []openflow.Action{&openflow.Output{Port: port}}}
	f4.Match.IPDst(ip)
	f5 := &openflow.Flow{Table: 3, Priority: 200, Actions: []openflow.Action{&openflow.Output{Port: port}}}
	f5.Match.EthDst(mac)
	return []*openflow.Flow{f1, f2, f3, f4, f5}
}

// podBatches installs n pods' flows, one batch each, and returns the latencies.
func (b *bench) podBatches(ctx context.Context, n int, viaOfctl bool) ([]time.Duration, error) {
	if err := b.clear(ctx); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		flows := podFlows(i)
		var text string
		if viaOfctl {
			var sb strings.Builder
			for _, f := range flows {
				sb.WriteString(f.String())
				sb.WriteByte('\n')
			}
			text = sb.String()
		}
		start := time.Now()
		if viaOfctl {
			cmd := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow15", "--bundle", "add-flows", b.mgmt, "-")
			cmd.Stdin = strings.NewReader(text)
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("ovs-ofctl batch %d: %w: %s", i, err, out)
			}
		} else {
			msgs := make([]openflow.Message, len(flows))
			for j, f := range flows {
				msgs[j] = openflow.AddFlow(f)
			}
			if err := b.conn.Bundle(ctx, msgs...); err != nil {
				return nil, fmt.Errorf("batch %d: %w", i, err)
			}
		}
		lat = append(lat, time.Since(start))
	}
	body, err := b.conn.FlowStatsRaw(ctx, openflow.FlowStatsRequest{TableID: openflow.TableAll})
	if err != nil {
		return nil, err
	}
	stats, err := openflow.DecodeFlowStats(body, b.conn.Version())
	if err != nil {
		return nil, err
	}
	if len(stats) != 5*n {
		return nil, fmt.Errorf("after %d batches the bridge holds %d flows, want %d", n, len(stats), 5*n)
	}
	return lat, nil
}

// encodeCost measures heap bytes and allocations per flow of encoding flow
// mods into bundle-add framing, as the binding does on its hot path.
func encodeCost(flows []*openflow.Flow) (bytesPerFlow, allocsPerFlow float64) {
	buf := make([]byte, 0, 1<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, f := range flows {
		var err error
		buf, err = openflow.AppendMessage(buf[:0], openflow.AddFlow(f), openflow.Version15, uint32(i))
		if err != nil {
			panic(err)
		}
	}
	runtime.ReadMemStats(&after)
	n := float64(len(flows))
	return float64(after.TotalAlloc-before.TotalAlloc) / n, float64(after.Mallocs-before.Mallocs) / n
}
