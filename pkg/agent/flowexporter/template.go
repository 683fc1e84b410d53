package flowexporter

import (
	"net/netip"

	"antrea.io/antrea/pkg/ipfix"
)

// Template ids of the records the exporter sends.
const (
	TemplateIPv4 uint16 = 256
	TemplateIPv6 uint16 = 257
)

// Templates returns the exporter's two templates: IANA's 5-tuple, times,
// end reason and counts (reverse counts per RFC 5103), then Antrea's
// elements, as upstream's FlowExporter names them. The destination is the
// endpoint (after DNAT); a Service's ClusterIP and port go in
// destinationClusterIPv4/6 and destinationServicePort.
func Templates() (v4, v6 ipfix.Template) {
	common := func(src, dst, clusterIP ipfix.Element) []ipfix.Element {
		return append(ipfix.NodeFlowElements(src, dst, clusterIP), ipfix.PolicyElements()...)
	}
	return ipfix.Template{ID: TemplateIPv4, Fields: common(ipfix.SourceIPv4Address, ipfix.DestinationIPv4Address, ipfix.DestinationClusterIPv4)},
		ipfix.Template{ID: TemplateIPv6, Fields: common(ipfix.SourceIPv6Address, ipfix.DestinationIPv6Address, ipfix.DestinationClusterIPv6)}
}

// values returns r's values in the templates' order, appended to dst.
func (r *Record) values(dst []ipfix.Value, node string) []ipfix.Value {
	var clusterIP netip.Addr
	var svcPort uint16
	if r.isDNAT() {
		clusterIP, svcPort = r.Orig.Dst, r.Orig.DstPort
	} else if r.Orig.Src.Is4() {
		clusterIP = netip.IPv4Unspecified()
	} else {
		clusterIP = netip.IPv6Unspecified()
	}
	srcNode, dstNode := "", ""
	if r.SrcPod != "" {
		srcNode = node
	}
	if r.DstPod != "" {
		dstNode = node
	}
	u, s, a := ipfix.U, ipfix.S, ipfix.A
	return append(dst,
		u(uint64(r.Start.Unix())), u(uint64(r.End.Unix())), u(uint64(r.EndReason)),
		a(r.Orig.Src), a(r.Reply.Src), u(uint64(r.Orig.SrcPort)), u(uint64(r.Reply.SrcPort)), u(uint64(r.Orig.Proto)),
		u(r.OrigCounts.Packets), u(r.OrigCounts.Bytes), u(r.OrigDelta.Packets), u(r.OrigDelta.Bytes),
		u(r.ReplyCounts.Packets), u(r.ReplyCounts.Bytes), u(r.ReplyDelta.Packets), u(r.ReplyDelta.Bytes),
		s(r.SrcPod), s(r.SrcNamespace), s(srcNode),
		s(r.DstPod), s(r.DstNamespace), s(dstNode),
		a(clusterIP), u(uint64(svcPort)), s(r.ServicePortName),
		u(uint64(r.FlowType)), s(r.TCPState),
		s(labelsJSON(r.SrcLabels)), s(labelsJSON(r.DstLabels)),
		s(r.Ingress.Name), s(r.Ingress.Namespace), u(uint64(r.Ingress.Type)), s(r.Ingress.Rule), u(uint64(r.Ingress.Action)),
		s(r.Egress.Name), s(r.Egress.Namespace), u(uint64(r.Egress.Type)), s(r.Egress.Rule), u(uint64(r.Egress.Action)),
	)
}
