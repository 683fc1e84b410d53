// Package v1alpha1 is stats.antrea.io/v1alpha1: the traffic statistics of
// NetworkPolicies per policy and per rule, which antrea-controller sums from
// its agents' reports and serves read-only (as upstream Antrea's API group of
// the same name), the Nodes' latency stats, and the multicast groups the
// cluster's Pods joined. The types serve as their own internal version.
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=io.antrea.stats.v1alpha1
// +groupName=stats.antrea.io
package v1alpha1
