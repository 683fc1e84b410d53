package admission

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// ValidateTierCreate: at most MaxSupportedTiers Tiers; a custom Tier's
// priority is neither reserved (250 to 255) nor another Tier's; a static
// Tier is created with its own priority.
func (v *Validator) ValidateTierCreate(ctx context.Context, t *crdv1beta1.Tier, user string) field.ErrorList {
	priority := field.NewPath("spec", "priority")
	tiers, err := v.lookup.Tiers(ctx)
	if err != nil {
		return field.ErrorList{field.InternalError(priority, fmt.Errorf("listing Tiers: %w", err))}
	}
	if len(tiers) >= crdv1beta1.MaxSupportedTiers {
		return field.ErrorList{field.TooMany(field.NewPath("metadata", "name"), len(tiers)+1, crdv1beta1.MaxSupportedTiers)}
	}
	if want, static := staticTierSpec(t.Name); static {
		if t.Spec.Priority != want.Priority && user != v.controllerUser {
			return field.ErrorList{field.Invalid(priority, t.Spec.Priority,
				fmt.Sprintf("%s is a static Tier: its priority is %d", t.Name, want.Priority))}
		}
	} else if crdv1beta1.IsReservedTierPriority(t.Spec.Priority) {
		return field.ErrorList{field.Invalid(priority, t.Spec.Priority,
			"priorities 250 to 255 are reserved (the application Tier is 250, baseline 253): a custom Tier must come before the application Tier")}
	}
	for _, other := range tiers {
		if other.Name != t.Name && other.Spec.Priority == t.Spec.Priority {
			return field.ErrorList{field.Duplicate(priority, fmt.Sprintf("%d (Tier %s has it)", t.Spec.Priority, other.Name))}
		}
	}
	return nil
}

// ValidateTierUpdate: a Tier's priority cannot change; a static Tier's spec
// cannot change. antrea-controller itself may restore a static Tier.
func (v *Validator) ValidateTierUpdate(t, old *crdv1beta1.Tier, user string) field.ErrorList {
	if user == v.controllerUser {
		return nil
	}
	spec := field.NewPath("spec")
	if t.Spec.Priority != old.Spec.Priority {
		return field.ErrorList{field.Forbidden(spec.Child("priority"),
			fmt.Sprintf("the priority of a Tier cannot be updated (it is %d)", old.Spec.Priority))}
	}
	if _, static := staticTierSpec(t.Name); static && t.Spec != old.Spec {
		return field.ErrorList{field.Forbidden(spec.Child("description"), t.Name+" is a static Tier: it is read-only")}
	}
	return nil
}

// ValidateTierDelete: static Tiers and Tiers that policies reference stay.
func (v *Validator) ValidateTierDelete(ctx context.Context, t *crdv1beta1.Tier) field.ErrorList {
	name := field.NewPath("metadata", "name")
	if _, static := staticTierSpec(t.Name); static {
		return field.ErrorList{field.Forbidden(name, t.Name+" is a static Tier: it cannot be deleted")}
	}
	acnps, annps, err := v.lookup.PoliciesInTier(ctx, t.Name)
	if err != nil {
		return field.ErrorList{field.InternalError(name, fmt.Errorf("listing the policies of Tier %s: %w", t.Name, err))}
	}
	if acnps+annps > 0 {
		return field.ErrorList{field.Forbidden(name, fmt.Sprintf(
			"Tier %s is referenced by %d ClusterNetworkPolicies and %d Antrea NetworkPolicies (their spec.tier): delete or move them first",
			t.Name, acnps, annps))}
	}
	return nil
}

func staticTierSpec(name string) (crdv1beta1.TierSpec, bool) {
	for _, t := range crdv1beta1.StaticTiers {
		if t.Name == name {
			return t.Spec, true
		}
	}
	return crdv1beta1.TierSpec{}, false
}
