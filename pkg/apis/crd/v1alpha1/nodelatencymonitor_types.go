package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeLatencyMonitorName is the only name a NodeLatencyMonitor may have: it
// is a cluster-wide singleton, as upstream's (docs/node-latency-monitor.md).
const NodeLatencyMonitorName = "default"

// Upstream's bounds of spec.pingIntervalSeconds (its CRD: minimum 1; its
// docs' example and default 60).
const (
	MinPingIntervalSeconds     = 1
	DefaultPingIntervalSeconds = 60
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nlm
// +kubebuilder:printcolumn:name="Ping-Interval",type=integer,JSONPath=".spec.pingIntervalSeconds",description="Seconds between two probes of a peer."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",message="the NodeLatencyMonitor must be named default"

// NodeLatencyMonitor turns the agents' latency probes on while it exists:
// every agent pings every other Node's gateway IP each pingIntervalSeconds
// and reports NodeLatencyStats (stats.antrea.io/v1alpha1).
type NodeLatencyMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NodeLatencyMonitorSpec `json:"spec"`
}

// NodeLatencyMonitorSpec is the monitor's configuration.
type NodeLatencyMonitorSpec struct {
	// PingIntervalSeconds is the time between two probes of a peer, at least 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=60
	PingIntervalSeconds int32 `json:"pingIntervalSeconds"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// NodeLatencyMonitorList is a list of NodeLatencyMonitor.
type NodeLatencyMonitorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NodeLatencyMonitor `json:"items"`
}
