// Package controlplane holds the internal (unversioned) types of the
// controlplane.antrea.io API group: the policy objects the controller computes
// once and serves, per node, to every agent. Versioned forms live in v1beta2.
//
// +k8s:deepcopy-gen=package
// +groupName=controlplane.antrea.io
package controlplane
