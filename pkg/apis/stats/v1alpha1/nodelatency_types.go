package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create,delete,get,list
// +resourceName=nodelatencystats
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeLatencyStats is one Node's latest report of its probes to its peers,
// named after the Node (upstream's type: the agent creates it, the
// controller stores the latest one per Node).
type NodeLatencyStats struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// PeerNodeLatencyStats are the probes' results, one entry per peer Node.
	PeerNodeLatencyStats []PeerNodeLatencyStats `json:"peerNodeLatencyStats,omitempty"`
}

// PeerNodeLatencyStats are the results for one peer Node, per target IP (one
// per IP family the peer has a gateway address in).
type PeerNodeLatencyStats struct {
	NodeName             string                 `json:"nodeName,omitempty"`
	TargetIPLatencyStats []TargetIPLatencyStats `json:"targetIPLatencyStats,omitempty"`
}

// TargetIPLatencyStats is what the agent knows of one target IP: when it last
// sent a probe, when it last got a reply, and the RTT of that reply. A
// lastRecvTime older than lastSendTime by more than an interval means the
// peer has stopped answering.
type TargetIPLatencyStats struct {
	TargetIP                   string      `json:"targetIP,omitempty"`
	LastSendTime               metav1.Time `json:"lastSendTime,omitempty"`
	LastRecvTime               metav1.Time `json:"lastRecvTime,omitempty"`
	LastMeasuredRTTNanoseconds int64       `json:"lastMeasuredRTTNanoseconds,omitempty"`
	// RecentRTTNanoseconds are the RTTs of the replies received over the
	// agent's window (the last 10 probes), oldest first; an addition to
	// upstream's fields, optional (absent from upstream agents' reports), from
	// which antctl prints the median and maximum.
	RecentRTTNanoseconds []int64 `json:"recentRTTNanoseconds,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeLatencyStatsList is a list of NodeLatencyStats.
type NodeLatencyStatsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeLatencyStats `json:"items"`
}
