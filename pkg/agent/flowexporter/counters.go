package flowexporter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/ipfix"
)

// CounterFeed gives the packet and byte counts of a connection's
// directions when its ConnectionSource has none.
type CounterFeed interface {
	// Counts returns the counts of one direction seen so far.
	Counts(t Tuple) (Counts, bool)
	// Retain forgets the directions not in keep that saw no packet since
	// the previous Retain.
	Retain(keep map[Tuple]struct{})
}

// OVSIPFIXFeed counts packets and bytes per direction from the IPFIX
// records ovs-vswitchd itself exports for a bridge (its Bridge's ipfix
// column: bridge-level sampling at every packet's input, probability 1).
// OVS's userspace conntrack keeps no counters: `dpctl/dump-conntrack -s`
// prints none for the netdev datapath, so this is where the counts come
// from. Each record holds one direction's 5-tuple and its
// packetDeltaCount and octetDeltaCount (IP bytes) since OVS's previous
// record of it; the feed sums them. ICMP records carry no ports and are
// not matched (ICMP connections are exported without counts).
type OVSIPFIXFeed struct {
	conn net.PacketConn
	max  int

	mu     sync.Mutex
	counts map[Tuple]*feedEntry

	// Records counts the records summed; Dropped those not kept because
	// the feed holds max directions; Undecodable the messages it could
	// not decode.
	Records, Dropped, Undecodable atomic.Uint64
}

type feedEntry struct {
	Counts
	fresh bool // updated since the previous Retain
}

// ListenOVSIPFIX listens on addr (UDP, e.g. 127.0.0.1:0) for ovs-vswitchd's
// records, keeping at most max directions.
func ListenOVSIPFIX(addr string, max int) (*OVSIPFIXFeed, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for OVS's IPFIX records on %s: %w", addr, err)
	}
	// OVS sends a burst of records every cache_active_timeout: ask for a
	// receive buffer that holds one (the kernel caps it at rmem_max).
	if u, ok := pc.(*net.UDPConn); ok {
		_ = u.SetReadBuffer(4 << 20)
	}
	return &OVSIPFIXFeed{conn: pc, max: max, counts: map[Tuple]*feedEntry{}}, nil
}

// Addr returns the address OVS is to send to.
func (f *OVSIPFIXFeed) Addr() string { return f.conn.LocalAddr().String() }

// Run reads OVS's messages until ctx ends, then closes the socket.
func (f *OVSIPFIXFeed) Run(ctx context.Context) {
	stop := context.AfterFunc(ctx, func() { f.conn.Close() })
	defer stop()
	defer f.conn.Close()
	// One exporting process: ovs-vswitchd.
	s := ipfix.NewSession()
	buf := make([]byte, 65536)
	logged := false
	for {
		n, _, err := f.conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				klog.ErrorS(err, "Reading OVS's IPFIX records failed")
			}
			return
		}
		if err := f.Ingest(s, buf[:n]); err != nil && !logged {
			klog.ErrorS(err, "Could not decode an IPFIX message of ovs-vswitchd (logged once)")
			logged = true
		}
	}
}

// Ingest decodes one of OVS's messages in session s and sums its records.
func (f *OVSIPFIXFeed) Ingest(s *ipfix.Session, msg []byte) error {
	m, err := s.Decode(msg)
	if err != nil {
		f.Undecodable.Add(1)
	}
	if m == nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range m.Records {
		t, c, ok := directionOf(r)
		if !ok {
			continue
		}
		e := f.counts[t]
		if e == nil {
			if len(f.counts) >= f.max {
				f.Dropped.Add(1)
				continue
			}
			e = &feedEntry{}
			f.counts[t] = e
		}
		e.Packets += c.Packets
		e.Bytes += c.Bytes
		e.fresh = true
		f.Records.Add(1)
	}
	return err
}

