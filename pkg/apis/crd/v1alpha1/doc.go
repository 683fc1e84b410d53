// Package v1alpha1 holds the operations API of crd.antrea.io/v1alpha1:
// PacketCapture, NodeLatencyMonitor and SupportBundleCollection, with upstream Antrea's names, JSON fields and meanings, so
// that upstream's YAML (docs/packetcapture.md) applies unchanged.
//
// The CRD manifest in build/charts/antrea/crds is generated from these types
// and their +kubebuilder markers by hack/codegen-k8s.sh (controller-gen);
// antrea-controller's admission webhook (pkg/controller/admission) refuses
// what a schema cannot say, naming the field.
//
// +k8s:deepcopy-gen=package
// +groupName=crd.antrea.io
package v1alpha1
