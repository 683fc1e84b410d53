package flowaggregator

import (
	"context"
	"crypto/tls"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"

	"antrea.io/antrea/pkg/agent/flowexporter"
	flowpb "antrea.io/antrea/pkg/apis/flow/v1alpha1"
	"antrea.io/antrea/pkg/flowtls"
	"antrea.io/antrea/pkg/ipfix"
)

// oneConnection is a ConnectionSource of one connection between two local
// Pods whose counts grow at every poll.
type oneConnection struct{ polls uint64 }

func (s *oneConnection) Connections(context.Context) ([]flowexporter.Connection, error) {
	s.polls++
	t := flowexporter.Tuple{Proto: 6, Src: netip.MustParseAddr("10.10.1.2"), Dst: netip.MustParseAddr("10.10.1.3"), SrcPort: 40000, DstPort: 80}
	return []flowexporter.Connection{{Key: flowexporter.Key{Orig: t},
		Reply:    flowexporter.Tuple{Proto: 6, Src: t.Dst, Dst: t.Src, SrcPort: t.DstPort, DstPort: t.SrcPort},
		TCPState: "ESTABLISHED", HasCounts: true,
		OrigCounts: flowexporter.Counts{Packets: s.polls, Bytes: 100 * s.polls}, ReplyCounts: flowexporter.Counts{Packets: 1, Bytes: 60}}}, nil
}

type twoPods struct{}

func (twoPods) PodOf(ip netip.Addr) (string, string, bool) {
	switch ip.String() {
	case "10.10.1.2":
		return "ns", "client", true
	case "10.10.1.3":
		return "ns", "server", true
	}
	return "", "", false
}

type podLabels map[string]map[string]string

func (l podLabels) PodLabels(ns, name string) (map[string]string, bool) {
	m, ok := l[ns+"/"+name]
	return m, ok
}

