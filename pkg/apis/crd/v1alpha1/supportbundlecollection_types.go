package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultExpirationMinutes is upstream's default of spec.expirationMinutes.
const DefaultExpirationMinutes = 60

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=sbc
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".status.desiredNodes",description="The number of Nodes selected."
// +kubebuilder:printcolumn:name="Collected",type=integer,JSONPath=".status.collectedNodes",description="The number of Nodes whose bundle was uploaded."
// +kubebuilder:printcolumn:name="Completed",type=string,JSONPath=`.status.conditions[?(@.type=="Completed")].status`,description="Whether every selected Node has succeeded or failed."
// +kubebuilder:printcolumn:name="Failure",type=string,JSONPath=`.status.conditions[?(@.type=="CollectionFailure")].status`,description="Whether a selected Node failed."
// +kubebuilder:printcolumn:name="Failed-Nodes",type=string,JSONPath=`.status.conditions[?(@.type=="CollectionFailure")].message`,description="Which Nodes failed, and why.",priority=10
// +kubebuilder:printcolumn:name="File-Server",type=string,JSONPath=".spec.fileServer.url",priority=10
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"

// SupportBundleCollection asks the agents of the selected Nodes for their
// support bundle, each uploaded to the file server as
// <nodeName>_<collectionName>.tar.gz (docs/support-bundle-guide.md).
type SupportBundleCollection struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SupportBundleCollectionSpec `json:"spec"`
	// +optional
	Status SupportBundleCollectionStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// SupportBundleCollectionList is a list of SupportBundleCollections.
type SupportBundleCollectionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []SupportBundleCollection `json:"items"`
}

// SupportBundleCollectionSpec is upstream's: which Nodes, where to upload,
// with which credentials, and until when.
// +kubebuilder:validation:XValidation:rule="has(self.nodes) || has(self.externalNodes)",message="one of nodes and externalNodes must be set"
type SupportBundleCollectionSpec struct {
	// Nodes selects Kubernetes Nodes by name or label; every Node when both
	// are empty.
	// +optional
	Nodes *BundleNodes `json:"nodes,omitempty"`
	// ExternalNodes selects upstream's ExternalNodes (VMs running the agent).
	// This Antrea has no ExternalNodes: the field is accepted, and a
	// collection that names only ExternalNodes fails, saying so.
	// +optional
	ExternalNodes *BundleExternalNodes `json:"externalNodes,omitempty"`
	// ExpirationMinutes is how long the Nodes have to upload their bundle;
	// a Node that has not by then counts as failed. Default 60.
	// +kubebuilder:default=60
	// +optional
	ExpirationMinutes int32 `json:"expirationMinutes"`
	// SinceTime, a duration before now such as 2h, 30m or 1d, leaves out
	// the log files not written since then; every log file when unset.
	// +optional
	SinceTime string `json:"sinceTime,omitempty"`
	// FileServer is the SFTP server the bundles go to.
	FileServer BundleFileServer `json:"fileServer"`
	// Authentication names the Secret with the file server's credentials.
	Authentication BundleServerAuthConfiguration `json:"authentication"`
}

// BundleNodes selects Nodes by name and by label (a Node matching any).
type BundleNodes struct {
	// +optional
	NodeNames []string `json:"nodeNames,omitempty"`
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// MatchLabels selects the Nodes with all these labels, as
	// nodeSelector.matchLabels. Not in upstream's CRD: upstream's guide
	// (docs/support-bundle-guide.md) writes its example so, and kubectl's
	// strict validation refuses that example against upstream's schema.
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// BundleExternalNodes selects upstream's ExternalNodes of one Namespace.
type BundleExternalNodes struct {
	Namespace string `json:"namespace"`
	// +optional
	NodeNames []string `json:"nodeNames,omitempty"`
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// BundleFileServer is where the bundles go.
type BundleFileServer struct {
	// URL is sftp://host:port[/path]; the scheme may be left out.
	URL string `json:"url"`
	// HostPublicKey is the only host key accepted from the server (SSH wire
	// format, base64-encoded in YAML); any key is accepted when unset.
	// +optional
	HostPublicKey []byte `json:"hostPublicKey,omitempty"`
}

// BundleServerAuthType is how to log in to the file server.
type BundleServerAuthType string

// Upstream's authentication types; upstream, as this Antrea, implements
// BasicAuthentication only (a username and a password).
const (
	APIKey              BundleServerAuthType = "APIKey"
	BearerToken         BundleServerAuthType = "BearerToken"
	BasicAuthentication BundleServerAuthType = "BasicAuthentication"
)

// BundleServerAuthConfiguration names the credentials of the file server.
type BundleServerAuthConfiguration struct {
	// +kubebuilder:validation:Enum=BearerToken;APIKey;BasicAuthentication
	AuthType BundleServerAuthType `json:"authType"`
	// AuthSecret is a Secret with the keys username and password.
	AuthSecret *corev1.SecretReference `json:"authSecret"`
}

// SupportBundleCollectionStatus is upstream's (counts and conditions) with
// one addition, Nodes: each selected Node's result.
type SupportBundleCollectionStatus struct {
	// CollectedNodes is the number of Nodes whose bundle was uploaded.
	CollectedNodes int32 `json:"collectedNodes"`
	// DesiredNodes is the number of Nodes selected when the collection started.
	DesiredNodes int32 `json:"desiredNodes"`
	// +optional
	Conditions []SupportBundleCollectionCondition `json:"conditions,omitempty"`
	// Nodes are the selected Nodes, each with its result: antrea-controller
	// writes them Pending when the collection starts; each agent writes its
	// own Node's result; antrea-controller marks those still Pending at
	// expiration Failed. Not upstream's (upstream keeps them in
	// antrea-controller's memory).
	// +optional
	// +listType=map
	// +listMapKey=name
	Nodes []SupportBundleCollectionNodeResult `json:"nodes,omitempty"`
}

// SupportBundleCollectionNodeState is where a Node is in a collection.
type SupportBundleCollectionNodeState string

// The states of a Node in a collection.
const (
	NodePending   SupportBundleCollectionNodeState = "Pending"
	NodeCollected SupportBundleCollectionNodeState = "Collected"
	NodeFailed    SupportBundleCollectionNodeState = "Failed"
)

// SupportBundleCollectionNodeResult is one Node's result.
type SupportBundleCollectionNodeResult struct {
	Name  string                           `json:"name"`
	State SupportBundleCollectionNodeState `json:"state"`
	// Message says why the Node failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// SupportBundleCollectionConditionType is upstream's.
type SupportBundleCollectionConditionType string

// Upstream's condition types.
const (
	// CollectionStarted: antrea-controller has selected the Nodes.
	CollectionStarted SupportBundleCollectionConditionType = "Started"
	// BundleCollected: at least one Node uploaded its bundle.
	BundleCollected SupportBundleCollectionConditionType = "BundleCollected"
	// CollectionFailure: at least one Node failed (its message names them).
	CollectionFailure SupportBundleCollectionConditionType = "CollectionFailure"
	// CollectionCompleted: every selected Node has succeeded or failed.
	CollectionCompleted SupportBundleCollectionConditionType = "Completed"
)

// SupportBundleCollectionCondition is upstream's condition.
type SupportBundleCollectionCondition struct {
	Type   SupportBundleCollectionConditionType `json:"type"`
	Status metav1.ConditionStatus               `json:"status"`
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}
