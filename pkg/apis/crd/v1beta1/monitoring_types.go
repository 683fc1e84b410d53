package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Monitoring CRDs (upstream's fields and printer columns): every agent keeps
// an AntreaAgentInfo named after its Node, the controller one
// AntreaControllerInfo named antrea-controller, each refreshed every 60 s
// (the heartbeat: lastHeartbeatTime of their conditions). A heartbeat older
// than a few minutes says the component stopped reporting.

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=aai,path=antreaagentinfos
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=".agentConditions[?(@.type=='AgentHealthy')].status",description="Health status of this Agent"
// +kubebuilder:printcolumn:name="Last Heartbeat",type=date,JSONPath=".agentConditions[?(@.type=='AgentHealthy')].lastHeartbeatTime",description="Last time the Healthy Condition was updated"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=".version",description="Version of the Antrea binary",priority=1
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=".podRef.name",description="The Pod that the Antrea Agent is running in",priority=2
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=".nodeRef.name",description="The Node that the Antrea Agent is running in",priority=1
// +kubebuilder:printcolumn:name="Num Pods",type=integer,JSONPath=".localPodNum",description="Number of local Pods managed by the Antrea Agent",priority=2
// +kubebuilder:printcolumn:name="Subnets",type=string,JSONPath=".nodeSubnets",description="Subnets used by this Node for Pod IPAM",priority=2

// AntreaAgentInfo is what one antrea-agent reports about itself.
type AntreaAgentInfo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Version is the agent's version.
	Version string `json:"version,omitempty"`
	// PodRef is the agent's Pod.
	PodRef corev1.ObjectReference `json:"podRef,omitempty"`
	// NodeRef is the agent's Node.
	NodeRef corev1.ObjectReference `json:"nodeRef,omitempty"`
	// NodeSubnets are the Node's Pod CIDRs.
	NodeSubnets []string `json:"nodeSubnets,omitempty"`
	// OVSInfo is the Node's Open vSwitch.
	OVSInfo OVSInfo `json:"ovsInfo,omitempty"`
	// NetworkPolicyControllerInfo counts the Node's slice of the computed
	// policies.
	NetworkPolicyControllerInfo NetworkPolicyControllerInfo `json:"networkPolicyControllerInfo,omitempty"`
	// LocalPodNum is the number of Pods with an interface on the Node.
	LocalPodNum int32 `json:"localPodNum,omitempty"`
	// AgentConditions are the agent's health conditions.
	AgentConditions []AgentCondition `json:"agentConditions,omitempty"`
	// APIPort is the port of the agent API.
	APIPort int `json:"apiPort,omitempty"`
}

// OVSInfo describes a Node's Open vSwitch.
type OVSInfo struct {
	// Version is ovs_version of OVSDB's Open_vSwitch table.
	Version string `json:"version,omitempty"`
	// BridgeName is the integration bridge.
	BridgeName string `json:"bridgeName,omitempty"`
	// FlowTable is the number of flows per table (by table number).
	FlowTable map[string]int32 `json:"flowTable,omitempty"`
}

// AgentConditionType names an agent condition.
type AgentConditionType string

// The agent's conditions.
const (
	// AgentHealthy: the agent runs (its heartbeat is the time the agent
	// last updated it).
	AgentHealthy AgentConditionType = "AgentHealthy"
	// ControllerConnectionUp: the controlplane API (antrea-controller,
	// through kube-apiserver) answered.
	ControllerConnectionUp AgentConditionType = "ControllerConnectionUp"
	// OVSDBConnectionUp: ovsdb-server answered.
	OVSDBConnectionUp AgentConditionType = "OVSDBConnectionUp"
	// OpenflowConnectionUp: the bridge's OpenFlow channel answered.
	OpenflowConnectionUp AgentConditionType = "OpenflowConnectionUp"
)

// AgentCondition is one condition of an agent.
type AgentCondition struct {
	Type   AgentConditionType     `json:"type"`
	Status corev1.ConditionStatus `json:"status"`
	// LastHeartbeatTime is when the agent last checked the condition.
	LastHeartbeatTime metav1.Time `json:"lastHeartbeatTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// NetworkPolicyControllerInfo counts computed policy objects.
type NetworkPolicyControllerInfo struct {
	NetworkPolicyNum  int32 `json:"networkPolicyNum,omitempty"`
	AddressGroupNum   int32 `json:"addressGroupNum,omitempty"`
	AppliedToGroupNum int32 `json:"appliedToGroupNum,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// AntreaAgentInfoList is a list of AntreaAgentInfos.
type AntreaAgentInfoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []AntreaAgentInfo `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=aci,path=antreacontrollerinfos
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=".controllerConditions[?(@.type=='ControllerHealthy')].status",description="Health status of the Controller"
// +kubebuilder:printcolumn:name="Last Heartbeat",type=date,JSONPath=".controllerConditions[?(@.type=='ControllerHealthy')].lastHeartbeatTime",description="Last time the Healthy Condition was updated"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=".version",description="Version of the Antrea binary",priority=1
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=".podRef.name",description="The Pod that the Antrea Controller is running in",priority=2
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=".nodeRef.name",description="The Node that the Antrea Controller is running in",priority=1
// +kubebuilder:printcolumn:name="Agents",type=integer,JSONPath=".connectedAgentNum",description="Number of agents watching the computed policies",priority=1

// AntreaControllerInfo is what antrea-controller reports about itself.
type AntreaControllerInfo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Version is the controller's version.
	Version string `json:"version,omitempty"`
	// PodRef is the controller's Pod.
	PodRef corev1.ObjectReference `json:"podRef,omitempty"`
	// NodeRef is the controller's Node.
	NodeRef corev1.ObjectReference `json:"nodeRef,omitempty"`
	// ServiceRef is the Service the controlplane API is reached by.
	ServiceRef corev1.ObjectReference `json:"serviceRef,omitempty"`
	// NetworkPolicyControllerInfo counts the computed policy objects.
	NetworkPolicyControllerInfo NetworkPolicyControllerInfo `json:"networkPolicyControllerInfo,omitempty"`
	// ConnectedAgentNum is the number of agents watching the computed
	// NetworkPolicies.
	ConnectedAgentNum int32 `json:"connectedAgentNum,omitempty"`
	// ControllerConditions are the controller's health conditions.
	ControllerConditions []ControllerCondition `json:"controllerConditions,omitempty"`
	// APIPort is the port of the controller's API server.
	APIPort int `json:"apiPort,omitempty"`
}

// ControllerConditionType names a controller condition.
type ControllerConditionType string

// ControllerHealthy: the controller runs (its heartbeat is the time the
// controller last updated it).
const ControllerHealthy ControllerConditionType = "ControllerHealthy"

// ControllerCondition is one condition of the controller.
type ControllerCondition struct {
	Type   ControllerConditionType `json:"type"`
	Status corev1.ConditionStatus  `json:"status"`
	// LastHeartbeatTime is when the controller last checked the condition.
	LastHeartbeatTime metav1.Time `json:"lastHeartbeatTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// AntreaControllerInfoList is a list of AntreaControllerInfos.
type AntreaControllerInfoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []AntreaControllerInfo `json:"items"`
}