// runAgent runs an agent's exporter sending to addr over proto with tc.
func runAgent(t *testing.T, proto, addr string, tc *tls.Config) *flowexporter.Exporter {
	t.Helper()
	e, err := flowexporter.New(flowexporter.Config{NodeName: "node-1", Collector: addr, Protocol: proto,
		TLS:          func(context.Context) (*tls.Config, error) { return tc, nil },
		PollInterval: 20 * time.Millisecond, ActiveTimeout: 50 * time.Millisecond, IdleTimeout: time.Minute},
		&oneConnection{}, nil, twoPods{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetLabels(podLabels{"ns/client": {"app": "client"}, "ns/server": {}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

func agentTLS(t *testing.T, pki *flowtls.PKI) *tls.Config {
	t.Helper()
	tc, err := flowtls.ClientConfig(pki.CACert, pki.ClientCert, pki.Client, flowtls.ServerName("flow-aggregator", ServiceName))
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// An agent streams its records over gRPC (upstream's transport) with mutual
// TLS: the aggregator decodes them as it does IPFIX, the Pods' labels (an
// empty set kept apart from none) and the Service included.
func TestAnAgentStreamsRecordsOverGRPCWithTLS(t *testing.T) {
	r := startForTest(t, DefaultConfig())
	if r.GRPCAddr == nil || r.PKI == nil {
		t.Fatal("no gRPC collector")
	}
	e := runAgent(t, "grpc", r.GRPCAddr.String(), agentTLS(t, r.PKI))
	got := getFlows(t, r, "pod=client", func(fs []Flow) bool { return len(fs) > 1 })
	f := got[len(got)-1]
	if f.SrcPod != "client" || f.DstPod != "server" || f.SrcNode != "node-1" || f.FlowType != ipfix.FlowTypeIntraNode ||
		f.TCPState != "ESTABLISHED" || f.SrcPort != 40000 || f.DstPort != 80 || f.Protocol != 6 || f.FromSource == nil ||
		f.FromSource.Total.Bytes == 0 || f.FromSource.ReverseTotal.Bytes != 60 {
		t.Errorf("record %+v", f)
	}
	if f.SrcLabels["app"] != "client" || f.DstLabels == nil || len(f.DstLabels) != 0 {
		t.Errorf("labels %v and %v, want app=client and an empty set", f.SrcLabels, f.DstLabels)
	}
	if n := r.Metrics.RecordsReceived.WithLabelValues("grpc"); n == nil {
		t.Error("no grpc counter")
	}
	if s := e.Stats(); !s.Connected || s.RecordsSent == 0 {
		t.Errorf("agent stats %+v", s)
	}
}

// A client without the agents' client certificate is refused (mutual TLS);
// so is one that does not trust the aggregator's CA.
func TestTheGRPCCollectorRefusesClientsWithoutTheClientCertificate(t *testing.T) {
	r := startForTest(t, DefaultConfig())
	noCert := agentTLS(t, r.PKI)
	noCert.Certificates = nil
	other, err := flowtls.New([]string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]*tls.Config{"no client certificate": noCert, "another CA": agentTLS(t, other)} {
		t.Run(name, func(t *testing.T) {
			conn, err := grpc.NewClient("passthrough:///"+r.GRPCAddr.String(), grpc.WithTransportCredentials(credentials.NewTLS(tc)))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			stream, err := flowpb.NewFlowExportServiceClient(conn).Export(ctx)
			if err == nil {
				_ = stream.Send(&flowpb.ExportRequest{Flows: []*flowpb.Flow{{Ip: &flowpb.IP{Source: []byte{10, 0, 0, 1}, Destination: []byte{10, 0, 0, 2}}}}})
				_, err = stream.CloseAndRecv()
			}
			if err == nil {
				t.Fatal("the stream was accepted")
			}
		})
	}
}

// IPFIX over TLS (aggregatorTransportProtocol tls, the agents' transport
// tls): the same records as over TCP.
func TestAnAgentSendsIPFIXOverTLS(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AggregatorTransportProtocol = "tls"
	r := startForTest(t, cfg)
	if r.UDPAddr != nil {
		t.Errorf("UDP listens with tls: %v", r.UDPAddr)
	}
	runAgent(t, "tls", r.TCPAddr.String(), agentTLS(t, r.PKI))
	got := getFlows(t, r, "pod=client", func(fs []Flow) bool { return len(fs) > 0 })
	if f := got[0]; f.SrcPod != "client" || f.DstPod != "server" || f.SrcLabels["app"] != "client" {
		t.Errorf("record %+v", f)
	}
}

// BenchmarkIngestGRPC is BenchmarkIngestTCP over gRPC with mutual TLS: two
// agents' streams of inter-node records (batches of 200), timed until every
// pair is joined.
func BenchmarkIngestGRPC(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := Start(ctx, DefaultConfig(), Listen{GRPC: "127.0.0.1:0", API: "127.0.0.1:0"}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); r.Wait() }()
	tc, err := flowtls.ClientConfig(r.PKI.CACert, r.PKI.ClientCert, r.PKI.Client, flowtls.ServerName("flow-aggregator", ServiceName))
	if err != nil {
		b.Fatal(err)
	}
	open := func() flowpb.FlowExportService_ExportClient {
		conn, err := grpc.NewClient("passthrough:///"+r.GRPCAddr.String(), grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		s, err := flowpb.NewFlowExportServiceClient(conn).Export(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	s1, s2 := open(), open()
	record := func(port uint16, src bool) *flowpb.Flow {
		f := &flowpb.Flow{StartTs: timestamppb.New(t0), EndTs: timestamppb.New(t0.Add(5 * time.Second)), EndReason: 2,
			Ip:           &flowpb.IP{Version: 4, Source: []byte{10, 10, 0, 2}, Destination: []byte{10, 10, 1, 2}},
			Transport:    &flowpb.Transport{ProtocolNumber: 6, SourcePort: uint32(port), DestinationPort: 5201},
			Stats:        &flowpb.Stats{PacketTotalCount: 1, PacketDeltaCount: 1, OctetTotalCount: 100, OctetDeltaCount: 100},
			ReverseStats: &flowpb.Stats{}, K8S: &flowpb.Kubernetes{}}
		if src {
			f.K8S.FlowType, f.K8S.SourcePodName, f.K8S.SourcePodNamespace, f.K8S.SourceNodeName = 3, "a", "ns", "node-1"
		} else {
			f.K8S.FlowType, f.K8S.DestinationPodName, f.K8S.DestinationPodNamespace, f.K8S.DestinationNodeName = 4, "b", "ns", "node-2"
		}
		return f
	}
	const batch = 200
	b.ResetTimer()
	sent, port := 0, 0
	for sent < b.N {
		src, dst := &flowpb.ExportRequest{}, &flowpb.ExportRequest{}
		for range batch {
			port++
			src.Flows = append(src.Flows, record(uint16(port), true))
			dst.Flows = append(dst.Flows, record(uint16(port), false))
		}
		if err := s1.Send(src); err != nil {
			b.Fatal(err)
		}
		if err := s2.Send(dst); err != nil {
			b.Fatal(err)
		}
		sent += 2 * batch
	}
	for testutil.ToFloat64(r.Metrics.Correlated) < float64(sent/2) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(sent)/b.Elapsed().Seconds(), "records/s")
}
