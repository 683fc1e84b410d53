package flowaggregator

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the aggregator's Prometheus metrics, on a registry of its own
// (served at /metrics).
type Metrics struct {
	Registry        *prometheus.Registry
	RecordsReceived *prometheus.CounterVec
	DecodeErrors    *prometheus.CounterVec
	RecordsExported *prometheus.CounterVec
	ExportErrors    *prometheus.CounterVec
	RecordsDropped  *prometheus.CounterVec
	Correlated      prometheus.Counter
	ReleasedAlone   prometheus.Counter
	PendingRecords  prometheus.Gauge
	StoredRecords   prometheus.Gauge
	ConnectedPeers  prometheus.Gauge
	LiveConnections prometheus.Gauge
}

const metricsNamespace = "antrea_flow_aggregator"

// NewMetrics registers the metrics on a new registry.
func NewMetrics() *Metrics {
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help}, labels)
	}
	m := &Metrics{
		Registry:        prometheus.NewRegistry(),
		RecordsReceived: counterVec("records_received_total", "IPFIX data records decoded from the agents, by transport.", "transport"),
		DecodeErrors:    counterVec("decode_errors_total", "IPFIX messages (or records) from the agents that could not be decoded, by transport.", "transport"),
		RecordsExported: counterVec("records_exported_total", "Records handed to an exporter and written, by exporter (ipfix, log).", "exporter"),
		ExportErrors:    counterVec("export_errors_total", "Failed writes of an exporter (each may lose a batch), by exporter.", "exporter"),
		RecordsDropped:  counterVec("records_dropped_total", "Records an exporter dropped because its queue was full or its write failed, by exporter.", "exporter"),
		Correlated: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "records_correlated_total",
			Help: "Inter-node connections whose source and destination Node records were joined."}),
		ReleasedAlone: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "records_uncorrelated_total",
			Help: "Records released without the partner they waited for (correlationWait)."}),
		PendingRecords: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "pending_records",
			Help: "Records waiting for their partner."}),
		StoredRecords: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "stored_records",
			Help: "Records held for the API (recordBufferSize at most)."}),
		ConnectedPeers: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "tcp_peers",
			Help: "Agents connected over TCP."}),
		LiveConnections: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "live_connections",
			Help: "Connections the aggregator output and keeps (output again each activeFlowRecordTimeout while no record comes, until inactiveFlowRecordTimeout)."}),
	}
	m.Registry.MustRegister(m.RecordsReceived, m.DecodeErrors, m.RecordsExported, m.ExportErrors, m.RecordsDropped,
		m.Correlated, m.ReleasedAlone, m.PendingRecords, m.StoredRecords, m.ConnectedPeers, m.LiveConnections)
	return m
}
