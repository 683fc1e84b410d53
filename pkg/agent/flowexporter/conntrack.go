package flowexporter

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Tuple is one direction of a connection: protocol, addresses and ports
// (for ICMP, the echo id as both ports, type and code left out).
type Tuple struct {
	Proto            uint8
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
}

func (t Tuple) String() string {
	return fmt.Sprintf("%d %s:%d>%s:%d", t.Proto, t.Src, t.SrcPort, t.Dst, t.DstPort)
}

// Key identifies a connection in the store: its original direction and its
// conntrack zone (the same tuple may live in two zones, e.g. before and
// after a Service's SNAT).
type Key struct {
	Orig Tuple
	Zone uint16
}

// Counts are a direction's packets and bytes (IP bytes, headers included).
type Counts struct{ Packets, Bytes uint64 }

// Connection is a conntrack entry as a source read it.
type Connection struct {
	Key
	// Reply is the reply direction: after DNAT (a Service) its source is
	// the endpoint, not the address the client dialled.
	Reply Tuple
	Mark  uint32
	// Labels is the 128-bit conntrack label, as printed (hex, "" for 0).
	Labels string
	// TCPState is the TCP state ("" for other protocols).
	TCPState string
	// HasCounts says whether Orig/ReplyCounts were read: OVS's userspace
	// conntrack keeps none (see CounterFeed).
	HasCounts               bool
	OrigCounts, ReplyCounts Counts
}

// ConnectionSource lists the connections a datapath tracks. DpctlSource
// reads OVS's userspace conntrack; a netfilter conntrack source (the
// kernel datapath, with its own counters) implements the same interface.
type ConnectionSource interface {
	Connections(ctx context.Context) ([]Connection, error)
}

// DpctlSource lists the connections of ovs-vswitchd's userspace conntrack
// with `ovs-appctl dpctl/dump-conntrack -m -s`, in the given zones (all
// zones when Zones is empty).
type DpctlSource struct {
	// RunDir is ovs-vswitchd's run directory (antrea-agent.conf ovsRunDir).
	RunDir string
	// Datapath names the datapath ("netdev@ovs-netdev" for the userspace
	// one); empty lets ovs-appctl pick the only one (and log a warning
	// each time it fails to enumerate the kernel's).
	Datapath string
	Zones    []uint16
}

