package networkpolicy

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// The status of Antrea-native policies follows upstream's status controller:
// phase Pending until the policy is computed (or while it cannot be:
// condition Realizable False), Realized once every Node of its span reported
// the current generation (0 of 0 included), Failed once every Node has
// reported and at least one failed, Realizing otherwise.

// recordStatus remembers what the status of a native policy derives from.
func (c *Controller) recordStatus(key string, info nativeStatusInfo) {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	if old, ok := c.statusInfo[key]; ok && old.name != info.name {
		delete(c.keyByInternalName, old.name)
	}
	c.statusInfo[key] = info
	c.keyByInternalName[info.name] = key
	if info.err != nil {
		c.statusQueue.Add(key)
	}
}

func (c *Controller) forgetStatus(key string) {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	if old, ok := c.statusInfo[key]; ok {
		delete(c.keyByInternalName, old.name)
		delete(c.statusInfo, key)
	}
}

func (c *Controller) enqueueStatus(key string) {
	if c.native != nil && c.native.client != nil {
		c.statusQueue.Add(key)
	}
}

// internalStatusChanged is told by the status store that agents reported on
// the internal policy name.
func (c *Controller) internalStatusChanged(name string) {
	c.statusMu.Lock()
	key, ok := c.keyByInternalName[name]
	c.statusMu.Unlock()
	if ok {
		c.enqueueStatus(key)
	}
}

// desiredStatus computes the status of a native policy from its
// computation and the agents' reports.
func (c *Controller) desiredStatus(info nativeStatusInfo) crdv1beta1.NetworkPolicyStatus {
	st := crdv1beta1.NetworkPolicyStatus{ObservedGeneration: info.generation, Phase: crdv1beta1.NetworkPolicyPending}
	if info.err != nil {
		st.Conditions = []crdv1beta1.NetworkPolicyCondition{{
			Type: crdv1beta1.NetworkPolicyConditionRealizable, Status: metav1.ConditionFalse,
			Reason: "NetworkPolicyInvalid", Message: info.err.Error(),
		}}
		return st
	}
	st.Conditions = []crdv1beta1.NetworkPolicyCondition{{Type: crdv1beta1.NetworkPolicyConditionRealizable, Status: metav1.ConditionTrue}}
	if _, exists, _ := c.networkPolicyStore.Get(info.name); !exists || c.native.realizer == nil {
		return st
	}
	realized, failed, desired := c.native.realizer.Realization(info.name)
	st.CurrentNodesRealized, st.DesiredNodesRealized = int32(realized), int32(desired)
	switch {
	case realized == desired:
		st.Phase = crdv1beta1.NetworkPolicyRealized
	case failed > 0 && realized+failed == desired:
		st.Phase = crdv1beta1.NetworkPolicyFailed
	default:
		st.Phase = crdv1beta1.NetworkPolicyRealizing
	}
	if failed > 0 {
		st.Conditions = append(st.Conditions, crdv1beta1.NetworkPolicyCondition{
			Type: crdv1beta1.NetworkPolicyConditionRealizationFailure, Status: metav1.ConditionTrue,
			Reason: "NetworkPolicyRealizationFailedOnNode", Message: fmt.Sprintf("Failed Nodes count %d", failed),
		})
	}
	return st
}

// sameStatus compares statuses without the conditions' transition times.
func sameStatus(a, b *crdv1beta1.NetworkPolicyStatus) bool {
	if a.Phase != b.Phase || a.ObservedGeneration != b.ObservedGeneration ||
		a.CurrentNodesRealized != b.CurrentNodesRealized || a.DesiredNodesRealized != b.DesiredNodesRealized ||
		len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message {
			return false
		}
	}
	return true
}

