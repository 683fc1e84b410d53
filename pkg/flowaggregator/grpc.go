package flowaggregator

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	flowpb "antrea.io/antrea/pkg/apis/flow/v1alpha1"
)

// GRPCPort is where the agents stream records over gRPC (upstream's).
const GRPCPort = 14739

// maxGRPCMessage bounds one message of an agent (the agents send at most
// grpcBatch records a message, a few hundred bytes each).
const maxGRPCMessage = 16 << 20

// grpcCollector is the FlowExportService: each agent's stream of batches,
// decoded into records and handed to the aggregator. A record without
// addresses is counted (decode_errors_total{transport="record"}) and
// skipped; at most maxTCPPeers streams at once.
type grpcCollector struct {
	flowpb.UnimplementedFlowExportServiceServer
	agg     *Aggregator
	metrics *Metrics
	sem     chan struct{}
}

// Export implements FlowExportService.
func (g *grpcCollector) Export(stream flowpb.FlowExportService_ExportServer) error {
	select {
	case g.sem <- struct{}{}:
		defer func() { <-g.sem }()
	default:
		return status.Errorf(codes.ResourceExhausted, "too many agents (%d)", cap(g.sem))
	}
	g.metrics.ConnectedPeers.Inc()
	defer g.metrics.ConnectedPeers.Dec()
	from := "unknown"
	if p, ok := peer.FromContext(stream.Context()); ok {
		from = p.Addr.String()
	}
	klog.V(2).InfoS("gRPC peer connected", "peer", from)
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&flowpb.ExportResponse{})
		}
		if err != nil {
			return err
		}
		now := g.agg.now()
		fs := make([]Flow, 0, len(req.GetFlows()))
		for _, pf := range req.GetFlows() {
			f, ok := fromProto(pf, now)
			if !ok {
				g.metrics.DecodeErrors.WithLabelValues("record").Inc()
				continue
			}
			fs = append(fs, f)
		}
		g.metrics.RecordsReceived.WithLabelValues("grpc").Add(float64(len(req.GetFlows())))
		g.agg.IngestFlows(fs, now)
	}
}

// serveGRPC serves the FlowExportService on l over TLS (tc) until ctx ends.
func serveGRPC(ctx context.Context, l net.Listener, tc *tls.Config, agg *Aggregator, m *Metrics) {
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)), grpc.MaxRecvMsgSize(maxGRPCMessage))
	flowpb.RegisterFlowExportServiceServer(srv, &grpcCollector{agg: agg, metrics: m, sem: make(chan struct{}, maxTCPPeers)})
	go func() {
		<-ctx.Done()
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			srv.Stop()
		}
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) && ctx.Err() == nil {
		klog.ErrorS(err, "gRPC collector failed")
	}
}

// fromProto reads an agent's record from the gRPC API; one without
// addresses is refused.
func fromProto(p *flowpb.Flow, now time.Time) (Flow, bool) {
	var f Flow
	src, ok1 := netip.AddrFromSlice(p.GetIp().GetSource())
	dst, ok2 := netip.AddrFromSlice(p.GetIp().GetDestination())
	if !ok1 || !ok2 {
		return f, false
	}
	f.SrcIP, f.DstIP = src.Unmap(), dst.Unmap()
	tr := p.GetTransport()
	f.SrcPort, f.DstPort, f.Protocol = uint16(tr.GetSourcePort()), uint16(tr.GetDestinationPort()), uint8(tr.GetProtocolNumber())
	f.TCPState = tr.GetTcp().GetStateName()
	// IPFIX's times are seconds: the same records whichever the transport.
	f.Start = time.Unix(p.GetStartTs().GetSeconds(), 0).UTC()
	f.End = time.Unix(p.GetEndTs().GetSeconds(), 0).UTC()
	f.EndReason = uint8(p.GetEndReason())
	k := p.GetK8S()
	f.FlowType = uint8(k.GetFlowType())
	f.SrcPod, f.SrcNamespace, f.SrcNode = k.GetSourcePodName(), k.GetSourcePodNamespace(), k.GetSourceNodeName()
	f.DstPod, f.DstNamespace, f.DstNode = k.GetDestinationPodName(), k.GetDestinationPodNamespace(), k.GetDestinationNodeName()
	labels := func(l *flowpb.Labels) map[string]string {
		if l == nil {
			return nil
		}
		if l.GetLabels() == nil {
			return map[string]string{}
		}
		return l.GetLabels()
	}
	f.SrcLabels, f.DstLabels = labels(k.GetSourcePodLabels()), labels(k.GetDestinationPodLabels())
	if ip, ok := netip.AddrFromSlice(k.GetDestinationServiceIp()); ok && !ip.IsUnspecified() {
		f.ClusterIP = ip.Unmap()
	}
	f.ServicePort, f.Service = uint16(k.GetDestinationServicePort()), k.GetDestinationServicePortName()
	f.IngressPolicy = ref(k.GetIngressNetworkPolicyNamespace(), k.GetIngressNetworkPolicyName())
	f.IngressPolicyType, f.IngressPolicyRule = uint8(k.GetIngressNetworkPolicyType()), k.GetIngressNetworkPolicyRuleName()
	f.IngressPolicyAction = uint8(k.GetIngressNetworkPolicyRuleAction())
	f.EgressPolicy = ref(k.GetEgressNetworkPolicyNamespace(), k.GetEgressNetworkPolicyName())
	f.EgressPolicyType, f.EgressPolicyRule = uint8(k.GetEgressNetworkPolicyType()), k.GetEgressNetworkPolicyRuleName()
	f.EgressPolicyAction = uint8(k.GetEgressNetworkPolicyRuleAction())
	st, rst := p.GetStats(), p.GetReverseStats()
	f.finish(&NodeCounts{
		Total:        Counts{st.GetPacketTotalCount(), st.GetOctetTotalCount()},
		Delta:        Counts{st.GetPacketDeltaCount(), st.GetOctetDeltaCount()},
		ReverseTotal: Counts{rst.GetPacketTotalCount(), rst.GetOctetTotalCount()},
		ReverseDelta: Counts{rst.GetPacketDeltaCount(), rst.GetOctetDeltaCount()},
		End:          f.End,
	}, now)
	return f, true
}