// Connections implements ConnectionSource.
func (s *DpctlSource) Connections(ctx context.Context) ([]Connection, error) {
	target := "ovs-vswitchd"
	if ctl := filepath.Join(s.RunDir, "ovs-vswitchd.ctl"); s.RunDir != "" {
		if _, err := os.Stat(ctl); err == nil {
			target = ctl
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	dump := func(zone string) ([]Connection, error) {
		args := []string{"-t", target, "dpctl/dump-conntrack", "-m", "-s"}
		if s.Datapath != "" {
			args = append(args, s.Datapath)
		}
		if zone != "" {
			args = append(args, "zone="+zone)
		}
		cmd := exec.CommandContext(ctx, "ovs-appctl", args...)
		if s.RunDir != "" {
			cmd.Env = append(os.Environ(), "OVS_RUNDIR="+s.RunDir)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("ovs-appctl dpctl/dump-conntrack: %w: %s", err, strings.TrimSpace(stderr.String()))
		}
		conns, _ := ParseDpctl(stdout.Bytes())
		return conns, nil
	}
	if len(s.Zones) == 0 {
		return dump("")
	}
	var all []Connection
	for _, z := range s.Zones {
		c, err := dump(strconv.Itoa(int(z)))
		if err != nil {
			return nil, err
		}
		all = append(all, c...)
	}
	return all, nil
}

// ParseDpctl parses the output of `ovs-appctl dpctl/dump-conntrack [-m]
// [-s]`, one entry per line (OVS's ct_dpif_format_entry). Lines it cannot
// read are skipped and counted in skipped; keys it does not know are
// ignored, so a newer OVS printing more does not break it.
func ParseDpctl(out []byte) (conns []Connection, skipped int) {
	for len(out) > 0 {
		line := out
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			out = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		c, err := parseEntry(string(line))
		if err != nil {
			skipped++
			continue
		}
		conns = append(conns, c)
	}
	return conns, skipped
}

var protocols = map[string]uint8{"icmp": 1, "tcp": 6, "udp": 17, "dccp": 33, "icmpv6": 58, "sctp": 132, "udplite": 136}

// parseEntry parses one line:
// tcp,orig=(src=A,dst=B,sport=P,dport=Q[,packets=N,bytes=M]),reply=(...),zone=Z,mark=M,labels=0x..,protoinfo=(state=S|state_orig=S,state_reply=S,...)
func parseEntry(line string) (Connection, error) {
	var c Connection
	fields := binding.SplitTopLevel(line)
	if len(fields) < 3 {
		return c, fmt.Errorf("too few fields")
	}
	proto, ok := protocols[fields[0]]
	if !ok {
		n, err := strconv.ParseUint(strings.TrimPrefix(fields[0], "proto="), 10, 8)
		if err != nil {
			return c, fmt.Errorf("protocol %q", fields[0])
		}
		proto = uint8(n)
	}
	var haveOrig, haveReply bool
	var origState, replyState string
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		var err error
		switch k {
		case "orig":
			c.Orig, c.OrigCounts, err = parseTuple(proto, v, &c.HasCounts)
			haveOrig = err == nil
		case "reply":
			c.Reply, c.ReplyCounts, err = parseTuple(proto, v, &c.HasCounts)
			haveReply = err == nil
		case "zone":
			var z uint64
			z, err = strconv.ParseUint(v, 10, 16)
			c.Zone = uint16(z)
		case "mark":
			var m uint64
			m, err = strconv.ParseUint(v, 0, 32)
			c.Mark = uint32(m)
		case "labels":
			c.Labels = v
		case "protoinfo":
			for _, p := range binding.SplitTopLevel(unparen(v)) {
				pk, pv, _ := strings.Cut(p, "=")
				switch pk {
				case "state":
					c.TCPState = pv
				case "state_orig":
					origState = pv
				case "state_reply":
					replyState = pv
				}
			}
		}
		if err != nil {
			return c, fmt.Errorf("%s: %w", k, err)
		}
	}
	if !haveOrig || !haveReply {
		return c, fmt.Errorf("no orig or reply tuple")
	}
	if c.TCPState == "" && proto == 6 {
		c.TCPState = laterState(origState, replyState)
	}
	return c, nil
}

// tcpStateOrder ranks the TCP states of OVS's userspace conntrack, which
// keeps one per peer (state_orig, state_reply): a connection is reported
// in the later of the two, so a half-closed one reads FIN_WAIT_2, not
// ESTABLISHED.
var tcpStateOrder = []string{"LISTEN", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "CLOSE_WAIT", "FIN_WAIT_1",
	"CLOSING", "LAST_ACK", "FIN_WAIT_2", "TIME_WAIT", "CLOSED"}

// Both peers at FIN_WAIT_2 or later means both closed (OVS then applies
// its closed-connection timeout): that reads TIME_WAIT, netfilter's name
// for it, which collectors know.
func laterState(a, b string) string {
	rank := func(s string) int {
		for i, x := range tcpStateOrder {
			if x == s {
				return i
			}
		}
		return -1
	}
	closed := rank("FIN_WAIT_2")
	if rank(a) >= closed && rank(b) >= closed && rank(a) < rank("CLOSED") && rank(b) < rank("CLOSED") {
		return "TIME_WAIT"
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

func unparen(s string) string {
	if len(s) >= 2 && s[0] == '(' && s[len(s)-1] == ')' {
		return s[1 : len(s)-1]
	}
	return s
}

func parseTuple(proto uint8, s string, hasCounts *bool) (Tuple, Counts, error) {
	t := Tuple{Proto: proto}
	var c Counts
	if len(s) < 2 || s[0] != '(' || s[len(s)-1] != ')' {
		return t, c, fmt.Errorf("tuple %q", s)
	}
	for _, f := range binding.SplitTopLevel(unparen(s)) {
		k, v, _ := strings.Cut(f, "=")
		var err error
		var n uint64
		switch k {
		case "src":
			t.Src, err = netip.ParseAddr(v)
		case "dst":
			t.Dst, err = netip.ParseAddr(v)
		case "sport":
			n, err = strconv.ParseUint(v, 10, 16)
			t.SrcPort = uint16(n)
		case "dport":
			n, err = strconv.ParseUint(v, 10, 16)
			t.DstPort = uint16(n)
		case "id": // ICMP echo id
			n, err = strconv.ParseUint(v, 10, 16)
			t.SrcPort, t.DstPort = uint16(n), uint16(n)
		case "packets":
			c.Packets, err = strconv.ParseUint(v, 10, 64)
			*hasCounts = true
		case "bytes":
			c.Bytes, err = strconv.ParseUint(v, 10, 64)
			*hasCounts = true
		}
		if err != nil {
			return t, c, fmt.Errorf("%s: %w", k, err)
		}
	}
	if !t.Src.IsValid() || !t.Dst.IsValid() {
		return t, c, fmt.Errorf("tuple %q has no addresses", s)
	}
	return t, c, nil
}