// directionOf reads the 5-tuple and delta counts of one of OVS's records.
func directionOf(r ipfix.Record) (Tuple, Counts, bool) {
	var t Tuple
	var c Counts
	proto, ok := r.Get(ipfix.ProtocolIdentifier)
	if !ok {
		return t, c, false
	}
	t.Proto = uint8(proto.Uint)
	src, ok1 := r.Get(ipfix.SourceIPv4Address)
	dst, ok2 := r.Get(ipfix.DestinationIPv4Address)
	if !ok1 || !ok2 {
		src, ok1 = r.Get(ipfix.SourceIPv6Address)
		dst, ok2 = r.Get(ipfix.DestinationIPv6Address)
	}
	sp, ok3 := r.Get(ipfix.SourceTransportPort)
	dp, ok4 := r.Get(ipfix.DestinationTransportPort)
	pk, ok5 := r.Get(ipfix.PacketDeltaCount)
	by, ok6 := r.Get(ipfix.OctetDeltaCount)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return t, c, false
	}
	// OVS 3.1 reports a packet at its input and again at its output
	// (flowDirection 0 and 1), whatever enable-output-sampling says:
	// count it once, at its input.
	if fd, ok := r.Get(ipfix.FlowDirection); ok && fd.Uint != 0 {
		return t, c, false
	}
	t.Src, t.Dst = src.Addr.Unmap(), dst.Addr.Unmap()
	t.SrcPort, t.DstPort = uint16(sp.Uint), uint16(dp.Uint)
	return t, Counts{Packets: pk.Uint, Bytes: by.Uint}, true
}

// Counts implements CounterFeed.
func (f *OVSIPFIXFeed) Counts(t Tuple) (Counts, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.counts[t]; ok {
		return e.Counts, true
	}
	return Counts{}, false
}

// Retain implements CounterFeed.
func (f *OVSIPFIXFeed) Retain(keep map[Tuple]struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t, e := range f.counts {
		if _, ok := keep[t]; !ok && !e.fresh {
			delete(f.counts, t)
		}
		e.fresh = false
	}
}

// BridgeIPFIX says how ovs-vswitchd exports a bridge's flows to the feed.
type BridgeIPFIX struct {
	RunDir, Bridge string
	// Target is the feed's address (host:port).
	Target string
	// CacheActiveTimeout is how often (seconds, at least 1) OVS sends a
	// record of a flow that goes on; CacheMaxFlows bounds its cache.
	CacheActiveTimeout, CacheMaxFlows int
}

// Configure points the bridge's IPFIX export at the feed: every packet is
// sampled at its input to the bridge (not again at a tunnel output), so a
// packet is counted once per pass through the bridge.
//
// The export is cleared first, in a transaction of its own: OVS 3.1 sends
// its templates at an exporter's first export and then every 10 minutes,
// and a new target given to an existing exporter (an agent restarted while
// ovs-vswitchd runs, or ovs-vswitchd restarted with the previous agent's
// row) keeps that schedule, so the feed would decode nothing for up to 10
// minutes; a cleared exporter starts afresh and sends them at once (seen on
// the lab after `kubectl rollout restart ds/antrea-agent`).
func (b BridgeIPFIX) Configure(ctx context.Context) error {
	if err := b.Clear(ctx); err != nil {
		return err
	}
	_, err := vsctl(ctx, b.RunDir, "--", "set", "Bridge", b.Bridge, "ipfix=@i", "--", "--id=@i", "create", "IPFIX",
		fmt.Sprintf("targets=%q", b.Target), "sampling=1",
		"cache_active_timeout="+strconv.Itoa(max(1, b.CacheActiveTimeout)),
		"cache_max_flows="+strconv.Itoa(max(1, b.CacheMaxFlows)),
		"other_config:enable-output-sampling=false", "other_config:enable-tunnel-sampling=false",
		"external_ids:owner="+ipfixOwner)
	return err
}

// ipfixOwner marks the IPFIX row the agent made (external_ids:owner).
const ipfixOwner = "antrea-flowexporter"

// ClearStale stops the bridge's IPFIX export if the agent configured it
// in an earlier run (an agent that died without Clear), so sampling every
// packet does not outlive the exporter. An export someone else configured
// stays.
func (b BridgeIPFIX) ClearStale(ctx context.Context) error {
	out, err := vsctl(ctx, b.RunDir, "--bare", "--columns=ipfix", "find", "Bridge", "name="+b.Bridge)
	if err != nil || strings.TrimSpace(out) == "" {
		return err
	}
	owner, err := vsctl(ctx, b.RunDir, "--bare", "--columns=_uuid", "find", "IPFIX", "external_ids:owner="+ipfixOwner)
	if err != nil || !strings.Contains(owner, strings.TrimSpace(out)) {
		return err
	}
	return b.Clear(ctx)
}

// Clear stops the bridge's IPFIX export.
func (b BridgeIPFIX) Clear(ctx context.Context) error {
	_, err := vsctl(ctx, b.RunDir, "clear", "Bridge", b.Bridge, "ipfix")
	return err
}

func vsctl(ctx context.Context, runDir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ovs-vsctl", append([]string{"--timeout=10"}, args...)...)
	if runDir != "" {
		cmd.Env = append(os.Environ(), "OVS_RUNDIR="+runDir)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ovs-vsctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
