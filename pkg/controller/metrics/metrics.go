// Package metrics holds antrea-controller's Prometheus metrics, with
// upstream Antrea's names, served at /metrics of the controller's API server
// (authenticated and authorized by kube-apiserver like every non-API path)
// next to the generic API server's and client-go's workqueue metrics:
//
//	antrea_controller_network_policy_processed                   counter: NetworkPolicy syncs
//	antrea_controller_network_policy_sync_duration_milliseconds   histogram: their duration
//	antrea_controller_address_group_processed                    counter: AddressGroup syncs
//	antrea_controller_address_group_sync_duration_milliseconds    histogram
//	antrea_controller_applied_to_group_processed                 counter: AppliedToGroup syncs
//	antrea_controller_applied_to_group_sync_duration_milliseconds histogram
//	antrea_controller_length_network_policy_queue                gauge (also _address_group_, _applied_to_group_)
//	antrea_controller_network_policy_count                       gauge: internal NetworkPolicies computed
//	antrea_controller_address_group_count, _applied_to_group_count  gauges
//
// "network_policy" counts the K8s NetworkPolicies and the Antrea-native ones
// (their syncs run in two queues; both are reported under that name, as
// upstream does).
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// The kinds of sync the controller runs.
const (
	NetworkPolicy  = "network_policy"
	AddressGroup   = "address_group"
	AppliedToGroup = "applied_to_group"
)

const namespace, subsystem = "antrea", "controller"

func name(n string) string { return prometheus.BuildFQName(namespace, subsystem, n) }

var buckets = []float64{0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000}

type syncMetrics struct {
	processed prometheus.Counter
	duration  prometheus.Histogram
}

var syncs = map[string]syncMetrics{}

func init() {
	for _, kind := range []string{NetworkPolicy, AddressGroup, AppliedToGroup} {
		syncs[kind] = syncMetrics{
			processed: prometheus.NewCounter(prometheus.CounterOpts{Name: name(kind + "_processed"),
				Help: "Number of " + kind + " syncs the controller processed."}),
			duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: name(kind + "_sync_duration_milliseconds"),
				Help: "Duration of the controller's " + kind + " syncs, in milliseconds.", Buckets: buckets}),
		}
	}
}

// ObserveSync records one sync of kind (NetworkPolicy, AddressGroup,
// AppliedToGroup) that took d. Other kinds are ignored.
func ObserveSync(kind string, d time.Duration) {
	m, ok := syncs[kind]
	if !ok {
		return
	}
	m.processed.Inc()
	m.duration.Observe(float64(d) / float64(time.Millisecond))
}

// Counts are the numbers the scrape-time gauges read.
type Counts struct {
	// Queue lengths by kind.
	Queues map[string]int
	// NetworkPolicies, AddressGroups, AppliedToGroups computed (in the
	// controlplane stores).
	NetworkPolicies, AddressGroups, AppliedToGroups int
}

var desc = struct {
	queue                                    map[string]*prometheus.Desc
	networkPolicies, addressGroups, atGroups *prometheus.Desc
}{
	queue: map[string]*prometheus.Desc{},
	networkPolicies: prometheus.NewDesc(name("network_policy_count"),
		"Number of internal NetworkPolicies the controller computed.", nil, nil),
	addressGroups: prometheus.NewDesc(name("address_group_count"),
		"Number of AddressGroups the controller computed.", nil, nil),
	atGroups: prometheus.NewDesc(name("applied_to_group_count"),
		"Number of AppliedToGroups the controller computed.", nil, nil),
}

func init() {
	for _, kind := range []string{NetworkPolicy, AddressGroup, AppliedToGroup} {
		desc.queue[kind] = prometheus.NewDesc(name("length_"+kind+"_queue"),
			"Number of "+kind+" keys waiting in the controller's queue.", nil, nil)
	}
}

type collector struct{ counts func() Counts }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range desc.queue {
		ch <- d
	}
	ch <- desc.networkPolicies
	ch <- desc.addressGroups
	ch <- desc.atGroups
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	n := c.counts()
	for kind, d := range desc.queue {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(n.Queues[kind]))
	}
	ch <- prometheus.MustNewConstMetric(desc.networkPolicies, prometheus.GaugeValue, float64(n.NetworkPolicies))
	ch <- prometheus.MustNewConstMetric(desc.addressGroups, prometheus.GaugeValue, float64(n.AddressGroups))
	ch <- prometheus.MustNewConstMetric(desc.atGroups, prometheus.GaugeValue, float64(n.AppliedToGroups))
}

var registerOnce sync.Once

// Register adds the controller's metrics to the registry /metrics serves
// (k8s.io/component-base's legacy registry); counts feeds the gauges. Only
// the first call counts: there is one controller per process.
func Register(counts func() Counts) {
	registerOnce.Do(func() {
		r := legacyregistry.Registerer()
		cs := []prometheus.Collector{collector{counts}}
		for _, m := range syncs {
			cs = append(cs, m.processed, m.duration)
		}
		for _, c := range cs {
			if err := r.Register(c); err != nil {
				klog.ErrorS(err, "Cannot register a controller metric")
			}
		}
	})
}
