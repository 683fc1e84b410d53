package admission

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// ValidateClusterGroup returns every reason to refuse a ClusterGroup.
func (v *Validator) ValidateClusterGroup(ctx context.Context, g *crdv1beta1.ClusterGroup) field.ErrorList {
	errs := validateGroupSpec(&g.Spec)
	if len(g.Spec.ChildGroups) == 0 {
		return errs
	}
	children := field.NewPath("spec", "childGroups")
	parents, err := v.lookup.ClusterGroupParents(ctx, g.Name)
	if err != nil {
		return append(errs, field.InternalError(children, err))
	}
	if len(parents) > 0 {
		errs = append(errs, field.Forbidden(children, fmt.Sprintf(
			"ClusterGroup %s is a child of %s: childGroups nest one level only", g.Name, strings.Join(parents, ", "))))
	}
	for i, c := range g.Spec.ChildGroups {
		p := children.Index(i)
		if string(c) == g.Name {
			errs = append(errs, field.Invalid(p, c, "a ClusterGroup cannot be its own child"))
			continue
		}
		child, err := v.lookup.ClusterGroup(ctx, string(c))
		if err != nil {
			errs = append(errs, field.InternalError(p, err))
		} else if child != nil && len(child.Spec.ChildGroups) > 0 {
			errs = append(errs, field.Invalid(p, c, "this ClusterGroup has childGroups itself: childGroups nest one level only"))
		}
	}
	return errs
}

// ValidateGroup returns every reason to refuse a Group.
func (v *Validator) ValidateGroup(ctx context.Context, g *crdv1beta1.Group) field.ErrorList {
	errs := validateGroupSpec(&g.Spec)
	if len(g.Spec.ChildGroups) == 0 {
		return errs
	}
	children := field.NewPath("spec", "childGroups")
	parents, err := v.lookup.GroupParents(ctx, g.Namespace, g.Name)
	if err != nil {
		return append(errs, field.InternalError(children, err))
	}
	if len(parents) > 0 {
		errs = append(errs, field.Forbidden(children, fmt.Sprintf(
			"Group %s/%s is a child of %s: childGroups nest one level only", g.Namespace, g.Name, strings.Join(parents, ", "))))
	}
	for i, c := range g.Spec.ChildGroups {
		p := children.Index(i)
		if string(c) == g.Name {
			errs = append(errs, field.Invalid(p, c, "a Group cannot be its own child"))
			continue
		}
		child, err := v.lookup.Group(ctx, g.Namespace, string(c))
		if err != nil {
			errs = append(errs, field.InternalError(p, err))
		} else if child != nil && len(child.Spec.ChildGroups) > 0 {
			errs = append(errs, field.Invalid(p, c, "this Group has childGroups itself: childGroups nest one level only"))
		}
	}
	return errs
}

// validateGroupSpec: one kind of selection (podSelector and
// namespaceSelector combine), valid selectors and ipBlocks.
func validateGroupSpec(s *crdv1beta1.GroupSpec) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	set := setFields(map[string]bool{
		"podSelector":            s.PodSelector != nil,
		"namespaceSelector":      s.NamespaceSelector != nil,
		"nodeSelector":           s.NodeSelector != nil,
		"ipBlocks":               len(s.IPBlocks) > 0,
		"serviceReference":       s.ServiceReference != nil,
		"externalEntitySelector": s.ExternalEntitySelector != nil,
		"childGroups":            len(s.ChildGroups) > 0,
	})
	selectors := slices.DeleteFunc(slices.Clone(set), func(f string) bool { return f == "namespaceSelector" })
	if len(selectors) > 1 || (len(selectors) == 1 && len(set) == 2 && selectors[0] != "podSelector") {
		offender := selectors[0]
		if offender == "podSelector" {
			offender = selectors[len(selectors)-1]
		}
		errs = append(errs, field.Forbidden(spec.Child(offender), fmt.Sprintf(
			"at most one of podSelector, nodeSelector, ipBlocks, serviceReference or childGroups can be set, "+
				"and only podSelector combines with namespaceSelector (set: %s)", strings.Join(set, ", "))))
	}
	if s.ExternalEntitySelector != nil {
		errs = append(errs, unsupported(spec.Child("externalEntitySelector"), "ExternalEntities"))
	}
	if s.ServiceReference != nil {
		errs = append(errs, validateNamespacedName(spec.Child("serviceReference"), s.ServiceReference)...)
	}
	errs = append(errs, validateSelector(spec.Child("podSelector"), s.PodSelector)...)
	errs = append(errs, validateSelector(spec.Child("namespaceSelector"), s.NamespaceSelector)...)
	errs = append(errs, validateSelector(spec.Child("nodeSelector"), s.NodeSelector)...)
	multicast, unicast := false, false
	for i := range s.IPBlocks {
		p := spec.Child("ipBlocks").Index(i)
		blockErrs := validateIPBlock(p, &s.IPBlocks[i])
		errs = append(errs, blockErrs...)
		if len(blockErrs) > 0 {
			continue
		}
		if ip, _, _ := net.ParseCIDR(s.IPBlocks[i].CIDR); ip.IsMulticast() {
			multicast = true
		} else {
			unicast = true
		}
	}
	if multicast && unicast {
		errs = append(errs, field.Forbidden(spec.Child("ipBlocks"), "multicast and unicast CIDRs cannot be set in the same group"))
	}
	for i, c := range s.ChildGroups {
		if c == "" {
			errs = append(errs, field.Required(spec.Child("childGroups").Index(i), "the name of a group"))
		}
	}
	return errs
}
