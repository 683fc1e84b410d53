package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the Antrea-native policy CRDs.
const GroupName = "crd.antrea.io"

// SchemeGroupVersion is the only version this Antrea serves (upstream's
// storage version; its older v1alpha versions are deprecated there).
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

// Resource takes an unqualified resource and returns a group-qualified one.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	localSchemeBuilder = &SchemeBuilder
	// SchemeBuilder registers the crd.antrea.io/v1beta1 types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the crd.antrea.io/v1beta1 types to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Tier{},
		&TierList{},
		&ClusterNetworkPolicy{},
		&ClusterNetworkPolicyList{},
		&NetworkPolicy{},
		&NetworkPolicyList{},
		&ClusterGroup{},
		&ClusterGroupList{},
		&Group{},
		&GroupList{},
		&Traceflow{},
		&TraceflowList{},
		&AntreaAgentInfo{},
		&AntreaAgentInfoList{},
		&AntreaControllerInfo{},
		&AntreaControllerInfoList{},
		&Egress{},
		&EgressList{},
		&ExternalIPPool{},
		&ExternalIPPoolList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
