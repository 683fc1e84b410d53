package registry

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"antrea.io/antrea/pkg/apis/controlplane"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// StatsProvider serves the summed NetworkPolicy statistics
// (pkg/controller/stats.Aggregator).
type StatsProvider interface {
	Collect(*controlplane.NodeStatsSummary)
	ListNetworkPolicyStats(namespace string) []statsv1alpha1.NetworkPolicyStats
	GetNetworkPolicyStats(namespace, name string) (*statsv1alpha1.NetworkPolicyStats, bool)
	ListAntreaNetworkPolicyStats(namespace string) []statsv1alpha1.AntreaNetworkPolicyStats
	GetAntreaNetworkPolicyStats(namespace, name string) (*statsv1alpha1.AntreaNetworkPolicyStats, bool)
	ListAntreaClusterNetworkPolicyStats() []statsv1alpha1.AntreaClusterNetworkPolicyStats
	GetAntreaClusterNetworkPolicyStats(name string) (*statsv1alpha1.AntreaClusterNetworkPolicyStats, bool)
	ListMulticastGroups() []statsv1alpha1.MulticastGroup
	GetMulticastGroup(name string) (*statsv1alpha1.MulticastGroup, bool)
}

// NodeStatsSummaryREST serves POST nodestatssummaries: an agent's report,
// added to the sums; nothing is stored.
type NodeStatsSummaryREST struct {
	stats StatsProvider
}

var (
	_ rest.Creater              = &NodeStatsSummaryREST{}
	_ rest.Scoper               = &NodeStatsSummaryREST{}
	_ rest.SingularNameProvider = &NodeStatsSummaryREST{}
)

// NewNodeStatsSummaryREST serves nodestatssummaries into a StatsProvider.
func NewNodeStatsSummaryREST(stats StatsProvider) *NodeStatsSummaryREST {
	return &NodeStatsSummaryREST{stats: stats}
}

// New returns an empty NodeStatsSummary.
func (r *NodeStatsSummaryREST) New() runtime.Object { return &controlplane.NodeStatsSummary{} }

// Destroy has nothing to release.
func (r *NodeStatsSummaryREST) Destroy() {}

// NamespaceScoped is false: a summary is a Node's.
func (r *NodeStatsSummaryREST) NamespaceScoped() bool { return false }

// GetSingularName is the singular resource name.
func (r *NodeStatsSummaryREST) GetSingularName() string { return "nodestatssummary" }

// Create adds the report to the sums.
func (r *NodeStatsSummaryREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	s, ok := obj.(*controlplane.NodeStatsSummary)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("got %T, want NodeStatsSummary", obj))
	}
	if s.Name == "" {
		return nil, apierrors.NewBadRequest("a NodeStatsSummary is named after its Node")
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj); err != nil {
			return nil, err
		}
	}
	r.stats.Collect(s)
	return s, nil
}

// StatsREST serves one read-only stats.antrea.io resource.
type StatsREST struct {
	resource   string
	singular   string
	namespaced bool
	newFunc    func() runtime.Object
	newList    func() runtime.Object
	get        func(namespace, name string) (runtime.Object, bool)
	list       func(namespace string) runtime.Object
}

var (
	_ rest.Storage              = &StatsREST{}
	_ rest.Scoper               = &StatsREST{}
	_ rest.Getter               = &StatsREST{}
	_ rest.Lister               = &StatsREST{}
	_ rest.SingularNameProvider = &StatsREST{}
)

// NewNetworkPolicyStatsREST serves networkpolicystats (namespaced).
func NewNetworkPolicyStatsREST(p StatsProvider) *StatsREST {
	return &StatsREST{resource: "networkpolicystats", singular: "networkpolicystats", namespaced: true,
		newFunc: func() runtime.Object { return &statsv1alpha1.NetworkPolicyStats{} },
		newList: func() runtime.Object { return &statsv1alpha1.NetworkPolicyStatsList{} },
		get: func(ns, name string) (runtime.Object, bool) {
			o, ok := p.GetNetworkPolicyStats(ns, name)
			return o, ok
		},
		list: func(ns string) runtime.Object {
			return &statsv1alpha1.NetworkPolicyStatsList{Items: p.ListNetworkPolicyStats(ns)}
		},
	}
}

// NewAntreaNetworkPolicyStatsREST serves antreanetworkpolicystats (namespaced).
func NewAntreaNetworkPolicyStatsREST(p StatsProvider) *StatsREST {
	return &StatsREST{resource: "antreanetworkpolicystats", singular: "antreanetworkpolicystats", namespaced: true,
		newFunc: func() runtime.Object { return &statsv1alpha1.AntreaNetworkPolicyStats{} },
		newList: func() runtime.Object { return &statsv1alpha1.AntreaNetworkPolicyStatsList{} },
		get: func(ns, name string) (runtime.Object, bool) {
			o, ok := p.GetAntreaNetworkPolicyStats(ns, name)
			return o, ok
		},
		list: func(ns string) runtime.Object {
			return &statsv1alpha1.AntreaNetworkPolicyStatsList{Items: p.ListAntreaNetworkPolicyStats(ns)}
		},
	}
}

