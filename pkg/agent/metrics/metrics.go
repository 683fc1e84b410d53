// Package metrics holds antrea-agent's Prometheus metrics, with upstream
// Antrea's names, served at /metrics of the agent API (pkg/agent/apiserver)
// next to the generic API server's and client-go's workqueue metrics:
//
//	antrea_agent_local_pod_count                          gauge: pods with an interface on this node
//	antrea_agent_networkpolicy_count                      gauge: NetworkPolicies realized on this node
//	antrea_agent_ingress_networkpolicy_rule_count         gauge: their ingress rules
//	antrea_agent_egress_networkpolicy_rule_count          gauge: their egress rules
//	antrea_agent_ovs_flow_count{table_id}                 gauge: flows per table of br-int
//	antrea_agent_ovs_total_flow_count                     gauge: flows of br-int
//	antrea_agent_ovs_flow_ops_count{operation}            counter: flow mods written (add, modify, delete)
//	antrea_agent_ovs_flow_ops_error_count{operation}      counter: flow mods of bundles OVS refused
//	antrea_agent_ovs_flow_ops_latency_milliseconds{operation}  histogram: bundle latency, per operation it holds
//	antrea_agent_ovs_bundle_count / _error_count          counter: OpenFlow bundles written / refused
//	antrea_agent_conntrack_antrea_connection_count        gauge: connections the FlowExporter holds (br-int's zone)
//	antrea_agent_flow_collector_reconnection_count        counter: FlowExporter's new sessions to its collector
//	antrea_agent_flow_exporter_record_count{result}       counter: records sent / dropped (queue full, lost session); not upstream's
//	antrea_agent_flow_exporter_evicted_connection_count   counter: connections dropped to stay within the bound; not upstream's
//	antrea_agent_denied_connection_count                  gauge: denied connections the FlowExporter holds
//	antrea_agent_flow_exporter_denied_packet_count        counter: denied packets reported to the FlowExporter (metered packet-ins); not upstream's
//	antrea_agent_flow_exporter_evicted_denied_connection_count  counter: denied connections dropped to stay within the bound; not upstream's
//
// The gauges are read when Prometheus scrapes (the interface store, the
// policy controller's cache, an OpenFlow table-stats request); the counters
// and the histogram are updated by Bridge, which wraps the OpenFlow client
// the agent writes its flows through.
package metrics

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	binding "antrea.io/antrea/pkg/ovs/openflow"
)

const namespace, subsystem = "antrea", "agent"

func name(n string) string { return prometheus.BuildFQName(namespace, subsystem, n) }

// Flow operations, the label of the flow-ops metrics.
const (
	OpAdd    = "add"
	OpModify = "modify"
	OpDelete = "delete"
)

var (
	flowOps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("ovs_flow_ops_count"),
		Help: "Number of OpenFlow flow mods the agent wrote, by operation (add, modify, delete)."}, []string{"operation"})
	flowOpErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("ovs_flow_ops_error_count"),
		Help: "Number of OpenFlow flow mods in bundles OVS refused, by operation."}, []string{"operation"})
	flowOpLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name("ovs_flow_ops_latency_milliseconds"),
		Help:    "Latency of the OpenFlow bundles holding flow mods of an operation, in milliseconds (one observation per bundle and operation).",
		Buckets: []float64{0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}}, []string{"operation"})
	bundles = prometheus.NewCounter(prometheus.CounterOpts{Name: name("ovs_bundle_count"),
		Help: "Number of OpenFlow bundles the agent wrote."})
	bundleErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: name("ovs_bundle_error_count"),
		Help: "Number of OpenFlow bundles OVS refused or that failed."})
)

// Sources are what the scrape-time gauges read; a nil field leaves its
// gauges out.
type Sources struct {
	// LocalPods counts the pods with an interface on this node.
	LocalPods func() int
	// Policies counts the realized NetworkPolicies and their rules.
	Policies func() PolicyCounts
	// TableStats reads br-int's table stats (OpenFlow multipart).
	TableStats func(ctx context.Context) ([]binding.TableStats, error)
	// FlowExporter reads the FlowExporter's counters (when it runs).
	FlowExporter func() FlowExporterCounts
}

