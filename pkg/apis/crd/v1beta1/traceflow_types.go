package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tf
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase",description="The phase of the Traceflow."
// +kubebuilder:printcolumn:name="Source-Pod",type=string,JSONPath=".spec.source.pod",description="The name of the source Pod."
// +kubebuilder:printcolumn:name="Destination-Pod",type=string,JSONPath=".spec.destination.pod",description="The name of the destination Pod."
// +kubebuilder:printcolumn:name="Destination-IP",type=string,JSONPath=".spec.destination.ip",description="The IP address of the destination."
// +kubebuilder:printcolumn:name="Live-Traffic",type=boolean,JSONPath=".spec.liveTraffic",description="Trace live traffic."
// +kubebuilder:printcolumn:name="Dropped-Only",type=boolean,JSONPath=".spec.droppedOnly",description="Capture only the dropped packet."
// +kubebuilder:printcolumn:name="Timeout",type=integer,JSONPath=".spec.timeout",description="Timeout in seconds."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"

// Traceflow traces one packet from a source Pod to a destination (a Pod, a
// Service or an IP) through the data plane of every Node it crosses. The
// antrea-controller validates it and gives it a data-plane tag; the agent of
// the source Pod's Node injects a packet carrying that tag (or tags the
// Pod's next matching packet, LiveTraffic), and every agent that sees the
// tagged packet reports what its pipeline did with it in Status.Results.
type Traceflow struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TraceflowSpec   `json:"spec,omitempty"`
	Status TraceflowStatus `json:"status,omitempty"`
}

// TraceflowSpec says which packet to trace.
type TraceflowSpec struct {
	Source      Source      `json:"source,omitempty"`
	Destination Destination `json:"destination,omitempty"`
	// Packet gives the headers of the injected packet (or the ones the
	// live packet must match).
	// +optional
	Packet Packet `json:"packet,omitempty"`
	// LiveTraffic traces the source Pod's next real packet that matches
	// instead of injecting one.
	// +optional
	LiveTraffic bool `json:"liveTraffic,omitempty"`
	// DroppedOnly (with LiveTraffic) reports only a packet that is dropped.
	// +optional
	DroppedOnly bool `json:"droppedOnly,omitempty"`
	// Timeout in seconds after which a Traceflow that has not completed
	// fails (default 20).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	// +optional
	Timeout int32 `json:"timeout,omitempty"`
}

// Source is where the traced packet comes from: a Pod (Namespace and Pod),
// or, for live traffic to a Pod, an IP.
type Source struct {
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	IP        string `json:"ip,omitempty"`
}

// Destination is where the traced packet goes: a Pod, a Service (its
// ClusterIP) or an IP.
type Destination struct {
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	Service   string `json:"service,omitempty"`
	IP        string `json:"ip,omitempty"`
}

// IPHeader are the IPv4 header fields of the packet.
type IPHeader struct {
	// Protocol is the IP protocol number (1 ICMP, 6 TCP, 17 UDP).
	// +optional
	Protocol int32 `json:"protocol,omitempty"`
	// TTL of the packet (default 64).
	// +optional
	TTL int32 `json:"ttl,omitempty"`
	// Flags of the IP header (2: don't fragment).
	// +optional
	Flags int32 `json:"flags,omitempty"`
}

// IPv6Header are the IPv6 header fields of the packet: a Traceflow with
// it traces an IPv6 packet (to the IPv6 address of a dual-stack destination
// Pod or Service).
type IPv6Header struct {
	// NextHeader is the protocol of the header after the IPv6 header (6 TCP,
	// 17 UDP, 58 ICMPv6; default 58, or the transport header's).
	// +optional
	NextHeader *int32 `json:"nextHeader,omitempty"`
	// HopLimit of the packet (default 64).
	// +optional
	HopLimit int32 `json:"hopLimit,omitempty"`
}

// TransportHeader is the transport header: one of ICMP, UDP, TCP.
type TransportHeader struct {
	ICMP *ICMPEchoRequestHeader `json:"icmp,omitempty"`
	UDP  *UDPHeader             `json:"udp,omitempty"`
	TCP  *TCPHeader             `json:"tcp,omitempty"`
}

// ICMPEchoRequestHeader is an ICMP echo request (ICMPv6's in an IPv6
// packet).
type ICMPEchoRequestHeader struct {
	ID       int32 `json:"id,omitempty"`
	Sequence int32 `json:"sequence,omitempty"`
}

// UDPHeader is a UDP header.
type UDPHeader struct {
	SrcPort int32 `json:"srcPort,omitempty"`
	DstPort int32 `json:"dstPort,omitempty"`
}

// TCPHeader is a TCP header.
type TCPHeader struct {
	SrcPort int32 `json:"srcPort,omitempty"`
	DstPort int32 `json:"dstPort,omitempty"`
	// Flags are the TCP flags (default 2: SYN).
	// +optional
	Flags *int32 `json:"flags,omitempty"`
}

