package registry

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// NodeLatencyStore keeps the latest NodeLatencyStats each agent created,
// in memory, and serves nodelatencystats (create, get, list, delete). A
// Node's report goes when the Node goes; all go when the NodeLatencyMonitor
// goes, and reports are refused while there is none (Watch).
type NodeLatencyStore struct {
	mu      sync.RWMutex
	byNode  map[string]*statsv1alpha1.NodeLatencyStats
	monitor func() bool // whether the NodeLatencyMonitor exists; nil: always
}

var (
	_ rest.Creater              = &NodeLatencyStore{}
	_ rest.Getter               = &NodeLatencyStore{}
	_ rest.Lister               = &NodeLatencyStore{}
	_ rest.GracefulDeleter      = &NodeLatencyStore{}
	_ rest.Scoper               = &NodeLatencyStore{}
	_ rest.SingularNameProvider = &NodeLatencyStore{}
)

// NewNodeLatencyStore returns an empty store.
func NewNodeLatencyStore() *NodeLatencyStore {
	return &NodeLatencyStore{byNode: map[string]*statsv1alpha1.NodeLatencyStats{}}
}

// Watch drops a Node's report when the Node is deleted, and every report
// when the NodeLatencyMonitor is; reports are taken only while it exists.
func (s *NodeLatencyStore) Watch(nodes, monitors cache.SharedIndexInformer) error {
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if n, ok := tombstone(obj).(*corev1.Node); ok {
			s.drop(n.Name)
		}
	}}); err != nil {
		return fmt.Errorf("watching Nodes for NodeLatencyStats: %w", err)
	}
	if _, err := monitors.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		klog.InfoS("NodeLatencyMonitor deleted; dropping the NodeLatencyStats", "count", len(s.byNode))
		clear(s.byNode)
	}}); err != nil {
		return fmt.Errorf("watching NodeLatencyMonitors: %w", err)
	}
	s.monitor = func() bool {
		_, ok, err := monitors.GetStore().GetByKey(crdv1alpha1.NodeLatencyMonitorName)
		return ok && err == nil
	}
	return nil
}

func tombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (s *NodeLatencyStore) drop(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byNode, node)
}

// New returns an empty NodeLatencyStats.
func (s *NodeLatencyStore) New() runtime.Object { return &statsv1alpha1.NodeLatencyStats{} }

// NewList returns an empty NodeLatencyStatsList.
func (s *NodeLatencyStore) NewList() runtime.Object { return &statsv1alpha1.NodeLatencyStatsList{} }

// Destroy has nothing to release.
func (s *NodeLatencyStore) Destroy() {}

// NamespaceScoped is false: a report is a Node's.
func (s *NodeLatencyStore) NamespaceScoped() bool { return false }

// GetSingularName is the singular resource name.
func (s *NodeLatencyStore) GetSingularName() string { return "nodelatencystats" }

// Create stores a Node's report in place of its previous one.
func (s *NodeLatencyStore) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	in, ok := obj.(*statsv1alpha1.NodeLatencyStats)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("got %T, want NodeLatencyStats", obj))
	}
	if in.Name == "" {
		return nil, apierrors.NewBadRequest("a NodeLatencyStats is named after its Node")
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj); err != nil {
			return nil, err
		}
	}
	if s.monitor != nil && !s.monitor() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("NodeLatencyStats of Node %s refused: no NodeLatencyMonitor %q",
			in.Name, crdv1alpha1.NodeLatencyMonitorName))
	}
	out := in.DeepCopy()
	out.CreationTimestamp = metav1.NewTime(time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byNode[out.Name] = out
	return out.DeepCopy(), nil
}

// Get returns a Node's report.
func (s *NodeLatencyStore) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.byNode[name]
	if !ok {
		return nil, apierrors.NewNotFound(statsv1alpha1.Resource("nodelatencystats"), name)
	}
	return o.DeepCopy(), nil
}

// List returns every Node's report, by Node name.
func (s *NodeLatencyStore) List(_ context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	if options != nil && (options.LabelSelector != nil && !options.LabelSelector.Empty() ||
		options.FieldSelector != nil && !options.FieldSelector.Empty()) {
		return nil, apierrors.NewBadRequest("stats objects support no label or field selector")
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := &statsv1alpha1.NodeLatencyStatsList{Items: make([]statsv1alpha1.NodeLatencyStats, 0, len(s.byNode))}
	for _, o := range s.byNode {
		l.Items = append(l.Items, *o.DeepCopy())
	}
	slices.SortFunc(l.Items, func(a, b statsv1alpha1.NodeLatencyStats) int { return strings.Compare(a.Name, b.Name) })
	return l, nil
}

// Delete drops a Node's report.
func (s *NodeLatencyStore) Delete(_ context.Context, name string, _ rest.ValidateObjectFunc, _ *metav1.DeleteOptions) (runtime.Object, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.byNode[name]
	if !ok {
		return nil, false, apierrors.NewNotFound(statsv1alpha1.Resource("nodelatencystats"), name)
	}
	delete(s.byNode, name)
	return o, true, nil
}

var nodeLatencyColumns = []metav1.TableColumnDefinition{
	{Name: "Node Name", Type: "string", Format: "name", Description: "The Node that probed"},
	{Name: "Num Latency Entries", Type: "integer", Description: "Target IPs it reports"},
	{Name: "Avg Latency", Type: "string", Description: "Mean of the last RTTs of the targets that answered"},
	{Name: "Max Latency", Type: "string", Description: "Largest of those RTTs"},
}

// ConvertToTable renders reports for kubectl get: entries, mean and max of
// the last RTTs.
func (s *NodeLatencyStore) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t, err := tableRows(obj, func(o runtime.Object) []any {
		st, _ := o.(*statsv1alpha1.NodeLatencyStats)
		if st == nil {
			return []any{"", int64(0), "", ""}
		}
		var n, answered int64
		var sum, maxRTT time.Duration
		for _, p := range st.PeerNodeLatencyStats {
			for _, ts := range p.TargetIPLatencyStats {
				n++
				if ts.LastMeasuredRTTNanoseconds > 0 {
					answered++
					d := time.Duration(ts.LastMeasuredRTTNanoseconds)
					sum += d
					maxRTT = max(maxRTT, d)
				}
			}
		}
		avg := "<none>"
		if answered > 0 {
			avg = (sum / time.Duration(answered)).String()
		}
		return []any{st.Name, n, avg, maxRTT.String()}
	})
	if err != nil {
		return nil, err
	}
	t.ColumnDefinitions = nodeLatencyColumns
	return t, nil
}
