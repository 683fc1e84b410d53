package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrafficStats are the counters of a policy or rule. Sessions are the
// connections it decided on; Packets and Bytes the packets it evaluated
// (docs/network-policy-stats.md says which packets those are).
type TrafficStats struct {
	Packets  int64 `json:"packets,omitempty"`
	Bytes    int64 `json:"bytes,omitempty"`
	Sessions int64 `json:"sessions,omitempty"`
}

// RuleTrafficStats are the counters of one named rule of a policy.
type RuleTrafficStats struct {
	Name         string       `json:"name,omitempty"`
	TrafficStats TrafficStats `json:"trafficStats,omitempty"`
}

// +genclient
// +genclient:onlyVerbs=get,list
// +resourceName=networkpolicystats
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkPolicyStats are the traffic statistics of a K8s NetworkPolicy,
// named and namespaced as it is.
type NetworkPolicyStats struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	TrafficStats      TrafficStats `json:"trafficStats,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkPolicyStatsList is a list of NetworkPolicyStats.
type NetworkPolicyStatsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkPolicyStats `json:"items"`
}

// +genclient
// +genclient:onlyVerbs=get,list
// +resourceName=antreanetworkpolicystats
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AntreaNetworkPolicyStats are the traffic statistics of an Antrea
// NetworkPolicy (crd.antrea.io NetworkPolicy), in total and per rule.
type AntreaNetworkPolicyStats struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	TrafficStats      TrafficStats       `json:"trafficStats,omitempty"`
	RuleTrafficStats  []RuleTrafficStats `json:"ruleTrafficStats,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AntreaNetworkPolicyStatsList is a list of AntreaNetworkPolicyStats.
type AntreaNetworkPolicyStatsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AntreaNetworkPolicyStats `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=get,list
// +resourceName=antreaclusternetworkpolicystats
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AntreaClusterNetworkPolicyStats are the traffic statistics of an Antrea
// ClusterNetworkPolicy, in total and per rule.
type AntreaClusterNetworkPolicyStats struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	TrafficStats      TrafficStats       `json:"trafficStats,omitempty"`
	RuleTrafficStats  []RuleTrafficStats `json:"ruleTrafficStats,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AntreaClusterNetworkPolicyStatsList is a list of AntreaClusterNetworkPolicyStats.
type AntreaClusterNetworkPolicyStatsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AntreaClusterNetworkPolicyStats `json:"items"`
}

// PodReference names a Pod by namespace and name.
type PodReference struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=get,list
// +resourceName=multicastgroups
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MulticastGroup is one multicast group joined by Pods of the cluster: its
// name and Group are the group's IP address, Pods the Pods of every Node
// that joined it (as upstream's multicastgroups).
type MulticastGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Group is the IP address of the multicast group.
	Group string `json:"group,omitempty"`
	// Pods are the Pods that joined the group.
	Pods []PodReference `json:"pods"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MulticastGroupList is a list of MulticastGroup.
type MulticastGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MulticastGroup `json:"items"`
}
