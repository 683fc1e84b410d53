package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	statsv1alpha1 "antrea.io/antrea/pkg/apis/stats/v1alpha1"
)

// PodReference names a Pod by namespace and name.
type PodReference struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// NodeReference names a Node.
type NodeReference struct {
	Name string `json:"name,omitempty"`
}

// NamedPort is a container port with its name.
type NamedPort struct {
	Port     int32    `json:"port,omitempty"`
	Name     string   `json:"name,omitempty"`
	Protocol Protocol `json:"protocol,omitempty"`
}

// GroupMember is one endpoint of a group: a Pod (or Node) with its IPs and ports.
type GroupMember struct {
	Pod  *PodReference  `json:"pod,omitempty"`
	Node *NodeReference `json:"node,omitempty"`
	// Service is set when the member is a Service (a policy applied to a
	// NodePort Service); Ports then are the Service's NodePorts.
	Service *ServiceReference `json:"service,omitempty"`
	IPs     []IPAddress       `json:"ips,omitempty"`
	Ports   []NamedPort       `json:"ports,omitempty"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=list,get,watch
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AppliedToGroup is the set of members a policy (or rule) applies to.
type AppliedToGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	GroupMembers      []GroupMember `json:"groupMembers,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AppliedToGroupPatch carries the members added to and removed from an AppliedToGroup.
type AppliedToGroupPatch struct {
	metav1.TypeMeta     `json:",inline"`
	metav1.ObjectMeta   `json:"metadata,omitempty"`
	AddedGroupMembers   []GroupMember `json:"addedGroupMembers,omitempty"`
	RemovedGroupMembers []GroupMember `json:"removedGroupMembers,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AppliedToGroupList is a list of AppliedToGroups.
type AppliedToGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AppliedToGroup `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=list,get,watch
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AddressGroup is the set of addresses a rule's peer selects.
type AddressGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	GroupMembers      []GroupMember `json:"groupMembers,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AddressGroupPatch carries the members added to and removed from an AddressGroup.
type AddressGroupPatch struct {
	metav1.TypeMeta     `json:",inline"`
	metav1.ObjectMeta   `json:"metadata,omitempty"`
	AddedGroupMembers   []GroupMember `json:"addedGroupMembers,omitempty"`
	RemovedGroupMembers []GroupMember `json:"removedGroupMembers,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AddressGroupList is a list of AddressGroups.
type AddressGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AddressGroup `json:"items"`
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
	Type      NetworkPolicyType `json:"type,omitempty"`
	Namespace string            `json:"namespace,omitempty"`
	Name      string            `json:"name,omitempty"`
	UID       types.UID         `json:"uid,omitempty"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=list,get,watch
// +genclient:method=UpdateStatus,verb=create,subresource=status,input=NetworkPolicyStatus,result=NetworkPolicyStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkPolicy is the computed form of a user policy; metadata.generation
// increases whenever its content changes.
type NetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Rules             []NetworkPolicyRule     `json:"rules,omitempty"`
	AppliedToGroups   []string                `json:"appliedToGroups,omitempty"`
	Priority          *float64                `json:"priority,omitempty"`
	TierPriority      *int32                  `json:"tierPriority,omitempty"`
	SourceRef         *NetworkPolicyReference `json:"sourceRef,omitempty"`
	AppliedToPerRule  bool                    `json:"appliedToPerRule,omitempty"`
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
	Direction       Direction         `json:"direction"`
	From            NetworkPolicyPeer `json:"from,omitempty"`
	To              NetworkPolicyPeer `json:"to,omitempty"`
	Services        []Service         `json:"services,omitempty"`
	Priority        int32             `json:"priority,omitempty"`
	Action          *RuleAction       `json:"action,omitempty"`
	EnableLogging   bool              `json:"enableLogging,omitempty"`
	AppliedToGroups []string          `json:"appliedToGroups,omitempty"`
	Name            string            `json:"name,omitempty"`
	// LogLabel is the user's string for the rule's audit log lines.
	LogLabel string `json:"logLabel,omitempty"`
	// L7Protocols, when set, make an Allow rule a layer-7 rule: the
	// agent's layer-7 engine lets through the requests one of these
	// matches and denies the rest of the traffic the rule matches.
	L7Protocols []L7Protocol `json:"l7Protocols,omitempty"`
}

// L7Protocol is one layer-7 match of a rule: exactly one of HTTP and TLS.
type L7Protocol struct {
	HTTP *HTTPProtocol `json:"http,omitempty"`
	TLS  *TLSProtocol  `json:"tls,omitempty"`
}

// HTTPProtocol matches HTTP requests; an empty field matches everything.
// Host and Path are globs ("*" matches any run of characters), Method is
// exact.
type HTTPProtocol struct {
	Host   string `json:"host,omitempty"`
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
}

// TLSProtocol matches a TLS ClientHello's server name (SNI), a glob; empty
// matches every handshake.
type TLSProtocol struct {
	SNI string `json:"sni,omitempty"`
}

// NetworkPolicyPeer selects the other side of a rule.
type NetworkPolicyPeer struct {
	AddressGroups []string  `json:"addressGroups,omitempty"`
	IPBlocks      []IPBlock `json:"ipBlocks,omitempty"`
	// ToServices (egress only) matches traffic to these Services' ClusterIPs
	// and ports, before AntreaProxy's DNAT.
	ToServices []ServiceReference `json:"toServices,omitempty"`
	// FQDNs (egress only) are domain names and "*" patterns, lower case
	// without a trailing dot: the agent matches them against the DNS
	// answers its Pods receive and the rule selects the addresses learned.
	FQDNs []string `json:"fqdns,omitempty"`
}

// ServiceReference names a Service.
type ServiceReference struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// IPBlock is a CIDR with optional exceptions.
type IPBlock struct {
	CIDR   IPNet   `json:"cidr"`
	Except []IPNet `json:"except,omitempty"`
}

// IPAddress is an IPv4 or IPv6 address in network byte order (base64 in JSON).
type IPAddress []byte

// IPNet is an address with a prefix length.
type IPNet struct {
	IP           IPAddress `json:"ip,omitempty"`
	PrefixLength int32     `json:"prefixLength,omitempty"`
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
	Protocol *Protocol           `json:"protocol,omitempty"`
	Port     *intstr.IntOrString `json:"port,omitempty"`
	EndPort  *int32              `json:"endPort,omitempty"`
	// SrcPort, with SrcEndPort a range, restricts the source port.
	SrcPort    *int32 `json:"srcPort,omitempty"`
	SrcEndPort *int32 `json:"srcEndPort,omitempty"`
	ICMPType   *int32 `json:"icmpType,omitempty"`
	ICMPCode   *int32 `json:"icmpCode,omitempty"`
	// IGMPType and GroupAddress apply when Protocol is IGMP.
	IGMPType     *int32 `json:"igmpType,omitempty"`
	GroupAddress string `json:"groupAddress,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkPolicyList is a list of NetworkPolicies.
type NetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkPolicy `json:"items"`
}

// NetworkPolicyNodeStatus is one node's realization of a policy.
type NetworkPolicyNodeStatus struct {
	NodeName           string `json:"nodeName,omitempty"`
	Generation         int64  `json:"generation,omitempty"`
	RealizationFailure bool   `json:"realizationFailure,omitempty"`
	Message            string `json:"message,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NetworkPolicyStatus is what an agent posts to networkpolicies/{name}/status.
type NetworkPolicyStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Nodes             []NetworkPolicyNodeStatus `json:"nodes,omitempty"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeStatsSummary is what an agent posts to nodestatssummaries every
// collection interval: the traffic its Node's policy rules saw since the
// previous report. Its name is the Node's.
type NodeStatsSummary struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// NetworkPolicies are the K8s NetworkPolicies' statistics.
	NetworkPolicies []NetworkPolicyStats `json:"networkPolicies,omitempty"`
	// AntreaClusterNetworkPolicies are the Antrea ClusterNetworkPolicies' statistics.
	AntreaClusterNetworkPolicies []NetworkPolicyStats `json:"antreaClusterNetworkPolicies,omitempty"`
	// AntreaNetworkPolicies are the Antrea NetworkPolicies' statistics.
	AntreaNetworkPolicies []NetworkPolicyStats `json:"antreaNetworkPolicies,omitempty"`
	// Multicast are the multicast groups the Node's Pods joined, at the
	// time of the report (each report replaces the Node's previous one).
	Multicast []MulticastGroupInfo `json:"multicast,omitempty"`
}

// MulticastGroupInfo is a multicast group and the Pods of one Node that
// joined it.
type MulticastGroupInfo struct {
	// Group is the group's IP address.
	Group string `json:"group,omitempty"`
	// Pods are the Node's Pods that joined it.
	Pods []PodReference `json:"pods,omitempty"`
}

// NetworkPolicyStats are one policy's counters on one Node, in total and
// per named rule, since the previous report.
type NetworkPolicyStats struct {
	NetworkPolicy    NetworkPolicyReference           `json:"networkPolicy,omitempty"`
	TrafficStats     statsv1alpha1.TrafficStats       `json:"trafficStats,omitempty"`
	RuleTrafficStats []statsv1alpha1.RuleTrafficStats `json:"ruleTrafficStats,omitempty"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=list,get,watch
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EgressGroup is the set of Pods an Egress (crd.antrea.io) applies to; its
// name is the Egress's. An agent that watches with fieldSelector
// nodeName=<its Node> gets the Egresses with members on its Node and only
// those members; a watch without a nodeName gets every member.
type EgressGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	GroupMembers      []GroupMember `json:"groupMembers,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EgressGroupPatch carries the members added to and removed from an EgressGroup.
type EgressGroupPatch struct {
	metav1.TypeMeta     `json:",inline"`
	metav1.ObjectMeta   `json:"metadata,omitempty"`
	AddedGroupMembers   []GroupMember `json:"addedGroupMembers,omitempty"`
	RemovedGroupMembers []GroupMember `json:"removedGroupMembers,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// EgressGroupList is a list of EgressGroups.
type EgressGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EgressGroup `json:"items"`
}
