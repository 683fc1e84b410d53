// Package v1beta1 holds the Antrea-native policy API, crd.antrea.io/v1beta1:
// Tier, ClusterNetworkPolicy (acnp), NetworkPolicy (annp), ClusterGroup (cg)
// and Group (grp). Names, JSON fields and meanings are upstream Antrea's, so
// policy YAML written for upstream applies unchanged
// (docs/antrea-network-policy.md says what this Antrea does with each field).
//
// The types are CustomResourceDefinitions: the CRD manifests in
// build/charts/antrea/crds are generated from these types and their
// +kubebuilder markers by hack/codegen-k8s.sh (controller-gen), and
// antrea-controller's admission webhooks (pkg/controller/admission) check
// what a schema cannot.
//
// +k8s:deepcopy-gen=package
// +groupName=crd.antrea.io
package v1beta1
