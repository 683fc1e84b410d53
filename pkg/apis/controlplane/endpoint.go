package controlplane

// Where agents reach antrea-controller's controlplane API directly, without
// kube-apiserver's aggregation layer (docs/design/controlplane-api.md, "How
// agents connect"): the controller publishes the CA of its serving
// certificate in a ConfigMap, and agents dial an endpoint of its Service
// and verify the certificate for ServerName with that CA.
const (
	// ControllerNamespace is the Namespace of the controller's Service and
	// of the CA ConfigMap.
	ControllerNamespace = "kube-system"
	// ControllerServiceName is the controller's Service (upstream's name).
	ControllerServiceName = "antrea"
	// CAConfigMapName is the ConfigMap holding the controller's serving CA
	// (upstream's name).
	CAConfigMapName = "antrea-ca"
	// CAConfigMapKey is the key of the PEM CA in CAConfigMapName.
	CAConfigMapKey = "ca.crt"
	// ControllerServerName is the name the serving certificate is verified
	// for: the Service's DNS name, which the certificate always carries.
	ControllerServerName = ControllerServiceName + "." + ControllerNamespace + ".svc"
)
