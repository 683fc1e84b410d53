package flowaggregator

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/ipfix"
)

// Template ids of the aggregated records.
const (
	AggregatedTemplateIPv4 uint16 = 256
	AggregatedTemplateIPv6 uint16 = 257
)

// AggregatedTemplates are the templates of the records the aggregator
// exports: the agents' elements (pkg/agent/flowexporter's template), then
// upstream's aggregator elements: each node's counts, throughputs (bits per
// second, as upstream) and each node's flowEndSeconds.
func AggregatedTemplates() (v4, v6 ipfix.Template) {
	common := func(src, dst, clusterIP ipfix.Element) []ipfix.Element {
		fields := append(ipfix.NodeFlowElements(src, dst, clusterIP),
			ipfix.PacketTotalCountFromSourceNode, ipfix.OctetTotalCountFromSourceNode,
			ipfix.PacketDeltaCountFromSourceNode, ipfix.OctetDeltaCountFromSourceNode,
			ipfix.ReversePacketTotalCountFromSourceNode, ipfix.ReverseOctetTotalCountFromSourceNode,
			ipfix.ReversePacketDeltaCountFromSourceNode, ipfix.ReverseOctetDeltaCountFromSourceNode,
			ipfix.PacketTotalCountFromDestinationNode, ipfix.OctetTotalCountFromDestinationNode,
			ipfix.PacketDeltaCountFromDestinationNode, ipfix.OctetDeltaCountFromDestinationNode,
			ipfix.ReversePacketTotalCountFromDestinationNode, ipfix.ReverseOctetTotalCountFromDestinationNode,
			ipfix.ReversePacketDeltaCountFromDestinationNode, ipfix.ReverseOctetDeltaCountFromDestinationNode,
			ipfix.Throughput, ipfix.ReverseThroughput,
			ipfix.ThroughputFromSourceNode, ipfix.ThroughputFromDestinationNode,
			ipfix.ReverseThroughputFromSourceNode, ipfix.ReverseThroughputFromDestinationNode,
			ipfix.FlowEndSecondsFromSourceNode, ipfix.FlowEndSecondsFromDestinationNode)
		return append(fields, ipfix.PolicyElements()...)
	}
	return ipfix.Template{ID: AggregatedTemplateIPv4, Fields: common(ipfix.SourceIPv4Address, ipfix.DestinationIPv4Address, ipfix.DestinationClusterIPv4)},
		ipfix.Template{ID: AggregatedTemplateIPv6, Fields: common(ipfix.SourceIPv6Address, ipfix.DestinationIPv6Address, ipfix.DestinationClusterIPv6)}
}

// ipfixValues returns f's values in AggregatedTemplates' order.
func ipfixValues(f *Flow) []ipfix.Value {
	u, s, a := ipfix.U, ipfix.S, ipfix.A
	clusterIP := f.ClusterIP
	if !clusterIP.IsValid() {
		clusterIP = netip.IPv4Unspecified()
		if !f.SrcIP.Is4() {
			clusterIP = netip.IPv6Unspecified()
		}
	}
	c := f.counts()
	node := func(n *NodeCounts) []ipfix.Value {
		if n == nil {
			n = &NodeCounts{}
		}
		return []ipfix.Value{u(n.Total.Packets), u(n.Total.Bytes), u(n.Delta.Packets), u(n.Delta.Bytes),
			u(n.ReverseTotal.Packets), u(n.ReverseTotal.Bytes), u(n.ReverseDelta.Packets), u(n.ReverseDelta.Bytes)}
	}
	end := func(n *NodeCounts) ipfix.Value {
		if n == nil || n.End.IsZero() {
			return u(0)
		}
		return u(uint64(n.End.Unix()))
	}
	bits := func(bytesPerSecond uint64) ipfix.Value { return u(8 * bytesPerSecond) }
	srcTh, dstTh, srcRTh, dstRTh := uint64(0), uint64(0), uint64(0), uint64(0)
	if f.FromSource != nil {
		srcTh, srcRTh = f.Throughput, f.ReverseThroughput
	}
	if f.FromDestination != nil {
		dstTh, dstRTh = f.Throughput, f.ReverseThroughput
	}
	vals := []ipfix.Value{
		u(uint64(f.Start.Unix())), u(uint64(f.End.Unix())), u(uint64(f.EndReason)),
		a(f.SrcIP), a(f.DstIP), u(uint64(f.SrcPort)), u(uint64(f.DstPort)), u(uint64(f.Protocol)),
		u(c.Total.Packets), u(c.Total.Bytes), u(c.Delta.Packets), u(c.Delta.Bytes),
		u(c.ReverseTotal.Packets), u(c.ReverseTotal.Bytes), u(c.ReverseDelta.Packets), u(c.ReverseDelta.Bytes),
		s(f.SrcPod), s(f.SrcNamespace), s(f.SrcNode),
		s(f.DstPod), s(f.DstNamespace), s(f.DstNode),
		a(clusterIP), u(uint64(f.ServicePort)), s(f.Service),
		u(uint64(f.FlowType)), s(f.TCPState),
		s(labelsJSON(f.SrcLabels)), s(labelsJSON(f.DstLabels)),
	}
	vals = append(vals, node(f.FromSource)...)
	vals = append(vals, node(f.FromDestination)...)
	vals = append(vals, bits(f.Throughput), bits(f.ReverseThroughput), bits(srcTh), bits(dstTh), bits(srcRTh), bits(dstRTh),
		end(f.FromSource), end(f.FromDestination))
	policy := func(ref string, typ uint8, rule string, action uint8) []ipfix.Value {
		ns, name, ok := strings.Cut(ref, "/")
		if !ok {
			ns, name = "", ref
		}
		if action == 0 && name != "" {
			// A record of an earlier agent, without the action.
			action = ipfix.RuleActionAllow
		}
		return []ipfix.Value{s(name), s(ns), u(uint64(typ)), s(rule), u(uint64(action))}
	}
	vals = append(vals, policy(f.IngressPolicy, f.IngressPolicyType, f.IngressPolicyRule, f.IngressPolicyAction)...)
	vals = append(vals, policy(f.EgressPolicy, f.EgressPolicyType, f.EgressPolicyRule, f.EgressPolicyAction)...)
	return vals
}