// NewAntreaClusterNetworkPolicyStatsREST serves
// antreaclusternetworkpolicystats (cluster-scoped).
func NewAntreaClusterNetworkPolicyStatsREST(p StatsProvider) *StatsREST {
	return &StatsREST{resource: "antreaclusternetworkpolicystats", singular: "antreaclusternetworkpolicystats",
		newFunc: func() runtime.Object { return &statsv1alpha1.AntreaClusterNetworkPolicyStats{} },
		newList: func() runtime.Object { return &statsv1alpha1.AntreaClusterNetworkPolicyStatsList{} },
		get: func(_, name string) (runtime.Object, bool) {
			o, ok := p.GetAntreaClusterNetworkPolicyStats(name)
			return o, ok
		},
		list: func(string) runtime.Object {
			return &statsv1alpha1.AntreaClusterNetworkPolicyStatsList{Items: p.ListAntreaClusterNetworkPolicyStats()}
		},
	}
}

// New returns an empty object of the resource.
func (r *StatsREST) New() runtime.Object { return r.newFunc() }

// NewList returns an empty list of the resource.
func (r *StatsREST) NewList() runtime.Object { return r.newList() }

// Destroy has nothing to release.
func (r *StatsREST) Destroy() {}

// NamespaceScoped says whether the resource's policies are namespaced.
func (r *StatsREST) NamespaceScoped() bool { return r.namespaced }

// GetSingularName is the singular resource name for kubectl.
func (r *StatsREST) GetSingularName() string { return r.singular }

// Get returns one policy's stats.
func (r *StatsREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	obj, ok := r.get(ns, name)
	if !ok {
		return nil, apierrors.NewNotFound(statsv1alpha1.Resource(r.resource), name)
	}
	return obj, nil
}

// List returns the stats of every policy (of the request's namespace).
// Selectors are not supported: stats objects carry no labels.
func (r *StatsREST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	if options != nil && (options.LabelSelector != nil && !options.LabelSelector.Empty() ||
		options.FieldSelector != nil && !options.FieldSelector.Empty()) {
		return nil, apierrors.NewBadRequest("stats objects support no label or field selector")
	}
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	return r.list(ns), nil
}

var statsColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the policy"},
	{Name: "Sessions", Type: "integer", Description: "Connections the policy's rules decided on"},
	{Name: "Packets", Type: "integer", Description: "Packets the policy's rules evaluated"},
	{Name: "Bytes", Type: "integer", Description: "Bytes of those packets"},
	{Name: "Created At", Type: "string", Format: "date", Description: "When the policy was created"},
}

// ConvertToTable renders stats for kubectl get, with upstream's columns.
func (r *StatsREST) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t, err := tableRows(obj, func(o runtime.Object) []any {
		var m metav1.ObjectMeta
		var s statsv1alpha1.TrafficStats
		switch x := o.(type) {
		case *statsv1alpha1.NetworkPolicyStats:
			m, s = x.ObjectMeta, x.TrafficStats
		case *statsv1alpha1.AntreaNetworkPolicyStats:
			m, s = x.ObjectMeta, x.TrafficStats
		case *statsv1alpha1.AntreaClusterNetworkPolicyStats:
			m, s = x.ObjectMeta, x.TrafficStats
		}
		created := "<unknown>"
		if !m.CreationTimestamp.IsZero() {
			created = m.CreationTimestamp.UTC().Format(time.RFC3339)
		}
		return []any{m.Name, s.Sessions, s.Packets, s.Bytes, created}
	})
	if err != nil {
		return nil, err
	}
	t.ColumnDefinitions = statsColumns
	return t, nil
}

// MulticastGroupREST serves multicastgroups (cluster-scoped): per group
// address, the Pods of every Node that joined it.
type MulticastGroupREST struct {
	*StatsREST
}

// NewMulticastGroupREST serves multicastgroups.
func NewMulticastGroupREST(p StatsProvider) *MulticastGroupREST {
	return &MulticastGroupREST{&StatsREST{resource: "multicastgroups", singular: "multicastgroup",
		newFunc: func() runtime.Object { return &statsv1alpha1.MulticastGroup{} },
		newList: func() runtime.Object { return &statsv1alpha1.MulticastGroupList{} },
		get: func(_, name string) (runtime.Object, bool) {
			o, ok := p.GetMulticastGroup(name)
			return o, ok
		},
		list: func(string) runtime.Object {
			return &statsv1alpha1.MulticastGroupList{Items: p.ListMulticastGroups()}
		},
	}}
}

// maxPodsShown is how many members a multicastgroups table row names.
const maxPodsShown = 3

var multicastGroupColumns = []metav1.TableColumnDefinition{
	{Name: "Group", Type: "string", Format: "name", Description: "IP address of the multicast group"},
	{Name: "Count", Type: "integer", Description: "Number of Pods that joined the group"},
	{Name: "Pods", Type: "string", Description: "Pods that joined the group (namespace/name; the first few)"},
}

// ConvertToTable renders groups for kubectl get multicastgroups.
func (r *MulticastGroupREST) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t, err := tableRows(obj, func(o runtime.Object) []any {
		g, ok := o.(*statsv1alpha1.MulticastGroup)
		if !ok {
			return []any{"", int64(0), ""}
		}
		var names []string
		for i, p := range g.Pods {
			if i == maxPodsShown {
				names = append(names, fmt.Sprintf("+ %d more...", len(g.Pods)-maxPodsShown))
				break
			}
			names = append(names, p.Namespace+"/"+p.Name)
		}
		return []any{g.Name, int64(len(g.Pods)), strings.Join(names, ", ")}
	})
	if err != nil {
		return nil, err
	}
	t.ColumnDefinitions = multicastGroupColumns
	return t, nil
}
