// Package stats is the agent's NetworkPolicy statistics collector: every
// interval it reads the counters of the Node's policy rules (an Allow
// rule's metric flows, which count its connections and every packet of
// them in both directions; the conj_id flow of the other rules, which
// counts the packets they drop or pass), turns them
// into what each rule counted since the previous collection, and reports
// that per policy and per named rule to antrea-controller as a
// controlplane NodeStatsSummary, which the controller sums over Nodes
// (pkg/controller/stats). Counters that went down belong to flows that
// were reinstalled: they count from zero. The first collection after the
// agent starts is only a baseline, so a restarted agent does not report
// again what it reported before. When multicast is on, each report also
// carries the multicast groups the Node's Pods joined at that moment
// (MulticastGroups), which the controller serves as multicastgroups.
package stats

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	agentof "antrea.io/antrea/pkg/agent/openflow"
	cpv1beta2 "antrea.io/antrea/pkg/apis/controlplane/v1beta2"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
)

// Rule is a realized rule's identity: the user's policy, the rule's name
// (empty for K8s NetworkPolicy rules, which have none) and its key on the
// Node (policy and rule; a conjunction id given to another rule counts
// that rule from zero).
type Rule struct {
	Policy cpv1beta2.NetworkPolicyReference
	Name   string
	Key    string
}

// Rules says which rule each conjunction id is (the policy controller).
type Rules interface {
	RealizedRules() map[uint32]Rule
}

// Counters reads the rules' flow counters (the OpenFlow client).
type Counters interface {
	PolicyRuleStats(ctx context.Context) (map[uint32]agentof.RuleCounters, error)
}

// MulticastGroups says which multicast groups the local Pods joined (the
// multicast controller).
type MulticastGroups interface {
	Groups() []cpv1beta2.MulticastGroupInfo
}

// Reporter sends a summary to the controller.
type Reporter interface {
	Report(ctx context.Context, s *cpv1beta2.NodeStatsSummary) error
}

// sample is a rule's counters at the last collection.
type sample struct {
	key      string
	sessions uint64
	packets  uint64
	bytes    uint64
}

// Collector collects and reports; Run drives it.
type Collector struct {
	node     string
	interval time.Duration
	rules    Rules
	counters Counters
	reporter Reporter
	mcast    MulticastGroups // nil: multicast off

	last map[uint32]sample // nil until the baseline is taken
}

// NewCollector returns a collector for node that reports every interval.
func NewCollector(node string, interval time.Duration, rules Rules, counters Counters, reporter Reporter) *Collector {
	return &Collector{node: node, interval: interval, rules: rules, counters: counters, reporter: reporter}
}

// SetMulticastGroups makes every report carry g's groups (before Run).
func (c *Collector) SetMulticastGroups(g MulticastGroups) { c.mcast = g }

// Run takes the baseline, then collects and reports every interval until
// ctx ends. A failed report is logged and its counts are lost (as
// upstream's): the next one carries only its own interval.
func (c *Collector) Run(ctx context.Context) {
	klog.InfoS("Starting the NetworkPolicy stats collector", "interval", c.interval)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		s, err := c.Collect(ctx)
		if err != nil {
			klog.ErrorS(err, "Could not collect NetworkPolicy stats")
			return
		}
		if s == nil {
			return
		}
		if err := c.reporter.Report(ctx, s); err != nil {
			klog.ErrorS(err, "Could not report NetworkPolicy stats", "policies",
				len(s.NetworkPolicies)+len(s.AntreaNetworkPolicies)+len(s.AntreaClusterNetworkPolicies))
		}
	}, c.interval)
}

// Collect reads the counters and returns what each policy and rule counted
// since the previous call: nil on the first call (the baseline). Every
// realized rule appears, with zeros if it saw nothing, so a policy's
// rules are listed as soon as they are realized.
func (c *Collector) Collect(ctx context.Context) (*cpv1beta2.NodeStatsSummary, error) {
	counters, err := c.counters.PolicyRuleStats(ctx)
	if err != nil {
		return nil, err
	}
	rules := c.rules.RealizedRules()
	now := make(map[uint32]sample, len(rules))
	for id, r := range rules {
		rc := counters[id]
		now[id] = sample{key: r.Key, sessions: rc.Sessions, packets: rc.Packets, bytes: rc.Bytes}
	}
	last := c.last
	c.last = now
	if last == nil {
		return nil, nil
	}
	s := summarize(c.node, rules, now, last)
	if c.mcast != nil {
		s.Multicast = c.mcast.Groups()
	}
	return s, nil
}