// FlowExporterCounts are the FlowExporter's numbers.
type FlowExporterCounts struct {
	Connections                                      int
	Reconnects, RecordsSent, RecordsDropped, Evicted uint64
	// DeniedConnections are the denied connections held; DeniedPackets the
	// denied packets reported; DeniedEvicted the denied connections dropped.
	DeniedConnections            int
	DeniedPackets, DeniedEvicted uint64
}

// PolicyCounts are the agent's policy numbers.
type PolicyCounts struct {
	NetworkPolicies, IngressRules, EgressRules int
	AddressGroups, AppliedToGroups             int
}

// scrapeTimeout bounds the table-stats request of one scrape.
const scrapeTimeout = 5 * time.Second

var (
	desc = struct {
		localPods, policies, ingressRules, egressRules, flowCount, totalFlows *prometheus.Desc
		connections, reconnects, records, evicted                             *prometheus.Desc
		denied, deniedPackets, deniedEvicted                                  *prometheus.Desc
	}{
		localPods:    prometheus.NewDesc(name("local_pod_count"), "Number of pods on the local node which the agent manages.", nil, nil),
		policies:     prometheus.NewDesc(name("networkpolicy_count"), "Number of NetworkPolicies the agent realizes on the local node.", nil, nil),
		ingressRules: prometheus.NewDesc(name("ingress_networkpolicy_rule_count"), "Number of ingress rules of the NetworkPolicies the agent realizes.", nil, nil),
		egressRules:  prometheus.NewDesc(name("egress_networkpolicy_rule_count"), "Number of egress rules of the NetworkPolicies the agent realizes.", nil, nil),
		flowCount:    prometheus.NewDesc(name("ovs_flow_count"), "Number of OpenFlow flows in a table of the bridge.", []string{"table_id"}, nil),
		totalFlows:   prometheus.NewDesc(name("ovs_total_flow_count"), "Number of OpenFlow flows in the bridge.", nil, nil),
		connections:  prometheus.NewDesc(name("conntrack_antrea_connection_count"), "Number of connections of the bridge's conntrack zone the FlowExporter holds.", nil, nil),
		reconnects:   prometheus.NewDesc(name("flow_collector_reconnection_count"), "Number of times the FlowExporter started a new session to its collector.", nil, nil),
		records:      prometheus.NewDesc(name("flow_exporter_record_count"), "Number of flow records the FlowExporter sent or dropped (result sent, dropped).", []string{"result"}, nil),
		evicted:      prometheus.NewDesc(name("flow_exporter_evicted_connection_count"), "Number of connections the FlowExporter dropped, unexported, to stay within its bound.", nil, nil),
		denied:       prometheus.NewDesc(name("denied_connection_count"), "Number of denied connections the FlowExporter holds (connections a NetworkPolicy rule or isolation dropped or rejected).", nil, nil),
		deniedPackets: prometheus.NewDesc(name("flow_exporter_denied_packet_count"),
			"Number of denied packets reported to the FlowExporter (the drops' metered packet-ins).", nil, nil),
		deniedEvicted: prometheus.NewDesc(name("flow_exporter_evicted_denied_connection_count"),
			"Number of denied connections the FlowExporter dropped, unexported, to stay within its bound.", nil, nil),
	}
)

