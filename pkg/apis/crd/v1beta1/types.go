package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// +genclient
// +genclient:nonNamespaced
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tr
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=".spec.priority",description="The Priority of this Tier relative to other Tiers."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"

// Tier groups Antrea-native policies: every policy of a Tier with a lower
// priority value is evaluated before any policy of a Tier with a higher one.
// antrea-controller creates the static Tiers (StaticTiers) at start.
type Tier struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TierSpec `json:"spec"`
}

// TierSpec is the order of a Tier among Tiers.
type TierSpec struct {
	// Priority orders the Tier relative to other Tiers: lower is evaluated
	// first. Two Tiers never share a priority, and it cannot be updated.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	Priority int32 `json:"priority"`
	// Description says what the Tier is for.
	// +optional
	Description string `json:"description,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// TierList is a list of Tiers.
type TierList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Tier `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=acnp
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Tier",type=string,JSONPath=".spec.tier",description="The Tier to which this ClusterNetworkPolicy belongs to."
// +kubebuilder:printcolumn:name="Priority",type=number,format=float,JSONPath=".spec.priority",description="The Priority of this ClusterNetworkPolicy relative to other policies."
// +kubebuilder:printcolumn:name="Desired Nodes",type=number,format=int32,JSONPath=".status.desiredNodesRealized",description="The total number of Nodes that should realize the NetworkPolicy."
// +kubebuilder:printcolumn:name="Current Nodes",type=number,format=int32,JSONPath=".status.currentNodesRealized",description="The number of Nodes that have realized the NetworkPolicy."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"

// ClusterNetworkPolicy (ACNP) is a cluster-scoped Antrea-native policy: it
// selects workloads in any Namespace and is evaluated, by Tier, policy
// priority and rule order, before K8s NetworkPolicies (after them in the
// baseline Tier).
type ClusterNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterNetworkPolicySpec `json:"spec"`
	// +optional
	Status NetworkPolicyStatus `json:"status"`
}

// ClusterNetworkPolicySpec is what a ClusterNetworkPolicy selects and does.
type ClusterNetworkPolicySpec struct {
	// Tier is the name of the Tier the policy belongs to; empty means the
	// "application" Tier (the admission webhook writes it in).
	// +optional
	Tier string `json:"tier,omitempty"`
	// Priority orders the policy among the policies of its Tier: lower is
	// evaluated first.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Priority float64 `json:"priority"`
	// AppliedTo selects the workloads the rules apply to. Either it or the
	// appliedTo of every rule is set, never both.
	// +optional
	AppliedTo []AppliedTo `json:"appliedTo,omitempty"`
	// Ingress rules, evaluated in order.
	// +optional
	Ingress []Rule `json:"ingress,omitempty"`
	// Egress rules, evaluated in order.
	// +optional
	Egress []Rule `json:"egress,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ClusterNetworkPolicyList is a list of ClusterNetworkPolicies.
type ClusterNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterNetworkPolicy `json:"items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=annp
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Tier",type=string,JSONPath=".spec.tier",description="The Tier to which this Antrea NetworkPolicy belongs to."
// +kubebuilder:printcolumn:name="Priority",type=number,format=float,JSONPath=".spec.priority",description="The Priority of this Antrea NetworkPolicy relative to other policies."
// +kubebuilder:printcolumn:name="Desired Nodes",type=number,format=int32,JSONPath=".status.desiredNodesRealized",description="The total number of Nodes that should realize the NetworkPolicy."
// +kubebuilder:printcolumn:name="Current Nodes",type=number,format=int32,JSONPath=".status.currentNodesRealized",description="The number of Nodes that have realized the NetworkPolicy."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"

// NetworkPolicy (ANNP) is a Namespaced Antrea-native policy: like a
// ClusterNetworkPolicy whose selectors stay inside its Namespace.
type NetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NetworkPolicySpec `json:"spec"`
	// +optional
	Status NetworkPolicyStatus `json:"status"`
}

