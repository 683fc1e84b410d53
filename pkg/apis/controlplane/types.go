package controlplane

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// PodReference names a Pod by namespace and name.
type PodReference struct {
	Name      string
	Namespace string
}

// NodeReference names a Node; Node members let cluster policies select Nodes later.
type NodeReference struct {
	Name string
}

// NamedPort is a container port with its name, so that a rule's named port
// can be resolved per member by the agent.
type NamedPort struct {
	Port     int32
	Name     string
	Protocol Protocol
}

// GroupMember is one endpoint of a group: a Pod (or Node) with its IPs and ports.
type GroupMember struct {
	// Pod is set when the member is a Pod.
	Pod *PodReference
	// Node is set when the member is a Node.
	Node *NodeReference
	// Service is set when the member is a Service (a policy applied to a
	// NodePort Service); Ports then are the Service's NodePorts, named by
	// the Service's port names.
	Service *ServiceReference
	// IPs are the member's addresses (4 or 16 bytes each).
	IPs []IPAddress
	// Ports are the member's named container ports.
	Ports []NamedPort
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AppliedToGroup is the set of members a policy (or rule) applies to.
type AppliedToGroup struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// GroupMembers are the members of the group; a watcher with a nodeName
	// selector only sees the members on its node.
	GroupMembers []GroupMember
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AppliedToGroupPatch is what a watcher receives when members of an
// AppliedToGroup change: only the difference.
type AppliedToGroupPatch struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	AddedGroupMembers   []GroupMember
	RemovedGroupMembers []GroupMember
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AppliedToGroupList is a list of AppliedToGroups.
type AppliedToGroupList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []AppliedToGroup
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AddressGroup is the set of addresses a rule's peer selects.
type AddressGroup struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	GroupMembers []GroupMember
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AddressGroupPatch is what a watcher receives when members of an
// AddressGroup change: only the difference.
type AddressGroupPatch struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	AddedGroupMembers   []GroupMember
	RemovedGroupMembers []GroupMember
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AddressGroupList is a list of AddressGroups.
type AddressGroupList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []AddressGroup
}

// NetworkPolicyType says which kind of user policy an internal policy comes from.
type NetworkPolicyType string

// The user-facing policy kinds an internal NetworkPolicy can be computed from.
const (
	K8sNetworkPolicy           NetworkPolicyType = "K8sNetworkPolicy"
	AntreaClusterNetworkPolicy NetworkPolicyType = "AntreaClusterNetworkPolicy"
	AntreaNetworkPolicy        NetworkPolicyType = "AntreaNetworkPolicy"
)

// NetworkPolicyReference points back to the user's policy.
type NetworkPolicyReference struct {
	Type NetworkPolicyType
	// Namespace is empty for cluster-scoped policies.
	Namespace string
	Name      string
	UID       types.UID
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkPolicy is the internal, computed form of a user policy. Its
// ObjectMeta.Generation increases whenever its content changes, so that
// agents can report which generation they realized.
type NetworkPolicy struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// Rules in order of precedence.
	Rules []NetworkPolicyRule
	// AppliedToGroups are the groups the whole policy applies to (empty when
	// AppliedToPerRule).
	AppliedToGroups []string
	// Priority orders policies within a tier (Antrea-native policies only).
	Priority *float64
	// TierPriority is the priority of the policy's tier (Antrea-native only).
	TierPriority *int32
	// SourceRef names the user policy this was computed from.
	SourceRef *NetworkPolicyReference
	// AppliedToPerRule is true when each rule carries its own AppliedToGroups.
	AppliedToPerRule bool
}

// Direction of a rule.
type Direction string

// Rule directions.
const (
	DirectionIn  Direction = "In"
	DirectionOut Direction = "Out"
)

// RuleAction is what a rule does with matching traffic.
type RuleAction string

// Rule actions; K8s NetworkPolicy rules are always Allow.
const (
	RuleActionAllow  RuleAction = "Allow"
	RuleActionDrop   RuleAction = "Drop"
	RuleActionReject RuleAction = "Reject"
	RuleActionPass   RuleAction = "Pass"
)

// NetworkPolicyRule is one rule of a policy.
type NetworkPolicyRule struct {
	Direction Direction
	// From is the peer of an ingress rule.
	From NetworkPolicyPeer
	// To is the peer of an egress rule.
	To NetworkPolicyPeer
	// Services are the allowed ports; empty means every port.
	Services []Service
	// Priority orders rules inside a policy (lower first).
	Priority int32
	// Action is nil for K8s NetworkPolicy rules, meaning Allow.
	Action *RuleAction
	// EnableLogging asks the agent to log matching traffic (native policies).
	EnableLogging bool
	// AppliedToGroups is used when the policy's AppliedToPerRule is true.
	AppliedToGroups []string
	// Name of the rule (native policies); unique within the policy.
	Name string
	// LogLabel is the user's string for the rule's audit log lines.
	LogLabel string
	// L7Protocols, when set, make an Allow rule a layer-7 rule: the
	// agent steers the connections the rule's L3/L4 part matches through
	// its layer-7 engine, which lets through the requests one of these
	// matches and denies the rest (HTTP 403, TLS reset).
	L7Protocols []L7Protocol
}

