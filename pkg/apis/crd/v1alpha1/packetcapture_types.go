package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=pcap
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Source-Pod",type=string,JSONPath=".spec.source.pod.name",description="The name of the source Pod.",priority=10
// +kubebuilder:printcolumn:name="Destination-Pod",type=string,JSONPath=".spec.destination.pod.name",description="The name of the destination Pod.",priority=10
// +kubebuilder:printcolumn:name="Source-IP",type=string,JSONPath=".spec.source.ip",description="The IP address of the source.",priority=10
// +kubebuilder:printcolumn:name="Destination-IP",type=string,JSONPath=".spec.destination.ip",description="The IP address of the destination.",priority=10
// +kubebuilder:printcolumn:name="Timeout",type=integer,JSONPath=".spec.timeout",description="Timeout in seconds.",priority=10
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Captured-Packets",type=integer,JSONPath=".status.numberCaptured",description="Number of packets captured so far."
// +kubebuilder:printcolumn:name="Started",type=string,JSONPath=`.status.conditions[?(@.type=="PacketCaptureStarted")].status`,description="Whether the capture has been started."
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="PacketCaptureComplete")].status`,description="Whether the capture has completed."
// +kubebuilder:printcolumn:name="Uploaded",type=string,JSONPath=`.status.conditions[?(@.type=="PacketCaptureFileUploaded")].status`,description="Whether the capture file has been uploaded to the file server.",priority=10

// PacketCapture captures the first packets of a flow between a Pod and a
// Pod or an IP, on the Node of the capture point (the source Pod's, or the
// destination Pod's), into a pcapng file that the agent keeps (and uploads
// to FileServer when set).
type PacketCapture struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PacketCaptureSpec   `json:"spec"`
	Status PacketCaptureStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// PacketCaptureList is a list of PacketCaptures.
type PacketCaptureList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []PacketCapture `json:"items"`
}

// PacketCaptureSpec says which packets to capture, how many and for how long.
// +kubebuilder:validation:XValidation:rule="(has(self.source) && has(self.source.pod)) || (has(self.destination) && has(self.destination.pod))",message="at least one of source.pod and destination.pod must be set"
type PacketCaptureSpec struct {
	// Timeout in seconds after which the capture stops with what it has
	// (default 60).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	// +kubebuilder:default=60
	// +optional
	Timeout *int32 `json:"timeout,omitempty"`
	// CaptureConfig says when the capture is complete.
	CaptureConfig CaptureConfig `json:"captureConfig"`
	// Source is where the packets come from (a Pod or an IP).
	// +optional
	Source Source `json:"source,omitempty"`
	// Destination is where they go (a Pod or an IP).
	// +optional
	Destination Destination `json:"destination,omitempty"`
	// Packet narrows the capture to a protocol and ports; all traffic
	// between source and destination when unset.
	// +optional
	Packet *Packet `json:"packet,omitempty"`
	// Direction says which way the captured packets go (default
	// SourceToDestination).
	// +kubebuilder:validation:Enum=SourceToDestination;DestinationToSource;Both
	// +kubebuilder:default=SourceToDestination
	// +optional
	Direction CaptureDirection `json:"direction,omitempty"`
	// CapturePoint is the Pod whose Node captures: Source (the default
	// when the source is a Pod) or Destination.
	// +kubebuilder:validation:Enum=Source;Destination
	// +optional
	CapturePoint CapturePoint `json:"capturePoint,omitempty"`
	// FileServer is an SFTP server the capture file is uploaded to; without
	// it the file stays on the agent (Status.FilePath).
	// +optional
	FileServer *PacketCaptureFileServer `json:"fileServer,omitempty"`
}

// CaptureDirection is the direction of the captured packets.
type CaptureDirection string

// Directions.
const (
	CaptureDirectionSourceToDestination CaptureDirection = "SourceToDestination"
	CaptureDirectionDestinationToSource CaptureDirection = "DestinationToSource"
	CaptureDirectionBoth                CaptureDirection = "Both"
)

// CapturePoint is the end whose Node captures.
type CapturePoint string

// Capture points.
const (
	CapturePointSource      CapturePoint = "Source"
	CapturePointDestination CapturePoint = "Destination"
)

// CaptureConfig says when a capture is complete.
type CaptureConfig struct {
	// FirstN completes the capture after the first N matching packets.
	// +optional
	FirstN *PacketCaptureFirstNConfig `json:"firstN,omitempty"`
}

// PacketCaptureFirstNConfig is the number of packets to capture.
type PacketCaptureFirstNConfig struct {
	// +kubebuilder:validation:Minimum=1
	Number int32 `json:"number"`
}

// PacketCaptureFileServer is an SFTP server to upload the capture to.
type PacketCaptureFileServer struct {
	// URL is sftp://host:port[/path].
	// +kubebuilder:validation:Pattern=`^sftp:\/\/[\w\-._\/\[\]:]+:\d+`
	URL string `json:"url"`
	// HostPublicKey is the only host key accepted from the server (SSH wire
	// format, RFC 4253 section 6.6), base64-encoded; any key is accepted
	// when unset.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=string
	// +optional
	HostPublicKey Base64Bytes `json:"hostPublicKey,omitempty"`
}

// PodReference names a Pod.
type PodReference struct {
	// +kubebuilder:default=default
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// Source is a Pod or an IP, not both.
// +kubebuilder:validation:XValidation:rule="!(has(self.pod) && has(self.ip))",message="pod and ip are mutually exclusive"
type Source struct {
	// +optional
	Pod *PodReference `json:"pod,omitempty"`
	// +optional
	IP *string `json:"ip,omitempty"`
}

// Destination is a Pod or an IP, not both.
// +kubebuilder:validation:XValidation:rule="!(has(self.pod) && has(self.ip))",message="pod and ip are mutually exclusive"
type Destination struct {
	// +optional
	Pod *PodReference `json:"pod,omitempty"`
	// +optional
	IP *string `json:"ip,omitempty"`
}

// Packet is the filter on the packets' headers.
type Packet struct {
	// IPFamily of the packets (default IPv4).
	// +kubebuilder:validation:Enum=IPv4;IPv6
	// +kubebuilder:default=IPv4
	// +optional
	IPFamily corev1.IPFamily `json:"ipFamily,omitempty"`
	// Protocol is a number or TCP, UDP, ICMP (any case); any protocol when
	// unset.
	// +optional
	Protocol *intstr.IntOrString `json:"protocol,omitempty"`
	// +optional
	TransportHeader TransportHeader `json:"transportHeader,omitempty"`
}

// TransportHeader holds the transport filter of the protocol.
type TransportHeader struct {
	// +optional
	UDP *UDPHeader `json:"udp,omitempty"`
	// +optional
	TCP *TCPHeader `json:"tcp,omitempty"`
	// +optional
	ICMP *ICMPHeader `json:"icmp,omitempty"`
}

// UDPHeader are the UDP ports to match.
type UDPHeader struct {
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	SrcPort *int32 `json:"srcPort,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	DstPort *int32 `json:"dstPort,omitempty"`
}

