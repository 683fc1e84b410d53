package v1beta2

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the computed policy objects.
const GroupName = "controlplane.antrea.io"

// NodeNameField is the field selector label an agent uses to watch only the
// objects whose span holds its Node: fieldSelector=nodeName=<node>.
const NodeNameField = "nodeName"

// SchemeGroupVersion is the served version.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta2"}

// Resource takes an unqualified resource and returns a group-qualified one.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	localSchemeBuilder = &SchemeBuilder
	// SchemeBuilder registers the v1beta2 types, conversions and field labels.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, addFieldLabelConversions)
	// AddToScheme adds the v1beta2 types to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
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
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// addFieldLabelConversions lets the server accept nodeName (and metadata.name)
// as field selectors on every listed kind.
func addFieldLabelConversions(scheme *runtime.Scheme) error {
	for _, kind := range []string{"AppliedToGroup", "AddressGroup", "NetworkPolicy", "EgressGroup"} {
		err := scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind(kind),
			func(label, value string) (string, string, error) {
				switch label {
				case NodeNameField, "metadata.name":
					return label, value, nil
				}
				return "", "", fmt.Errorf("field label %q not supported for %s", label, kind)
			})
		if err != nil {
			return fmt.Errorf("registering field labels of %s: %w", kind, err)
		}
	}
	return nil
}
