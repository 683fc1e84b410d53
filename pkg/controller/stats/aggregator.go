// Package stats is the controller's NetworkPolicy statistics aggregator:
// agents report, every collection interval, what each policy rule of their
// Node counted since the previous report (controlplane NodeStatsSummary);
// the aggregator sums those per policy and per rule over all Nodes and
// serves the sums as stats.antrea.io/v1alpha1 objects. It knows the
// policies from the informers of K8s NetworkPolicies and Antrea-native
// policies: a policy's stats exist (at zero) as soon as the policy does,
// and go away when it is deleted; a report on a policy it does not know is
// dropped. As upstream's, the sums live in memory: a restarted controller
// counts from zero.
//
// The same reports carry the multicast groups each Node's Pods joined;
// Multicast (multicast.go) keeps the latest per Node and serves them
// merged as MulticastGroups.
package stats

import (
	"cmp"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// Kind is the user-facing kind of a policy whose stats are served.
type Kind = controlplane.NetworkPolicyType

// The kinds, as controlplane's NetworkPolicyReference names them.
const (
	KindK8s  = controlplane.K8sNetworkPolicy
	KindANNP = controlplane.AntreaNetworkPolicy
	KindACNP = controlplane.AntreaClusterNetworkPolicy
)

// policyStats are the sums of one policy.
type policyStats struct {
	meta  metav1.ObjectMeta // name, namespace, uid, creationTimestamp of the policy
	total statsv1alpha1.TrafficStats
	rules map[string]*statsv1alpha1.TrafficStats
}

// Aggregator sums agents' reports per policy and rule. It is safe for
// concurrent use.
type Aggregator struct {
	mu sync.RWMutex
	// policies by kind and UID.
	policies map[Kind]map[types.UID]*policyStats
	// Multicast holds the Nodes' multicast groups.
	*Multicast
}

// NewAggregator returns an aggregator that knows no policy yet.
func NewAggregator() *Aggregator {
	return &Aggregator{policies: map[Kind]map[types.UID]*policyStats{KindK8s: {}, KindANNP: {}, KindACNP: {}},
		Multicast: NewMulticast(0)}
}

// AddPolicy makes a policy's stats exist (zero until reported); adding a
// known policy again keeps its sums.
func (a *Aggregator) AddPolicy(kind Kind, m metav1.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	byUID, ok := a.policies[kind]
	if !ok {
		return
	}
	if _, ok := byUID[m.GetUID()]; ok {
		return
	}
	byUID[m.GetUID()] = &policyStats{
		meta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			CreationTimestamp: m.GetCreationTimestamp()},
		rules: map[string]*statsv1alpha1.TrafficStats{},
	}
}

// DeletePolicy forgets a policy's stats.
func (a *Aggregator) DeletePolicy(kind Kind, uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.policies[kind], uid)
}

// WatchPolicies keeps the set of policies of a kind equal to an informer's.
func (a *Aggregator) WatchPolicies(kind Kind, informer cache.SharedIndexInformer) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m, ok := obj.(metav1.Object); ok {
				a.AddPolicy(kind, m)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if m, ok := obj.(metav1.Object); ok {
				a.DeletePolicy(kind, m.GetUID())
			}
		},
	})
	return err
}

func add(sum *statsv1alpha1.TrafficStats, d statsv1alpha1.TrafficStats) {
	sum.Packets += d.Packets
	sum.Bytes += d.Bytes
	sum.Sessions += d.Sessions
}

// Collect adds one Node's report. Stats of a policy the aggregator does
// not know (deleted since, or not yet seen) are dropped; the Node's
// multicast groups replace its previous ones.
func (a *Aggregator) Collect(s *controlplane.NodeStatsSummary) {
	a.Multicast.Collect(s)
	a.mu.Lock()
	defer a.mu.Unlock()
	dropped := 0
	for kind, list := range map[Kind][]controlplane.NetworkPolicyStats{
		KindK8s: s.NetworkPolicies, KindANNP: s.AntreaNetworkPolicies, KindACNP: s.AntreaClusterNetworkPolicies,
	} {
		for i := range list {
			ps := a.policies[kind][list[i].NetworkPolicy.UID]
			if ps == nil {
				dropped++
				continue
			}
			add(&ps.total, list[i].TrafficStats)
			for _, r := range list[i].RuleTrafficStats {
				if r.Name == "" {
					continue
				}
				rs := ps.rules[r.Name]
				if rs == nil {
					rs = &statsv1alpha1.TrafficStats{}
					ps.rules[r.Name] = rs
				}
				add(rs, r.TrafficStats)
			}
		}
	}
	klog.V(2).InfoS("Collected NetworkPolicy stats", "node", s.Name, "unknownPolicies", dropped)
}