// L7Protocol is one layer-7 match of a rule: exactly one of HTTP and TLS.
type L7Protocol struct {
	HTTP *HTTPProtocol
	TLS  *TLSProtocol
}

// HTTPProtocol matches HTTP requests; an empty field matches everything.
// Host and Path are globs ("*" matches any run of characters), Method is
// exact (upper case).
type HTTPProtocol struct {
	Host   string
	Method string
	Path   string
}

// TLSProtocol matches a TLS ClientHello's server name (SNI), a glob; empty
// matches every handshake.
type TLSProtocol struct {
	SNI string
}

// NetworkPolicyPeer selects the other side of a rule.
type NetworkPolicyPeer struct {
	AddressGroups []string
	IPBlocks      []IPBlock
	// ToServices (egress only) matches traffic to these Services' ClusterIPs
	// and ports, before AntreaProxy's DNAT.
	ToServices []ServiceReference
	// FQDNs (egress only) are domain names and "*" patterns, lower case
	// without a trailing dot: the agent matches them against the DNS
	// answers its Pods receive and the rule selects the addresses learned.
	FQDNs []string
}

// ServiceReference names a Service.
type ServiceReference struct {
	Name      string
	Namespace string
}

// IPBlock is a CIDR with optional exceptions.
type IPBlock struct {
	CIDR   IPNet
	Except []IPNet
}

// IPAddress is an IPv4 or IPv6 address in network byte order.
type IPAddress []byte

// IPNet is an address with a prefix length.
type IPNet struct {
	IP           IPAddress
	PrefixLength int32
}

// Protocol is an L4 protocol name.
type Protocol string

// Supported protocols.
const (
	ProtocolTCP  Protocol = "TCP"
	ProtocolUDP  Protocol = "UDP"
	ProtocolSCTP Protocol = "SCTP"
	ProtocolICMP Protocol = "ICMP"
	ProtocolIGMP Protocol = "IGMP"
)

// Service is a protocol and a port (number or name) or port range.
type Service struct {
	// Protocol defaults to TCP when nil.
	Protocol *Protocol
	// Port is a number or a named port; nil means all ports.
	Port *intstr.IntOrString
	// EndPort, with a numeric Port, makes a range [Port, EndPort].
	EndPort *int32
	// SrcPort, with SrcEndPort a range [SrcPort, SrcEndPort], restricts the
	// source port (TCP, UDP, SCTP).
	SrcPort    *int32
	SrcEndPort *int32
	// ICMPType and ICMPCode apply when Protocol is ICMP; nil matches any.
	ICMPType *int32
	ICMPCode *int32
	// IGMPType and GroupAddress apply when Protocol is IGMP.
	IGMPType     *int32
	GroupAddress string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkPolicyList is a list of NetworkPolicies.
type NetworkPolicyList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []NetworkPolicy
}

// NetworkPolicyNodeStatus is one node's realization of a policy.
type NetworkPolicyNodeStatus struct {
	NodeName string
	// Generation is the policy generation the node realized.
	Generation int64
	// RealizationFailure is true when the agent failed to realize it.
	RealizationFailure bool
	// Message explains a failure.
	Message string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkPolicyStatus is what an agent posts to networkpolicies/status.
type NetworkPolicyStatus struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Nodes []NetworkPolicyNodeStatus
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeStatsSummary is what an agent reports every collection interval: the
// traffic its Node's policy rules saw since the previous report.
type NodeStatsSummary struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// NetworkPolicies are the K8s NetworkPolicies' statistics.
	NetworkPolicies []NetworkPolicyStats
	// AntreaClusterNetworkPolicies are the Antrea ClusterNetworkPolicies' statistics.
	AntreaClusterNetworkPolicies []NetworkPolicyStats
	// AntreaNetworkPolicies are the Antrea NetworkPolicies' statistics.
	AntreaNetworkPolicies []NetworkPolicyStats
	// Multicast are the multicast groups the Node's Pods joined, at the
	// time of the report (each report replaces the Node's previous one).
	Multicast []MulticastGroupInfo
}

// MulticastGroupInfo is a multicast group and the Pods of one Node that
// joined it.
type MulticastGroupInfo struct {
	// Group is the group's IP address.
	Group string
	// Pods are the Node's Pods that joined it.
	Pods []PodReference
}

// NetworkPolicyStats are one policy's counters on one Node, in total and
// per named rule, since the previous report.
type NetworkPolicyStats struct {
	NetworkPolicy    NetworkPolicyReference
	TrafficStats     statsv1alpha1.TrafficStats
	RuleTrafficStats []statsv1alpha1.RuleTrafficStats
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EgressGroup is the set of Pods an Egress applies to; it has the Egress's
// name. A watcher with a nodeName selector sees the members on its Node
// only; a watcher without one sees every member.
type EgressGroup struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	GroupMembers []GroupMember
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EgressGroupPatch is what a watcher receives when members of an
// EgressGroup change: only the difference.
type EgressGroupPatch struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	AddedGroupMembers   []GroupMember
	RemovedGroupMembers []GroupMember
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EgressGroupList is a list of EgressGroups.
type EgressGroupList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []EgressGroup
}
