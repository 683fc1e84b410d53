// Package manifest tests the Helm chart build/charts/antrea and the manifest
// rendered from it, build/yamls/antrea.yml: that the committed manifest is
// what `make manifests` renders now, that the chart lints and refuses bad
// values by name, that a real kube-apiserver accepts what it renders (with
// several value combinations), and the properties users rely on that a copy of
// our own output could not check: the agent runs on every Node; RBAC is least
// privilege and enough (the real antrea-controller runs as its
// ServiceAccount); the Pods touch only the Node paths Antrea owns; the conf
// files are ones antrea-agent and antrea-controller accept.
//
// The tests run helm from _output/tools (./hack/install.sh helm) and
// kube-apiserver, etcd and kubectl from _output/bin (make install).
package manifest
