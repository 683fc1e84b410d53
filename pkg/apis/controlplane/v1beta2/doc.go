// Package v1beta2 is the served version of controlplane.antrea.io: what agents,
// antctl and kubectl read. Its shape mirrors the internal types one to one.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=antrea.io/antrea/pkg/apis/controlplane
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=io.antrea.controlplane.v1beta2
// +groupName=controlplane.antrea.io
package v1beta2