// TCPHeader are the TCP ports and flags to match.
type TCPHeader struct {
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	SrcPort *int32 `json:"srcPort,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	DstPort *int32 `json:"dstPort,omitempty"`
	// Flags match when any of them matches (tcp[13] & mask == value).
	// +optional
	Flags []TCPFlagsMatcher `json:"flags,omitempty"`
}

// TCPFlagsMatcher matches the TCP flags byte: flags & Mask == Value (Mask
// defaults to Value).
type TCPFlagsMatcher struct {
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	Value int32 `json:"value"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +optional
	Mask *int32 `json:"mask,omitempty"`
}

// ICMPHeader are the ICMP messages to match (any of them).
type ICMPHeader struct {
	// +optional
	Messages []ICMPMsgMatcher `json:"messages,omitempty"`
}

// ICMPMsgType names ICMP types as upstream does.
type ICMPMsgType string

// ICMP type names.
const (
	ICMPMsgTypeEcho       ICMPMsgType = "icmp-echo"
	ICMPMsgTypeEchoReply  ICMPMsgType = "icmp-echoreply"
	ICMPMsgTypeDstUnreach ICMPMsgType = "icmp-unreach"
	ICMPMsgTypeTimexceed  ICMPMsgType = "icmp-timxceed"
)

// ICMPMsgMatcher matches an ICMP type (a number or a name) and, when set,
// its code.
type ICMPMsgMatcher struct {
	Type intstr.IntOrString `json:"type"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +optional
	Code *int32 `json:"code,omitempty"`
}

// PacketCaptureStatus is what the capturing agent reports.
type PacketCaptureStatus struct {
	// NumberCaptured is how many packets were captured so far.
	// +optional
	NumberCaptured int32 `json:"numberCaptured,omitempty"`
	// FilePath is where the file is: the upload URL, or
	// <antrea-agent-pod-name>:<path> on the capturing agent.
	// +optional
	FilePath string `json:"filePath,omitempty"`
	// Conditions are the capture's progress.
	// +optional
	Conditions []PacketCaptureCondition `json:"conditions,omitempty"`
}

// PacketCaptureConditionType names a condition.
type PacketCaptureConditionType string

// Conditions of a PacketCapture.
const (
	// PacketCaptureStarted: the agent installed the capture.
	PacketCaptureStarted PacketCaptureConditionType = "PacketCaptureStarted"
	// PacketCaptureComplete: the capture ended (firstN reached, or the
	// timeout) and the file is written on the agent.
	PacketCaptureComplete PacketCaptureConditionType = "PacketCaptureComplete"
	// PacketCaptureFileUploaded: the file is on the file server.
	PacketCaptureFileUploaded PacketCaptureConditionType = "PacketCaptureFileUploaded"
)

// PacketCaptureCondition is one condition of a PacketCapture.
type PacketCaptureCondition struct {
	Type               PacketCaptureConditionType `json:"type"`
	Status             metav1.ConditionStatus     `json:"status"`
	LastTransitionTime metav1.Time                `json:"lastTransitionTime"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}
