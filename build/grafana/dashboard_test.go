// Package grafana holds the Grafana dashboard of Antrea's metrics
// (antrea-dashboard.json); its test checks that the dashboard is valid JSON
// and that every metric a panel queries is one the agent or the controller
// exports.
package grafana

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/workqueue"

	agentmetrics "antrea.io/antrea/pkg/agent/metrics"
	controllermetrics "antrea.io/antrea/pkg/controller/metrics"
	binding "antrea.io/antrea/pkg/ovs/openflow"
)

type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// exported gathers every metric family the agent and the controller
// register, each with at least one sample (a vector shows only once used).
func exported(t *testing.T) map[string]*dto.MetricFamily {
	agentmetrics.Register(agentmetrics.Sources{
		LocalPods: func() int { return 1 },
		Policies:  func() agentmetrics.PolicyCounts { return agentmetrics.PolicyCounts{NetworkPolicies: 1} },
		TableStats: func(context.Context) ([]binding.TableStats, error) {
			return []binding.TableStats{{TableID: 0, ActiveCount: 3}}, nil
		},
	})
	f := &binding.Flow{}
	agentmetrics.ObserveBundle([]binding.Message{binding.AddFlow(f), binding.ModifyFlowStrict(f), binding.DeleteFlowStrict(f)},
		time.Millisecond, errors.New("refused"))
	controllermetrics.Register(func() controllermetrics.Counts { return controllermetrics.Counts{} })
	for _, kind := range []string{controllermetrics.NetworkPolicy, controllermetrics.AddressGroup, controllermetrics.AppliedToGroup} {
		controllermetrics.ObserveSync(kind, time.Millisecond)
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "networkpolicy"})
	q.Add("x")
	defer q.ShutDown()
	fams, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

var (
	// The metric names in a PromQL expression: Antrea's and client-go's
	// workqueue metrics (label names and functions never start so).
	metricName      = regexp.MustCompile(`\b(antrea_[a-z_]+|workqueue_[a-z_]+)\b`)
	histogramSuffix = regexp.MustCompile(`_(bucket|sum|count)$`)
)

// known says whether a series name is exported: a family, or a histogram's
// _bucket/_sum/_count series.
func known(fams map[string]*dto.MetricFamily, name string) bool {
	if _, ok := fams[name]; ok {
		return true
	}
	base := histogramSuffix.ReplaceAllString(name, "")
	f, ok := fams[base]
	return ok && f.GetType() == dto.MetricType_HISTOGRAM
}

func TestDashboardQueriesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("antrea-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("antrea-dashboard.json is not valid JSON: %v", err)
	}
	if d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard has no title or no panels")
	}
	fams := exported(t)
	used := map[string]bool{}
	check := func(where, expr string) {
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q queries no Antrea metric", where, expr)
		}
		for _, n := range names {
			used[n] = true
			if !known(fams, n) {
				t.Errorf("%s: %q queries %s, which neither the agent nor the controller exports", where, expr, n)
			}
		}
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if s, ok := v.Query.(string); ok && strings.Contains(s, "(") {
			check("variable "+v.Name, s)
		}
	}
	// Every Antrea metric is plotted somewhere.
	for name := range fams {
		if !strings.HasPrefix(name, "antrea_") {
			continue
		}
		plotted := used[name]
		for u := range used {
			plotted = plotted || histogramSuffix.ReplaceAllString(u, "") == name
		}
		if !plotted {
			t.Errorf("%s is exported but no panel plots it", name)
		}
	}
}