// collector computes the gauges when scraped.
type collector struct{ s Sources }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- desc.localPods
	ch <- desc.policies
	ch <- desc.ingressRules
	ch <- desc.egressRules
	ch <- desc.flowCount
	ch <- desc.totalFlows
	ch <- desc.connections
	ch <- desc.reconnects
	ch <- desc.records
	ch <- desc.evicted
	ch <- desc.denied
	ch <- desc.deniedPackets
	ch <- desc.deniedEvicted
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	if c.s.LocalPods != nil {
		ch <- prometheus.MustNewConstMetric(desc.localPods, prometheus.GaugeValue, float64(c.s.LocalPods()))
	}
	if c.s.Policies != nil {
		p := c.s.Policies()
		ch <- prometheus.MustNewConstMetric(desc.policies, prometheus.GaugeValue, float64(p.NetworkPolicies))
		ch <- prometheus.MustNewConstMetric(desc.ingressRules, prometheus.GaugeValue, float64(p.IngressRules))
		ch <- prometheus.MustNewConstMetric(desc.egressRules, prometheus.GaugeValue, float64(p.EgressRules))
	}
	if c.s.FlowExporter != nil {
		f := c.s.FlowExporter()
		ch <- prometheus.MustNewConstMetric(desc.connections, prometheus.GaugeValue, float64(f.Connections))
		ch <- prometheus.MustNewConstMetric(desc.reconnects, prometheus.CounterValue, float64(f.Reconnects))
		ch <- prometheus.MustNewConstMetric(desc.records, prometheus.CounterValue, float64(f.RecordsSent), "sent")
		ch <- prometheus.MustNewConstMetric(desc.records, prometheus.CounterValue, float64(f.RecordsDropped), "dropped")
		ch <- prometheus.MustNewConstMetric(desc.evicted, prometheus.CounterValue, float64(f.Evicted))
		ch <- prometheus.MustNewConstMetric(desc.denied, prometheus.GaugeValue, float64(f.DeniedConnections))
		ch <- prometheus.MustNewConstMetric(desc.deniedPackets, prometheus.CounterValue, float64(f.DeniedPackets))
		ch <- prometheus.MustNewConstMetric(desc.deniedEvicted, prometheus.CounterValue, float64(f.DeniedEvicted))
	}
	if c.s.TableStats != nil {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
		stats, err := c.s.TableStats(ctx)
		if err != nil {
			klog.ErrorS(err, "Cannot read the bridge's table stats for the metrics")
			return
		}
		total := 0
		for _, t := range stats {
			if t.ActiveCount == 0 {
				continue
			}
			total += int(t.ActiveCount)
			ch <- prometheus.MustNewConstMetric(desc.flowCount, prometheus.GaugeValue, float64(t.ActiveCount), strconv.Itoa(int(t.TableID)))
		}
		ch <- prometheus.MustNewConstMetric(desc.totalFlows, prometheus.GaugeValue, float64(total))
	}
}

var registerOnce sync.Once

// Register adds the agent's metrics to the registry /metrics serves
// (k8s.io/component-base's legacy registry). Only the first call's sources
// count: there is one agent per process.
func Register(s Sources) {
	registerOnce.Do(func() {
		r := legacyregistry.Registerer()
		for _, c := range []prometheus.Collector{flowOps, flowOpErrors, flowOpLatency, bundles, bundleErrors, collector{s}} {
			if err := r.Register(c); err != nil {
				klog.ErrorS(err, "Cannot register an agent metric")
			}
		}
	})
}

// Bridge is the agent's OpenFlow client with the flow-ops metrics: every
// Bundle counts its flow mods by operation and times itself. The other
// methods are the client's (embedded), so the features that look for them
// (dumps, conntrack flushes, meters) still find them.
type Bridge struct {
	*binding.Client
}

// Bundle writes msgs as one bundle and records it.
func (b Bridge) Bundle(ctx context.Context, msgs ...binding.Message) error {
	start := time.Now()
	err := b.Client.Bundle(ctx, msgs...)
	ObserveBundle(msgs, time.Since(start), err)
	return err
}

// ObserveBundle records one bundle of msgs that took d and ended with err.
func ObserveBundle(msgs []binding.Message, d time.Duration, err error) {
	var n [3]int
	for _, m := range msgs {
		fm, ok := m.(*binding.FlowMod)
		if !ok {
			continue
		}
		switch fm.Command {
		case binding.FlowAdd:
			n[0]++
		case binding.FlowModify, binding.FlowModifyStrict:
			n[1]++
		case binding.FlowDelete, binding.FlowDeleteStrict:
			n[2]++
		}
	}
	bundles.Inc()
	if err != nil {
		bundleErrors.Inc()
	}
	ms := float64(d) / float64(time.Millisecond)
	for i, op := range []string{OpAdd, OpModify, OpDelete} {
		if n[i] == 0 {
			continue
		}
		flowOps.WithLabelValues(op).Add(float64(n[i]))
		flowOpLatency.WithLabelValues(op).Observe(ms)
		if err != nil {
			flowOpErrors.WithLabelValues(op).Add(float64(n[i]))
		}
	}
}