// Packet describes a packet: the one to inject (spec) or the one captured
// (status, live traffic).
// +kubebuilder:validation:XValidation:rule="!(has(self.ipHeader) && has(self.ipv6Header))",message="ipHeader and ipv6Header are exclusive (ipHeader makes the packet IPv4, ipv6Header IPv6): give one"
type Packet struct {
	SrcIP string `json:"srcIP,omitempty"`
	DstIP string `json:"dstIP,omitempty"`
	// Length is the IP packet's total length.
	// +optional
	Length int32 `json:"length,omitempty"`
	// IPHeader makes the packet IPv4; it and IPv6Header are exclusive.
	// +optional
	IPHeader *IPHeader `json:"ipHeader,omitempty"`
	// IPv6Header makes the packet IPv6. Without either, the packet is of
	// the destination IP's family, else IPv4 when the source and the
	// destination have an IPv4 address (dual-stack), else IPv6.
	// +optional
	IPv6Header *IPv6Header `json:"ipv6Header,omitempty"`
	// +optional
	TransportHeader TransportHeader `json:"transportHeader,omitempty"`
}

// TraceflowPhase is where a Traceflow is.
type TraceflowPhase string

// Phases of a Traceflow.
const (
	// TraceflowRunning: validated, tagged, being traced.
	TraceflowRunning TraceflowPhase = "Running"
	// TraceflowSucceeded: the packet's fate is known (delivered, dropped,
	// rejected or forwarded out of the overlay).
	TraceflowSucceeded TraceflowPhase = "Succeeded"
	// TraceflowFailed: invalid, or timed out (Reason says which).
	TraceflowFailed TraceflowPhase = "Failed"
)

// TraceflowComponent is the part of the data plane an observation is from.
type TraceflowComponent string

// Components.
const (
	ComponentSpoofGuard    TraceflowComponent = "SpoofGuard"
	ComponentLB            TraceflowComponent = "LB"
	ComponentRouting       TraceflowComponent = "Routing"
	ComponentNetworkPolicy TraceflowComponent = "NetworkPolicy"
	ComponentForwarding    TraceflowComponent = "Forwarding"
	ComponentEgress        TraceflowComponent = "Egress"
)

// TraceflowAction is what a component did with the packet.
type TraceflowAction string

// Actions.
const (
	ActionDelivered             TraceflowAction = "Delivered"
	ActionReceived              TraceflowAction = "Received"
	ActionForwarded             TraceflowAction = "Forwarded"
	ActionDropped               TraceflowAction = "Dropped"
	ActionRejected              TraceflowAction = "Rejected"
	ActionForwardedOutOfOverlay TraceflowAction = "ForwardedOutOfOverlay"
)

// Roles of a Node in a Traceflow.
const (
	RoleSender   = "Sender"
	RoleReceiver = "Receiver"
)

// TraceflowStatus is the progress and the result of a Traceflow.
type TraceflowStatus struct {
	// +optional
	Phase TraceflowPhase `json:"phase,omitempty"`
	// Reason says why the Traceflow failed.
	// +optional
	Reason string `json:"reason,omitempty"`
	// StartTime is when the controller started it.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// DataplaneTag is the tag (6 bits of the IP DSCP field, 1..59: the
	// high bits of IPv4's TOS or of IPv6's traffic class) the traced
	// packet carries.
	// +optional
	DataplaneTag int8 `json:"dataplaneTag,omitempty"`
	// Results are the observations of each Node, one entry per Node.
	// +optional
	Results []NodeResult `json:"results,omitempty"`
	// CapturedPacket is the packet traced (live traffic).
	// +optional
	CapturedPacket *Packet `json:"capturedPacket,omitempty"`
}

// NodeResult is what one Node saw.
type NodeResult struct {
	// Node is the Node's name.
	Node string `json:"node,omitempty"`
	// Role is Sender or Receiver.
	Role string `json:"role,omitempty"`
	// Timestamp (Unix seconds) of the observations.
	Timestamp int64 `json:"timestamp,omitempty"`
	// Observations in the order the packet met them.
	Observations []Observation `json:"observations,omitempty"`
}

// Observation is one decision of the data plane on the packet.
type Observation struct {
	Component TraceflowComponent `json:"component,omitempty"`
	// ComponentInfo is the table (or the step) that decided.
	ComponentInfo string          `json:"componentInfo,omitempty"`
	Action        TraceflowAction `json:"action,omitempty"`
	// Pod is "<namespace>/<name>" of the Pod the packet was delivered to.
	Pod string `json:"pod,omitempty"`
	// DstMAC is the packet's destination MAC at the observation.
	DstMAC string `json:"dstMAC,omitempty"`
	// NetworkPolicy is the policy that decided: "<type>:<namespace>/<name>"
	// or "<type>:<name>" (K8sNetworkPolicy, AntreaNetworkPolicy,
	// AntreaClusterNetworkPolicy).
	NetworkPolicy string `json:"networkPolicy,omitempty"`
	// NetworkPolicyRule is the name of the rule that decided.
	NetworkPolicyRule string `json:"networkPolicyRule,omitempty"`
	// TTL of the packet at the observation.
	TTL int32 `json:"ttl,omitempty"`
	// TranslatedDstIP is the endpoint a Service's load balancer chose.
	TranslatedDstIP string `json:"translatedDstIP,omitempty"`
	// TunnelDstIP is the Node the packet was tunnelled to.
	TunnelDstIP string `json:"tunnelDstIP,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// TraceflowList is a list of Traceflows.
type TraceflowList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Traceflow `json:"items"`
}