// NetworkPolicySpec is what an Antrea NetworkPolicy selects and does.
type NetworkPolicySpec struct {
	// Tier is the name of the Tier the policy belongs to; empty means the
	// "application" Tier (the admission webhook writes it in).
	// +optional
	Tier string `json:"tier,omitempty"`
	// Priority orders the policy among the policies of its Tier: lower is
	// evaluated first.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Priority float64 `json:"priority"`
	// AppliedTo selects the workloads of the policy's Namespace the rules
	// apply to. Either it or the appliedTo of every rule is set, never both.
	// +optional
	AppliedTo []AppliedTo `json:"appliedTo,omitempty"`
	// Ingress rules, evaluated in order.
	// +optional
	Ingress []Rule `json:"ingress,omitempty"`
	// Egress rules, evaluated in order.
	// +optional
	Egress []Rule `json:"egress,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// NetworkPolicyList is a list of Antrea NetworkPolicies.
type NetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NetworkPolicy `json:"items"`
}

// NetworkPolicyPhase summarizes the realization of a policy.
type NetworkPolicyPhase string

// The phases of a policy.
const (
	// NetworkPolicyPending: accepted, not yet processed by antrea-controller.
	NetworkPolicyPending NetworkPolicyPhase = "Pending"
	// NetworkPolicyRealizing: computed, not yet realized on every Node of its span.
	NetworkPolicyRealizing NetworkPolicyPhase = "Realizing"
	// NetworkPolicyRealized: realized on every Node of its span.
	NetworkPolicyRealized NetworkPolicyPhase = "Realized"
	// NetworkPolicyFailed: at least one Node failed to realize it.
	NetworkPolicyFailed NetworkPolicyPhase = "Failed"
)

// NetworkPolicyConditionType is the type of a policy condition.
type NetworkPolicyConditionType string

// The condition types of a policy.
const (
	// NetworkPolicyConditionRealizable: whether the policy can be realized
	// (and, in the message, why not: a missing group, ...).
	NetworkPolicyConditionRealizable NetworkPolicyConditionType = "Realizable"
	// NetworkPolicyConditionRealizationFailure: a Node failed to realize it.
	NetworkPolicyConditionRealizationFailure NetworkPolicyConditionType = "RealizationFailure"
)

// NetworkPolicyCondition is one observation of a policy's state.
type NetworkPolicyCondition struct {
	Type   NetworkPolicyConditionType `json:"type"`
	Status metav1.ConditionStatus     `json:"status"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// NetworkPolicyStatus is the realization of a policy, written by
// antrea-controller from the agents' reports.
type NetworkPolicyStatus struct {
	// +optional
	Phase NetworkPolicyPhase `json:"phase"`
	// ObservedGeneration is the generation of the spec the status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`
	// CurrentNodesRealized is the number of Nodes that realized the policy.
	// +optional
	CurrentNodesRealized int32 `json:"currentNodesRealized"`
	// DesiredNodesRealized is the number of Nodes that should realize it.
	// +optional
	DesiredNodesRealized int32 `json:"desiredNodesRealized"`
	// +optional
	Conditions []NetworkPolicyCondition `json:"conditions"`
}

// Rule matches traffic of the applied-to workloads by peer, port and
// protocol, and applies its action to the first match in rule order.
// The field order is upstream's: the generated rule names hash the rule's
// JSON, so the same rule gets upstream's name.
type Rule struct {
	// Action is applied to matching traffic: Allow, Drop, Reject (Drop and
	// tell the client: TCP RST or ICMP) or Pass (skip the remaining
	// Antrea-native policies; K8s NetworkPolicy, then baseline, decide).
	Action *RuleAction `json:"action"`
	// Ports matches destination (and source) ports. With protocols unset
	// too, every port of every protocol matches.
	// +optional
	Ports []NetworkPolicyPort `json:"ports,omitempty"`
	// Protocols matches protocols without ports (ICMP, IGMP).
	// +optional
	Protocols []NetworkPolicyProtocol `json:"protocols,omitempty"`
	// L7Protocols makes an Allow rule a layer 7 rule: of the TCP traffic
	// its L3/L4 part matches, the agent's layer 7 engine lets through the
	// HTTP requests and TLS handshakes one entry matches and denies the
	// rest (HTTP 403, TLS connection reset); other traffic is dropped.
	// +optional
	L7Protocols []L7Protocol `json:"l7Protocols,omitempty"`
	// From are the sources of an ingress rule; empty matches all sources.
	// +optional
	From []NetworkPolicyPeer `json:"from,omitempty"`
	// To are the destinations of an egress rule; empty (with toServices
	// empty) matches all destinations.
	// +optional
	To []NetworkPolicyPeer `json:"to,omitempty"`
	// ToServices matches egress traffic to these Services (ClusterIPs);
	// not with to, ports or protocols.
	// +optional
	ToServices []PeerService `json:"toServices,omitempty"`
	// Name says what the rule is for; unique in the policy. When empty the
	// admission webhook writes ingress|egress-<action>-<hash of the rule>.
	// +optional
	Name string `json:"name,omitempty"`
	// EnableLogging logs the connections the rule matches (audit log).
	// +optional
	EnableLogging bool `json:"enableLogging"`
	// LogLabel is a string added to the rule's audit log lines.
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$`
	// +optional
	LogLabel string `json:"logLabel,omitempty"`
	// AppliedTo selects the workloads this rule applies to, when the policy
	// has no appliedTo.
	// +optional
	AppliedTo []AppliedTo `json:"appliedTo,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="!(has(self.namespaces) && has(self.namespaceSelector))",message="namespaces and namespaceSelector cannot be set at the same time"

// NetworkPolicyPeer selects the workloads or addresses on the other side of
// a rule. Exactly one kind of selection is set, except that podSelector
// combines with namespaceSelector or namespaces.
type NetworkPolicyPeer struct {
	// IPBlock matches addresses of a CIDR, less its except CIDRs.
	// +optional
	IPBlock *IPBlock `json:"ipBlock,omitempty"`
	// PodSelector selects Pods (in the policy's Namespace for an Antrea
	// NetworkPolicy, in every Namespace for a ClusterNetworkPolicy, unless
	// namespaceSelector or namespaces restricts it).
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// NamespaceSelector selects the Pods of matching Namespaces.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// Namespaces selects Namespaces relative to the applied-to workload's
	// own (ClusterNetworkPolicy only).
	// +optional
	Namespaces *PeerNamespaces `json:"namespaces,omitempty"`
	// ExternalEntitySelector is upstream's; not supported by this Antrea
	// (refused at admission).
	// +optional
	ExternalEntitySelector *metav1.LabelSelector `json:"externalEntitySelector,omitempty"`
	// Group is the name of a ClusterGroup (or, in an Antrea NetworkPolicy,
	// a Group of its Namespace), alone.
	// +optional
	Group string `json:"group,omitempty"`
	// FQDN (egress only, alone) selects the addresses a domain name
	// resolves to in the DNS answers the applied-to Pods receive: an exact
	// name ("api.example.com") or a pattern with "*" wildcards
	// ("*.example.com"), matched case-insensitively, a trailing dot ignored.
	// +optional
	FQDN string `json:"fqdn,omitempty"`
	// ServiceAccount selects the Pods that run as it, alone.
	// +optional
	ServiceAccount *NamespacedName `json:"serviceAccount,omitempty"`
	// NodeSelector selects Nodes (their IPs), alone.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Scope is upstream's multi-cluster scope; only Cluster (the default)
	// is supported.
	// +optional
	Scope PeerScope `json:"scope,omitempty"`
}

// AppliedTo selects the workloads a policy or rule applies to. Exactly one
// kind of selection is set, except that podSelector combines with
// namespaceSelector.
type AppliedTo struct {
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// ExternalEntitySelector is upstream's; not supported by this Antrea.
	// +optional
	ExternalEntitySelector *metav1.LabelSelector `json:"externalEntitySelector,omitempty"`
	// Group is the name of a ClusterGroup (or Group), alone.
	// +optional
	Group string `json:"group,omitempty"`
	// ServiceAccount selects the Pods that run as it, alone.
	// +optional
	ServiceAccount *NamespacedName `json:"serviceAccount,omitempty"`
	// Service selects a NodePort Service, alone, in a policy with ingress
	// rules only whose peers are ipBlocks.
	// +optional
	Service *NamespacedName `json:"service,omitempty"`
	// NodeSelector selects Nodes (Node policies), alone.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="!(has(self.match) && has(self.sameLabels))",message="only one of match and sameLabels can be set"

// PeerNamespaces selects Namespaces relative to the applied-to workload's.
type PeerNamespaces struct {
	// Match Self selects the applied-to workload's own Namespace.
	// +optional
	Match NamespaceMatchType `json:"match,omitempty"`
	// SameLabels selects the Namespaces that have the same values as the
	// applied-to workload's Namespace for all of these label keys.
	// +optional
	SameLabels []string `json:"sameLabels,omitempty"`
}

// NamespaceMatchType is how namespaces.match selects Namespaces.
// +kubebuilder:validation:Enum=Self
type NamespaceMatchType string

// NamespaceMatchSelf selects the applied-to workload's own Namespace.
const NamespaceMatchSelf NamespaceMatchType = "Self"

// PeerScope is the scope of a peer's selectors.
// +kubebuilder:validation:Enum=Cluster;ClusterSet
type PeerScope string

// The scopes of a peer.
const (
	ScopeCluster    PeerScope = "Cluster"
	ScopeClusterSet PeerScope = "ClusterSet"
)

// IPBlock is a CIDR less some CIDRs inside it.
type IPBlock struct {
	// CIDR such as 192.168.1.0/24 or 2001:db8::/64.
	CIDR string `json:"cidr"`
	// Except are CIDRs strictly inside cidr that do not match.
	// +optional
	Except []string `json:"except,omitempty"`
}

// endPort is checked by the admission webhook: a CEL rule on the
// int-or-string port exceeds kube-apiserver's cost budget.
// +kubebuilder:validation:XValidation:rule="!has(self.sourceEndPort) || (has(self.sourcePort) && self.sourceEndPort >= self.sourcePort)",message="sourceEndPort needs sourcePort and must not be less than it",fieldPath=".sourceEndPort"

// NetworkPolicyPort matches a protocol and destination (and source) ports.
type NetworkPolicyPort struct {
	// Protocol is TCP (the default), UDP or SCTP.
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	// +optional
	Protocol *corev1.Protocol `json:"protocol,omitempty"`
	// Port is a port number or a named container port; unset matches all.
	// +optional
	Port *intstr.IntOrString `json:"port,omitempty"`
	// EndPort makes port..endPort an inclusive range (numerical port only).
	// +optional
	EndPort *int32 `json:"endPort,omitempty"`
	// SourcePort is a source port number.
	// +optional
	SourcePort *int32 `json:"sourcePort,omitempty"`
	// SourceEndPort makes sourcePort..sourceEndPort an inclusive range.
	// +optional
	SourceEndPort *int32 `json:"sourceEndPort,omitempty"`
}

// RuleAction is what a rule does with the traffic it matches.
// +kubebuilder:validation:Enum=Allow;Drop;Reject;Pass
type RuleAction string

// The rule actions.
const (
	RuleActionAllow RuleAction = "Allow"
	RuleActionDrop  RuleAction = "Drop"
	// RuleActionPass skips the remaining Antrea-native policies: K8s
	// NetworkPolicy decides, then the baseline Tier.
	RuleActionPass RuleAction = "Pass"
	// RuleActionReject drops and answers with a TCP RST or an ICMP
	// administratively-prohibited.
	RuleActionReject RuleAction = "Reject"
)

// IGMP message types (RFC 3376 §4; RFC 2236 §2.1; RFC 1112 appendix I).
const (
	IGMPQuery    int32 = 0x11
	IGMPReportV1 int32 = 0x12
	IGMPReportV2 int32 = 0x16
	IGMPReportV3 int32 = 0x22
)

// NamespacedName names a Namespaced object.
type NamespacedName struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// PeerService names a Service (toServices).
type PeerService struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Scope: only Cluster (the default) is supported.
	// +optional
	Scope PeerScope `json:"scope,omitempty"`
}

// NetworkPolicyProtocol is a protocol without ports; exactly one is set.
type NetworkPolicyProtocol struct {
	// +optional
	ICMP *ICMPProtocol `json:"icmp,omitempty"`
	// +optional
	IGMP *IGMPProtocol `json:"igmp,omitempty"`
}

// ICMPProtocol matches ICMP by type and code; unset fields match all.
type ICMPProtocol struct {
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +optional
	ICMPType *int32 `json:"icmpType,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +optional
	ICMPCode *int32 `json:"icmpCode,omitempty"`
}

// IGMPProtocol matches IGMP by type (a query in ingress rules, a report in
// egress rules) and multicast group; an empty group matches all.
type IGMPProtocol struct {
	// +optional
	IGMPType *int32 `json:"igmpType,omitempty"`
	// +optional
	GroupAddress string `json:"groupAddress,omitempty"`
}

// L7Protocol is one layer 7 match: http or tls.
type L7Protocol struct {
	// +optional
	HTTP *HTTPProtocol `json:"http,omitempty"`
	// +optional
	TLS *TLSProtocol `json:"tls,omitempty"`
}

// HTTPProtocol matches HTTP requests: host and path are globs ("*" matches
// any run of characters), method is exact; an empty field matches all.
type HTTPProtocol struct {
	// +optional
	Host string `json:"host,omitempty"`
	// +optional
	Method string `json:"method,omitempty"`
	// +optional
	Path string `json:"path,omitempty"`
}

// TLSProtocol matches a TLS ClientHello's server name (SNI), a glob; empty
// matches every handshake.
type TLSProtocol struct {
	// +optional
	SNI string `json:"sni,omitempty"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cg
// +kubebuilder:subresource:status

// ClusterGroup is a named set of workloads or addresses that policies of
// any Namespace reference by name (appliedTo, from, to: group).
type ClusterGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec GroupSpec `json:"spec"`
	// +optional
	Status GroupStatus `json:"status"`
}

// GroupSpec is what a ClusterGroup or Group holds: one kind of selection
// (podSelector and namespaceSelector combine).
type GroupSpec struct {
	// PodSelector selects Pods (of every Namespace for a ClusterGroup, of the
	// Group's Namespace for a Group, unless namespaceSelector restricts it).
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// NamespaceSelector selects the Pods of matching Namespaces.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// NodeSelector selects Nodes, alone.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// IPBlocks are CIDRs (not in an appliedTo), alone.
	// +optional
	IPBlocks []IPBlock `json:"ipBlocks,omitempty"`
	// ServiceReference selects the endpoints of a Service, alone.
	// +optional
	ServiceReference *NamespacedName `json:"serviceReference,omitempty"`
	// ExternalEntitySelector is upstream's; not supported by this Antrea.
	// +optional
	ExternalEntitySelector *metav1.LabelSelector `json:"externalEntitySelector,omitempty"`
	// ChildGroups are other groups (ClusterGroups, or Groups of the same
	// Namespace) whose members this one holds, alone. One level only: a
	// child has no childGroups and a parent is no child.
	// +optional
	ChildGroups []ClusterGroupReference `json:"childGroups,omitempty"`
}

// GroupConditionType is the type of a group condition.
type GroupConditionType string

// GroupMembersComputed says whether antrea-controller computed the members.
const GroupMembersComputed GroupConditionType = "GroupMembersComputed"

// GroupCondition is one observation of a group's state.
type GroupCondition struct {
	Type   GroupConditionType     `json:"type"`
	Status corev1.ConditionStatus `json:"status"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// GroupStatus is the state of a group, written by antrea-controller.
type GroupStatus struct {
	// +optional
	Conditions []GroupCondition `json:"conditions,omitempty"`
}

// ClusterGroupReference is the name of a group.
type ClusterGroupReference string

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ClusterGroupList is a list of ClusterGroups.
type ClusterGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterGroup `json:"items,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=grp
// +kubebuilder:subresource:status

// Group is a Namespaced group that the Antrea NetworkPolicies of its
// Namespace reference by name.
type Group struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec GroupSpec `json:"spec"`
	// +optional
	Status GroupStatus `json:"status"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// GroupList is a list of Groups.
type GroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Group `json:"items,omitempty"`
}