// delta is what a rule counted between two samples.
func delta(now, last sample, hadLast bool) statsv1alpha1.TrafficStats {
	if !hadLast || last.key != now.key || now.sessions < last.sessions || now.packets < last.packets || now.bytes < last.bytes {
		// New rule, an id given to another rule, or reinstalled flows.
		last = sample{}
	}
	return statsv1alpha1.TrafficStats{Packets: int64(now.packets - last.packets), Bytes: int64(now.bytes - last.bytes),
		Sessions: int64(now.sessions - last.sessions)}
}

func summarize(node string, rules map[uint32]Rule, now, last map[uint32]sample) *cpv1beta2.NodeStatsSummary {
	type policyKey struct {
		t   cpv1beta2.NetworkPolicyType
		uid string
	}
	byPolicy := map[policyKey]*cpv1beta2.NetworkPolicyStats{}
	ruleSums := map[policyKey]map[string]*statsv1alpha1.TrafficStats{}
	for id, r := range rules {
		if r.Policy.UID == "" {
			continue
		}
		l, ok := last[id]
		d := delta(now[id], l, ok)
		k := policyKey{r.Policy.Type, string(r.Policy.UID)}
		ps := byPolicy[k]
		if ps == nil {
			ps = &cpv1beta2.NetworkPolicyStats{NetworkPolicy: r.Policy}
			byPolicy[k] = ps
			ruleSums[k] = map[string]*statsv1alpha1.TrafficStats{}
		}
		addStats(&ps.TrafficStats, d)
		if r.Name != "" {
			rs := ruleSums[k][r.Name]
			if rs == nil {
				rs = &statsv1alpha1.TrafficStats{}
				ruleSums[k][r.Name] = rs
			}
			addStats(rs, d)
		}
	}
	s := &cpv1beta2.NodeStatsSummary{}
	s.Name = node
	for _, k := range slices.SortedFunc(maps.Keys(byPolicy), func(a, b policyKey) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.uid, b.uid))
	}) {
		ps := byPolicy[k]
		for name, rs := range ruleSums[k] {
			ps.RuleTrafficStats = append(ps.RuleTrafficStats, statsv1alpha1.RuleTrafficStats{Name: name, TrafficStats: *rs})
		}
		slices.SortFunc(ps.RuleTrafficStats, func(a, b statsv1alpha1.RuleTrafficStats) int { return cmp.Compare(a.Name, b.Name) })
		switch k.t {
		case cpv1beta2.K8sNetworkPolicy:
			s.NetworkPolicies = append(s.NetworkPolicies, *ps)
		case cpv1beta2.AntreaNetworkPolicy:
			s.AntreaNetworkPolicies = append(s.AntreaNetworkPolicies, *ps)
		case cpv1beta2.AntreaClusterNetworkPolicy:
			s.AntreaClusterNetworkPolicies = append(s.AntreaClusterNetworkPolicies, *ps)
		}
	}
	return s
}

func addStats(sum *statsv1alpha1.TrafficStats, d statsv1alpha1.TrafficStats) {
	sum.Packets += d.Packets
	sum.Bytes += d.Bytes
	sum.Sessions += d.Sessions
}

// ClientReporter posts summaries to controlplane.antrea.io nodestatssummaries.
type ClientReporter struct {
	Client versioned.Interface
}

// Report creates the summary.
func (r ClientReporter) Report(ctx context.Context, s *cpv1beta2.NodeStatsSummary) error {
	_, err := r.Client.ControlplaneV1beta2().NodeStatsSummaries().Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("posting the NodeStatsSummary of %s: %w", s.Name, err)
	}
	return nil
}
