package controlplane

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the computed policy objects.
const GroupName = "controlplane.antrea.io"

// SchemeGroupVersion is the internal version used inside the API server.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

// Resource takes an unqualified resource and returns a group-qualified one.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers the internal types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the internal types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&AppliedToGroup{},
		&AppliedToGroupPatch{},
		&AppliedToGroupList{},
		&AddressGroup{},
		&AddressGroupPatch{},
		&AddressGroupList{},
		&EgressGroup{},
		&EgressGroupPatch{},
		&EgressGroupList{},
		&NetworkPolicy{},
		&NetworkPolicyList{},
		&NetworkPolicyStatus{},
		&NodeStatsSummary{},
	)
	return nil
}
