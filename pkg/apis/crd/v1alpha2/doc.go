// Package v1alpha2 holds crd.antrea.io/v1alpha2: TrafficControl, with
// upstream Antrea's names, JSON fields and meanings, so that upstream's YAML
// (docs/traffic-control.md) applies unchanged.
//
// The CRD manifest in build/charts/antrea/crds is generated from these types
// and their +kubebuilder markers by hack/codegen-k8s.sh (controller-gen).
//
// +k8s:deepcopy-gen=package
// +groupName=crd.antrea.io
package v1alpha2
