package admission

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
	"antrea.io/antrea/pkg/client/clientset/versioned"
	crdinformers "antrea.io/antrea/pkg/client/informers/externalversions/crd/v1beta1"
	crdlisters "antrea.io/antrea/pkg/client/listers/crd/v1beta1"
)

// Index names of the informers' indexers.
const (
	// TierIndex indexes ClusterNetworkPolicies and Antrea NetworkPolicies by
	// the name of their Tier (crdv1beta1.TierName).
	TierIndex = "tier"
	// ChildGroupIndex indexes ClusterGroups by child name, Groups by
	// namespace/child name.
	ChildGroupIndex = "childGroup"
)

// Informers are the crd.antrea.io informers the webhooks read.
type Informers struct {
	Tiers                  crdinformers.TierInformer
	ClusterNetworkPolicies crdinformers.ClusterNetworkPolicyInformer
	NetworkPolicies        crdinformers.NetworkPolicyInformer
	ClusterGroups          crdinformers.ClusterGroupInformer
	Groups                 crdinformers.GroupInformer
}

// informerLookup answers from the informers' caches; a name the cache does
// not hold yet is asked of kube-apiserver, so that a group or Tier created
// just before the policy that references it (kubectl apply -f of one file)
// is found.
type informerLookup struct {
	client        versioned.Interface
	tiers         crdlisters.TierLister
	acnps, annps  cache.Indexer
	clusterGroups cache.Indexer
	groups        cache.Indexer
	cgLister      crdlisters.ClusterGroupLister
	groupLister   crdlisters.GroupLister
}

// NewInformerLookup adds the indexers it needs to the informers (before
// they start) and returns a Lookup reading them, and client on a miss.
func NewInformerLookup(client versioned.Interface, inf Informers) (Lookup, error) {
	tierOf := func(obj any) ([]string, error) {
		switch p := obj.(type) {
		case *crdv1beta1.ClusterNetworkPolicy:
			return []string{crdv1beta1.TierName(p.Spec.Tier)}, nil
		case *crdv1beta1.NetworkPolicy:
			return []string{crdv1beta1.TierName(p.Spec.Tier)}, nil
		}
		return nil, nil
	}
	childrenOf := func(obj any) ([]string, error) {
		var keys []string
		switch g := obj.(type) {
		case *crdv1beta1.ClusterGroup:
			for _, c := range g.Spec.ChildGroups {
				keys = append(keys, string(c))
			}
		case *crdv1beta1.Group:
			for _, c := range g.Spec.ChildGroups {
				keys = append(keys, g.Namespace+"/"+string(c))
			}
		}
		return keys, nil
	}
	for _, add := range []struct {
		informer cache.SharedIndexInformer
		index    string
		fn       cache.IndexFunc
	}{
		{inf.ClusterNetworkPolicies.Informer(), TierIndex, tierOf},
		{inf.NetworkPolicies.Informer(), TierIndex, tierOf},
		{inf.ClusterGroups.Informer(), ChildGroupIndex, childrenOf},
		{inf.Groups.Informer(), ChildGroupIndex, childrenOf},
	} {
		if err := add.informer.AddIndexers(cache.Indexers{add.index: add.fn}); err != nil {
			return nil, fmt.Errorf("adding the %s index: %w", add.index, err)
		}
	}
	return &informerLookup{
		client:        client,
		tiers:         inf.Tiers.Lister(),
		acnps:         inf.ClusterNetworkPolicies.Informer().GetIndexer(),
		annps:         inf.NetworkPolicies.Informer().GetIndexer(),
		clusterGroups: inf.ClusterGroups.Informer().GetIndexer(),
		groups:        inf.Groups.Informer().GetIndexer(),
		cgLister:      inf.ClusterGroups.Lister(),
		groupLister:   inf.Groups.Lister(),
	}, nil
}

// orLive returns the cached object, or asks kube-apiserver on a miss.
func orLive[T any](cached *T, cacheErr error, live func() (*T, error)) (*T, error) {
	if cacheErr == nil {
		return cached, nil
	}
	if !apierrors.IsNotFound(cacheErr) {
		return nil, cacheErr
	}
	obj, err := live()
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

func (l *informerLookup) Tier(ctx context.Context, name string) (*crdv1beta1.Tier, error) {
	t, err := l.tiers.Get(name)
	return orLive(t, err, func() (*crdv1beta1.Tier, error) {
		return l.client.CrdV1beta1().Tiers().Get(ctx, name, metav1.GetOptions{})
	})
}

func (l *informerLookup) Tiers(context.Context) ([]*crdv1beta1.Tier, error) {
	return l.tiers.List(labels.Everything())
}

func (l *informerLookup) PoliciesInTier(_ context.Context, name string) (int, int, error) {
	acnps, err := l.acnps.ByIndex(TierIndex, name)
	if err != nil {
		return 0, 0, err
	}
	annps, err := l.annps.ByIndex(TierIndex, name)
	return len(acnps), len(annps), err
}

func (l *informerLookup) ClusterGroup(ctx context.Context, name string) (*crdv1beta1.ClusterGroup, error) {
	g, err := l.cgLister.Get(name)
	return orLive(g, err, func() (*crdv1beta1.ClusterGroup, error) {
		return l.client.CrdV1beta1().ClusterGroups().Get(ctx, name, metav1.GetOptions{})
	})
}

func (l *informerLookup) Group(ctx context.Context, namespace, name string) (*crdv1beta1.Group, error) {
	g, err := l.groupLister.Groups(namespace).Get(name)
	return orLive(g, err, func() (*crdv1beta1.Group, error) {
		return l.client.CrdV1beta1().Groups(namespace).Get(ctx, name, metav1.GetOptions{})
	})
}

func (l *informerLookup) ClusterGroupParents(_ context.Context, name string) ([]string, error) {
	return namesByIndex(l.clusterGroups, name)
}

func (l *informerLookup) GroupParents(_ context.Context, namespace, name string) ([]string, error) {
	return namesByIndex(l.groups, namespace+"/"+name)
}

func namesByIndex(indexer cache.Indexer, key string) ([]string, error) {
	objs, err := indexer.ByIndex(ChildGroupIndex, key)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok {
			names = append(names, m.GetName())
		}
	}
	return names, nil
}
