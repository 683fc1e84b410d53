package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of policy statistics.
const GroupName = "stats.antrea.io"

// SchemeGroupVersion is the served version.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource takes an unqualified resource and returns a group-qualified one.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers the v1alpha1 types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the v1alpha1 types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// knownTypes are the kinds of the group.
func knownTypes() []runtime.Object {
	return []runtime.Object{
		&NetworkPolicyStats{}, &NetworkPolicyStatsList{},
		&AntreaNetworkPolicyStats{}, &AntreaNetworkPolicyStatsList{},
		&AntreaClusterNetworkPolicyStats{}, &AntreaClusterNetworkPolicyStatsList{},
		&NodeLatencyStats{}, &NodeLatencyStatsList{},
		&MulticastGroup{}, &MulticastGroupList{},
	}
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, knownTypes()...)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// AddToSchemeAsInternal registers the same types as the group's internal
// version too, so an API server serves them without conversions: the
// scheme finds each object already in the version it is asked for.
func AddToSchemeAsInternal(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}, knownTypes()...)
	return nil
}
