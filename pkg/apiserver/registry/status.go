package registry

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
	"antrea.io/antrea/pkg/apiserver/storage"
	"antrea.io/antrea/pkg/controller/types"
)

// StatusStore remembers, per policy and Node, the generation each agent
// reported, and tells how many Nodes of a policy's span realized its
// current generation.
type StatusStore struct {
	policies storage.Interface

	mu       sync.RWMutex
	byPolicy map[string]map[string]controlplane.NetworkPolicyNodeStatus
	handlers []func(policyName string)
}

// AddHandler registers h to be told the name of each policy agents reported
// on, after the report is recorded (the controller then rewrites the status
// of Antrea-native policies). Register handlers before the server runs.
func (s *StatusStore) AddHandler(h func(policyName string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, h)
}

// NewStatusStore returns a StatusStore for the policies of a NetworkPolicy store.
func NewStatusStore(policies storage.Interface) *StatusStore {
	return &StatusStore{policies: policies, byPolicy: map[string]map[string]controlplane.NetworkPolicyNodeStatus{}}
}

// Update records the Node statuses an agent posted for a policy.
func (s *StatusStore) Update(status *controlplane.NetworkPolicyStatus) error {
	if _, exists, _ := s.policies.Get(status.Name); !exists {
		return apierrors.NewNotFound(controlplane.Resource("networkpolicies"), status.Name)
	}
	s.mu.Lock()
	s.updateLocked(status)
	handlers := s.handlers
	s.mu.Unlock()
	for _, h := range handlers {
		h(status.Name)
	}
	return nil
}

func (s *StatusStore) updateLocked(status *controlplane.NetworkPolicyStatus) {
	nodes := s.byPolicy[status.Name]
	if nodes == nil {
		nodes = map[string]controlplane.NetworkPolicyNodeStatus{}
		s.byPolicy[status.Name] = nodes
	}
	for _, n := range status.Nodes {
		nodes[n.NodeName] = n
	}
	// Deleted policies leave their statuses behind; drop them once they could
	// outnumber the live policies.
	if len(s.byPolicy) > 2*len(s.policies.List())+100 {
		for name := range s.byPolicy {
			if _, exists, _ := s.policies.Get(name); !exists {
				delete(s.byPolicy, name)
			}
		}
	}
}

// Realization returns, for a policy, how many Nodes of its span reported its
// current generation (realized), how many reported a failure, and the span
// size (desired).
func (s *StatusStore) Realization(name string) (realized, failed, desired int) {
	obj, exists, _ := s.policies.Get(name)
	if !exists {
		return 0, 0, 0
	}
	p := obj.(*types.NetworkPolicy)
	s.mu.RLock()
	defer s.mu.RUnlock()
	nodes := s.byPolicy[name]
	for node := range p.NodeNames {
		st, ok := nodes[node]
		switch {
		case !ok || st.Generation != p.Generation:
		case st.RealizationFailure:
			failed++
		default:
			realized++
		}
	}
	return realized, failed, p.NodeNames.Len()
}

// NodeStatuses returns, for every Node of a policy's span, what its agent
// last reported (a Node that has not reported has Generation 0), sorted
// by Node, and the policy's current generation.
func (s *StatusStore) NodeStatuses(name string) (nodes []controlplane.NetworkPolicyNodeStatus, generation int64, exists bool) {
	obj, exists, _ := s.policies.Get(name)
	if !exists {
		return nil, 0, false
	}
	p := obj.(*types.NetworkPolicy)
	s.mu.RLock()
	defer s.mu.RUnlock()
	reported := s.byPolicy[name]
	for _, node := range sets.List(p.NodeNames) {
		st, ok := reported[node]
		if !ok {
			st = controlplane.NetworkPolicyNodeStatus{NodeName: node}
		}
		nodes = append(nodes, st)
	}
	return nodes, p.Generation, true
}

// StatusREST serves POST networkpolicies/{name}/status (an agent's report)
// and GET (every Node of the span with what it reported: antctl and the
// web UI show realization per Node).
type StatusREST struct {
	statuses *StatusStore
}

var (
	_ rest.NamedCreater = &StatusREST{}
	_ rest.Getter       = &StatusREST{}
)

// Get returns the per-Node realization of the policy: its Generation is the
// policy's current one, each Node's the one its agent realized.
func (r *StatusREST) Get(_ context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	nodes, generation, exists := r.statuses.NodeStatuses(name)
	if !exists {
		return nil, apierrors.NewNotFound(controlplane.Resource("networkpolicies"), name)
	}
	return &controlplane.NetworkPolicyStatus{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: generation}, Nodes: nodes}, nil
}

// NewStatusREST serves the status subresource into a StatusStore.
func NewStatusREST(statuses *StatusStore) *StatusREST { return &StatusREST{statuses: statuses} }

// New returns an empty NetworkPolicyStatus.
func (r *StatusREST) New() runtime.Object { return &controlplane.NetworkPolicyStatus{} }

// Destroy has nothing to release.
func (r *StatusREST) Destroy() {}

// Create records an agent's realization status of the policy named in the path.
func (r *StatusREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	status, ok := obj.(*controlplane.NetworkPolicyStatus)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("got %T, want NetworkPolicyStatus", obj))
	}
	if status.Name != "" && status.Name != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("status names policy %q but the path names %q", status.Name, name))
	}
	status.Name = name
	for _, n := range status.Nodes {
		if n.NodeName == "" {
			return nil, apierrors.NewBadRequest("every node status needs a nodeName")
		}
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj); err != nil {
			return nil, err
		}
	}
	if err := r.statuses.Update(status); err != nil {
		return nil, err
	}
	klog.V(2).InfoS("Recorded NetworkPolicy status", "policy", name, "nodes", len(status.Nodes))
	return status, nil
}
