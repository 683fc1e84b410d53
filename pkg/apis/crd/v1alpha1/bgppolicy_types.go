package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultBGPListenPort is the port a BGP speaker listens on when
// spec.listenPort is not given (RFC 4271 section 8.2.1; upstream's default).
const DefaultBGPListenPort = 179

// BGPPasswordsSecret is the Secret, in the agent's Namespace, that holds the
// peers' TCP MD5 passwords: key "ADDRESS-ASN" (upstream's name and format,
// docs/bgp-policy.md "BGP Authentication").
const BGPPasswordsSecret = "antrea-bgp-passwords"

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Local ASN",type=integer,JSONPath=".spec.localASN",description="The ASN of the local BGP speaker."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"

// BGPPolicy runs a BGP speaker on the Nodes it selects, advertising Pod
// CIDRs, Service IPs and Egress IPs to its peers (docs/bgp-policy.md). When
// several select a Node, the oldest is the one in effect there.
type BGPPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BGPPolicySpec `json:"spec"`
}

// BGPPolicySpec is upstream's crd.antrea.io/v1alpha1 BGPPolicy spec.
type BGPPolicySpec struct {
	// NodeSelector selects the Nodes the policy applies to.
	NodeSelector metav1.LabelSelector `json:"nodeSelector"`

	// LocalASN is the AS number of the speaker on each selected Node.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	LocalASN int32 `json:"localASN"`

	// ListenPort is the TCP port the speaker listens on (default 179).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=179
	// +optional
	ListenPort *int32 `json:"listenPort,omitempty"`

	// Confederation makes the speaker a member of a BGP confederation.
	// +optional
	Confederation *Confederation `json:"confederation,omitempty"`

	// Advertisements are the IPs advertised to the peers.
	// +optional
	Advertisements Advertisements `json:"advertisements,omitempty"`

	// BGPPeers are the speaker's peers.
	// +optional
	BGPPeers []BGPPeer `json:"bgpPeers,omitempty"`
}

// Confederation is the confederation the speaker belongs to (RFC 5065).
type Confederation struct {
	// Identifier is the confederation's AS number, the one peers outside it see.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Identifier int32 `json:"identifier"`
	// MemberASNs are the other member ASes of the confederation.
	// +optional
	MemberASNs []int32 `json:"memberASNs,omitempty"`
}

// Advertisements says which IPs are advertised; an absent field advertises
// nothing of its kind.
type Advertisements struct {
	// Service advertises Service IPs of the types listed.
	// +optional
	Service *ServiceAdvertisement `json:"service,omitempty"`
	// Pod advertises the Node's Pod CIDRs.
	// +optional
	Pod *PodAdvertisement `json:"pod,omitempty"`
	// Egress advertises the Egress IPs the Node holds.
	// +optional
	Egress *EgressAdvertisement `json:"egress,omitempty"`
}

// ServiceIPType is a kind of Service IP that may be advertised.
// +kubebuilder:validation:Enum=ClusterIP;LoadBalancerIP;ExternalIP
type ServiceIPType string

// The kinds of Service IPs.
const (
	ServiceIPTypeClusterIP      ServiceIPType = "ClusterIP"
	ServiceIPTypeLoadBalancerIP ServiceIPType = "LoadBalancerIP"
	ServiceIPTypeExternalIP     ServiceIPType = "ExternalIP"
)

// ServiceAdvertisement lists the kinds of Service IPs advertised.
type ServiceAdvertisement struct {
	// IPTypes are the kinds of Service IPs advertised, each as a host route.
	// +optional
	IPTypes []ServiceIPType `json:"ipTypes,omitempty"`
}

// PodAdvertisement advertises the Node's Pod CIDRs (Node IPAM).
type PodAdvertisement struct{}

// EgressAdvertisement advertises the Egress IPs the Node holds.
type EgressAdvertisement struct{}

// BGPPeer is a remote BGP speaker.
type BGPPeer struct {
	// Address is the peer's IP address.
	Address string `json:"address"`
	// Port is the peer's TCP port (default 179).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=179
	// +optional
	Port *int32 `json:"port,omitempty"`
	// ASN is the peer's AS number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ASN int32 `json:"asn"`
	// MultihopTTL is the TTL of the BGP packets sent to the peer (default 1).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=255
	// +kubebuilder:default=1
	// +optional
	MultihopTTL *int32 `json:"multihopTTL,omitempty"`
	// GracefulRestartTimeSeconds is how long the peer keeps this speaker's
	// routes after the session went down (default 120).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=120
	// +optional
	GracefulRestartTimeSeconds *int32 `json:"gracefulRestartTimeSeconds,omitempty"`
	// KeepaliveTimeSeconds is the interval between two KEEPALIVEs sent to
	// the peer (the speaker's default, 30 s, when absent).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	KeepaliveTimeSeconds *int32 `json:"keepaliveTimeSeconds,omitempty"`
	// HoldTimeSeconds is how long the session lives without a message from
	// the peer (the speaker's default, 90 s, when absent).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	HoldTimeSeconds *int32 `json:"holdTimeSeconds,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// BGPPolicyList is a list of BGPPolicy.
type BGPPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []BGPPolicy `json:"items"`
}