// IPFIXExporter sends the records to an IPFIX collector over TCP or UDP,
// reconnecting with a backoff when it goes away. Records queue in a bounded
// channel; a batch that finds it full is dropped and counted.
type IPFIXExporter struct {
	Address, Protocol string
	Domain            uint32
	// MaxMsgSize bounds a message (0: 1400 over UDP, 65535 over TCP).
	MaxMsgSize      int
	TemplateRefresh time.Duration
	Metrics         *Metrics
	queue           chan []Flow
}

const exporterQueue = 64

// Export queues fs (never blocks).
func (e *IPFIXExporter) Export(fs []Flow) {
	select {
	case e.queue <- fs:
	default:
		e.Metrics.RecordsDropped.WithLabelValues("ipfix").Add(float64(len(fs)))
	}
}

// Run sends until ctx ends.
func (e *IPFIXExporter) Run(ctx context.Context) {
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		used, err := e.session(ctx)
		if ctx.Err() != nil {
			return
		}
		e.Metrics.ExportErrors.WithLabelValues("ipfix").Inc()
		klog.ErrorS(err, "IPFIX collector connection failed; reconnecting", "address", e.Address, "backoff", backoff)
		if used {
			backoff = 500 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (e *IPFIXExporter) session(ctx context.Context) (used bool, err error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, e.Protocol, e.Address)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	dead := make(chan struct{})
	if e.Protocol == "tcp" {
		go func() {
			defer close(dead)
			b := make([]byte, 256)
			for {
				if _, err := conn.Read(b); err != nil {
					conn.Close()
					return
				}
			}
		}()
	}
	w := &ipfix.Writer{Domain: e.Domain, MaxLen: e.MaxMsgSize}
	if w.MaxLen == 0 && e.Protocol == "udp" {
		w.MaxLen = 1400
	}
	write := func(b []byte) error {
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err := conn.Write(b)
		return err
	}
	v4, v6 := AggregatedTemplates()
	templates := func() error { return w.Templates(uint32(time.Now().Unix()), write, v4, v6) }
	if err := templates(); err != nil {
		return false, err
	}
	klog.InfoS("Connected to the IPFIX collector", "address", e.Address, "protocol", e.Protocol)
	refresh := time.NewTicker(e.TemplateRefresh)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case <-dead:
			return true, errors.New("the collector closed the connection")
		case <-refresh.C:
			if e.Protocol == "udp" {
				if err := templates(); err != nil {
					return true, err
				}
			}
		case fs := <-e.queue:
			var r4, r6 [][]ipfix.Value
			for i := range fs {
				if fs[i].SrcIP.Is4() {
					r4 = append(r4, ipfixValues(&fs[i]))
				} else {
					r6 = append(r6, ipfixValues(&fs[i]))
				}
			}
			now := uint32(time.Now().Unix())
			for _, b := range []struct {
				t    ipfix.Template
				recs [][]ipfix.Value
			}{{v4, r4}, {v6, r6}} {
				if len(b.recs) == 0 {
					continue
				}
				if err := w.Data(now, b.t, b.recs, write); err != nil {
					e.Metrics.RecordsDropped.WithLabelValues("ipfix").Add(float64(len(b.recs)))
					return true, err
				}
				e.Metrics.RecordsExported.WithLabelValues("ipfix").Add(float64(len(b.recs)))
			}
		}
	}
}
