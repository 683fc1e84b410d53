package antctl

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"antrea.io/antrea/pkg/antctl/query"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/diagram"
)

// Output formats of antctl traceflow: table, json, yaml, and the pictures
// dot and svg (outputDot and outputSVG, which antctl get pipeline has too).
var traceflowOutputs = []string{outputTable, outputJSON, outputYAML, outputDot, outputSVG}

// traceflowOptions are antctl traceflow's flags.
type traceflowOptions struct {
	o           *options
	source      string
	destination string
	flow        string
	live        bool
	droppedOnly bool
	timeout     time.Duration
	output      string
	preserve    bool
	nowait      bool
	poll        time.Duration
}

func newTraceflowCommand(o *options) *cobra.Command {
	t := &traceflowOptions{o: o, poll: 100 * time.Millisecond}
	cmd := &cobra.Command{
		Use:     "traceflow -S NS/POD -D NS/POD|NS/SERVICE|IP",
		Aliases: []string{"tf", "traceflows"},
		Short:   "Trace a packet from a Pod through every Node it crosses",
		Long: `Trace a packet from a Pod to a Pod, a Service or an IP address: antctl creates a
Traceflow (crd.antrea.io/v1beta1), the source Pod's agent injects a packet
tagged for it (or, with --live-traffic, tags the Pod's next matching packet),
every Node the packet crosses reports what its data plane did with it, and
antctl prints the path Node by Node, then deletes the Traceflow (unless
--preserve). -o dot and -o svg draw the path.

A destination NS/NAME is a Pod if one of that name exists, else a Service.
-f gives the packet's headers as ovs-ofctl spells them: a protocol (tcp,
udp, icmp; tcp6, udp6, icmp6 or ipv6 for IPv6) and fields tcp_src,
tcp_dst, tcp_flags, udp_src, udp_dst, icmp_id, icmp_seq, nw_ttl (the hop
limit in IPv6), nw_proto.

The packet is IPv6 with -f ipv6 (or tcp6, udp6, icmp6), or to an IPv6
address; else IPv4 when the source and the destination have an IPv4
address (dual-stack), else IPv6 (IPv6-only).`,
		Example: `  antctl traceflow -S demo/client -D demo/web-0
  antctl traceflow -S demo/client -D demo/web -f tcp,tcp_dst=80
  antctl traceflow -S demo/client -D 10.10.1.5 -o svg > path.svg
  antctl traceflow -S demo/client -D demo/web-0 -f ipv6,tcp,tcp_dst=80
  antctl traceflow -S demo/client -D fd00:10:96::a -f udp,udp_dst=53
  antctl traceflow -S demo/client -D demo/web-0 --live-traffic --dropped-only -t 60s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return t.run(cmd.Context(), cmd.OutOrStdout()) },
	}
	f := cmd.Flags()
	f.StringVarP(&t.source, "source", "S", "", "Source Pod: NS/POD (or POD in the current namespace); with --live-traffic to a Pod, an IP")
	f.StringVarP(&t.destination, "destination", "D", "", "Destination: NS/POD, NS/SERVICE or an IP address (IPv4 or IPv6)")
	f.StringVarP(&t.flow, "flow", "f", "", "Packet headers, e.g. tcp,tcp_dst=80 or ipv6,udp,udp_dst=53 (default: an ICMP echo request; a Service's first port)")
	f.BoolVarP(&t.live, "live-traffic", "L", false, "Trace the source Pod's next real packet that matches instead of injecting one")
	f.BoolVar(&t.droppedOnly, "dropped-only", false, "With --live-traffic: report only a packet that is dropped")
	f.DurationVarP(&t.timeout, "timeout", "t", 20*time.Second, "How long the trace may take (whole seconds, up to 5m)")
	f.StringVarP(&t.output, "output", "o", outputTable, "Output format: table, json, yaml, dot or svg")
	f.BoolVarP(&t.preserve, "preserve", "p", false, "Keep the Traceflow object after printing it")
	f.BoolVar(&t.nowait, "nowait", false, "Create the Traceflow, print its name and return without waiting for (or deleting) it")
	_ = cmd.MarkFlagRequired("source")
	_ = cmd.MarkFlagRequired("destination")
	return cmd
}

// splitRef splits NS/NAME (or NAME in the current namespace).
func (t *traceflowOptions) splitRef(s string) (ns, name string) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i+1:]
	}
	ns, _ = t.o.namespace()
	return ns, s
}

func (t *traceflowOptions) run(ctx context.Context, w io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if !contains(traceflowOutputs, t.output) {
		return fmt.Errorf("unknown output format %q%s; want one of %s", t.output, didYouMean(t.output, traceflowOutputs),
			strings.Join(traceflowOutputs, ", "))
	}
	if t.timeout < time.Second || t.timeout > 5*time.Minute {
		return fmt.Errorf("--timeout %s: want 1s to 5m", t.timeout)
	}
	if t.droppedOnly && !t.live {
		return fmt.Errorf("--dropped-only needs --live-traffic")
	}
	packet, ipv6, err := parseFlow(t.flow)
	if err != nil {
		return err
	}
	cl, err := t.o.getClients()
	if err != nil {
		return err
	}
	req := query.TraceflowRequest{Packet: packet, IPv6: ipv6, LiveTraffic: t.live, DroppedOnly: t.droppedOnly, Timeout: t.timeout}
	req.SourceNamespace, req.SourcePod = t.splitRef(t.source)
	req.DestinationNamespace, req.Destination = t.splitRef(t.destination)
	tf, err := query.NewTraceflow(ctx, cl, req)
	if err != nil {
		return err
	}
	if t.nowait {
		created, err := cl.Antrea.CrdV1beta1().Traceflows().Create(ctx, tf, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create Traceflow: %w", err)
		}
		_, err = fmt.Fprintf(w, "Traceflow %s created; its result: kubectl get traceflow %s -o yaml\n", created.Name, created.Name)
		return err
	}
	got, err := query.RunTraceflow(ctx, cl, tf, t.poll, t.preserve)
	if got == nil {
		return err
	}
	if werr := writeTraceflow(w, t.output, got); werr != nil {
		return werr
	}
	if err == nil && got.Status.Phase == crdv1beta1.TraceflowFailed && t.output == outputTable {
		return fmt.Errorf("traceflow %s failed: %s", got.Name, got.Status.Reason)
	}
	return err
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// flowKeys are the fields -f accepts.
var flowKeys = []string{"tcp_src", "tcp_dst", "tcp_flags", "udp_src", "udp_dst", "icmp_id", "icmp_seq", "nw_ttl", "nw_proto"}

// flowProtocols are the protocols -f names, IPv6's as ovs-ofctl spells
// them too (tcp6, udp6, icmp6; ipv6 alone: ICMPv6).
var flowProtocols = []string{"tcp", "udp", "icmp", "tcp6", "udp6", "icmp6", "ipv6"}

// parseFlow reads -f: "tcp,tcp_dst=80", "udp,udp_dst=53", "icmp",
// "ipv6,tcp,tcp_dst=80" (ipv6: the packet is IPv6; its header's fields
// are still read into ipHeader, which query.NewTraceflow moves).
func parseFlow(s string) (p crdv1beta1.Packet, ipv6 bool, err error) {
	if strings.TrimSpace(s) == "" {
		return p, false, nil
	}
	th := &p.TransportHeader
	ip := func() *crdv1beta1.IPHeader {
		if p.IPHeader == nil {
			p.IPHeader = &crdv1beta1.IPHeader{}
		}
		return p.IPHeader
	}
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(tok)
		key, val, hasVal := strings.Cut(tok, "=")
		if !hasVal {
			if key != "ipv6" && strings.HasSuffix(key, "6") && contains(flowProtocols, key) {
				key, ipv6 = strings.TrimSuffix(key, "6"), true
			}
			switch key {
			case "tcp":
				if th.TCP == nil {
					th.TCP = &crdv1beta1.TCPHeader{}
				}
				ip().Protocol = 6
			case "udp":
				if th.UDP == nil {
					th.UDP = &crdv1beta1.UDPHeader{}
				}
				ip().Protocol = 17
			case "icmp":
				if th.ICMP == nil {
					th.ICMP = &crdv1beta1.ICMPEchoRequestHeader{}
				}
				ip().Protocol = 1
			case "ipv6":
				ipv6 = true
			case "":
			default:
				return p, false, fmt.Errorf("-f: unknown protocol %q%s; want one of %s", key,
					didYouMean(key, flowProtocols), strings.Join(flowProtocols, ", "))
			}
			continue
		}
		if !contains(flowKeys, key) {
			return p, false, fmt.Errorf("-f: unknown field %q%s; want one of %s", key, didYouMean(key, flowKeys), strings.Join(flowKeys, ", "))
		}
		n, err := strconv.ParseUint(val, 0, 16)
		if err != nil {
			return p, false, fmt.Errorf("-f: %s=%q is not a number", key, val)
		}
		v := int32(n)
		switch key {
		case "tcp_src", "tcp_dst", "tcp_flags":
			if th.TCP == nil {
				th.TCP = &crdv1beta1.TCPHeader{}
			}
			ip().Protocol = 6
			switch key {
			case "tcp_src":
				th.TCP.SrcPort = v
			case "tcp_dst":
				th.TCP.DstPort = v
			default:
				th.TCP.Flags = &v
			}
		case "udp_src", "udp_dst":
			if th.UDP == nil {
				th.UDP = &crdv1beta1.UDPHeader{}
			}
			ip().Protocol = 17
			if key == "udp_src" {
				th.UDP.SrcPort = v
			} else {
				th.UDP.DstPort = v
			}
		case "icmp_id", "icmp_seq":
			if th.ICMP == nil {
				th.ICMP = &crdv1beta1.ICMPEchoRequestHeader{}
			}
			ip().Protocol = 1
			if key == "icmp_id" {
				th.ICMP.ID = v
			} else {
				th.ICMP.Sequence = v
			}
		case "nw_ttl":
			if v == 0 || v > 255 {
				return p, false, fmt.Errorf("-f: nw_ttl=%d: want 1..255", v)
			}
			ip().TTL = v
		case "nw_proto":
			ip().Protocol = v
		}
	}
	n := 0
	for _, set := range []bool{th.TCP != nil, th.UDP != nil, th.ICMP != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return p, false, fmt.Errorf("-f %q: give one protocol", s)
	}
	return p, ipv6, nil
}

// writeTraceflow prints a finished Traceflow.
func writeTraceflow(w io.Writer, format string, tf *crdv1beta1.Traceflow) error {
	switch format {
	case outputJSON, outputYAML:
		return writeObject(w, format, tf)
	case outputDot:
		_, err := io.WriteString(w, diagram.TraceflowDOT(tf))
		return err
	case outputSVG:
		_, err := io.WriteString(w, diagram.TraceflowSVG(tf))
		return err
	}
	return writeTraceflowText(w, tf)
}

// writeTraceflowText prints the path Node by Node.
func writeTraceflowText(w io.Writer, tf *crdv1beta1.Traceflow) error {
	s, d := tf.Spec.Source, tf.Spec.Destination
	dst := d.IP
	var notes []string
	switch {
	case d.Pod != "":
		dst = d.Namespace + "/" + d.Pod
	case d.Service != "":
		dst = d.Namespace + "/" + d.Service
		notes = append(notes, "Service")
	}
	if tf.Spec.Packet.IPv6Header != nil && d.IP == "" {
		// Which of a dual-stack destination's addresses was traced.
		notes = append(notes, "IPv6")
	}
	if len(notes) > 0 {
		dst += " (" + strings.Join(notes, ", ") + ")"
	}
	fmt.Fprintf(w, "name: %s\nphase: %s\n", tf.Name, tf.Status.Phase)
	if tf.Status.Reason != "" {
		fmt.Fprintf(w, "reason: %s\n", tf.Status.Reason)
	}
	fmt.Fprintf(w, "source: %s/%s\ndestination: %s\n", s.Namespace, s.Pod, dst)
	if tf.Spec.LiveTraffic && tf.Status.CapturedPacket != nil {
		cp := tf.Status.CapturedPacket
		fmt.Fprintf(w, "captured packet: %s -> %s, %d bytes\n", cp.SrcIP, cp.DstIP, cp.Length)
	}
	for _, r := range tf.Status.Results {
		fmt.Fprintf(w, "\n%s (%s)\n", r.Node, r.Role)
		tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
		for _, o := range r.Observations {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", o.Component, o.ComponentInfo, o.Action, diagram.ObservationDetails(o))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
