package stats

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"antrea.io/antrea/pkg/apis/controlplane"
	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// DefaultMulticastStaleAfter is how long a Node's multicast groups are
// served after its last report: three of the agents' default
// statsCollectionInterval (60 s), so that one or two lost reports do not
// hide a Node's members, while an agent that stopped reporting drops out.
const DefaultMulticastStaleAfter = 3 * time.Minute

// nodeGroups is what one Node last reported of its multicast groups.
type nodeGroups struct {
	at     time.Time
	groups map[string][]statsv1alpha1.PodReference
}

// Multicast keeps, per Node, the multicast groups its Pods joined as its
// latest report says (a report replaces the Node's previous one) and
// serves them merged over the Nodes as stats.antrea.io MulticastGroups.
// A Node that is deleted, or has not reported for staleAfter, drops out.
// It is safe for concurrent use.
type Multicast struct {
	staleAfter time.Duration
	now        func() time.Time

	mu    sync.RWMutex
	nodes map[string]nodeGroups
}

// NewMulticast returns an empty multicast group table; staleAfter <= 0
// means DefaultMulticastStaleAfter.
func NewMulticast(staleAfter time.Duration) *Multicast {
	if staleAfter <= 0 {
		staleAfter = DefaultMulticastStaleAfter
	}
	return &Multicast{staleAfter: staleAfter, now: time.Now, nodes: map[string]nodeGroups{}}
}

// Collect replaces the Node's groups with those of its report. Entries
// whose group is not a multicast IP address are dropped.
func (m *Multicast) Collect(s *controlplane.NodeStatsSummary) {
	groups := map[string][]statsv1alpha1.PodReference{}
	bad := 0
	for _, g := range s.Multicast {
		a, err := netip.ParseAddr(g.Group)
		if err != nil || !a.IsMulticast() {
			bad++
			continue
		}
		for _, p := range g.Pods {
			groups[a.String()] = append(groups[a.String()], statsv1alpha1.PodReference{Name: p.Name, Namespace: p.Namespace})
		}
	}
	if bad > 0 {
		klog.InfoS("Dropped multicast groups that are no multicast address", "node", s.Name, "count", bad)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(groups) == 0 {
		delete(m.nodes, s.Name)
		return
	}
	m.nodes[s.Name] = nodeGroups{at: m.now(), groups: groups}
}

// DeleteNode forgets a Node's groups.
func (m *Multicast) DeleteNode(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.nodes, name)
}

// WatchNodes forgets the groups of the Nodes the informer sees deleted.
func (m *Multicast) WatchNodes(informer cache.SharedIndexInformer) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				m.DeleteNode(n.Name)
			}
		},
	})
	return err
}

// ListMulticastGroups returns every group with members on a Node that
// reported within staleAfter, sorted by address; a group's Pods are
// sorted by namespace and name.
func (m *Multicast) ListMulticastGroups() []statsv1alpha1.MulticastGroup {
	m.mu.RLock()
	defer m.mu.RUnlock()
	deadline := m.now().Add(-m.staleAfter)
	merged := map[string][]statsv1alpha1.PodReference{}
	for _, n := range m.nodes {
		if n.at.Before(deadline) {
			continue
		}
		for g, pods := range n.groups {
			merged[g] = append(merged[g], pods...)
		}
	}
	out := make([]statsv1alpha1.MulticastGroup, 0, len(merged))
	for g, pods := range merged {
		slices.SortFunc(pods, func(a, b statsv1alpha1.PodReference) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		pods = slices.Compact(pods)
		out = append(out, statsv1alpha1.MulticastGroup{ObjectMeta: metav1.ObjectMeta{Name: g}, Group: g, Pods: pods})
	}
	slices.SortFunc(out, func(a, b statsv1alpha1.MulticastGroup) int {
		return netip.MustParseAddr(a.Group).Compare(netip.MustParseAddr(b.Group))
	})
	return out
}

// GetMulticastGroup returns one group by its address.
func (m *Multicast) GetMulticastGroup(name string) (*statsv1alpha1.MulticastGroup, bool) {
	for _, g := range m.ListMulticastGroups() {
		if g.Name == name {
			return &g, true
		}
	}
	return nil, false
}
