package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=eg
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="EgressIP",type=string,JSONPath=".status.egressIP",description="The effective SNAT IP address for the selected workloads."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=".status.egressNode",description="The Owner Node of egress IP"

// Egress says which source (SNAT) IP the traffic of the selected Pods to
// destinations outside the cluster leaves with (docs/egress.md). The
// antrea-controller allocates spec.egressIP from spec.externalIPPool when it
// is empty; the agents assign the IP to one of the pool's Nodes, tunnel the
// selected Pods' traffic there and SNAT it.
type Egress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EgressSpec `json:"spec"`
	// +optional
	Status EgressStatus `json:"status"`
}

// +kubebuilder:validation:XValidation:rule="(has(self.egressIP) || has(self.externalIPPool)) != (has(self.egressIPs) || has(self.externalIPPools))",message="exactly one of egressIP/externalIPPool and egressIPs/externalIPPools must be set"

// EgressSpec is the desired state of an Egress.
type EgressSpec struct {
	// AppliedTo selects the Pods whose egress traffic uses the Egress IP.
	AppliedTo EgressAppliedTo `json:"appliedTo"`
	// EgressIP is the SNAT IP. With ExternalIPPool empty it must be given
	// (and assigned to a Node by hand); with ExternalIPPool set it may be
	// empty, and the antrea-controller allocates one from the pool; when
	// both are set the IP must be in the pool.
	// +optional
	EgressIP string `json:"egressIP,omitempty"`
	// EgressIPs are several SNAT IPs (one per entry of ExternalIPPools,
	// same index). Cannot be set with EgressIP.
	// +optional
	EgressIPs []string `json:"egressIPs,omitempty"`
	// ExternalIPPool names the ExternalIPPool the IP is allocated from and
	// whose nodeSelector chooses the Nodes that may hold it.
	// +optional
	ExternalIPPool string `json:"externalIPPool,omitempty"`
	// ExternalIPPools name distinct pools for EgressIPs. Cannot be set with
	// ExternalIPPool.
	// +optional
	ExternalIPPools []string `json:"externalIPPools,omitempty"`
	// Bandwidth limits the egress traffic of the selected Pods through this
	// Egress (upstream's EgressTrafficShaping).
	// +optional
	Bandwidth *Bandwidth `json:"bandwidth,omitempty"`
}

// EgressAppliedTo selects Pods: PodSelector alone selects in every
// Namespace, NamespaceSelector alone every Pod of the selected Namespaces,
// both together the matching Pods of the matching Namespaces. An empty
// appliedTo selects nothing. (Upstream's type is its policy AppliedTo, of
// which an Egress may use only these two fields; its CRD schema has only
// these, and so does this one.)
type EgressAppliedTo struct {
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// Bandwidth is a rate limit in Kubernetes quantity form (300k, 10M, 2G).
type Bandwidth struct {
	// Rate is the maximum rate in bits per second.
	Rate string `json:"rate"`
	// Burst is the maximum burst size when traffic exceeds the rate.
	Burst string `json:"burst"`
}

// EgressStatus is where the Egress IP is.
type EgressStatus struct {
	// EgressNode is the Node that holds the Egress IP.
	// +optional
	EgressNode string `json:"egressNode"`
	// EgressIP is the effective Egress IP of the selected Pods; empty while
	// no Node holds it.
	// +optional
	EgressIP string `json:"egressIP"`
	// +optional
	Conditions []EgressCondition `json:"conditions,omitempty"`
}

// EgressConditionType is the type of an Egress condition.
type EgressConditionType string

// Upstream's Egress conditions; neither applies to an Egress without an
// ExternalIPPool.
const (
	// IPAllocated: an IP was allocated to the Egress from its pool.
	IPAllocated EgressConditionType = "IPAllocated"
	// IPAssigned: the Egress IP was assigned to a Node.
	IPAssigned EgressConditionType = "IPAssigned"
)

// EgressCondition is one condition of an Egress.
type EgressCondition struct {
	// +optional
	Type EgressConditionType `json:"type,omitempty"`
	// +optional
	Status corev1.ConditionStatus `json:"status,omitempty"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// EgressList is a list of Egresses.
type EgressList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Egress `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=eip
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=".status.usage.total",description="The number of total IPs"
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=".status.usage.used",description="The number of allocated IPs"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"

// ExternalIPPool is a set of IPs usable on the external network, from which
// the antrea-controller allocates Egress IPs (and, later, LoadBalancer IPs
// of Services), and the Nodes that may hold them.
type ExternalIPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ExternalIPPoolSpec `json:"spec"`
	// +optional
	Status ExternalIPPoolStatus `json:"status"`
}

// ExternalIPPoolSpec is the pool's ranges and Nodes.
type ExternalIPPoolSpec struct {
	// IPRanges are the pool's addresses, e.g. 10.10.0.0/24,
	// 10.10.10.2-10.10.10.20.
	IPRanges []IPRange `json:"ipRanges"`
	// SubnetInfo, when the IPs are not in the Nodes' subnet, is the subnet
	// every range shares (used for Egress only).
	// +optional
	SubnetInfo *SubnetInfo `json:"subnetInfo,omitempty"`
	// NodeSelector chooses the Nodes the IPs may be assigned to; empty
	// selects every Node.
	NodeSelector metav1.LabelSelector `json:"nodeSelector"`
}

// +kubebuilder:validation:XValidation:rule="has(self.cidr) != (has(self.start) && has(self.end))",message="an IP range is either cidr or start and end"

// IPRange is contiguous addresses: a CIDR, or Start to End inclusive.
type IPRange struct {
	// CIDR of the range, e.g. 10.10.10.0/24. For IPv4 its network and
	// broadcast addresses are not allocated.
	// +optional
	CIDR string `json:"cidr,omitempty"`
	// Start is the first IP of the range, inclusive.
	// +optional
	Start string `json:"start,omitempty"`
	// End is the last IP of the range, inclusive.
	// +optional
	End string `json:"end,omitempty"`
}

// SubnetInfo is the subnet of a pool whose IPs are not in the Nodes' one.
type SubnetInfo struct {
	// Gateway of the subnet, e.g. 10.10.1.1.
	Gateway string `json:"gateway"`
	// PrefixLength of the subnet, e.g. 24.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=127
	PrefixLength int32 `json:"prefixLength"`
	// VLAN ID of the subnet, 0 (none, the default) to 4094.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4094
	// +optional
	VLAN int32 `json:"vlan,omitempty"`
}

// ExternalIPPoolStatus is the pool's usage.
type ExternalIPPoolStatus struct {
	// +optional
	Usage IPPoolUsage `json:"usage,omitempty"`
}

// IPPoolUsage counts a pool's IPs.
type IPPoolUsage struct {
	// Total is the number of IPs of the pool.
	Total int `json:"total"`
	// Used is the number of allocated IPs.
	Used int `json:"used"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ExternalIPPoolList is a list of ExternalIPPools.
type ExternalIPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ExternalIPPool `json:"items"`
}
