package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/agent/flowexporter"
	agentmetrics "antrea.io/antrea/pkg/agent/metrics"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	agentconfig "antrea.io/antrea/pkg/config/agent"
	"antrea.io/antrea/pkg/flowtls"
)

// FlowExporterOptions are the FlowExporter's options (the flowExporter
// section, when it and its gate are on).
type FlowExporterOptions struct {
	Collector          agentconfig.CollectorAddr
	Poll, Active, Idle time.Duration
}

// collectorTLS is the TLS configuration of the transports tls and grpc,
// read at every connection from what the Flow Aggregator publishes in its
// Namespace (the collector Service's, else flow-aggregator): its CA in the
// ConfigMap flow-aggregator-ca, the agents' client certificate in the Secret
// flow-aggregator-client-tls (pkg/flowtls). The server's certificate is
// verified against the Service's DNS name, or the collector's HOST (which
// the aggregator's flowAggregatorAddress must then name).
func collectorTLS(d *deps, a agentconfig.CollectorAddr) func(ctx context.Context) (*tls.Config, error) {
	ns, serverName := "flow-aggregator", a.Host
	if a.ServiceName != "" {
		ns, serverName = a.ServiceNamespace, flowtls.ServerName(a.ServiceNamespace, a.ServiceName)
	}
	return func(ctx context.Context) (*tls.Config, error) {
		cm, err := d.kube.CoreV1().ConfigMaps(ns).Get(ctx, flowtls.CAConfigMap, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("the Flow Aggregator's CA: %w", err)
		}
		sec, err := d.kube.CoreV1().Secrets(ns).Get(ctx, flowtls.ClientSecret, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("the Flow Aggregator's client certificate: %w", err)
		}
		return flowtls.ClientConfig([]byte(cm.Data[flowtls.CAKey]), sec.Data[flowtls.CertKey], sec.Data[flowtls.KeyKey], serverName)
	}
}

// maxExportedConnections bounds the exporter's store (and OVS's flow
// cache for the counts).
const maxExportedConnections = 65536

// setupFlowExporter runs the FlowExporter (pkg/agent/flowexporter): it
// reads the connections of br-int's conntrack zone and exports them to the
// collector. With the netdev datapath the counts come from ovs-vswitchd's
// own IPFIX export of the bridge, which this part points at a socket on
// loopback and clears when it stops; the kernel datapath's conntrack has
// its own counts (with nf_conntrack_acct). It registers the shared Service
// informer (Service names in records), so it comes before "informers".
func setupFlowExporter(ctx context.Context, d *deps) (component, error) {
	bridge := flowexporter.BridgeIPFIX{RunDir: d.o.OVSRunDir, Bridge: d.o.OVSBridge}
	fe := d.o.FlowExporter
	if fe == nil {
		if d.o.DatapathType == agentconfig.DatapathNetdev {
			if err := bridge.ClearStale(ctx); err != nil {
				klog.ErrorS(err, "Could not clear the bridge's IPFIX export of an earlier run", "bridge", d.o.OVSBridge)
			}
		}
		return nil, nil
	}
	src := &flowexporter.DpctlSource{RunDir: d.o.OVSRunDir, Zones: agentof.CtZones()}
	var feed flowexporter.CounterFeed
	var ovsFeed *flowexporter.OVSIPFIXFeed
	if d.o.DatapathType == agentconfig.DatapathNetdev {
		src.Datapath = "netdev@ovs-netdev"
		var err error
		if ovsFeed, err = flowexporter.ListenOVSIPFIX("127.0.0.1:0", 2*maxExportedConnections); err != nil {
			return nil, err
		}
		bridge.Target = ovsFeed.Addr()
		bridge.CacheActiveTimeout = max(1, int(min(fe.Active, fe.Poll).Seconds()))
		bridge.CacheMaxFlows = 2 * maxExportedConnections
		if err := bridge.Configure(ctx); err != nil {
			return nil, err
		}
		feed = ovsFeed
	} else {
		src.Datapath = "system@ovs-system"
	}
	cfg := flowexporter.Config{NodeName: d.o.NodeName, Protocol: fe.Collector.Transport,
		PollInterval: fe.Poll, ActiveTimeout: fe.Active, IdleTimeout: fe.Idle, MaxConnections: maxExportedConnections}
	if a := fe.Collector; a.ServiceName != "" {
		// An in-cluster collector: its ClusterIP, looked up at every
		// connection (the Service may come after the agent).
		cfg.Collector = a.ServiceNamespace + "/" + a.ServiceName
		cfg.Resolve = func(ctx context.Context) (string, error) {
			svc, err := d.kube.CoreV1().Services(a.ServiceNamespace).Get(ctx, a.ServiceName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			if ip := net.ParseIP(svc.Spec.ClusterIP); ip == nil {
				return "", fmt.Errorf("the flow collector's Service %s/%s has no ClusterIP", a.ServiceNamespace, a.ServiceName)
			}
			return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(a.Port)), nil
		}
	} else {
		cfg.Collector = a.HostPort()
	}
	if t := fe.Collector.Transport; t == agentconfig.TransportTLS || t == agentconfig.TransportGRPC {
		cfg.TLS = collectorTLS(d, fe.Collector)
	}
	// Service names from the Services AntreaProxy reads.
	services, err := flowexporter.NewServiceIndex(d.informers.Core().V1().Services().Informer())
	if err != nil {
		return nil, err
	}
	e, err := flowexporter.New(cfg, src, feed, flowexporter.InterfacePods{Store: d.store}, services)
	if err != nil {
		return nil, err
	}
	// The labels of this Node's Pods (the agent may list and watch Pods).
	pods := informers.NewSharedInformerFactoryWithOptions(d.kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", d.o.NodeName).String()
		}))
	e.SetLabels(flowexporter.PodListerLabels{Lister: pods.Core().V1().Pods().Lister()})
	// Denied connections: the policy flows that drop send a metered copy
	// of what they drop (before any policy flow is written: the
	// NetworkPolicy part comes later), which the policy controller names
	// and hands to the exporter (Options.Denied).
	d.flows.SetDenyTracking(true)
	d.exporter = e
	// The rules that allowed a connection, by the ids in its conntrack
	// label: the policy controller is set up after this part.
	e.SetRules(flowexporter.RuleLookupFunc(func(id uint32) (string, string, bool) {
		if c := d.policyRules.Load(); c != nil {
			return c.TraceflowRule(id)
		}
		return "", "", false
	}))
	d.api.metrics.FlowExporter = func() agentmetrics.FlowExporterCounts {
		s := e.Stats()
		return agentmetrics.FlowExporterCounts{Connections: s.Connections, Reconnects: s.Reconnects,
			RecordsSent: s.RecordsSent, RecordsDropped: s.RecordsDropped, Evicted: s.Evicted,
			DeniedConnections: s.Denied.Connections, DeniedPackets: s.Denied.Packets, DeniedEvicted: s.Denied.Evicted}
	}
	return loop(func(ctx context.Context) {
		pods.Start(ctx.Done())
		defer pods.Shutdown()
		if ovsFeed != nil {
			done := make(chan struct{})
			go func() { defer close(done); ovsFeed.Run(ctx) }()
			defer func() {
				<-done
				stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := bridge.Clear(stop); err != nil {
					klog.ErrorS(err, "Could not clear the bridge's IPFIX export", "bridge", d.o.OVSBridge)
				}
			}()
		}
		e.Run(ctx)
	}), nil
}
