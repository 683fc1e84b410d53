package networkpolicy

import (
	"context"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	sigv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	sigv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	sigclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
	siginformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"
	siglistersv1alpha1 "sigs.k8s.io/network-policy-api/pkg/client/listers/apis/v1alpha1"
	siglistersv1alpha2 "sigs.k8s.io/network-policy-api/pkg/client/listers/apis/v1alpha2"

	"antrea.io/antrea/pkg/apis/controlplane"
	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// SIGPolicyConfig wires the SIG network-policy-api kinds into a Controller.
type SIGPolicyConfig struct {
	// Client writes the policies' status.
	Client sigclient.Interface
	// Informers is the factory of policy.networking.k8s.io informers; the
	// caller starts it.
	Informers siginformers.SharedInformerFactory
	// ClusterNetworkPolicies enables v1alpha2 ClusterNetworkPolicy;
	// AdminNetworkPolicies enables v1alpha1 AdminNetworkPolicy and
	// BaselineAdminNetworkPolicy (each only where its CRD is served).
	ClusterNetworkPolicies, AdminNetworkPolicies bool
}

// sig is the state of the SIG kinds, nil when not enabled.
type sig struct {
	client     sigclient.Interface
	cnpLister  siglistersv1alpha2.ClusterNetworkPolicyLister
	anpLister  siglistersv1alpha1.AdminNetworkPolicyLister
	banpLister siglistersv1alpha1.BaselineAdminNetworkPolicyLister
}

// EnableSIGPolicies makes the controller compute the SIG's
// ClusterNetworkPolicies (v1alpha2), AdminNetworkPolicies and
// BaselineAdminNetworkPolicies (v1alpha1) as Antrea-native policies in
// their tiers (sig_translate.go) and write their status conditions. Call it
// after EnableAntreaPolicies, before Run and before the informers start.
func (c *Controller) EnableSIGPolicies(cfg SIGPolicyConfig) error {
	if c.native == nil {
		return fmt.Errorf("the SIG policy kinds need the Antrea-native ones: call EnableAntreaPolicies first")
	}
	s := &sig{client: cfg.Client}
	c.native.sig = s
	queue := func(key func(any) string) func(any) {
		return func(obj any) {
			if k := key(obj); k != "" {
				c.nativeQueue.Add(k)
			}
		}
	}
	// Status writes come back as updates: only a changed spec needs a
	// computation.
	specChanged := func(key func(any) string, spec func(any) (metav1.Object, any)) func(old, cur any) {
		return func(old, cur any) {
			o, os := spec(old)
			n, ns := spec(cur)
			if o != nil && n != nil && o.GetUID() == n.GetUID() && o.GetGeneration() == n.GetGeneration() && reflect.DeepEqual(os, ns) {
				return
			}
			queue(key)(cur)
		}
	}
	if cfg.ClusterNetworkPolicies {
		inf := cfg.Informers.Policy().V1alpha2().ClusterNetworkPolicies()
		s.cnpLister = inf.Lister()
		key := func(obj any) string {
			if p, ok := obj.(*sigv1alpha2.ClusterNetworkPolicy); ok {
				return sigKeyOfCNP(p.Name)
			}
			return ""
		}
		spec := func(obj any) (metav1.Object, any) {
			if p, ok := obj.(*sigv1alpha2.ClusterNetworkPolicy); ok {
				return p, p.Spec
			}
			return nil, nil
		}
		if err := c.native.handle(inf.Informer(), queue(key), specChanged(key, spec), queue(key)); err != nil {
			return fmt.Errorf("watching ClusterNetworkPolicies (policy.networking.k8s.io): %w", err)
		}
	}
	if cfg.AdminNetworkPolicies {
		anp := cfg.Informers.Policy().V1alpha1().AdminNetworkPolicies()
		s.anpLister = anp.Lister()
		anpKey := func(obj any) string {
			if p, ok := obj.(*sigv1alpha1.AdminNetworkPolicy); ok {
				return sigKeyOfANP(p.Name)
			}
			return ""
		}
		anpSpec := func(obj any) (metav1.Object, any) {
			if p, ok := obj.(*sigv1alpha1.AdminNetworkPolicy); ok {
				return p, p.Spec
			}
			return nil, nil
		}
		if err := c.native.handle(anp.Informer(), queue(anpKey), specChanged(anpKey, anpSpec), queue(anpKey)); err != nil {
			return fmt.Errorf("watching AdminNetworkPolicies: %w", err)
		}
		banp := cfg.Informers.Policy().V1alpha1().BaselineAdminNetworkPolicies()
		s.banpLister = banp.Lister()
		banpKey := func(obj any) string {
			if p, ok := obj.(*sigv1alpha1.BaselineAdminNetworkPolicy); ok {
				return sigKeyOfBANP(p.Name)
			}
			return ""
		}
		banpSpec := func(obj any) (metav1.Object, any) {
			if p, ok := obj.(*sigv1alpha1.BaselineAdminNetworkPolicy); ok {
				return p, p.Spec
			}
			return nil, nil
		}
		if err := c.native.handle(banp.Informer(), queue(banpKey), specChanged(banpKey, banpSpec), queue(banpKey)); err != nil {
			return fmt.Errorf("watching BaselineAdminNetworkPolicies: %w", err)
		}
	}
	return nil
}

// sigSource reads the SIG policy a key of kind sigcnp, anp or banp names:
// its nativeSpec, source reference and generation (spec nil when it is
// gone). ok is false for a kind that is not a SIG one.
func (c *Controller) sigSource(kind, name string) (spec *nativeSpec, ref *controlplane.NetworkPolicyReference, generation int64, ok bool, err error) {
	s := c.native.sig
	if s == nil {
		return nil, nil, 0, false, nil
	}
	switch kind {
	case sigKeyCNP:
		if s.cnpLister == nil {
			return nil, nil, 0, true, nil
		}
		p, gerr := s.cnpLister.Get(name)
		if gerr != nil {
			return nil, nil, 0, true, gerr
		}
		return specOfSIGCNP(p), &controlplane.NetworkPolicyReference{Type: SIGClusterNetworkPolicyType, Name: p.Name, UID: p.UID}, p.Generation, true, nil
	case sigKeyANP:
		if s.anpLister == nil {
			return nil, nil, 0, true, nil
		}
		p, gerr := s.anpLister.Get(name)
		if gerr != nil {
			return nil, nil, 0, true, gerr
		}
		return specOfANP(p), &controlplane.NetworkPolicyReference{Type: AdminNetworkPolicyType, Name: p.Name, UID: p.UID}, p.Generation, true, nil
	case sigKeyBANP:
		if s.banpLister == nil {
			return nil, nil, 0, true, nil
		}
		p, gerr := s.banpLister.Get(name)
		if gerr != nil {
			return nil, nil, 0, true, gerr
		}
		if p.Name != "default" {
			// The CRD admits only "default"; another name slipped past it
			// and is not enforced (the SIG's singleton).
			return nil, nil, 0, true, nil
		}
		return specOfBANP(p), &controlplane.NetworkPolicyReference{Type: BaselineAdminNetworkPolicyType, Name: p.Name, UID: p.UID}, p.Generation, true, nil
	}
	return nil, nil, 0, false, nil
}

// The status of a SIG policy is two conditions (the API has only
// conditions): Accepted (the controller computed it; False with the reason
// when it cannot) and Realized (every Node of its span enforces its current
// generation; False while some do not yet, or failed).
const (
	SIGConditionAccepted = "Accepted"
	SIGConditionRealized = "Realized"
)

// sigConditions derives the SIG conditions from the Antrea-native status.
func sigConditions(st crdv1beta1.NetworkPolicyStatus, info nativeStatusInfo) []metav1.Condition {
	if info.err != nil {
		return []metav1.Condition{{Type: SIGConditionAccepted, Status: metav1.ConditionFalse, Reason: "Invalid",
			Message: info.err.Error(), ObservedGeneration: info.generation}}
	}
	conds := []metav1.Condition{{Type: SIGConditionAccepted, Status: metav1.ConditionTrue, Reason: "Computed",
		Message: "the policy is computed for the Nodes of its subject", ObservedGeneration: info.generation}}
	realized := metav1.Condition{Type: SIGConditionRealized, ObservedGeneration: info.generation,
		Message: fmt.Sprintf("%d of %d Nodes enforce it", st.CurrentNodesRealized, st.DesiredNodesRealized)}
	switch st.Phase {
	case crdv1beta1.NetworkPolicyRealized:
		realized.Status, realized.Reason = metav1.ConditionTrue, "Realized"
	case crdv1beta1.NetworkPolicyFailed:
		realized.Status, realized.Reason = metav1.ConditionFalse, "RealizationFailed"
	default:
		realized.Status, realized.Reason = metav1.ConditionFalse, "Realizing"
	}
	return append(conds, realized)
}

// setConditions puts want into conds (keeping the transition time of a
// condition whose status did not change); changed reports a difference.
func setConditions(conds []metav1.Condition, want []metav1.Condition) ([]metav1.Condition, bool) {
	out := make([]metav1.Condition, len(conds))
	copy(out, conds)
	changed := false
	for _, w := range want {
		old := meta.FindStatusCondition(out, w.Type)
		if old != nil && old.Status == w.Status && old.Reason == w.Reason && old.Message == w.Message && old.ObservedGeneration == w.ObservedGeneration {
			continue
		}
		changed = true
		meta.SetStatusCondition(&out, w)
	}
	return out, changed
}

// syncSIGStatus writes the conditions of a SIG policy (kind sigcnp, anp or
// banp) where they differ; ok is false for another kind.
func (c *Controller) syncSIGStatus(ctx context.Context, kind, name string, st crdv1beta1.NetworkPolicyStatus, info nativeStatusInfo) (ok bool, err error) {
	s := c.native.sig
	if s == nil || s.client == nil {
		return kind == sigKeyCNP || kind == sigKeyANP || kind == sigKeyBANP, nil
	}
	want := sigConditions(st, info)
	switch kind {
	case sigKeyCNP:
		err = updateConditions(ctx, name, want, s.cnpLister.Get,
			func(p *sigv1alpha2.ClusterNetworkPolicy) *[]metav1.Condition { return &p.Status.Conditions },
			s.client.PolicyV1alpha2().ClusterNetworkPolicies().UpdateStatus)
	case sigKeyANP:
		err = updateConditions(ctx, name, want, s.anpLister.Get,
			func(p *sigv1alpha1.AdminNetworkPolicy) *[]metav1.Condition { return &p.Status.Conditions },
			s.client.PolicyV1alpha1().AdminNetworkPolicies().UpdateStatus)
	case sigKeyBANP:
		err = updateConditions(ctx, name, want, s.banpLister.Get,
			func(p *sigv1alpha1.BaselineAdminNetworkPolicy) *[]metav1.Condition { return &p.Status.Conditions },
			s.client.PolicyV1alpha1().BaselineAdminNetworkPolicies().UpdateStatus)
	default:
		return false, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return true, fmt.Errorf("updating status of %s:%s: %w", kind, name, err)
	}
	if err == nil {
		klog.V(2).InfoS("Updated SIG policy status", "kind", kind, "name", name, "phase", st.Phase)
	}
	return true, nil
}

// updateConditions writes want into the conditions of the cached object
// name when they differ (a copy, through updateStatus); an object gone from
// the cache needs nothing.
func updateConditions[T interface{ DeepCopy() T }](ctx context.Context, name string, want []metav1.Condition,
	get func(string) (T, error), conditions func(T) *[]metav1.Condition,
	updateStatus func(context.Context, T, metav1.UpdateOptions) (T, error)) error {
	p, err := get(name)
	if err != nil {
		return nil
	}
	conds, changed := setConditions(*conditions(p), want)
	if !changed {
		return nil
	}
	p = p.DeepCopy()
	*conditions(p) = conds
	_, err = updateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// sigServedWait is how long EnableServedSIGPolicies waits for the SIG CRDs
// to be served (they are installed with the controller and may still be
// being established when it starts).
const sigServedWait = 15 * time.Second

// EnableServedSIGPolicies enables the SIG kinds whose CRDs the API server
// serves (policy.networking.k8s.io v1alpha2 clusternetworkpolicies, v1alpha1
// adminnetworkpolicies and baselineadminnetworkpolicies), with a client and
// informer factory for cfg. It returns the factory to start, nil when none
// is served: a kind whose CRD is missing is left out (with a log line)
// instead of waiting forever for its informer.
func (c *Controller) EnableServedSIGPolicies(cfg *rest.Config, disc discovery.DiscoveryInterface) (siginformers.SharedInformerFactory, error) {
	served := func(gv, resource string) bool {
		l, err := disc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			return false
		}
		for _, r := range l.APIResources {
			if r.Name == resource {
				return true
			}
		}
		return false
	}
	var cnp, anp bool
	deadline := time.Now().Add(sigServedWait)
	for {
		cnp = served(sigv1alpha2.GroupVersion.String(), "clusternetworkpolicies")
		anp = served(sigv1alpha1.GroupVersion.String(), "adminnetworkpolicies") &&
			served(sigv1alpha1.GroupVersion.String(), "baselineadminnetworkpolicies")
		if cnp && anp || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	klog.InfoS("SIG network-policy-api kinds", "clusterNetworkPolicies", cnp, "adminNetworkPolicies", anp)
	if !cnp && !anp {
		return nil, nil
	}
	client, err := sigclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the policy.networking.k8s.io client: %w", err)
	}
	factory := siginformers.NewSharedInformerFactory(client, 0)
	if err := c.EnableSIGPolicies(SIGPolicyConfig{Client: client, Informers: factory, ClusterNetworkPolicies: cnp, AdminNetworkPolicies: anp}); err != nil {
		return nil, err
	}
	return factory, nil
}
