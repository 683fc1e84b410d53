package flowexporter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/klog/v2"

	flowpb "antrea.io/antrea/pkg/apis/flow/v1alpha1"
)

// grpcSession streams the queued batches to the collector's
// FlowExportService (the transport grpc, upstream's default): one Export
// stream per connection, a batch per message, over TLS (s.tlsConfig: the
// Flow Aggregator's CA and client certificate). It returns when ctx ends or
// the stream fails; the server's end of the stream (the collector went
// away) shows at once, as TCP's does.
func (s *sender) grpcSession(ctx context.Context) error {
	addr, err := s.resolve(ctx)
	if err != nil {
		return fmt.Errorf("resolve the flow collector: %w", err)
	}
	if s.tlsConfig == nil {
		return fmt.Errorf("transport grpc needs TLS: no TLS configuration")
	}
	tc, err := s.tlsConfig(ctx)
	if err != nil {
		return fmt.Errorf("TLS configuration of the flow collector: %w", err)
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return s.dial(ctx, "tcp", a) }))
	if err != nil {
		return err
	}
	defer conn.Close()
	// Connected (TLS handshake done) before the stream opens: an
	// unreachable collector or a refused certificate is an error here, not
	// at the first batch.
	conn.Connect()
	openCtx, openCancel := context.WithTimeout(ctx, 10*time.Second)
	err = waitReady(openCtx, conn)
	openCancel()
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := flowpb.NewFlowExportServiceClient(conn).Export(sctx)
	if err != nil {
		return err
	}
	dead := make(chan error, 1)
	go func() {
		// The server answers only when the stream ends: a return here is
		// the collector gone (or ctx ended).
		dead <- stream.RecvMsg(new(flowpb.ExportResponse))
	}()
	s.connected.Store(true)
	klog.InfoS("Connected to the flow collector", "address", addr, "protocol", s.proto)
	seq := uint32(0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-dead:
			return errors.Join(errSessionUsed, fmt.Errorf("the collector ended the stream: %w", err))
		case recs := <-s.queue:
			now := time.Now()
			for len(recs) > 0 {
				batch := recs[:min(len(recs), grpcBatch)]
				recs = recs[len(batch):]
				req := &flowpb.ExportRequest{Flows: make([]*flowpb.Flow, 0, len(batch))}
				for i := range batch {
					req.Flows = append(req.Flows, batch[i].protoFlow(s.node, s.domain, seq, now))
					seq++
				}
				if err := stream.Send(req); err != nil {
					s.dropped.Add(uint64(len(batch) + len(recs)))
					return errors.Join(errSessionUsed, err)
				}
				s.sent.Add(uint64(len(batch)))
			}
		}
	}
}

// grpcBatch bounds the records of one gRPC message (a few hundred bytes
// each: well below the aggregator's 16 MiB).
const grpcBatch = 1000

// waitReady waits until conn is connected (TLS handshake done) or ctx ends.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	for {
		st := conn.GetState()
		if st == connectivity.Ready {
			return nil
		}
		if !conn.WaitForStateChange(ctx, st) {
			return fmt.Errorf("connecting to the flow collector: %w (state %s)", ctx.Err(), conn.GetState())
		}
	}
}

// protoFlow is r as the gRPC API carries it (flow.proto: upstream's
// fields), sent by node.
func (r *Record) protoFlow(node string, domain, seq uint32, now time.Time) *flowpb.Flow {
	f := &flowpb.Flow{
		Ipfix:     &flowpb.IPFIX{ExportTime: timestamppb.New(now), SequenceNumber: seq, ObservationDomainId: domain},
		StartTs:   timestamppb.New(r.Start),
		EndTs:     timestamppb.New(r.End),
		EndReason: flowpb.FlowEndReason(r.EndReason),
		Ip:        &flowpb.IP{Version: flowpb.IPVersion_IP_VERSION_4, Source: addrBytes(r.Orig.Src), Destination: addrBytes(r.Reply.Src)},
		Transport: &flowpb.Transport{ProtocolNumber: uint32(r.Orig.Proto), SourcePort: uint32(r.Orig.SrcPort),
			DestinationPort: uint32(r.Reply.SrcPort)},
		Stats: &flowpb.Stats{PacketTotalCount: r.OrigCounts.Packets, PacketDeltaCount: r.OrigDelta.Packets,
			OctetTotalCount: r.OrigCounts.Bytes, OctetDeltaCount: r.OrigDelta.Bytes},
		ReverseStats: &flowpb.Stats{PacketTotalCount: r.ReplyCounts.Packets, PacketDeltaCount: r.ReplyDelta.Packets,
			OctetTotalCount: r.ReplyCounts.Bytes, OctetDeltaCount: r.ReplyDelta.Bytes},
	}
	if r.Orig.Src.Is6() {
		f.Ip.Version = flowpb.IPVersion_IP_VERSION_6
	}
	if r.TCPState != "" {
		f.Transport.Protocol = &flowpb.Transport_Tcp{Tcp: &flowpb.TCP{StateName: r.TCPState}}
	}
	k := &flowpb.Kubernetes{
		FlowType:           flowpb.FlowType(r.FlowType),
		SourcePodNamespace: r.SrcNamespace, SourcePodName: r.SrcPod,
		DestinationPodNamespace: r.DstNamespace, DestinationPodName: r.DstPod,
		DestinationServicePortName: r.ServicePortName,
	}
	if r.SrcPod != "" {
		k.SourceNodeName = node
	}
	if r.DstPod != "" {
		k.DestinationNodeName = node
	}
	if r.SrcLabels != nil {
		k.SourcePodLabels = &flowpb.Labels{Labels: r.SrcLabels}
	}
	if r.DstLabels != nil {
		k.DestinationPodLabels = &flowpb.Labels{Labels: r.DstLabels}
	}
	if r.isDNAT() {
		k.DestinationServiceIp, k.DestinationServicePort = addrBytes(r.Orig.Dst), uint32(r.Orig.DstPort)
	}
	k.IngressNetworkPolicyType, k.IngressNetworkPolicyNamespace, k.IngressNetworkPolicyName = flowpb.NetworkPolicyType(r.Ingress.Type), r.Ingress.Namespace, r.Ingress.Name
	k.IngressNetworkPolicyRuleName, k.IngressNetworkPolicyRuleAction = r.Ingress.Rule, flowpb.NetworkPolicyRuleAction(r.Ingress.Action)
	k.EgressNetworkPolicyType, k.EgressNetworkPolicyNamespace, k.EgressNetworkPolicyName = flowpb.NetworkPolicyType(r.Egress.Type), r.Egress.Namespace, r.Egress.Name
	k.EgressNetworkPolicyRuleName, k.EgressNetworkPolicyRuleAction = r.Egress.Rule, flowpb.NetworkPolicyRuleAction(r.Egress.Action)
	f.K8S = k
	return f
}

// addrBytes is a's 4 or 16 bytes (nil when invalid).
func addrBytes(a netip.Addr) []byte {
	if !a.IsValid() {
		return nil
	}
	return a.Unmap().AsSlice()
}
