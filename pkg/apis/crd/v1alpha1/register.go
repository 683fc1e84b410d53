package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of Antrea's CRDs.
const GroupName = "crd.antrea.io"

// SchemeGroupVersion is crd.antrea.io/v1alpha1, the version upstream serves
// PacketCapture, NodeLatencyMonitor, SupportBundleCollection and BGPPolicy in.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource takes an unqualified resource and returns a group-qualified one.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	localSchemeBuilder = &SchemeBuilder
	// SchemeBuilder registers the crd.antrea.io/v1alpha1 types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the crd.antrea.io/v1alpha1 types to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&PacketCapture{},
		&PacketCaptureList{},
		&NodeLatencyMonitor{},
		&NodeLatencyMonitorList{},
		&SupportBundleCollection{},
		&SupportBundleCollectionList{},
		&BGPPolicy{},
		&BGPPolicyList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
