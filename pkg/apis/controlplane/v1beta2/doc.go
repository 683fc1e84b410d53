// Package v1beta2 is the served version of controlplane.antrea.io: what agents,
// antctl and kubectl read. Its shape mirrors the internal types one to one.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=antrea.io/antrea/pkg/apis/controlplane
// +groupName=controlplane.antrea.io
package v1beta2
