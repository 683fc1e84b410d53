package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tc
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=".spec.action",description="Mirror or Redirect."
// +kubebuilder:printcolumn:name="Direction",type=string,JSONPath=".spec.direction",description="Ingress, Egress or Both."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"

// TrafficControl mirrors (copies) or redirects (diverts) the traffic the Pods
// it applies to send or receive to a port: an OVS internal port, a network
// device, or a tunnel to a collector (docs/traffic-control.md). Each Node's
// agent realizes it for its own Pods.
type TrafficControl struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TrafficControlSpec `json:"spec"`
}

// TrafficControlSpec is upstream's crd.antrea.io/v1alpha2 TrafficControl spec.
// +kubebuilder:validation:XValidation:rule="self.action == 'Redirect' || !has(self.returnPort)",message="returnPort is only for action Redirect"
type TrafficControlSpec struct {
	// AppliedTo selects the Pods whose traffic is mirrored or redirected.
	AppliedTo AppliedTo `json:"appliedTo"`

	// Direction is the traffic matched: what the Pods receive (Ingress),
	// send (Egress), or both.
	// +kubebuilder:validation:Enum=Ingress;Egress;Both
	Direction Direction `json:"direction"`

	// Action is Mirror (a copy goes to the target port, the traffic goes on)
	// or Redirect (the traffic goes to the target port instead and comes
	// back through the return port).
	// +kubebuilder:validation:Enum=Mirror;Redirect
	Action TrafficControlAction `json:"action"`

	// TargetPort is where the traffic is mirrored or redirected to.
	TargetPort TrafficControlPort `json:"targetPort"`

	// ReturnPort is the port redirected traffic comes back through, to go
	// on to its destination. Only for Redirect.
	// +optional
	ReturnPort *TrafficControlPort `json:"returnPort,omitempty"`
}

// AppliedTo selects Pods: those podSelector selects in the Namespaces
// namespaceSelector selects (every Namespace when it is absent; every Pod of
// them when podSelector is absent).
type AppliedTo struct {
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// Direction is the traffic a TrafficControl matches.
type Direction string

// Directions.
const (
	DirectionIngress Direction = "Ingress"
	DirectionEgress  Direction = "Egress"
	DirectionBoth    Direction = "Both"
)

// TrafficControlAction is what happens to the matched traffic.
type TrafficControlAction string

// Actions.
const (
	ActionRedirect TrafficControlAction = "Redirect"
	ActionMirror   TrafficControlAction = "Mirror"
)

// TrafficControlPort is one port: exactly one field is set.
// +kubebuilder:validation:XValidation:rule="[has(self.ovsInternal), has(self.device), has(self.geneve), has(self.vxlan), has(self.gre), has(self.erspan)].filter(x, x).size() == 1",message="exactly one of ovsInternal, device, geneve, vxlan, gre, erspan must be set"
type TrafficControlPort struct {
	// OVSInternal is an OVS internal port, created when it does not exist.
	// +optional
	OVSInternal *OVSInternalPort `json:"ovsInternal,omitempty"`
	// Device is a network device of the Node, attached to the bridge when
	// it is not. It must exist on every Node.
	// +optional
	Device *NetworkDevice `json:"device,omitempty"`
	// GENEVE is a Geneve tunnel to a collector, created on the bridge.
	// +optional
	GENEVE *UDPTunnel `json:"geneve,omitempty"`
	// VXLAN is a VXLAN tunnel to a collector, created on the bridge.
	// +optional
	VXLAN *UDPTunnel `json:"vxlan,omitempty"`
	// GRE is a GRE tunnel to a collector, created on the bridge.
	// +optional
	GRE *GRETunnel `json:"gre,omitempty"`
	// ERSPAN is an ERSPAN tunnel to a collector, created on the bridge.
	// +optional
	ERSPAN *ERSPANTunnel `json:"erspan,omitempty"`
}

// OVSInternalPort is an OVS internal port.
type OVSInternalPort struct {
	// Name is the port's (and its interface's) name.
	Name string `json:"name"`
}

// NetworkDevice is a network device of the Node.
type NetworkDevice struct {
	// Name is the device's name.
	Name string `json:"name"`
}

// UDPTunnel is a Geneve or VXLAN tunnel.
type UDPTunnel struct {
	// RemoteIP is the tunnel's far end.
	RemoteIP string `json:"remoteIP"`
	// VNI is the tunnel's ID (0 when absent).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16777215
	// +optional
	VNI *int32 `json:"vni,omitempty"`
	// DestinationPort is the UDP port (IANA's when absent: 6081 for Geneve,
	// 4789 for VXLAN).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	DestinationPort *int32 `json:"destinationPort,omitempty"`
}

// GRETunnel is a GRE tunnel.
type GRETunnel struct {
	// RemoteIP is the tunnel's far end.
	RemoteIP string `json:"remoteIP"`
	// Key is the GRE key (none when absent).
	// +optional
	Key *int32 `json:"key,omitempty"`
}

// ERSPANTunnel is an ERSPAN tunnel.
type ERSPANTunnel struct {
	// RemoteIP is the tunnel's far end.
	RemoteIP string `json:"remoteIP"`
	// SessionID is the ERSPAN session ID.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1023
	// +optional
	SessionID *int32 `json:"sessionID,omitempty"`
	// Version is 1 (ERSPAN type II) or 2 (type III).
	// +kubebuilder:validation:Enum=1;2
	Version int32 `json:"version"`
	// Index is the version 1 index.
	// +optional
	Index *int32 `json:"index,omitempty"`
	// Dir is the version 2 direction of the mirrored traffic (0 ingress,
	// 1 egress).
	// +kubebuilder:validation:Enum=0;1
	// +optional
	Dir *int32 `json:"dir,omitempty"`
	// HardwareID is the version 2 hardware ID.
	// +optional
	HardwareID *int32 `json:"hardwareID,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// TrafficControlList is a list of TrafficControls.
type TrafficControlList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []TrafficControl `json:"items"`
}
