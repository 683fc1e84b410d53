// Package admission is antrea-controller's admission of the Antrea-native
// policy API (crd.antrea.io: Tier, ClusterNetworkPolicy, NetworkPolicy,
// ClusterGroup, Group): the validating webhook refuses every invalid object
// with a message that names the field (upstream Antrea's validate.go list,
// plus references that must exist), and the mutating webhook fills in what
// upstream defaults (the application Tier, rule names). kube-apiserver calls
// both over antrea-controller's HTTPS server (pkg/apiserver), at the paths of
// the webhook configurations in build/charts/antrea (Paths).
//
// What a CRD schema can say (types, enums, ranges, a few CEL rules) is said
// there too; the webhook repeats it so that its own tests cover every rule.
package admission

import (
	"context"
	"os"

	crdv1beta1 "antrea.io/antrea/pkg/apis/crd/v1beta1"
)

// Lookup is what the validator reads of the cluster: the objects a policy,
// group or Tier refers to, or that refer to it. Each returns nil (and no
// error) for an object that does not exist.
type Lookup interface {
	Tier(ctx context.Context, name string) (*crdv1beta1.Tier, error)
	Tiers(ctx context.Context) ([]*crdv1beta1.Tier, error)
	// PoliciesInTier counts the ClusterNetworkPolicies and Antrea
	// NetworkPolicies whose tier is name.
	PoliciesInTier(ctx context.Context, name string) (acnps, annps int, err error)
	ClusterGroup(ctx context.Context, name string) (*crdv1beta1.ClusterGroup, error)
	Group(ctx context.Context, namespace, name string) (*crdv1beta1.Group, error)
	// ClusterGroupParents are the ClusterGroups that have name as a child.
	ClusterGroupParents(ctx context.Context, name string) ([]string, error)
	// GroupParents are the Groups of namespace that have name as a child.
	GroupParents(ctx context.Context, namespace, name string) ([]string, error)
}

// Validator checks Antrea-native policy objects.
type Validator struct {
	lookup Lookup
	// controllerUser is antrea-controller's user name: it may set the
	// static Tiers' specs, which nobody else may change.
	controllerUser string
	// l7NetworkPolicy is the controller's L7NetworkPolicy gate: without it
	// l7Protocols are refused, as upstream's webhook does.
	l7NetworkPolicy bool
}

// NewValidator returns a validator reading the cluster through lookup.
// controllerUser is antrea-controller's user name (ControllerUser).
func NewValidator(lookup Lookup, controllerUser string) *Validator {
	return &Validator{lookup: lookup, controllerUser: controllerUser}
}

// WithL7NetworkPolicy sets whether the controller's L7NetworkPolicy gate is
// on (off by default, as upstream's): only then are rules with l7Protocols
// accepted.
func (v *Validator) WithL7NetworkPolicy(on bool) *Validator {
	v.l7NetworkPolicy = on
	return v
}

// ControllerUser is the user name antrea-controller has in the cluster: its
// ServiceAccount antrea-controller in the Namespace it runs in ($POD_NAMESPACE,
// kube-system when unset), as upstream.
func ControllerUser() string {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "kube-system"
	}
	return "system:serviceaccount:" + ns + ":antrea-controller"
}
