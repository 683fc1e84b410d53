package query

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// StatsKind is one of the three stats.antrea.io/v1alpha1 resources: the
// traffic statistics antrea-controller sums from the agents' reports
// (docs/network-policy-stats.md).
type StatsKind string

// The stats kinds.
const (
	NetworkPolicyStats              StatsKind = "NetworkPolicyStats"
	AntreaNetworkPolicyStats        StatsKind = "AntreaNetworkPolicyStats"
	AntreaClusterNetworkPolicyStats StatsKind = "AntreaClusterNetworkPolicyStats"
)

// Namespaced says whether the kind's objects are in a namespace.
func (k StatsKind) Namespaced() bool { return k != AntreaClusterNetworkPolicyStats }

// PerRule says whether the kind counts each rule too.
func (k StatsKind) PerRule() bool { return k != NetworkPolicyStats }

// PolicyStats is one policy's traffic statistics.
type PolicyStats struct {
	Namespace string                           `json:"namespace,omitempty"`
	Name      string                           `json:"name"`
	Created   metav1.Time                      `json:"created"`
	Total     statsv1alpha1.TrafficStats       `json:"total"`
	Rules     []statsv1alpha1.RuleTrafficStats `json:"rules,omitempty"`
	// Object is the stats object as the API serves it (with its TypeMeta).
	Object any `json:"-"`
}

// Stats returns the statistics of kind: of one policy when name is given,
// else of every policy in namespace ns ("" for every namespace; a
// cluster-scoped kind ignores ns).
func Stats(ctx context.Context, c *Clients, kind StatsKind, ns, name string) ([]PolicyStats, error) {
	st := c.Antrea.StatsV1alpha1()
	if !kind.Namespaced() {
		ns = ""
	}
	tm := metav1.TypeMeta{APIVersion: statsv1alpha1.SchemeGroupVersion.String(), Kind: string(kind)}
	var out []PolicyStats
	var err error
	switch kind {
	case NetworkPolicyStats:
		out, err = readStats(ctx, st.NetworkPolicyStatses(ns), name,
			func(l *statsv1alpha1.NetworkPolicyStatsList) []statsv1alpha1.NetworkPolicyStats { return l.Items },
			func(o *statsv1alpha1.NetworkPolicyStats) PolicyStats {
				o.TypeMeta = tm
				return policyStats(&o.ObjectMeta, o.TrafficStats, nil, o)
			})
	case AntreaNetworkPolicyStats:
		out, err = readStats(ctx, st.AntreaNetworkPolicyStatses(ns), name,
			func(l *statsv1alpha1.AntreaNetworkPolicyStatsList) []statsv1alpha1.AntreaNetworkPolicyStats {
				return l.Items
			},
			func(o *statsv1alpha1.AntreaNetworkPolicyStats) PolicyStats {
				o.TypeMeta = tm
				return policyStats(&o.ObjectMeta, o.TrafficStats, o.RuleTrafficStats, o)
			})
	case AntreaClusterNetworkPolicyStats:
		out, err = readStats(ctx, st.AntreaClusterNetworkPolicyStatses(), name,
			func(l *statsv1alpha1.AntreaClusterNetworkPolicyStatsList) []statsv1alpha1.AntreaClusterNetworkPolicyStats {
				return l.Items
			},
			func(o *statsv1alpha1.AntreaClusterNetworkPolicyStats) PolicyStats {
				o.TypeMeta = tm
				return policyStats(&o.ObjectMeta, o.TrafficStats, o.RuleTrafficStats, o)
			})
	default:
		return nil, fmt.Errorf("unknown stats kind %q", kind)
	}
	resource := strings.ToLower(string(kind))
	switch {
	case err == nil:
		return out, nil
	case name != "" && apierrors.IsNotFound(err):
		where := ""
		if kind.Namespaced() {
			where = " in namespace " + ns
		}
		return nil, fmt.Errorf("%s %q not found%s (stats exist for each policy of that kind)", resource, name, where)
	case name != "":
		return nil, fmt.Errorf("getting %s %s: %w", resource, name, err)
	}
	return nil, fmt.Errorf("listing %s: %w", resource, err)
}

func policyStats(m *metav1.ObjectMeta, total statsv1alpha1.TrafficStats, rules []statsv1alpha1.RuleTrafficStats, obj any) PolicyStats {
	return PolicyStats{Namespace: m.Namespace, Name: m.Name, Created: m.CreationTimestamp, Total: total, Rules: rules, Object: obj}
}

// statsClient is what the three typed stats clients have in common.
type statsClient[T, L any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error)
	List(ctx context.Context, opts metav1.ListOptions) (*L, error)
}

// readStats gets one object (name given) or lists them all.
func readStats[T, L any](ctx context.Context, cl statsClient[T, L], name string, items func(*L) []T, row func(*T) PolicyStats) ([]PolicyStats, error) {
	if name != "" {
		o, err := cl.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return []PolicyStats{row(o)}, nil
	}
	l, err := cl.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	all := items(l)
	out := make([]PolicyStats, 0, len(all))
	for i := range all {
		out = append(out, row(&all[i]))
	}
	return out, nil
}
