package apiserver

import "fmt"

// LoopbackRegistration is the Service and the APIServices that aggregate the
// controlplane and stats APIs into a kube-apiserver when antrea-controller listens on
// loopback next to it (the node simulator's lab, envtest): Endpoints may not
// point at 127.0.0.0/8, so the Service is an ExternalName to localhost, which
// kube-apiserver's default routing (not --enable-aggregator-routing) dials at
// port while verifying the certificate for antrea.kube-system.svc against the
// caBundle antrea-controller fills in itself. A cluster uses the Service and
// APIService of build/yamls/antrea.yml instead.
func LoopbackRegistration(port int) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: antrea
  namespace: kube-system
spec:
  type: ExternalName
  externalName: localhost
  ports:
    - name: https
      port: %[1]d
      protocol: TCP
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta2.controlplane.antrea.io
spec:
  group: controlplane.antrea.io
  version: v1beta2
  groupPriorityMinimum: 100
  versionPriority: 100
  service:
    name: antrea
    namespace: kube-system
    port: %[1]d
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.stats.antrea.io
spec:
  group: stats.antrea.io
  version: v1alpha1
  groupPriorityMinimum: 100
  versionPriority: 100
  service:
    name: antrea
    namespace: kube-system
    port: %[1]d
`, port))
}
