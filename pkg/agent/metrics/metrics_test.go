package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"regexp"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	agentapi "antrea.io/antrea/pkg/agent/apiserver"
	"antrea.io/antrea/pkg/agent/apiserver/agentapitest"
	"antrea.io/antrea/pkg/agent/interfacestore"
	"antrea.io/antrea/pkg/agent/metrics"
	agentof "antrea.io/antrea/pkg/agent/openflow"
	"antrea.io/antrea/pkg/agent/openflow/bridgetest"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

// Scrape parses a /metrics body with Prometheus' text parser.
func Scrape(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value is the value of the family's sample whose labels include labels
// (name=value pairs); ok false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestAgentMetricsScrapedThroughTheAgentAPI: a real br-int with the agent's
// pipeline and three pods, the agent's flows written through the metrics'
// Bridge, scraped at the agent API's /metrics by a ServiceAccount bound to
// antrea-metrics-reader (authenticated and authorized by a real
// kube-apiserver) and parsed with Prometheus' text parser: the pod count is
// the pods made, the flow counts per table and in all are what ovs-ofctl
// dump-flows lists, the flow-ops counters count the flow mods the client
// sent (adds at install, deletes at a pod's removal), and the policy gauges
// what the policy controller reports.
func TestAgentMetricsScrapedThroughTheAgentAPI(t *testing.T) {
	br := bridgetest.New(t)
	flows, err := agentof.NewClient(metrics.Bridge{Client: br.OF}, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, cidr, _ := net.ParseCIDR(bridgetest.PodCIDR)
	if err := flows.Initialize(ctx, &agentof.NodeConfig{GatewayOFPort: bridgetest.GatewayOFPort,
		GatewayIP: net.ParseIP(bridgetest.GatewayIP), GatewayMAC: br.GatewayMAC, PodCIDR: cidr}); err != nil {
		t.Fatal(err)
	}
	store := interfacestore.NewInterfaceStore()
	var pods []*bridgetest.Pod
	for i := 0; i < 3; i++ {
		p := br.AddPod(t, fmt.Sprintf("p%d", i), fmt.Sprintf("10.10.1.%d/24", 10+i))
		if err := flows.InstallPodFlows(p.HostIF, []net.IP{p.IP}, p.MAC, p.OFPort); err != nil {
			t.Fatal(err)
		}
		cfg := interfacestore.NewContainerInterface(p.HostIF, "c"+p.Name, p.Name, "demo", "eth0", p.MAC, []net.IP{p.IP}, 0)
		cfg.OVSPortConfig = &interfacestore.OVSPortConfig{OFPort: int32(p.OFPort)}
		store.AddInterface(cfg)
		pods = append(pods, p)
	}
	metrics.Register(metrics.Sources{
		LocalPods: store.GetContainerInterfaceNum,
		Policies: func() metrics.PolicyCounts {
			return metrics.PolicyCounts{NetworkPolicies: 2, IngressRules: 3, EgressRules: 1}
		},
		TableStats: func(ctx context.Context) ([]binding.TableStats, error) {
			conn, err := br.OF.Conn(ctx)
			if err != nil {
				return nil, err
			}
			return conn.TableStats(ctx)
		},
		FlowExporter: func() metrics.FlowExporterCounts {
			return metrics.FlowExporterCounts{Connections: 7, Reconnects: 2, RecordsSent: 40, RecordsDropped: 3, Evicted: 1}
		},
	})
	api := agentapitest.Start(t, &agentapi.Querier{NodeName: "node-1", Interfaces: store}, nil)
	token := agentapitest.Token(t, api.Ctx, api.Kube, "prometheus", "antrea-metrics-reader")
	scrape := func() map[string]*dto.MetricFamily {
		return Scrape(t, agentapitest.GetOK(t, api.Ctx, api.URL, token, "/metrics"))
	}

	// What OVS holds, per table, by ovs-ofctl.
	tableOf := regexp.MustCompile(`table=(\d+)`)
	ofctlCounts := func() (map[string]int, int) {
		per, total := map[string]int{}, 0
		for _, l := range br.DumpFlows(t) {
			m := tableOf.FindStringSubmatch(l)
			table := "0"
			if m != nil {
				table = m[1]
			}
			per[table]++
			total++
		}
		return per, total
	}
	check := func(fams map[string]*dto.MetricFamily, pods int) {
		t.Helper()
		if v, ok := value(fams, "antrea_agent_local_pod_count"); !ok || v != float64(pods) {
			t.Errorf("antrea_agent_local_pod_count = %v (%v), want %d", v, ok, pods)
		}
		per, total := ofctlCounts()
		if v, _ := value(fams, "antrea_agent_ovs_total_flow_count"); v != float64(total) || total == 0 {
			t.Errorf("antrea_agent_ovs_total_flow_count = %v, ovs-ofctl dump-flows lists %d", v, total)
		}
		for table, n := range per {
			if v, _ := value(fams, "antrea_agent_ovs_flow_count", "table_id", table); v != float64(n) {
				t.Errorf("antrea_agent_ovs_flow_count{table_id=%q} = %v, ovs-ofctl lists %d", table, v, n)
			}
		}
		if n := len(fams["antrea_agent_ovs_flow_count"].GetMetric()); n != len(per) {
			t.Errorf("antrea_agent_ovs_flow_count has %d tables, ovs-ofctl %d", n, len(per))
		}
	}
	fams := scrape()
	check(fams, 3)
	for name, want := range map[string]float64{"antrea_agent_networkpolicy_count": 2,
		"antrea_agent_ingress_networkpolicy_rule_count": 3, "antrea_agent_egress_networkpolicy_rule_count": 1,
		"antrea_agent_conntrack_antrea_connection_count": 7, "antrea_agent_flow_collector_reconnection_count": 2,
		"antrea_agent_flow_exporter_evicted_connection_count": 1} {
		if v, _ := value(fams, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	for result, want := range map[string]float64{"sent": 40, "dropped": 3} {
		if v, _ := value(fams, "antrea_agent_flow_exporter_record_count", "result", result); v != want {
			t.Errorf("antrea_agent_flow_exporter_record_count{result=%q} = %v, want %v", result, v, want)
		}
	}
	// Every flow OVS holds was added through the client (no flow was
	// added twice here): adds >= flows; no delete yet.
	_, total := ofctlCounts()
	adds, _ := value(fams, "antrea_agent_ovs_flow_ops_count", "operation", "add")
	if adds < float64(total) {
		t.Errorf("antrea_agent_ovs_flow_ops_count{operation=add} = %v, fewer than the %d flows installed", adds, total)
	}
	if v, ok := value(fams, "antrea_agent_ovs_flow_ops_count", "operation", "delete"); ok && v != 0 {
		t.Errorf("deletes counted before any: %v", v)
	}
	addBundles, _ := value(fams, "antrea_agent_ovs_flow_ops_latency_milliseconds", "operation", "add")
	bundles, _ := value(fams, "antrea_agent_ovs_bundle_count")
	if addBundles < 4 || addBundles > bundles {
		t.Errorf("latency histogram holds %v add bundles of %v bundles; want one per bundle with adds (>= Initialize + 3 pods)", addBundles, bundles)
	}

	// Removing a pod deletes its flows: deletes counted, one pod less.
	before := len(br.DumpFlows(t))
	if err := flows.UninstallPodFlows(pods[0].HostIF); err != nil {
		t.Fatal(err)
	}
	removed := before - len(br.DumpFlows(t))
	store.DeleteInterface(&interfacestore.InterfaceConfig{InterfaceName: pods[0].HostIF})
	fams = scrape()
	check(fams, 2)
	if v, _ := value(fams, "antrea_agent_ovs_flow_ops_count", "operation", "delete"); removed == 0 || v != float64(removed) {
		t.Errorf("antrea_agent_ovs_flow_ops_count{operation=delete} = %v, the pod's removal deleted %d flows", v, removed)
	}
	// The histogram is a real Prometheus histogram (buckets, sum, count).
	h := fams["antrea_agent_ovs_flow_ops_latency_milliseconds"]
	if h.GetType() != dto.MetricType_HISTOGRAM || len(h.Metric[0].Histogram.Bucket) == 0 {
		t.Errorf("antrea_agent_ovs_flow_ops_latency_milliseconds is %v", h.GetType())
	}
}