// withTransitionTimes keeps the transition time of conditions whose status
// did not change, and stamps now on the others.
func withTransitionTimes(cur []crdv1beta1.NetworkPolicyCondition, prev []crdv1beta1.NetworkPolicyCondition) {
	now := metav1.Now()
	for i := range cur {
		cur[i].LastTransitionTime = now
		for _, p := range prev {
			if p.Type == cur[i].Type && p.Status == cur[i].Status {
				cur[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
}

// syncNativeStatus writes the status of a native policy (key as for
// syncNativePolicy) through its status subresource when it differs.
func (c *Controller) syncNativeStatus(ctx context.Context, key string) error {
	c.statusMu.Lock()
	info, ok := c.statusInfo[key]
	c.statusMu.Unlock()
	if !ok || c.native == nil || c.native.client == nil {
		return nil
	}
	want := c.desiredStatus(info)
	kind, rest, _ := strings.Cut(key, ":")
	var err error
	switch kind {
	case "acnp":
		p, gerr := c.native.acnpLister.Get(rest)
		if gerr != nil {
			return nil
		}
		if sameStatus(&p.Status, &want) {
			return nil
		}
		p = p.DeepCopy()
		withTransitionTimes(want.Conditions, p.Status.Conditions)
		p.Status = want
		_, err = c.native.client.CrdV1beta1().ClusterNetworkPolicies().UpdateStatus(ctx, p, metav1.UpdateOptions{})
	case "annp":
		ns, name, _ := strings.Cut(rest, "/")
		p, gerr := c.native.annpLister.NetworkPolicies(ns).Get(name)
		if gerr != nil {
			return nil
		}
		if sameStatus(&p.Status, &want) {
			return nil
		}
		p = p.DeepCopy()
		withTransitionTimes(want.Conditions, p.Status.Conditions)
		p.Status = want
		_, err = c.native.client.CrdV1beta1().NetworkPolicies(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	default:
		// The SIG network-policy-api kinds (sig_policy.go).
		if ok, serr := c.syncSIGStatus(ctx, kind, rest, want, info); ok {
			return serr
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// The lister is behind the object: retry once it caught up.
		return fmt.Errorf("updating status of %s: %w", key, err)
	case err != nil:
		return fmt.Errorf("updating status of %s: %w", key, err)
	}
	klog.V(2).InfoS("Updated Antrea-native policy status", "policy", key, "phase", want.Phase,
		"current", want.CurrentNodesRealized, "desired", want.DesiredNodesRealized)
	return nil
}

// parentsOf lists the groups (as dependency keys) with child as a child.
func (c *Controller) parentsOf(child string) []string {
	var out []string
	kind, rest, _ := strings.Cut(child, ":")
	switch kind {
	case "cg":
		cgs, _ := c.native.cgLister.List(labels.Everything())
		for _, g := range cgs {
			for _, ch := range g.Spec.ChildGroups {
				if string(ch) == rest {
					out = append(out, depClusterGroup(g.Name))
				}
			}
		}
	case "grp":
		ns, name, _ := strings.Cut(rest, "/")
		grps, _ := c.native.grpLister.Groups(ns).List(labels.Everything())
		for _, g := range grps {
			for _, ch := range g.Spec.ChildGroups {
				if string(ch) == name {
					out = append(out, depGroup(ns, g.Name))
				}
			}
		}
	}
	return out
}

// groupCondition is the GroupMembersComputed condition of a group spec:
// True once its members can be computed, False while a child group is
// missing.
func groupCondition(spec *crdv1beta1.GroupSpec, childExists func(string) bool) crdv1beta1.GroupCondition {
	var missing []string
	for _, ch := range spec.ChildGroups {
		if !childExists(string(ch)) {
			missing = append(missing, string(ch))
		}
	}
	if len(missing) > 0 {
		return crdv1beta1.GroupCondition{Type: crdv1beta1.GroupMembersComputed, Status: v1.ConditionFalse,
			Reason: "ChildGroupNotFound", Message: "child groups not found: " + strings.Join(missing, ", ")}
	}
	return crdv1beta1.GroupCondition{Type: crdv1beta1.GroupMembersComputed, Status: v1.ConditionTrue}
}

// setGroupCondition returns the conditions with cond set, and whether they
// changed.
func setGroupCondition(conds []crdv1beta1.GroupCondition, cond crdv1beta1.GroupCondition) ([]crdv1beta1.GroupCondition, bool) {
	out := make([]crdv1beta1.GroupCondition, 0, len(conds)+1)
	found := false
	for _, c := range conds {
		if c.Type != cond.Type {
			out = append(out, c)
			continue
		}
		found = true
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return conds, false
		}
		cond.LastTransitionTime = c.LastTransitionTime
		if c.Status != cond.Status {
			cond.LastTransitionTime = metav1.Now()
		}
		out = append(out, cond)
	}
	if !found {
		cond.LastTransitionTime = metav1.Now()
		out = append(out, cond)
	}
	return out, true
}

// syncGroupStatus writes the GroupMembersComputed condition of a
// ClusterGroup ("cg:name") or Group ("grp:ns/name").
func (c *Controller) syncGroupStatus(ctx context.Context, key string) error {
	if c.native == nil || c.native.client == nil {
		return nil
	}
	n := c.native
	kind, rest, _ := strings.Cut(key, ":")
	var err error
	switch kind {
	case "cg":
		g, gerr := n.cgLister.Get(rest)
		if gerr != nil {
			return nil
		}
		cond := groupCondition(&g.Spec, func(ch string) bool { _, err := n.cgLister.Get(ch); return err == nil })
		conds, changed := setGroupCondition(g.Status.Conditions, cond)
		if !changed {
			return nil
		}
		g = g.DeepCopy()
		g.Status.Conditions = conds
		_, err = n.client.CrdV1beta1().ClusterGroups().UpdateStatus(ctx, g, metav1.UpdateOptions{})
	case "grp":
		ns, name, _ := strings.Cut(rest, "/")
		g, gerr := n.grpLister.Groups(ns).Get(name)
		if gerr != nil {
			return nil
		}
		cond := groupCondition(&g.Spec, func(ch string) bool { _, err := n.grpLister.Groups(ns).Get(ch); return err == nil })
		conds, changed := setGroupCondition(g.Status.Conditions, cond)
		if !changed {
			return nil
		}
		g = g.DeepCopy()
		g.Status.Conditions = conds
		_, err = n.client.CrdV1beta1().Groups(ns).UpdateStatus(ctx, g, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating status of %s: %w", key, err)
	}
	return nil
}