// entry is one policy's stats as served.
type entry struct {
	meta  metav1.ObjectMeta
	total statsv1alpha1.TrafficStats
	rules []statsv1alpha1.RuleTrafficStats
}

func (ps *policyStats) entry() entry {
	e := entry{meta: ps.meta, total: ps.total}
	for name, s := range ps.rules {
		e.rules = append(e.rules, statsv1alpha1.RuleTrafficStats{Name: name, TrafficStats: *s})
	}
	slices.SortFunc(e.rules, func(x, y statsv1alpha1.RuleTrafficStats) int { return cmp.Compare(x.Name, y.Name) })
	return e
}

// list returns the stats of a kind's policies in namespace ("" for all),
// sorted by namespace and name.
func (a *Aggregator) list(kind Kind, namespace string) []entry {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []entry
	for _, ps := range a.policies[kind] {
		if namespace == "" || ps.meta.Namespace == namespace {
			out = append(out, ps.entry())
		}
	}
	slices.SortFunc(out, func(x, y entry) int {
		return cmp.Or(cmp.Compare(x.meta.Namespace, y.meta.Namespace), cmp.Compare(x.meta.Name, y.meta.Name))
	})
	return out
}

func (a *Aggregator) get(kind Kind, namespace, name string) (entry, bool) {
	for _, e := range a.list(kind, namespace) {
		if e.meta.Name == name {
			return e, true
		}
	}
	return entry{}, false
}

// ListNetworkPolicyStats returns the stats of the K8s NetworkPolicies in
// namespace ("" for all).
func (a *Aggregator) ListNetworkPolicyStats(namespace string) []statsv1alpha1.NetworkPolicyStats {
	var out []statsv1alpha1.NetworkPolicyStats
	for _, e := range a.list(KindK8s, namespace) {
		out = append(out, statsv1alpha1.NetworkPolicyStats{ObjectMeta: e.meta, TrafficStats: e.total})
	}
	return out
}

// GetNetworkPolicyStats returns the stats of one K8s NetworkPolicy.
func (a *Aggregator) GetNetworkPolicyStats(namespace, name string) (*statsv1alpha1.NetworkPolicyStats, bool) {
	e, ok := a.get(KindK8s, namespace, name)
	if !ok {
		return nil, false
	}
	return &statsv1alpha1.NetworkPolicyStats{ObjectMeta: e.meta, TrafficStats: e.total}, true
}

// ListAntreaNetworkPolicyStats returns the stats of the Antrea
// NetworkPolicies in namespace ("" for all).
func (a *Aggregator) ListAntreaNetworkPolicyStats(namespace string) []statsv1alpha1.AntreaNetworkPolicyStats {
	var out []statsv1alpha1.AntreaNetworkPolicyStats
	for _, e := range a.list(KindANNP, namespace) {
		out = append(out, statsv1alpha1.AntreaNetworkPolicyStats{ObjectMeta: e.meta, TrafficStats: e.total, RuleTrafficStats: e.rules})
	}
	return out
}

// GetAntreaNetworkPolicyStats returns the stats of one Antrea NetworkPolicy.
func (a *Aggregator) GetAntreaNetworkPolicyStats(namespace, name string) (*statsv1alpha1.AntreaNetworkPolicyStats, bool) {
	e, ok := a.get(KindANNP, namespace, name)
	if !ok {
		return nil, false
	}
	return &statsv1alpha1.AntreaNetworkPolicyStats{ObjectMeta: e.meta, TrafficStats: e.total, RuleTrafficStats: e.rules}, true
}

// ListAntreaClusterNetworkPolicyStats returns the stats of every Antrea
// ClusterNetworkPolicy.
func (a *Aggregator) ListAntreaClusterNetworkPolicyStats() []statsv1alpha1.AntreaClusterNetworkPolicyStats {
	var out []statsv1alpha1.AntreaClusterNetworkPolicyStats
	for _, e := range a.list(KindACNP, "") {
		out = append(out, statsv1alpha1.AntreaClusterNetworkPolicyStats{ObjectMeta: e.meta, TrafficStats: e.total, RuleTrafficStats: e.rules})
	}
	return out
}

// GetAntreaClusterNetworkPolicyStats returns the stats of one Antrea
// ClusterNetworkPolicy.
func (a *Aggregator) GetAntreaClusterNetworkPolicyStats(name string) (*statsv1alpha1.AntreaClusterNetworkPolicyStats, bool) {
	e, ok := a.get(KindACNP, "", name)
	if !ok {
		return nil, false
	}
	return &statsv1alpha1.AntreaClusterNetworkPolicyStats{ObjectMeta: e.meta, TrafficStats: e.total, RuleTrafficStats: e.rules}, true
}
